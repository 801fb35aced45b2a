"""A Session resumed from a Ready status is bound by the bring-up deadlines (issue 33, item 2).

On a fresh journal a Session whose status says Ready at generation N is brought up as N again
(``session.from_status``). When its pod is gone and the pod re-created under that name never runs
(or never becomes ready), the status a fresh bring-up would write must follow: while the pod comes
up kfold may hold back a status that moves the phase backwards, but at the deadline (plus the
quorum read of the pod it is judged on) the Session is Failed, exactly as the same pod without that
status fails. Time is frozen: the deadlines are measured on the records' server time.
"""
from __future__ import annotations

import pytest

from tests.scenario.test_lost_journal import _ready_session
from tests.scenario.test_session_support import SPEC, World, at, pod_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

START, READY, GRACE = 30, 20, 5   # seconds; GRACE: the read the judgement waits for (READ_GRACE_MS)


def _resumed_with_its_pod_gone(status: bool) -> World:
    """Generation 3's pod was deleted while kfold had no journal; its re-creation is answered 201."""
    w = World(start_seconds=START, ready_seconds=READY)
    obj = _ready_session(3)
    if not status:
        obj.pop("status")
        obj["metadata"]["finalizers"] = []
    w.s.observe(obj, at(0))
    if w.pending("patch", "Session"):
        w.rv += 1
        w.answer("patch", "Session", when=0, obj={**obj, "metadata": {**obj["metadata"], "finalizers": ["kfold.dev/teardown"]}})
    gen = w.decision().generation
    w.answer("create", "Pod", when=1, obj=pod_obj(gen, unscheduled="0/2 nodes are available: 2 Insufficient cpu."))
    _publish_pending(w, 1)
    return w


def _publish_pending(w: World, when: float) -> None:
    """Answer 201 to the Service and Ingress creates in flight (made once the pod runs)."""
    for kind in ("Service", "Ingress"):
        if w.pending("create", kind):
            w.answer("create", kind, when=when, obj={})


def _answer_reads(w: World, when: float, obj: dict) -> None:
    for read in [e for e in w.pending("get", "Pod") if e.machine == "session"]:
        w.s.outcome(read, "ok", at(when), obj=obj)


def _phases_written(w: World) -> list[str]:
    return [e.patch["status"]["phase"] for e in w.effects("patch", "Session") if e.subresource == "status"]


@pytest.mark.parametrize("status", [True, False], ids=["resumed-from-ready", "fresh"])
def test_a_pod_that_never_runs_fails_the_session_at_the_start_deadline(status):
    w = _resumed_with_its_pod_gone(status)
    gen = w.decision().generation
    pending = pod_obj(gen, unscheduled="0/2 nodes are available: 2 Insufficient cpu.", rv="11")
    w.s.advance_to(at(1 + START))
    _answer_reads(w, 1 + START + 1, pending)
    w.s.advance_to(at(1 + START + GRACE + 1))
    assert w.phase == "Failed", "bound by the start deadline, whatever the status said before"
    assert w.condition("Ready")["reason"] == "StartDeadlineExceeded"
    assert _phases_written(w)[-1] == "Failed"
    w.s.advance_to(at(3600))
    assert _phases_written(w)[-1] == "Failed"


def test_a_pod_that_runs_but_never_gets_ready_fails_the_session_at_the_ready_deadline():
    w = _resumed_with_its_pod_gone(True)
    running = pod_obj(3, phase="Running", ip="10.0.0.8", node="node-a", ready=False, rv="12")
    w.s.observe(running, at(2))
    _publish_pending(w, 2)
    w.s.advance_to(at(2 + READY))
    _answer_reads(w, 2 + READY + 1, running)
    w.s.advance_to(at(2 + READY + GRACE + 1))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "ReadyDeadlineExceeded"
    assert _phases_written(w)[-1] == "Failed"


def test_until_the_deadline_the_ready_status_is_held_while_the_pod_comes_up():
    w = _resumed_with_its_pod_gone(True)
    w.s.advance_to(at(START - 1))
    assert w.phase == "Provisioning" and "Provisioning" not in _phases_written(w)


