"""Only the session dispatcher moves a Session's phase.

A step of the session decision (``session.decide``) or a handler (``session.handlers``) that changes the
phase returns ``Moved`` (its decision and the triggers of ``model.TABLE``); ``decide.act`` (the
decision's dispatcher) and ``handlers.save`` (a handler's answer) are the only places that fire one.
The structural half reads the source; the behavioural half drives ``act`` with steps of its own."""
from __future__ import annotations

import ast

import pytest

from engine.machines.base import IllegalTransition
from engine.machines.session import decide as decide_mod, model
from engine.machines.session.model import Moved, SessionDecision, fire, moved
from tests.unit.test_machine_moves import callers, calls, name

# (module, function) -> what it may do with the phase
FIRES = {("decide", "act"), ("handlers", "save")}
BUILDS = {("observed", "from_status")}   # a record rebuilt from the status the cluster holds, not a move


def test_the_table_is_consulted_only_by_fire_and_fire_is_called_only_by_the_dispatcher():
    assert callers("session", "next", "TABLE") == {("model", "fire")}
    assert callers("session", "fire") == FIRES


def test_no_step_writes_a_session_phase_by_hand():
    """``phase=`` on a Session record (``d.but(...)``, a ``SessionDecision(...)``) only where a move is
    fired or a record is rebuilt from the status; a pod's phase (``d.pod.but(phase=...)``) is the pod's."""
    writers = set()
    for m, _, fn, c in calls("session"):
        if not any(k.arg == "phase" for k in c.keywords):
            continue
        receiver = getattr(c.func, "value", None)
        session_record = (name(c) == "but" and isinstance(receiver, ast.Name)) or name(c) == "SessionDecision"
        if session_record:
            writers.add((m, fn))
    assert writers <= {("model", "fire")} | BUILDS, writers - ({("model", "fire")} | BUILDS)
    assert not hasattr(SessionDecision, "move")


def test_fire_follows_the_table_in_order_and_refuses_what_it_forbids():
    d = SessionDecision(name="s", namespace="ns", home="local")
    assert fire(moved(d, "create", "created")).phase == "Provisioning"
    assert fire(moved(d, "begin")).phase == "Pending"
    with pytest.raises(IllegalTransition):
        fire(moved(d, "serve"))          # Pending -> Ready is no row of the table
    with pytest.raises(IllegalTransition):
        fire(moved(d.but(phase="Stopping"), "fail"))


def _act_with(monkeypatch, steps):
    """Run ``decide.act`` over a scripted ``_decide``: each call answers the next entry of ``steps``
    (a trigger tuple, or None for "no move"); returns the final decision and the phases decided in."""
    seen = []
    script = iter(steps)

    def decide(ctx, key, d, wish, spec, cfg):
        seen.append(d.phase)
        triggers = next(script)
        return d if triggers is None else Moved(d, triggers)
    monkeypatch.setattr(decide_mod, "_decide", decide)
    d = SessionDecision(name="s", namespace="ns", home="local")
    return decide_mod.act(None, "local/ns/s", d, "run", None, model.SessionConfig()), seen


def test_act_decides_again_after_a_trigger_that_continues(monkeypatch):
    out, seen = _act_with(monkeypatch, [("begin",), ("create",), ("created",)])
    assert out.phase == "Creating" and seen == ["Pending", "Pending"]   # the create's answer moves it on
    out, seen = _act_with(monkeypatch, [("create", "created"), ("serve",)])
    assert out.phase == "Ready" and seen == ["Pending", "Provisioning"]   # served in the same step, then over


@pytest.mark.parametrize("trigger, phase", [("fail", "Failed"), ("suspend", "Suspended"), ("create", "Creating")])
def test_act_ends_the_step_after_a_trigger_that_does_not_continue(monkeypatch, trigger, phase):
    out, seen = _act_with(monkeypatch, [(trigger,), ("begin",)])
    assert out.phase == phase and seen == ["Pending"]


def test_act_refuses_a_step_whose_moves_never_end(monkeypatch):
    with pytest.raises(AssertionError, match="no end to its moves"):
        _act_with(monkeypatch, [("begin",)] * 20)


def test_every_trigger_that_continues_is_a_row_of_the_table():
    assert decide_mod.CONTINUES <= {event for event, _, _ in model.TABLE.rows}
