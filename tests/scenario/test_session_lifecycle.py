"""Suspend, resume, set-apps, stop, delete, crash recovery, runs ending, bad input."""
from __future__ import annotations

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import ENV_SPEC, SPEC, World, at, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

TWO_APPS = {**SPEC, "apps": [*SPEC["apps"], {"name": "api", "ports": [{"port": 9090}]}]}


def _pod_gone(w: World, gen: int, when: float) -> None:
    """Answer the pod machine's fenced delete, then its watch sees the pod go."""
    w.answer("delete", "Pod", when=when)
    w.observe_pod(when, gen=gen, event="DELETED")


def test_suspend_during_bring_up_releases_the_pod_once_its_create_answers():
    w = World().to_creating()
    w.submit({**SPEC, "suspended": True}, 2)
    assert w.phase == "Suspended"
    assert not w.pending("delete", "Pod"), "no delete races the create in flight"
    w.answer("create", "Pod", when=3, obj=pod_obj(1))
    delete = w.pending("delete", "Pod")[0]
    assert (delete.name, delete.uid) == ("demo-g1", "pod-uid-1")


def test_resume_is_a_fresh_generation_with_a_fresh_pod_name():
    """Seed 002:634-638: every pod gets its own name; a resume never reuses one."""
    w = World().to_ready()
    w.submit({**SPEC, "suspended": True}, 10)
    _pod_gone(w, 1, 11)
    assert w.phase == "Suspended" and w.status()["podName"] is None
    w.submit(SPEC, 20)
    assert w.pod_creates() == ["demo-g1", "demo-g2"]
    assert w.phase == "Creating"


def test_suspend_twice_changes_nothing():
    w = World().to_ready()
    w.submit({**SPEC, "suspended": True}, 10)
    before = len(w.s.effects)
    w.submit({**SPEC, "suspended": True}, 11)
    assert len(w.s.effects) == before


def test_set_apps_while_suspended_creates_nothing_until_resume_then_uses_the_new_apps():
    w = World().to_ready()
    w.submit({**SPEC, "suspended": True}, 10)
    _pod_gone(w, 1, 11)
    w.submit({**TWO_APPS, "suspended": True}, 12)
    assert w.pod_creates() == ["demo-g1"]
    w.submit(TWO_APPS, 20)
    pod = w.pending("create", "Pod")[0]
    assert pod.name == "demo-g2"
    assert [c["name"] for c in pod.manifest["spec"]["containers"]] == ["workspace", "app-web", "app-api"]


def test_set_apps_on_a_ready_session_recreates_as_the_next_generation():
    """Seed 002:587-597: set-apps tears the pod down and brings up the next under a fresh name."""
    w = World().to_ready()
    w.submit(TWO_APPS, 10)
    assert w.pending("delete", "Pod")[0].name == "demo-g1"
    assert w.pod_creates() == ["demo-g1"], "seed 002 setApps: the old pod is torn down before the next is made"
    w.answer("delete", "Pod", when=11)
    assert w.pod_creates() == ["demo-g1"], "accepted is not gone: the old pod is still terminating"
    w.observe_pod(12, gen=1, event="DELETED")
    assert w.pod_creates() == ["demo-g1", "demo-g2"]


def test_resume_waits_for_the_suspended_pod_to_be_gone():
    w = World().to_ready()
    w.submit({**SPEC, "suspended": True}, 10)
    w.submit(SPEC, 11)
    assert w.pod_creates() == ["demo-g1"] and w.phase == "Pending"
    _pod_gone(w, 1, 12)
    assert w.pod_creates() == ["demo-g1", "demo-g2"]


def test_a_predecessor_that_cannot_be_deleted_holds_the_next_generation_only_for_the_delete_budget():
    """The pod machine's delete budget bounds the wait: once it answers ``pod_delete_failed`` the
    bring-up goes on (the failed delete is logged), it is not held for ever."""
    w = World().to_ready()
    w.submit(TWO_APPS, 10)
    w.answer("delete", "Pod", "forbidden", when=11)
    assert w.pod_creates() == ["demo-g1", "demo-g2"]


