"""The bring-up's sub-state machines (``session.steps``): every (step, event) pair has an answer,
or a refusal that names both; the resets the bring-up relies on hold from every step."""
from __future__ import annotations

import itertools

import pytest

from engine.machines.base import IllegalTransition
from engine.machines.session import steps
from engine.machines.session.model import SessionDecision


@pytest.mark.parametrize("after, states, events", [
    (steps.object_after, steps.OBJECT_STEPS, steps.OBJECT_EVENTS),
    (steps.ask_after, steps.ASK_STEPS, steps.ASK_EVENTS)])
def test_every_pair_is_answered_within_the_steps_or_refused_by_name(after, states, events):
    for step, event in itertools.product(states, events):
        try:
            nxt = after(step, event)
        except IllegalTransition as exc:
            assert repr(step) in str(exc) and repr(event) in str(exc)
        else:
            assert nxt in states
        assert after(step, "again") == "" and after(step, "skip") == "done"


def test_an_object_is_done_only_by_what_the_apiserver_answered():
    """``done`` is reached from a create's ok, an adopting read, a mending PUT's ok, a drop, or a skip;
    a request still in flight is never taken for done."""
    into_done = {(s, e) for s, e in itertools.product(steps.OBJECT_STEPS, steps.OBJECT_EVENTS)
                 if _try(steps.object_after, s, e) == "done" and e != "skip"}
    assert into_done == {("sent", "made"), ("reading", "kept"), ("replacing", "replaced"), ("dropping", "dropped")}


def test_a_new_generation_begins_every_step_again():
    d = SessionDecision(name="demo", namespace="team", home="local", namespace_step="done", repos_step="sent",
                        secret_step="dropping", claim_step="waiting")
    assert steps.begun_again(d) == {"namespace_step": "", "repos_step": "", "secret_step": "", "claim_step": ""}


def test_a_step_no_machine_knows_is_refused_by_the_record():
    with pytest.raises(ValueError):
        SessionDecision(name="demo", namespace="team", home="local", secret_step="sending")


def _try(after, step, event):
    try:
        return after(step, event)
    except IllegalTransition:
        return None
