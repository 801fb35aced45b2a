"""Only the pod dispatcher moves a pod operation's phase.

A handler of the pod machine (``pod.machine``, ``pod.create``, ``pod.delete``) that changes a
``PodOp``'s phase answers ``Move(e, event, then, changes)``; ``machine.dispatch`` (the one caller of
``DISPATCH.handler``) hands it to ``machine.fire``, the one caller of ``TABLE.next`` and the one
writer of ``phase=`` on a ``PodOp``. The structural half reads the source; the behavioural half
fires moves of its own and of the real handlers on a recording context."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.machines.base import IllegalTransition
from engine.machines.pod import machine
from engine.machines.pod import create, delete
from engine.machines.pod.machine import Move, fire, move, save, send_read
from engine.machines.pod.records import PodOp, Reply

POD = Path(__file__).resolve().parents[2] / "engine" / "machines" / "pod"
# a sweep entry's own two steps (``SweepEntry.phase``: secrets -> pods), no phase of ``TABLE``
SWEEP_STEP = {("sweep", "_secrets_listed")}


def _functions():
    """(module, enclosing class or "", function node) for every function of the pod package."""
    for path in sorted(POD.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for top in tree.body:
            if isinstance(top, ast.ClassDef):
                for fn in top.body:
                    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield path.stem, top.name, fn
            elif isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path.stem, "", top


def _calls():
    """(module, class, top-level function, call node) for every call in a function of the package
    (a nested function's calls count as its enclosing one's)."""
    for module, cls, fn in _functions():
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                yield module, cls, fn.name, node


def _name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _on(call: ast.Call, receiver: str) -> bool:
    return isinstance(call.func, ast.Attribute) and getattr(call.func.value, "id", "") == receiver


def test_the_table_is_consulted_only_by_fire_and_fire_is_called_only_by_the_dispatcher():
    nexts = {(m, fn) for m, _, fn, c in _calls() if _name(c) == "next" and _on(c, "TABLE")}
    fires = {(m, fn) for m, _, fn, c in _calls() if _name(c) == "fire"}
    assert nexts == {("machine", "fire")}
    assert fires == {("machine", "dispatch")}


def test_the_dispatcher_alone_looks_up_handlers_and_only_the_machine_calls_it():
    lookups = {(m, fn) for m, _, fn, c in _calls() if _name(c) == "handler" and _on(c, "DISPATCH")}
    callers = {(m, cls) for m, cls, fn, c in _calls() if _name(c) == "dispatch"}
    assert lookups == {("machine", "dispatch")}
    assert callers == {("machine", "PodMachine")}


def test_no_handler_writes_a_phase_by_hand():
    """``phase=`` is written on a record only by ``fire`` (a ``PodOp`` moved along ``TABLE``) and by
    the orphan-Secret sweep on its own entry; no step helper is left that moves a phase."""
    writers = {(m, fn) for m, _, fn, c in _calls() if any(k.arg == "phase" for k in c.keywords)}
    assert writers <= {("machine", "fire")} | SWEEP_STEP, writers
    assert ("machine", "fire") in writers
    assert not hasattr(machine, "step")


class Recorder:
    """A fold step's context as far as the pod acts use it: what was stored, sent and cancelled."""

    def __init__(self, **entries):
        self.table, self.done, self.now = dict(entries), [], None

    def get(self, key):
        return self.table.get(key)

    def put(self, key, e):
        self.table[key] = e
        self.done.append(("put", e.phase))

    def drop(self, key):
        self.table.pop(key, None)
        self.done.append(("drop", key))

    def emit(self, effect_type, key, **fields):
        self.done.append(("emit", effect_type.__name__))
        return SimpleNamespace(id=f"1.{len(self.done)}")

    def now_on(self, cluster):
        return None

    def cancel_timer(self, key, name):
        self.done.append(("cancel", name))

    def tell(self, to, key, message, **args):
        self.done.append(("tell", message))


KEY = "local/ns/p"


def test_fire_follows_the_table_and_refuses_what_it_forbids():
    seen = []
    fire(Recorder(), KEY, move(PodOp(), "create", lambda ctx, key, e: seen.append(e), op="create"))
    assert [(e.phase, e.op) for e in seen] == [("creating", "create")]
    with pytest.raises(IllegalTransition):
        fire(Recorder(), KEY, move(PodOp(), "accepted", save))    # idle -> terminating is no row
    fire(Recorder(), KEY, None)                                     # no move: nothing to make


def test_a_handler_answers_its_move_and_does_nothing_of_it_itself():
    ctx = Recorder()
    e = PodOp(op="delete", phase="deleting", uid="u1", rv="7", target="u1")
    answer = delete.deleted(ctx, KEY, e, SimpleNamespace(result="ok"))
    assert answer == Move(e, "accepted", save, {"terminating": True}) and ctx.done == []
    fire(ctx, KEY, answer)
    assert ctx.get(KEY).phase == "terminating" and ctx.get(KEY).terminating


def test_an_act_that_answers_a_move_is_fired_in_turn():
    """A delete without a complete fence (no resourceVersion) reads first: ``send_delete`` answers
    the read's move, and the dispatcher makes it (idle -> deleting -> reading, a GET, no DELETE)."""
    ctx = Recorder(**{KEY: PodOp(uid="u1")})
    fire(ctx, KEY, delete.start(ctx, KEY, (Reply(to="session", key="s"),), "stop", 60_000))
    assert ctx.done == [("emit", "GetObject"), ("put", "reading")]
    assert ctx.get(KEY).target == "u1"


def test_a_settled_create_starts_the_delete_queued_behind_it():
    ctx = Recorder()
    e = PodOp(op="create", phase="creating", session="s", generation=1, uid="u1", rv="3",
              replies=(Reply(to="session", key="s"),), then_delete=(Reply(to="session", key="s"),))
    fire(ctx, KEY, create.fail(ctx, KEY, e, "no"))
    assert ctx.done == [("tell", "pod_create_failed"), ("cancel", "budget"), ("cancel", "retry"),
                        ("put", "idle"), ("emit", "DeleteObject"), ("put", "deleting")]


def test_send_read_is_an_act_and_moves_nothing():
    ctx = Recorder()
    send_read(ctx, KEY, PodOp(op="delete", phase="reading"))
    assert ctx.get(KEY).phase == "reading"
