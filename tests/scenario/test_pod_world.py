"""The pod machine's scenario kit (a probe machine that asks and records answers, pod builders),
plus the tests that hold for the machine as a whole: snapshots, the table, frozen worlds."""
from __future__ import annotations

from typing import Any

import pytest

from engine.core import Machines
from engine.machines.base import Decision, IllegalTransition, Machine
from engine.machines.pod.machine import TABLE, PodMachine
from engine import snapshot
from tests.harness import T0, Scenario, of_type

KEY = "local/ns/s1-g1"
SECOND = 1000


class Inbox(Decision):
    messages: tuple[tuple[str, dict[str, Any]], ...] = ()


class Probe(Machine):
    """Stands in for the session machine: ``probe.tell`` sends a message, answers are recorded."""

    name = "probe"
    decision = Inbox
    commands = frozenset({"probe.tell"})

    def on_command(self, ctx, rec):
        a = rec.args
        ctx.tell(a["machine"], a["key"], a["message"], **a["args"])

    def on_message(self, ctx, key, message, args):
        box = ctx.get(key) or Inbox()
        ctx.put(key, box.but(messages=box.messages + ((message, args),)))


def world() -> Scenario:
    return Scenario(Machines([PodMachine(), Probe()]))


def pod(uid: str, rv: str, name: str = "s1-g1", session: str = "s1", generation: int = 1,
        terminating: bool = False, managed: bool = True, ns: str = "ns") -> dict[str, Any]:
    labels = {"kfold.dev/session": session, "kfold.dev/generation": str(generation)}
    if managed:
        labels["app.kubernetes.io/managed-by"] = "kfold"
    md = {"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv, "labels": labels}
    if terminating:
        md["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md}


def ask(s: Scenario, message: str, at: int | None, key: str = KEY, reply_key: str = "s1", **args: Any):
    return s.command("probe.tell", at, machine="pod", key=key, message=message,
                     args={"reply_to": "probe", "reply_key": reply_key, **args})


def ask_delete(s: Scenario, at: int | None, key: str = KEY, reply_key: str = "s1", **args: Any):
    return ask(s, "delete", at, key, reply_key, reason="session stopped", **args)


def ask_create(s: Scenario, at: int | None, key: str = KEY, session: str = "s1", generation: int = 1, **args: Any):
    manifest = {"spec": {"containers": [{"name": "agent", "image": "agent:1"}]}}
    return ask(s, "create", at, key, session, manifest=manifest, session=session, generation=generation, **args)


def answers(s: Scenario, reply_key: str = "s1") -> list[tuple[str, dict[str, Any]]]:
    box = s.decision("probe", reply_key)
    return list(box.messages) if box else []


def one(effects: Any, type_: str) -> Any:
    found = of_type(effects, type_)
    assert len(found) == 1, f"expected one {type_} effect, got {[e.type for e in effects]}"
    return found[0]


def deletes(s: Scenario) -> list[Any]:
    return [e for e in s.effects if e.type == "delete"]


# -- the machine as a whole -------------------------------------------------------------------
def test_a_snapshot_of_every_entry_kind_loads_back_equal():
    s = world()
    s.observe(pod("A", "5"), T0)
    ask_delete(s, T0 + SECOND)
    ask(s, "ensure_namespace", T0, key="local/ns/")
    s.command("pod.sweep_secrets", T0, cluster="local", namespace="")
    listed = one(s.command("pod.sweep_orphans", T0, cluster="local", namespace="ns", home="local"), "list")
    s.outcome(listed, "ok", T0, items=(pod("B", "3", name="gone-g1", session="gone"),))
    machines = Machines([PodMachine(), Probe()])
    assert snapshot.dump(snapshot.load(snapshot.dump(s.state), machines)) == snapshot.dump(s.state)
    kinds = {e.kind for e in s.state.table("pod").values()}
    assert kinds == {"pod", "namespace", "sweep", "orphans"}


def test_the_table_refuses_a_delete_while_terminating():
    with pytest.raises(IllegalTransition, match="'delete' is not allowed in state 'terminating'"):
        TABLE.next("terminating", "delete")


def test_pods_not_managed_by_kfold_are_not_tracked():
    s = world()
    s.observe(pod("X", "1", name="someone-else", managed=False), T0)
    assert s.decision("pod", "local/ns/someone-else") is None


def test_the_budget_runs_on_server_time_in_every_frozen_world(frozen_world):
    s = world()
    s.observe(pod("A", "5"), T0)
    d = one(ask_delete(s, T0), "delete")
    s.outcome(d, "ok", T0 + SECOND)
    s.advance_to(T0 + 601 * SECOND)
    assert [e.type for e in s.effects] == ["delete", "log"]
    assert answers(s)[0][0] == "pod_delete_failed"
