"""Shared world for the session scenarios: a Session, its pod, and the apiserver's answers.

Runs the full engine (the real pod and repo machines). Holds no tests itself.
"""
from __future__ import annotations

from typing import Any

from engine.machines.session.model import FINALIZER
from tests.harness import T0, Scenario

NS = "team"
NAME = "demo"
KEY = f"local/{NS}/{NAME}"
BASE = "sessions.example.test"
SPEC = {"image": "registry.example/ws:1", "apps": [{"name": "web", "ports": [{"port": 8080}], "io": "tty"}]}
# With env references: the Session gets its Secret (``<session>-env``), which a stop reads and deletes.
ENV_SPEC = {**SPEC, "env": [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}}]}


def at(seconds: float) -> int:
    return T0 + int(seconds * 1000)


def session_obj(spec: dict[str, Any], rv: str = "1", finalizers: tuple[str, ...] = (), deleting: bool = False,
                name: str = NAME, generation: int = 0) -> dict[str, Any]:
    """``generation``: its ``metadata.generation`` (0: none, as most scenarios leave it)."""
    md: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": rv,
                          "finalizers": list(finalizers)}
    if deleting:
        md["deletionTimestamp"] = "2030-01-01T00:10:00Z"
    if generation:
        md["generation"] = generation
    return {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": md, "spec": spec}


def pod_obj(gen: int, phase: str = "Pending", ip: str = "", node: str = "", ready: bool = False,
            waiting: tuple[str, str] | None = None, unscheduled: str = "", ended: dict[str, tuple[str, int]] | None = None,
            rv: str = "10", name: str = NAME) -> dict[str, Any]:
    statuses = [{"name": "workspace", "ready": ready,
                 "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}} if waiting else {"running": {}}}]
    for app, (reason, code) in (ended or {}).items():
        statuses.append({"name": f"app-{app}", "ready": False,
                         "state": {"terminated": {"reason": reason, "exitCode": code}}})
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unscheduled}] \
        if unscheduled else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-g{gen}", "namespace": NS, "uid": f"pod-uid-{gen}", "resourceVersion": rv,
                         "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": name,
                                    "kfold.dev/generation": str(gen)}},
            "spec": {"nodeName": node},
            "status": {"phase": phase, "podIP": ip, "containerStatuses": statuses, "conditions": conditions}}


