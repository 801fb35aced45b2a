"""A tiny in-memory apiserver for Repo scenarios, and a probe machine that records replies.

``RepoWorld`` answers the repo machine's pending effects the way an apiserver would (create /
merge patch / quorum get / list / fenced delete / secret apply), stamping every outcome with the
world's SERVER time ``world.at``. Tests move that clock explicitly; the wall clock is never read.
The tests at the bottom pin the fake's own semantics, so the scenarios rest on something checked.
"""
from __future__ import annotations

import copy
from typing import Any


from engine.core import Machines
from engine.effects.io.fake import merge_patch
from engine.machines.base import Machine
from engine.machines.repo.machine import RepoMachine
from engine.repo_names import rfc3339
from tests.harness import T0, Scenario

NS = "team"
CLUSTER = "local"


class Probe(Machine):
    """Stands in for the session machine: sends ``ensure`` on command, records every reply."""

    name = "probe"
    commands = frozenset({"probe.ensure"})

    def __init__(self) -> None:
        self.got: list[tuple[str, str, dict[str, Any]]] = []

    def on_command(self, ctx: Any, rec: Any) -> None:
        a = rec.args
        ctx.tell("repo", a["key"], "ensure", url=a["url"], reply_to="probe", reply_key=a["session"])

    def on_message(self, ctx: Any, key: str, message: str, args: dict[str, Any]) -> None:
        self.got.append((key, message, args))


class RepoWorld:
    def __init__(self, crd: bool = True, at: int | None = T0) -> None:
        self.probe = Probe()
        self.s = Scenario(machines=Machines([RepoMachine(), self.probe]))
        self.crd = crd
        self.at = at
        self.objs: dict[str, dict[str, Any]] = {}
        self.secrets: dict[str, dict[str, Any]] = {}
        self.requests: list[Any] = []
        self._rv = 100
        self.refuse: dict[str, tuple[str, str]] = {}   # effect type -> (result, message), once

    # -- driving the machine -----------------------------------------------------------------
    def command(self, name: str, **args: Any) -> tuple[Any, ...]:
        return self.s.command(name, self.at, cluster=CLUSTER, namespace=NS, **args)

    def bind(self, urls: list[str], credentials: list[dict] | None = None, env_present: list[str] | None = None):
        return self.command("repo.bind", bindings=[{"url": u} for u in urls],
                            credentials=credentials or [], env_present=env_present or [])

    def ensure(self, url: str, key: str, session: str = "s1") -> tuple[Any, ...]:
        """The session machine's ``ensure``, delivered in the fold step of a probe command."""
        return self.s.command("probe.ensure", self.at, key=f"{CLUSTER}/{NS}/{key}", url=url, session=session)

    def settle(self) -> list[Any]:
        """Answer every pending effect (and those they cause) until nothing is pending."""
        done = []
        while self.s.pending():
            effect = sorted(self.s.pending(), key=lambda e: tuple(map(int, e.id.split("."))))[0]
            self.requests.append(effect)
            done.append(effect)
            result, fields = self.apply(effect)
            self.s.outcome(effect, result, self.at, **fields)
        return done

    def put(self, name: str, url: str, *, bound: bool = False, last_attached: str | None = None,
            created: str = "2029-12-01T00:00:00Z", identity: str = "", nodes: list | None = None) -> dict:
        """A Repo that already exists on the server (made by an earlier run)."""
        md: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": self._next_rv(),
                              "creationTimestamp": created, "labels": {}, "annotations": {}}
        if bound:
            md["labels"]["kfold.dev/repo-bound"] = "true"
        if last_attached:
            md["annotations"]["kfold.dev/last-attached"] = last_attached
        if identity:
            md["annotations"]["kfold.dev/repo-identity"] = identity
        obj = {"apiVersion": "kfold.dev/v1alpha1", "kind": "Repo", "metadata": md, "spec": {"url": url}}
        if nodes is not None:
            obj["status"] = {"nodes": nodes}
        self.objs[name] = obj
        return obj

    def observe(self, name: str, event: str = "MODIFIED") -> tuple[Any, ...]:
        return self.s.observe(self.objs[name], self.at, event=event, cluster=CLUSTER)

    def replies(self, message: str | None = None) -> list[tuple[str, str, dict]]:
        return [g for g in self.probe.got if message in (None, g[1])]

    def logs(self, level: str | None = None) -> list[Any]:
        return [e for e in self.s.effects if e.type == "log" and level in (None, e.level)]

    def sent(self, type_: str) -> list[Any]:
        return [e for e in self.requests if e.type == type_]

    # -- the fake apiserver ------------------------------------------------------------------
    def apply(self, e: Any) -> tuple[str, dict[str, Any]]:
        if e.type in self.refuse:
            result, message = self.refuse.pop(e.type)
            return result, {"message": message}
        return getattr(self, f"_{e.type}")(e)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _create(self, e: Any):
        if e.name in self.objs:
            return "already_exists", {"status_reason": "AlreadyExists", "code": 409}
        obj = copy.deepcopy(e.manifest)
        obj["metadata"].update(uid=f"uid-{e.name}", resourceVersion=self._next_rv(),
                               creationTimestamp=rfc3339(self.at if self.at is not None else T0)[:19] + "Z")
        self.objs[e.name] = obj
        return "ok", {"obj": copy.deepcopy(obj)}

    def _patch(self, e: Any):
        if e.name not in self.objs:
            return "not_found", {"status_reason": "NotFound", "code": 404}
        obj = merge_patch(self.objs[e.name], e.patch)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self.objs[e.name] = obj
        return "ok", {"obj": copy.deepcopy(obj)}

    def _get(self, e: Any):
        if e.name not in self.objs:
            return "not_found", {"status_reason": "NotFound", "code": 404}
        return "ok", {"obj": copy.deepcopy(self.objs[e.name])}

    def _list(self, e: Any):
        if not self.crd:
            return "not_found", {"status_reason": "NotFound", "code": 404,
                                 "message": "the server could not find the requested resource"}
        k, _, v = e.label_selector.partition("=")
        items = [copy.deepcopy(o) for o in self.objs.values()
                 if not k or (o["metadata"].get("labels") or {}).get(k) == v]
        return "ok", {"items": tuple(items)}

    def _delete(self, e: Any):
        obj = self.objs.get(e.name)
        if obj is None:
            return "not_found", {"status_reason": "NotFound", "code": 404}
        md = obj["metadata"]
        if (e.uid and e.uid != md["uid"]) or (e.rv and e.rv != md["resourceVersion"]):
            return "conflict", {"status_reason": "Conflict", "code": 409}
        del self.objs[e.name]
        return "ok", {}

    def _apply_secret(self, e: Any):
        self.secrets[e.name] = {"literal": dict(e.literal), "values_from_env": dict(e.values_from_env)}
        return "ok", {}


# -- the fake's own semantics --------------------------------------------------------------------
def test_merge_patch_clears_null_and_merges_nested():
    assert merge_patch({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"b": None, "e": 4}, "d": None}) == {"a": {"c": 2, "e": 4}}


def test_the_fake_refuses_a_second_create_and_a_stale_fenced_delete():
    w = RepoWorld()
    w.put("r", "https://h/a/b")
    assert w._create(type("E", (), {"name": "r", "manifest": {}})())[0] == "already_exists"
    stale = type("E", (), {"name": "r", "uid": "uid-r", "rv": "1"})()
    assert w._delete(stale)[0] == "conflict"
    assert "r" in w.objs
