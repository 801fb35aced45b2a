"""The bring-up's sub-state machines (``session.steps``): every (step, event) pair has an answer,
or a refusal that names both; the resets the bring-up relies on hold from every step."""
from __future__ import annotations

import itertools

import pytest

from engine import migrations
from engine.machines.base import IllegalTransition
from engine.machines.session import steps
from engine.machines.session.model import Owned, SessionDecision, SessionEntry


@pytest.mark.parametrize("after, states, events, from_any", [
    (steps.object_after, steps.OBJECT_STEPS, steps.OBJECT_EVENTS, {"again": "", "skip": "done"}),
    (steps.ask_after, steps.ASK_STEPS, steps.ASK_EVENTS, {"again": "", "skip": "done"}),
    (steps.upsert_after, steps.UPSERT_STAGES, steps.UPSERT_EVENTS, {"settle": "idle"})])
def test_every_pair_is_answered_within_the_steps_or_refused_by_name(after, states, events, from_any):
    for step, event in itertools.product(states, events):
        try:
            nxt = after(step, event)
        except IllegalTransition as exc:
            assert repr(step) in str(exc) and repr(event) in str(exc)
        else:
            assert nxt in states
        assert all(after(step, e) == to for e, to in from_any.items())


def test_an_object_is_done_only_by_what_the_apiserver_answered():
    """``done`` is reached from a create's ok, an adopting read, a mending PUT's ok, a drop, or a skip;
    a request still in flight is never taken for done."""
    into_done = {(s, e) for s, e in itertools.product(steps.OBJECT_STEPS, steps.OBJECT_EVENTS)
                 if _try(steps.object_after, s, e) == "done" and e != "skip"}
    assert into_done == {("sent", "made"), ("reading", "kept"), ("replacing", "replaced"), ("dropping", "dropped")}


def test_a_new_generation_begins_every_step_again():
    d = SessionDecision(name="demo", namespace="team", home="local", namespace_step="done", repos_step="sent",
                        secret=Owned(step="dropping", uid="u1", tries=2, made=True), claim=Owned(step="waiting"))
    again = steps.begun_again(d)
    assert (again["namespace_step"], again["repos_step"]) == ("", "")
    assert again["secret"] == Owned(uid="u1", tries=2, made=True) and again["claim"] == Owned()


def test_a_step_no_machine_knows_is_refused_by_the_record():
    with pytest.raises(ValueError):
        SessionDecision(name="demo", namespace="team", home="local", secret=Owned(step="sending"))


def test_a_record_written_before_owned_loads_its_objects_facts_as_one():
    """A snapshot of format 1 holds the Secret's and claim's facts as flat fields: migrated
    (``engine.migrations``, format 2) the same facts load into ``secret`` and ``claim``."""
    old = {"kind": "session", "name": "demo", "namespace": "team", "home": "local", "secret_step": "reading",
           "secret_tries": 3, "secret_made": True, "secret_uid": "u1", "claim_step": "done", "claim_tries": 1,
           "claim_made": True}
    snap = migrations.upgrade({"format": 1, "tables": {"session": {"local/team/demo": old}}})
    d = SessionEntry.model_validate(snap["tables"]["session"]["local/team/demo"])
    assert d.secret == Owned(step="reading", uid="u1", tries=3, made=True)
    assert d.claim == Owned(step="done", tries=1, made=True)
    assert SessionEntry.model_validate(d.model_dump()) == d
    with pytest.raises(ValueError):
        SessionEntry.model_validate(old)   # format 1 unmigrated is refused, never half read


def test_an_answer_moves_an_object_only_in_the_step_that_asked():
    """Each (step, request) pair ``OBJECT_ANSWERS`` names is a step with that request in flight:
    the create of ``sent``, the read of ``reading``, the PUT of ``replacing``, a drop's read or delete."""
    assert {s for s, _ in steps.OBJECT_ANSWERS} <= set(steps.OBJECT_STEPS) - {"", "waiting", "done"}
    assert steps.IN_FLIGHT == {s for s, _ in steps.OBJECT_ANSWERS} - {"dropping"}


def _try(after, step, event):
    try:
        return after(step, event)
    except IllegalTransition:
        return None