def test_a_ready_deadline_over_a_ready_status_waits_for_the_requests_in_flight_then_judges():
    """Soak seed 70039: the status (written only by kfold) says this generation is Ready, and the
    Service create (a takeover's) is still in flight at the ready deadline: the Session is judged
    again later, not failed; once the request has answered, the deadline is judged as for a fresh
    bring-up (not beyond it: issue 33, item 2)."""
    w = World(start_seconds=START, ready_seconds=READY)
    obj = _ready_session(3)
    w.s.observe(obj, at(0))
    w.answer("create", "Pod", when=1, obj=pod_obj(3))
    running = pod_obj(3, phase="Running", ip="10.0.0.8", node="node-a", ready=False, rv="12")
    w.s.observe(running, at(2))
    assert w.pending("create", "Service"), "the endpoint request is in flight"
    w.s.advance_to(at(2 + READY))
    _answer_reads(w, 2 + READY + 1, running)
    w.s.advance_to(at(2 + READY + 4 * GRACE))
    assert w.phase == "Provisioning", "judged again later while kfold's own request is in flight"
    assert "Failed" not in _phases_written(w)
    for kind in ("Service", "Ingress"):
        if w.pending("create", kind):
            w.answer("create", kind, when=2 + READY + 4 * GRACE, obj={})
    w.s.advance_to(at(2 + READY + 5 * GRACE + 1))
    _answer_reads(w, 2 + READY + 5 * GRACE + 2, running)
    w.s.advance_to(at(2 + READY + 7 * GRACE))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "ReadyDeadlineExceeded"


def _taken_over_at_generation_2(with_pod: dict) -> World:
    """Generation 1's pod is being read (a relist lacked it) when the Session is observed with a new
    app set and a status another replica wrote: Ready at generation 2. The record begins generation
    2 (the read of demo-g1 still unanswered: a slow apiserver, the request timeout is 30 s), its
    pod is created and observed as ``with_pod``, its Service and Ingress are published."""
    w = World(start_seconds=START, ready_seconds=READY).to_provisioning(when=1)
    w.run_pod(2, ready=False)
    w.publish_endpoints(2)
    w.s.relist("Pod", [], at(3))
    assert [e.name for e in _session_pod_reads(w)] == ["demo-g1"]
    w.spec = {**SPEC, "apps": [*SPEC["apps"], {"name": "db", "io": "tty"}]}
    w.s.observe(_ready_session(2, spec=w.spec), at(4))
    assert w.decision().generation == 2
    w.answer("create", "Pod", when=5, obj=pod_obj(2))
    w.s.observe(with_pod, at(6))
    _publish_pending(w, 6)   # routed only if it runs
    return w


@pytest.mark.parametrize("deadline", ["start", "ready"])
def test_a_deadline_over_a_ready_status_does_not_wait_for_a_read_of_a_pod_the_session_let_go(deadline):
    """A bring-up deadline is judged later only while the Session waits on a request of its own
    (``_judge_later``); a read of its pod is the judgement's own, and one of a pod it has let go (an
    earlier generation's) says nothing of the current one. At the deadline the current pod is read
    (a quorum read made after it) and the Session is judged on that answer, with the earlier read
    still unanswered."""
    pod = (pod_obj(2, unscheduled="0/2 nodes are available: 2 Insufficient cpu.", rv="20") if deadline == "start"
           else pod_obj(2, phase="Running", ip="10.0.0.8", node="node-a", ready=False, rv="20"))
    w = _taken_over_at_generation_2(pod)
    due = 5 + START if deadline == "start" else 6 + READY
    w.s.advance_to(at(due))
    assert [e.name for e in _session_pod_reads(w)] == ["demo-g1", "demo-g2"], "the current pod is read after the deadline"
    w.s.outcome(_session_pod_reads(w)[-1], "ok", at(due + 1), obj={**pod, "metadata": {**pod["metadata"], "resourceVersion": "21"}})
    w.s.advance_to(at(due + GRACE))
    assert w.phase == "Failed"
    assert w.condition("Ready")["reason"] == ("StartDeadlineExceeded" if deadline == "start" else "ReadyDeadlineExceeded")
    assert [e.name for e in _session_pod_reads(w)] == ["demo-g1"], "judged with the earlier read still unanswered"


def _session_pod_reads(w: World) -> list:
    return [e for e in w.pending("get", "Pod") if e.machine == "session"]
