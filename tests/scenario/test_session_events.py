"""Events on the Session (issue 36, item 4): the decisions a user acts on are posted as
events.k8s.io/v1 Events about the Session (regarding its uid), once per decision, beside the status
write that reports them; never on the Session's own key (an Event holds none of its requests back).
"""
from __future__ import annotations

import pytest

from tests.scenario.test_lost_journal import _adopt_everything, _ready_session
from tests.scenario.test_session_lifecycle import _pod_gone
from tests.scenario.test_session_support import KEY, SPEC, World, at, pod_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def events(w: World) -> list[tuple[str, str, str]]:
    return [(e.event_type, e.reason, e.action) for e in w.effects("post_event")]


def status_writes(w: World) -> list:
    return [e for e in w.effects("patch", "Session") if e.subresource == "status"]


def _start_deadline_passed(w: World) -> World:
    """A pod still ContainerCreating when the start deadline passes, read after it: Failed."""
    w.to_provisioning(when=1)
    w.observe_pod(100, waiting=("ContainerCreating", ""))
    w.s.advance_to(at(1 + 180))
    w.answer("get", "Pod", when=182, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="11"))
    w.s.advance_to(at(190))
    assert w.phase == "Failed"
    return w


def test_ready_then_stopped_are_posted_once_each_about_the_session():
    w = World().to_ready()
    assert events(w) == [("Normal", "Ready", "BringUp")]
    [ready] = w.effects("post_event")
    assert ready.regarding == {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "name": "demo",
                               "namespace": "team", "uid": "uid-demo"}
    assert (ready.namespace, ready.cluster, ready.key) == ("team", "local", f"{KEY}#events")
    assert "demo-g1" in ready.note and ready.safe_to_retry is False
    w.observe_pod(7, phase="Running", ip="10.0.0.7", node="node-a", ready=True, rv="12")   # nothing new
    w.submit({**SPEC, "stopped": True}, 10)
    w.tear_down(11)
    _pod_gone(w, 1, 12)
    assert w.phase == "Stopped"
    assert events(w) == [("Normal", "Ready", "BringUp"), ("Normal", "Stopped", "Teardown")]


def test_a_deadline_that_passes_posts_a_warning_naming_its_reason():
    w = _start_deadline_passed(World())
    assert events(w) == [("Warning", "StartDeadlineExceeded", "BringUp")]
    assert "start deadline" in w.effects("post_event")[0].note


def test_a_status_written_again_posts_no_second_event():
    w = World().to_ready()
    [patch] = status_writes(w)[-1:]
    w.s.outcome(patch, "conflict", at(7), status_reason="Conflict")   # the write is made again
    assert len(status_writes(w)) >= 2
    assert events(w) == [("Normal", "Ready", "BringUp")]


def test_a_fresh_journal_over_a_ready_session_posts_no_second_ready():
    w = World()
    w.s.observe(_ready_session(3, spec=SPEC), at(0))
    _adopt_everything(w, 3)
    assert w.phase == "Ready" and events(w) == []


def test_at_level_warning_ready_and_stopped_are_not_posted_and_the_status_is_written_as_ever():
    w = World(event_level="Warning").to_ready()
    assert events(w) == []
    [status] = status_writes(w)[-1:]
    assert status.patch["status"]["phase"] == "Ready"
    w.submit({**SPEC, "stopped": True}, 10)
    w.tear_down(11)
    _pod_gone(w, 1, 12)
    assert w.phase == "Stopped" and events(w) == []


def test_at_level_warning_a_failure_is_still_posted():
    w = _start_deadline_passed(World(event_level="Warning"))
    assert events(w) == [("Warning", "StartDeadlineExceeded", "BringUp")]


def test_a_ready_not_posted_at_level_warning_is_not_posted_later_at_normal():
    """The level applies to the decisions made under it: a Ready decided at Warning is not posted
    when the config goes back to Normal, even by a status write made again after it."""
    w = World(event_level="Warning").to_ready()
    base = w.s.state.table("session")["#config"].base_domain
    w.s.command("session.configure", at(8), clusters=["local"], base_domain=base, event_level="Normal")
    writes = len(status_writes(w))
    [patch] = status_writes(w)[-1:]
    w.s.outcome(patch, "conflict", at(9), status_reason="Conflict")   # the write is made again
    assert len(status_writes(w)) > writes
    assert events(w) == []
