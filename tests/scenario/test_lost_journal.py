"""A lost journal costs history, never a healthy object (issue 12, item 2; DESIGN invariant 9).

kfold starts on an empty journal against a cluster where its Sessions are Ready: every create
answers AlreadyExists. It must converge to what is there: adopt the running generation's pod (no
new generation), fold what its own read of the pod returned (a quiet cluster sends no event),
never write a phase behind the one the Session shows, and delete nothing.
"""
from __future__ import annotations

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import ENV_SPEC, SPEC, World, at, owned_obj, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def _ready_session(gen: int, phase: str = "Ready", spec: dict | None = None, **status: object) -> dict:
    obj = session_obj(spec or SPEC, rv="500", finalizers=(FINALIZER,))
    obj["status"] = {"phase": phase, "generation": gen, "podName": f"demo-g{gen}", **status}
    return obj


def _running(gen: int) -> dict:
    return pod_obj(gen, phase="Running", ip="10.0.0.7", node="node-a", ready=True, rv="400")


def _adopt_everything(w: World, gen: int) -> None:
    """Answer every create with AlreadyExists and every read with what is running."""
    if w.pending("create", "Secret"):
        w.answer("create", "Secret", result="already_exists", when=1, status_reason="AlreadyExists")
    if w.pending("get", "Secret"):
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "demo-env", "namespace": "team", "uid": "secret-uid", "resourceVersion": "300",
            "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "demo"},
            "annotations": {"kfold.dev/env-refs": "TOKEN=creds/token"}}}   # ENV_SPEC's references
        w.answer("get", "Secret", when=1, obj=secret)
    w.answer("create", "Pod", result="already_exists", when=2, status_reason="AlreadyExists")
    w.answer("get", "Pod", when=2, obj=_running(gen))      # the pod machine's read: adopt
    w.answer("get", "Pod", when=3, obj=_running(gen))      # the session's read of the adopted pod
    for kind in ("Service", "Ingress"):                     # its endpoints, re-pointed at the same pod
        w.answer("create", kind, result="already_exists", when=3, status_reason="AlreadyExists")
        w.answer("get", kind, when=3, obj=owned_obj(kind))
        w.answer("replace", kind, when=3, obj={})


@pytest.mark.parametrize("spec", [SPEC, ENV_SPEC], ids=["no-env", "env"])
def test_a_fresh_journal_adopts_the_running_generation_without_a_new_one_or_a_delete(spec):
    w = World()
    w.s.observe(_ready_session(3, spec=spec), at(0))
    _adopt_everything(w, 3)
    assert w.pod_creates() == ["demo-g3"], "the running generation is adopted, not replaced"
    assert w.phase == "Ready", "the adopted pod's own read says Running and ready"
    assert w.decision().generation == 3
    assert not w.effects("delete"), "nothing is deleted"
    w.s.advance_to(at(3 + 600))
    assert w.phase == "Ready" and not w.effects("delete"), "no deadline fires on a quiet cluster"


def test_no_status_write_moves_the_visible_phase_backwards():
    w = World()
    w.s.observe(_ready_session(3), at(0))
    _adopt_everything(w, 3)
    phases = [e.patch["status"]["phase"] for e in w.effects("patch", "Session") if e.subresource == "status"]
    assert phases and set(phases) == {"Ready"}, f"status phases written: {phases}"


def test_a_failed_session_stays_failed_for_the_spec_it_failed_on():
    w = World()
    obj = _ready_session(2, phase="Failed",
                         conditions=[{"type": "Ready", "status": "False", "reason": "PodFailed", "message": "boom"}])
    w.s.observe(obj, at(0))
    assert w.phase == "Failed" and w.decision().generation == 2
    assert not w.effects("create") and not w.effects("delete")
    assert w.condition("Ready")["message"] == "boom"


@pytest.mark.parametrize("failed_at, now, retried", [(2, 2, False), (1, 2, True), (None, 2, False)],
                         ids=["failed-on-this-spec", "failed-on-an-earlier-spec", "status-without-it"])
def test_a_fresh_record_retries_a_failure_only_when_the_status_names_an_earlier_spec(failed_at, now, retried):
    """Soak seed 770254: the Failed condition names the spec that failed (its metadata.generation);
    a second daemon with a journal of its own, seeing Failed under a spec changed since, took the
    new spec for the failed one and wrote Failed over the Running pod the retry had made."""
    ready = {"type": "Ready", "status": "False", "reason": "PodFailed", "message": "boom"}
    obj = _ready_session(2, phase="Failed", conditions=[
        {**ready, "observedGeneration": failed_at} if failed_at is not None else ready])
    obj["metadata"]["generation"] = now
    w = World()
    w.s.observe(obj, at(0))
    assert (w.phase != "Failed") == retried
    assert w.pod_creates() == (["demo-g3"] if retried else [])


def test_a_failed_status_names_the_spec_that_failed():
    w = World(start_seconds=60)
    obj = session_obj(SPEC, rv="1", finalizers=(FINALIZER,))
    obj["metadata"]["generation"] = 4
    w.s.observe(obj, at(0))
    w.answer("create", "Pod", when=1, obj=pod_obj(1))
    w.s.advance_to(at(62))
    w.answer("get", "Pod", when=62, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="11"))
    w.s.advance_to(at(68))
    assert w.phase == "Failed" and w.condition("Ready")["observedGeneration"] == 4