@pytest.mark.parametrize("spec", [SPEC, ENV_SPEC], ids=["no-env", "env"])
def test_stop_during_provisioning_tears_everything_down_then_reports_stopped(spec):
    """Seed 002:609-613: stop tears everything down, then reports stopped."""
    w = World().to_provisioning(spec)
    w.observe_pod(2, waiting=("ContainerCreating", ""))
    w.submit({**spec, "stopped": True}, 3)
    assert w.phase == "Stopping"
    assert not [t for t in w.s.state.timers.values() if t.machine == "session"], "no deadline fires into a teardown"
    reads = {e.kind: e.name for e in w.effects("get") if e.kind != "Pod"}
    # The Service and Ingress name the pod as their owner: the garbage collector takes them with it.
    # The Secret exists only with env references; it is read before it is deleted.
    assert reads == ({"Secret": "demo-env"} if spec is ENV_SPEC else {})
    assert {e.kind: e.name for e in w.effects("delete")} == {"Pod": "demo-g1"}
    assert w.pending("delete", "Pod")[0].uid == "pod-uid-1", "the pod delete is fenced"
    w.tear_down(4)
    assert w.phase == "Stopping", "the pod is not gone yet"
    _pod_gone(w, 1, 5)
    assert w.phase == "Stopped"
    assert _status_phases(w)[-2:] == ["Stopping", "Stopped"], "a Session that stays shows its stop"
    assert {e.kind for e in w.effects("delete")} == ({"Pod", "Secret"} if spec is ENV_SPEC else {"Pod"})


def test_a_second_stop_changes_nothing():
    w = World().to_ready()
    w.submit({**SPEC, "stopped": True}, 10)
    before = len(w.s.effects)
    w.submit({**SPEC, "stopped": True}, 11)
    assert len(w.s.effects) == before


def _status_phases(w: World) -> list[str]:
    return [e.patch["status"]["phase"] for e in w.effects("patch", "Session") if e.subresource == "status"]


