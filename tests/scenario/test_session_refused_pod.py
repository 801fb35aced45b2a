"""A pod kfold refused to adopt is never deleted (issue 33, item 1; DESIGN invariant 10, "Names").

``<session>-g1`` already exists, managed by kfold but labelled for another Session: the create
meets AlreadyExists, the read refuses to adopt it and the Session fails ``NameTaken`` naming the
pod. A stop (or the Session's deletion) that follows, with the journal kept or lost, deletes
nothing of the other Session's: whatever names the pod, the delete goes through only for a pod
that carries this Session's labels (lookup and reaping go by labels, never by name). A pod under
the name with this Session's labels but another generation is this Session's own: it is refused as
the generation being brought up (``NameTaken``) and reaped, fenced by its uid, by a stop.
"""
from __future__ import annotations

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import SPEC, World, at, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

OTHER = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "other", "kfold.dev/generation": "1"}
OWN_OTHER_GEN = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "demo", "kfold.dev/generation": "7"}


def _held(labels: dict[str, str]) -> dict:
    pod = pod_obj(1, phase="Running", ip="10.0.0.9", node="node-b", ready=True, rv="40")
    pod["metadata"].update(uid="held-uid", labels=dict(labels))
    return pod


def _refused(labels: dict[str, str]) -> World:
    """The pod is on the cluster (and seen on kfold's watch) before the Session is created."""
    w = World()
    w.s.observe(_held(labels), at(0), event="ADDED")
    w.to_creating(SPEC, when=1)
    w.answer("create", "Pod", "already_exists", when=2, status_reason="AlreadyExists")
    w.answer("get", "Pod", when=2, obj=_held(labels))
    return w


def _with_status(w: World, spec: dict, **meta: object) -> dict:
    """The Session as the apiserver holds it now: kfold's last status write on it."""
    w.rv += 1
    obj = session_obj(spec, rv=str(w.rv), finalizers=(FINALIZER,), **meta)
    obj["status"] = w.status()
    return obj


def _stop(obj: dict, how: str) -> dict:
    if how == "stopped":
        obj["spec"] = {**obj["spec"], "stopped": True}
    else:
        obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:10:00Z"
    return obj


def _pod_deletes(w: World) -> list[str]:
    return [e.uid for e in w.effects("delete", "Pod")]


def _answer_pod_reads(w: World, obj: dict, when: float) -> None:
    for read in [e for e in w.pending("get", "Pod")]:
        w.s.outcome(read, "ok", at(when), obj=obj)


def test_a_pod_of_another_session_under_the_name_fails_the_session_name_taken():
    w = _refused(OTHER)
    assert w.phase == "Failed"
    cond = w.condition("Ready")
    assert cond["reason"] == "NameTaken"
    assert "demo-g1" in cond["message"] and "session=other" in cond["message"]
    assert not _pod_deletes(w)


@pytest.mark.parametrize("journal", ["kept", "lost"])
@pytest.mark.parametrize("how", ["stopped", "deleted"])
def test_stopping_the_session_never_deletes_the_refused_pod(how, journal):
    w = _refused(OTHER)
    obj = _stop(_with_status(w, SPEC), how)
    if journal == "lost":
        w = World()
        w.s.observe(_held(OTHER), at(3), event="ADDED")
    w.s.observe(obj, at(4))
    for when in (5, 6, 7):
        _answer_pod_reads(w, _held(OTHER), when)
    assert not _pod_deletes(w), "the other Session's pod is not this Session's to delete"
    assert w.phase == "Stopped"
    w.s.advance_to(at(700))
    assert not _pod_deletes(w), "nor later"


def test_a_pod_of_this_session_under_another_generation_is_refused_then_reaped_by_a_stop():
    w = _refused(OWN_OTHER_GEN)
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "NameTaken"
    assert not _pod_deletes(w), "refused as generation 1: not deleted while the Session is Failed"
    w.s.observe(_stop(_with_status(w, SPEC), "stopped"), at(4))
    _answer_pod_reads(w, _held(OWN_OTHER_GEN), 5)
    assert _pod_deletes(w) == ["held-uid"], "its own (by labels): reaped by the stop, fenced by its uid"


def test_a_stop_queued_behind_the_refused_create_does_not_delete_the_pod():
    """A fresh journal meets the Session's status (Ready, generation 1) and re-creates ``demo-g1``;
    the user stops it while that create is in flight: the release of the pod the status names
    waits for the create, which then refuses the pod holding the name."""
    w = World()
    w.s.observe(_held(OTHER), at(0), event="ADDED")
    obj = session_obj(SPEC, rv="500", finalizers=(FINALIZER,))
    obj["status"] = {"phase": "Ready", "generation": 1, "podName": "demo-g1"}
    w.s.observe(obj, at(1))
    assert w.pod_creates() == ["demo-g1"]
    w.s.observe(_stop({**obj, "metadata": {**obj["metadata"], "resourceVersion": "501"}}, "stopped"), at(2))
    w.answer("create", "Pod", "already_exists", when=3, status_reason="AlreadyExists")
    for when in (4, 5, 6):
        _answer_pod_reads(w, _held(OTHER), when)
    assert not _pod_deletes(w)
    assert w.phase == "Stopped"