def test_a_suspended_session_resumes_with_a_fresh_generation():
    w = World()
    obj = _ready_session(4, phase="Suspended")
    obj["spec"] = {**SPEC, "suspended": True}
    w.s.observe(obj, at(0))
    assert w.phase == "Suspended" and w.decision().generation == 4
    assert not w.effects("delete")


@pytest.mark.parametrize("how", ["stopped", "deleted", "suspended"])
def test_a_session_stopped_while_kfold_had_no_journal_still_releases_its_pod(how):
    """``suspended``: found by ``kfold sim --seed 78 --steps 80`` (the pod outlived the suspend)."""
    w = World()
    w.s.observe(_stopping(_ready_session(3), how), at(0))
    _the_named_pod_is_released(w, 1)


@pytest.mark.parametrize("how", ["stopped", "deleted"])
def test_a_session_stopped_after_a_fresh_journal_began_readopting_still_releases_its_pod(how):
    """Found by ``kfold sim --seed 163`` (a lost journal, then the user deletes the Session while
    kfold is still at its Secret step of re-adopting generation 3): the pod the status names was
    never read nor deleted, and outlived its Session. (A Secret step needs env references.)"""
    w = World()
    w.s.observe(_ready_session(3, spec=ENV_SPEC), at(0))
    assert w.decision().generation == 3 and w.phase == "Pending" and not w.decision().pod.name
    obj = _ready_session(3, spec=ENV_SPEC)
    obj["metadata"]["resourceVersion"] = "501"
    w.s.observe(_stopping(obj, how), at(2))
    _the_named_pod_is_released(w, 3)


def _stopping(obj: dict, how: str) -> dict:
    if how in ("stopped", "suspended"):
        obj["spec"] = {**obj["spec"], how: True}
    else:
        obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:10:00Z"
    return obj


def _the_named_pod_is_released(w: World, when: float) -> None:
    read = [e for e in w.pending("get", "Pod") if e.machine == "pod"]
    assert [e.name for e in read] == ["demo-g3"], "the pod the status names is read, then deleted fenced"
    w.s.outcome(read[0], "ok", at(when), obj=_running(3))
    assert [(e.name, e.uid) for e in w.pending("delete", "Pod")] == [("demo-g3", "pod-uid-3")]


@pytest.mark.parametrize("phase", ["Suspended", "Stopping", "Failed"])
def test_a_status_written_before_the_pod_was_gone_still_releases_generation_n(phase):
    """Found by ``kfold sim --seed 80 --steps 80``: the status said Suspended (no pod name) but
    the pod was still terminating when the journal was lost; the new life never released it.
    ``Failed``: seed 244 (80 steps), the Session then deleted."""
    w = World()
    obj = _ready_session(3, phase=phase)
    obj["status"]["podName"] = None
    w.s.observe(_stopping(obj, {"Suspended": "suspended", "Failed": "deleted"}.get(phase, "stopped")), at(0))
    _the_named_pod_is_released(w, 1)


@pytest.mark.parametrize("status", [None, "Ready"], ids=["new", "resumed-from-ready"])
@pytest.mark.parametrize("wish", ["suspended", "stopped"])
def test_a_record_that_never_began_a_generation_loads_back_from_a_snapshot(status, wish):
    """A Session first met suspended or stopped (new, or by a fresh journal) begins no generation;
    its record takes its target from the spec it meets (home cluster: no tenant), and a snapshot of
    it loads back equal (engine.snapshot: ``load(dump(s)) == s``)."""
    from engine import snapshot
    w = World()
    spec = {**SPEC, wish: True}
    w.s.observe(_ready_session(3, spec=spec) if status else session_obj(spec, rv="2"), at(0))
    assert (w.decision().target, w.decision().target_tenant) == ("local", "")
    data = snapshot.dump(w.s.state)
    assert snapshot.load(data).table("session") == w.s.state.table("session")


def test_a_stale_list_without_any_status_is_not_taken_for_another_writers_overwrite():
    """resourceVersions are opaque (only kube-apiserver's are integers, compared as such): a list
    answered before kfold's first status write, folded after its echo, shows no status at all. That
    is not another writer's status (``_overwritten``): nothing is written again."""
    w = World().to_ready()
    [write] = [e for e in w.s.effects if e.type == "patch" and e.subresource == "status"][-1:]
    w.s.outcome(write, "ok", at(7), obj={"metadata": {"resourceVersion": "rv-b"}})
    echo = session_obj(SPEC, rv="rv-b", finalizers=(FINALIZER,))
    echo["status"] = write.patch["status"]
    w.s.observe(echo, at(8))
    writes = len([e for e in w.s.effects if e.type == "patch" and e.subresource == "status"])
    w.s.observe(session_obj(SPEC, rv="rv-a", finalizers=(FINALIZER,)), at(9))   # no status at all
    assert len([e for e in w.s.effects if e.type == "patch" and e.subresource == "status"]) == writes


def test_a_failed_session_stopped_no_longer_reports_its_failure_as_why_it_is_not_ready():
    w = World()
    w.submit({**SPEC, "image": 3})
    assert w.condition("Ready")["reason"] == "InvalidSpec"
    w.submit({**SPEC, "image": 3, "stopped": True}, 5)
    assert w.phase in ("Stopping", "Stopped")
    assert w.condition("Ready")["reason"] in ("Stopping", "Stopped")
