"""kfold's finalizer on a Session (``kfold.dev/teardown``), as the Kubernetes convention has it:
a controller keeps its finalizer on every live object it manages (controller-runtime adds it
on every reconcile while the object is not being deleted) and removes it only once its own cleanup
is done; it never adds one to an object being deleted."""
from __future__ import annotations

import itertools

import pytest

from engine.machines.base import IllegalTransition
from engine.machines.session import finalizer
from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import SPEC, World, at, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def _finalizer_patches(w: World) -> list:
    return [e for e in w.effects("patch", "Session") if e.subresource != "status"]


def test_a_finalizer_someone_removed_from_a_live_session_is_added_again():
    w = World().to_ready()
    assert len(_finalizer_patches(w)) == 1
    w.rv += 1
    w.s.observe(session_obj(SPEC, rv=str(w.rv), finalizers=()), at(10))   # kubectl patch removed it
    added = _finalizer_patches(w)
    assert len(added) == 2
    assert added[-1].patch == {"metadata": {"finalizers": [FINALIZER], "resourceVersion": str(w.rv)}}, \
        "added again on the version that lacks it (a merge patch preconditioned on its resourceVersion)"
    w.rv += 1
    w.answer("patch", "Session", when=11, obj=session_obj(SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.rv += 1
    w.s.observe(session_obj(SPEC, rv=str(w.rv), finalizers=(FINALIZER,)), at(12))
    assert len(_finalizer_patches(w)) == 2, "once it is back, nothing more"
    assert w.phase == "Ready"


def test_a_finalizer_is_not_added_again_to_a_session_being_deleted():
    w = World().to_ready()
    w.rv += 1
    w.s.observe(session_obj(SPEC, rv=str(w.rv), finalizers=(), deleting=True), at(10))
    assert len(_finalizer_patches(w)) == 1, "a Session being deleted never gets a finalizer"


def test_the_add_patch_in_flight_is_not_sent_twice_by_an_observation_that_predates_it():
    w = World()
    w.submit(SPEC)
    assert len(_finalizer_patches(w)) == 1
    w.rv += 1
    w.s.observe(session_obj(SPEC, rv=str(w.rv), finalizers=()), at(1))   # an edit before the patch landed
    assert len(_finalizer_patches(w)) == 1


def test_every_step_and_event_has_an_answer_or_a_named_refusal():
    events = ("add", "added", "remove", "reread", "observed")
    for step, event, carried in itertools.product(finalizer.STEPS, events, (True, False)):
        try:
            nxt = finalizer.after(step, event, carried)
        except IllegalTransition as exc:
            assert repr(step) in str(exc) and repr(event) in str(exc)
            assert (event == "add" and not finalizer.may_add(step)) or (event == "remove" and not finalizer.may_remove(step))
        else:
            assert nxt in finalizer.STEPS
    assert finalizer.after("done", "observed", carried=False) == ""
    assert finalizer.after("removing", "observed", carried=False) == "removing", "released: never added back"