def test_deleting_the_session_tears_down_first_then_removes_the_finalizer():
    w = World().to_ready()
    written = _status_phases(w)
    w.submit(SPEC, 10, deleting=True)
    assert not [e for e in w.effects("patch", "Session") if isinstance(e.patch, list)]
    w.tear_down(11)
    _pod_gone(w, 1, 12)
    assert [e.kind for e in w.effects("delete")] == ["Pod"], "Service and Ingress go with the pod"
    assert _status_phases(w) == written, "a Session being deleted is not written Stopping/Stopped"
    removal = w.effects("patch", "Session")[-1]
    # preconditioned on the finalizer entry itself, not on a resourceVersion kfold's own status
    # writes move: a test op on the list index, then its removal
    assert removal.patch == [{"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
                             {"op": "remove", "path": "/metadata/finalizers/0"}]


def test_a_finalizer_list_changed_meanwhile_is_read_again_before_the_removal_is_retried():
    w = World().to_ready()
    w.submit(SPEC, 10, deleting=True)
    w.tear_down(11)
    _pod_gone(w, 1, 12)
    assert isinstance(w.pending("patch", "Session")[-1].patch, list)
    w.answer("patch", "Session", result="invalid", when=13)      # the test op failed: 422 Invalid
    assert w.pending("get", "Session"), "the Session is read again (quorum) before another removal"
    w.rv += 1
    w.answer("get", "Session", when=14, obj=session_obj(SPEC, rv=str(w.rv), finalizers=("other.dev/x", FINALIZER),
                                                             deleting=True))
    retry = w.pending("patch", "Session")[-1]
    assert retry.patch == [{"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
                           {"op": "remove", "path": "/metadata/finalizers/1"}]


def test_a_crash_between_pod_create_and_its_outcome_adopts_the_same_pod_name():
    w = World().to_creating()
    create = w.pending("create", "Pod")[0]
    w.s.command("effect.in_doubt", at(30), effect_id=create.id)
    w.answer("get", "Pod", when=31, obj=pod_obj(1))
    assert w.phase == "Provisioning"
    assert w.pod_creates() == ["demo-g1"], "no second pod name"
    assert w.decision().pod.uid == "pod-uid-1"


def test_an_ended_app_container_is_reported_once_per_generation_and_the_session_stays_up():
    """Seed 002:412-419: an ended app-<name> container is reported once, with its reason and exit
    code; seed 002:400-402: a run ending is not the Session ending."""
    w = World().to_ready()
    ended = {"web": ("Error", 3)}
    w.observe_pod(20, phase="Running", ip="10.0.0.7", node="node-a", ready=True, ended=ended)
    w.observe_pod(21, phase="Running", ip="10.0.0.7", node="node-a", ready=True, ended=ended, rv="11")
    assert w.phase == "Ready"
    assert w.status()["runs"] == [{"app": "web", "generation": 1, "reason": "application container Error (exit code 3)",
                                   "exitCode": 3}]
    events = w.effects("event")
    assert len(events) == 1 and events[0].reason == "RunEnded"


def test_the_pod_failing_after_ready_fails_the_session_unless_a_stop_was_requested():
    """Seed 002:437-445: a terminal pod after serving fails the Session, unless the user stopped it."""
    w = World().to_ready()
    w.observe_pod(20, phase="Failed")
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"] == "session pod demo-g1 reached Failed"
    stopped = World().to_ready()
    stopped.submit({**SPEC, "stopped": True}, 10)
    stopped.observe_pod(11, phase="Failed")
    assert stopped.phase == "Stopping"


@pytest.mark.parametrize("spec, field", [
    ({"apps": []}, "spec.image"),
    ({**SPEC, "apps": [{"name": "web"}, {"name": "web"}]}, "spec.apps"),
    ({**SPEC, "apps": [{"name": "web", "ports": [{"port": 70000}]}]}, "spec.apps[0].ports[0].port"),
    ({**SPEC, "cluster": "mars"}, "spec.cluster"),
], ids=["no-image", "duplicate-app", "bad-port", "unknown-cluster"])
def test_an_invalid_spec_fails_with_a_condition_naming_the_field_and_creates_nothing(spec, field):
    w = World()
    w.submit(spec)
    assert w.phase == "Failed"
    cond = w.condition("SpecValid")
    assert cond["status"] == "False" and cond["message"].startswith(f"{field}: ")
    assert [e.type for e in w.s.effects if e.type != "log"] == ["patch", "post_event"], "only the status is written (and its Failed Event posted)"


def test_fixing_an_invalid_spec_brings_the_session_up():
    w = World()
    w.submit({"apps": []})
    w.to_creating(SPEC, 5)
    assert w.pod_creates() == ["demo-g1"]


def _blocked_by_a_refused_pod_delete(w: World) -> None:
    w.submit(SPEC, 10, deleting=True)
    w.tear_down(11)
    w.answer("delete", "Pod", result="forbidden", when=12, status_reason="Forbidden",
             message='pods "demo-g1" is forbidden: User "kfold" cannot delete')
    assert w.phase == "Stopping" and w.has_finalizer()
    assert w.condition("TeardownComplete")["reason"] == "TeardownBlocked"
    assert "cannot delete" in w.condition("TeardownComplete")["message"]


def test_a_teardown_blocked_by_a_failed_pod_delete_deletes_it_again_later_and_finishes():
    """A pod delete that failed (refused here; a budget spent in an apiserver outage alike) blocks
    the teardown with the reason on the status, and is asked again a minute later with a fresh
    fenced delete: once it lands and the pod goes, the finalizer is released. Before, the Session
    stayed in Stopping for good, even after the cause was fixed."""
    w = World().to_ready()
    _blocked_by_a_refused_pod_delete(w)
    deletes = len(w.effects("delete", "Pod"))
    assert w.s.advance_to(at(12 + 59)) == [] and len(w.effects("delete", "Pod")) == deletes
    w.s.advance_to(at(12 + 60))
    again = w.pending("delete", "Pod")
    assert len(again) == 1 and (again[0].name, again[0].uid) == ("demo-g1", "pod-uid-1"), "fenced as before"
    _pod_gone(w, 1, 75)
    removal = w.effects("patch", "Session")[-1]
    assert removal.patch[-1] == {"op": "remove", "path": "/metadata/finalizers/0"}


def test_a_pod_event_while_the_teardown_is_blocked_waits_for_the_retry():
    """The pod whose delete was refused is still there, and its watch reports it (a status change):
    the delete is asked again only when the retry is due (``engine.backoff.BLOCKED_TEARDOWN_MS``),
    never at each event, and the teardown stays blocked until then."""
    w = World().to_ready()
    _blocked_by_a_refused_pod_delete(w)
    deletes = len(w.effects("delete", "Pod"))
    w.observe_pod(30, gen=1, phase="Running", ip="10.0.0.7", node="node-a", ready=False, rv="31")
    assert len(w.effects("delete", "Pod")) == deletes, "no delete before the retry is due"
    assert w.condition("TeardownComplete")["reason"] == "TeardownBlocked"
    w.s.advance_to(at(12 + 60))
    assert len(w.pending("delete", "Pod")) == 1, "asked again when the retry is due"
    _pod_gone(w, 1, 75)
    assert w.effects("patch", "Session")[-1].patch[-1] == {"op": "remove", "path": "/metadata/finalizers/0"}


def test_a_pod_gone_meanwhile_is_found_gone_by_the_retry_and_nothing_is_deleted():
    """Someone else deleted the pod while the teardown was blocked: the retry's delete starts from
    what kfold saw last (the pod's DELETED), so it reads (quorum) instead of deleting, and the 404
    finishes the teardown.
    Seed table: seed 001:227."""
    w = World().to_ready()
    _blocked_by_a_refused_pod_delete(w)
    w.observe_pod(30, gen=1, event="DELETED")
    assert w.phase == "Stopping", "a blocked teardown still waits for its retry"
    deletes = len(w.effects("delete", "Pod"))
    w.s.advance_to(at(12 + 60))
    assert len(w.effects("delete", "Pod")) == deletes, "nothing is deleted again"
    w.answer("get", "Pod", result="not_found", when=73)
    removal = w.effects("patch", "Session")[-1]
    assert removal.patch[-1] == {"op": "remove", "path": "/metadata/finalizers/0"}


@pytest.mark.parametrize("result", ["ok", "forbidden", "transient"])
def test_the_answer_to_an_event_decides_nothing(result):
    """An Event is a report: whatever its create answers, the Session carries on (it was
    quarantined on any answer before: an Event names no object kind)."""
    w = World().to_ready()
    w.observe_pod(20, phase="Running", ip="10.0.0.7", node="node-a", ready=True, ended={"web": ("Error", 3)})
    (event,) = w.effects("event")
    w.s.outcome(event, result, at(21))
    assert not w.s.state.quarantine
    assert w.phase == "Ready"
    w.submit({**SPEC, "stopped": True}, 22)
    assert w.phase == "Stopping", "still decided on"


def test_a_second_invalid_spec_reports_its_own_field_and_the_same_one_again_reports_nothing_new():
    """The SpecValid condition always names what is wrong with the spec as it is now (a user who
    fixed one field and broke another must be told the other), and a Session observed again with
    the same invalid spec writes no second status."""
    w = World()
    w.submit({"apps": []})
    assert w.condition("SpecValid")["message"].startswith("spec.image: ")
    w.submit({**SPEC, "cluster": "mars"}, 5)
    assert w.phase == "Failed"
    assert w.condition("SpecValid")["message"].startswith("spec.cluster: ")
    writes = len(w.effects("patch", "Session"))
    w.submit({**SPEC, "cluster": "mars"}, 6)
    assert len(w.effects("patch", "Session")) == writes
