"""A relist is a suspect list, never proof of absence (issue 12, item 1; DESIGN invariant 9).

The journal order these tests replay was seen on the real control plane: the pod create succeeded
at resourceVersion 70540, and a pod list taken earlier, at 70539, was journaled (and folded)
after it. The list cannot hold the pod; kfold must not conclude that the pod disappeared.
"""
from __future__ import annotations

import pytest

from tests.scenario.test_session_support import KEY, NS, SPEC, World, at, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

POD_KEY = f"local/{NS}/demo-g1"


def _created_then_stale_list(w: World) -> tuple:
    """Bring the pod create to its ok outcome at rv 70540, then fold a list taken at 70539."""
    w.to_creating(when=1)
    w.answer("create", "Pod", when=2, obj=pod_obj(1, rv="70540"))
    assert w.phase == "Provisioning"
    return w.s.feed(_relist(rv="70539", at_s=3))


def _relist(rv: str, at_s: float, objs: tuple = ()):
    from journal.records import ListedKey, Relist
    keys = tuple(ListedKey(namespace=o["metadata"]["namespace"], name=o["metadata"]["name"],
                           uid=o["metadata"]["uid"], rv=o["metadata"]["resourceVersion"]) for o in objs)
    return Relist(at=at(at_s), cluster="local", api_version="v1", kind="Pod", rv=rv, keys=keys)


def test_a_list_older_than_the_create_does_not_make_the_pod_disappear():
    w = World()
    effects = _created_then_stale_list(w)
    assert w.phase == "Provisioning", "a stale list failed the session"
    assert not w.decision().pod.gone
    reads = [e for e in effects if e.type == "get" and e.kind == "Pod"]
    assert [(r.namespace, r.name) for r in reads] == [(NS, "demo-g1")], "the suspect pod is re-read (quorum GET)"
    assert not w.pending("delete", "Pod")


def test_the_re_read_finding_the_pod_keeps_the_session_and_folds_what_it_says():
    w = World()
    _created_then_stale_list(w)
    w.answer("get", "Pod", when=4, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", ready=True,
                                               rv="70600"))
    w.publish_endpoints(4)
    assert w.phase == "Ready", "the read's facts are folded like a watch event's"
    assert not w.decision().pod.reading
    w.s.advance_to(at(4 + 600))
    assert w.phase == "Ready"


def test_only_the_re_reads_404_proves_the_pod_gone():
    w = World()
    _created_then_stale_list(w)
    w.answer("get", "Pod", result="not_found", when=4, status_reason="NotFound")
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"] == "pod demo-g1 disappeared before reaching Running"


def test_a_re_read_in_doubt_after_a_restart_is_sent_again():
    from journal.records import Command
    w = World()
    _created_then_stale_list(w)
    read = w.pending("get", "Pod")[0]
    more = w.s.feed(Command(at=at(5), name="effect.in_doubt", args={"effect_id": read.id}))
    assert [(e.type, e.kind, e.name) for e in more if e.type == "get"] == [("get", "Pod", "demo-g1")]


def test_the_pod_machine_keeps_the_fence_question_open_until_a_quorum_read():
    """A delete waiting for the pod to go is answered by the read's 404, not by the list."""
    w = World()
    _created_then_stale_list(w)
    w.answer("get", "Pod", when=4, obj=pod_obj(1, rv="70600"))
    w.submit({**SPEC, "stopped": True}, when=5)
    fence = [e for e in w.pending("get", "Pod") if e.machine == "pod"]
    assert fence, "the stale list dropped the idle fence: the delete fences itself by a quorum read first"
    w.s.outcome(fence[0], "ok", at(5), obj=pod_obj(1, rv="70600"))
    delete = w.answer("delete", "Pod", when=6)
    assert (delete.name, delete.uid) == ("demo-g1", "pod-uid-1")
    read = w.s.feed(_relist(rv="70601", at_s=7))
    assert [e.name for e in read if e.type == "get" and e.machine == "pod"] == ["demo-g1"]
    assert w.s.decision("pod", POD_KEY) is not None, "the list alone released nothing"
    found = [e for e in w.pending("get", "Pod") if e.machine == "pod"][0]
    w.s.outcome(found, "not_found", at(8), status_reason="NotFound")
    assert w.s.decision("pod", POD_KEY) is None
    assert not w.decision().releasing


def test_a_session_missing_from_a_relist_is_re_read_and_kept_when_it_exists():
    from journal.records import Relist
    w = World().to_ready()
    stale = Relist(at=at(10), cluster="local", api_version="kfold.dev/v1alpha1", kind="Session", rv="5", keys=())
    reads = [e for e in w.s.feed(stale) if e.type == "get" and e.kind == "Session"]
    assert [r.name for r in reads] == ["demo"]
    assert w.phase == "Ready" and not w.pending("delete", "Pod")
    w.s.outcome(reads[0], "ok", at(11), obj=session_obj(w.spec, rv="99", finalizers=("kfold.dev/teardown",)))
    assert w.phase == "Ready" and not w.pending("delete", "Pod")


def test_a_session_missing_from_a_relist_whose_re_read_404s_is_let_go():
    from journal.records import Relist
    w = World().to_ready()
    stale = Relist(at=at(10), cluster="local", api_version="kfold.dev/v1alpha1", kind="Session", rv="5", keys=())
    read = [e for e in w.s.feed(stale) if e.type == "get" and e.kind == "Session"][0]
    w.s.outcome(read, "not_found", at(11), status_reason="NotFound")
    assert w.decision() is None
    assert w.pending("delete", "Pod"), "its pod is released through the pod machine"