class World:
    """One Session on cluster "local", driven through the full engine."""

    def __init__(self, base_domain: str = BASE, **deadlines: int):
        """``deadlines``: ``start_seconds``/``ready_seconds``, as kfold run's boot sends them."""
        self.s = Scenario()
        self.s.command("session.configure", at(0), clusters=["local"], base_domain=base_domain, **deadlines)
        self.rv = 1
        self.meta_generation = 0   # metadata.generation the Session is observed with (0: none)

    # -- the Session ----------------------------------------------------------------------------
    def submit(self, spec: dict[str, Any], when: float = 0, deleting: bool = False) -> tuple[Any, ...]:
        self.rv += 1
        self.spec = spec
        fins = (FINALIZER,) if self.has_finalizer() else ()
        return self.s.observe(session_obj(spec, rv=str(self.rv), finalizers=fins, deleting=deleting,
                                          generation=self.meta_generation), at(when))

    def has_finalizer(self) -> bool:
        d = self.decision()
        return d is not None and FINALIZER in d.finalizers

    def decision(self) -> Any:
        return self.s.decision("session", KEY)

    @property
    def phase(self) -> str:
        return self.decision().phase

    def status(self) -> dict[str, Any]:
        patches = [e for e in self.s.effects if e.type == "patch" and e.subresource == "status"]
        return patches[-1].patch["status"]

    def condition(self, type_: str) -> dict[str, str]:
        return next(c for c in self.status()["conditions"] if c["type"] == type_)

    # -- answering effects ---------------------------------------------------------------------
    def pending(self, type_: str, kind: str | None = None) -> list[Any]:
        """Pending effects of this type and kind, oldest first; status writes are never answered."""
        found = [e for e in self.s.pending(type_) if kind in (None, getattr(e, "kind", None))
                 and getattr(e, "subresource", "") != "status"]
        return sorted(found, key=lambda e: tuple(int(p) for p in e.id.split(".")))

    def answer(self, type_: str, kind: str | None, result: str = "ok", when: float = 0, **fields: Any) -> Any:
        found = self.pending(type_, kind)
        assert found, f"no pending {type_} {kind}; pending: {[(e.type, getattr(e, 'kind', '')) for e in self.s.pending()]}"
        self.s.outcome(found[0], result, at(when), **fields)
        return found[0]

    def effects(self, type_: str, kind: str | None = None) -> list[Any]:
        return [e for e in self.s.effects if e.type == type_ and kind in (None, getattr(e, "kind", None))]

    def pod_creates(self) -> list[str]:
        return [e.name for e in self.effects("create", "Pod")]

    # -- driving ---------------------------------------------------------------------------------
    def to_creating(self, spec: dict[str, Any] | None = None, when: float = 0) -> "World":
        """Submit, then answer the finalizer and (with env) the Secret: the pod create is in flight (no
        namespace step: the pod runs beside its Session)."""
        spec = spec or SPEC
        self.submit(spec, when)
        self.rv += 1
        self.answer("patch", "Session", when=when,
                    obj=session_obj(spec, rv=str(self.rv), finalizers=(FINALIZER,), generation=self.meta_generation))
        if self.pending("create", "Secret"):
            self.answer("create", "Secret", when=when)
        return self

    def to_provisioning(self, spec: dict[str, Any] | None = None, when: float = 0) -> "World":
        self.to_creating(spec, when)
        gen = self.decision().generation
        self.answer("create", "Pod", when=when, obj=pod_obj(gen))
        return self

    def observe_pod(self, when: float, gen: int | None = None, event: str = "MODIFIED", **kw: Any) -> tuple[Any, ...]:
        return self.s.observe(pod_obj(gen or self.decision().generation, **kw), at(when), event=event)

    def run_pod(self, when: float, ready: bool = True, node: str = "node-a") -> None:
        self.observe_pod(when, phase="Running", ip="10.0.0.7", node=node, ready=ready)

    def publish_endpoints(self, when: float = 0) -> None:
        self.answer("create", "Service", when=when, obj={})
        if self.pending("create", "Ingress"):
            self.answer("create", "Ingress", when=when, obj={})

    def to_ready(self, spec: dict[str, Any] | None = None) -> "World":
        self.to_provisioning(spec, when=1)
        self.run_pod(5)
        self.publish_endpoints(6)
        return self

    def tear_down(self, when: float = 0, kinds: tuple[str, ...] | None = None, result: str = "ok") -> None:
        """Answer the teardown: each kind's read (default: each one pending) finds this Session's
        object, its fenced delete ``result``."""
        if kinds is None:
            kinds = tuple(e.kind for e in self.pending("get") if e.kind in ("Service", "Ingress", "Secret"))
        for kind in kinds:
            self.answer("get", kind, when=when, obj=owned_obj(kind))
            delete = self.answer("delete", kind, result, when=when)
            assert delete.uid == f"{kind.lower()}-uid", f"the {kind} delete is fenced by the read's uid"


def owned_obj(kind: str, name: str = NAME, session: str = NAME, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Service, Ingress or Secret as the apiserver holds it; this Session's unless ``labels`` say otherwise."""
    if labels is None:
        labels = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": session}
    obj_name = f"{name}-env" if kind == "Secret" else name
    md = {"name": obj_name, "namespace": NS, "uid": f"{kind.lower()}-uid", "resourceVersion": "77", "labels": labels}
    if kind == "Secret":   # as kfold makes it for ENV_SPEC: its env references, no data
        md["annotations"] = {"kfold.dev/env-refs": "TOKEN=creds/token"}
    return {"kind": kind, "metadata": md}
