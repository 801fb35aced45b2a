"""The perturbation runs' oracles (tests/e2e/perturb.py) judge the apiserver's order, not the
recorder's: its watches of Pods and Sessions run on separate threads, so one kind's events can be
recorded before another's that the apiserver made first."""
from __future__ import annotations

from tests.e2e.perturb import healthy_pods_deleted, in_apiserver_order


def _session(name: str, gen: int, rv: int, typ: str = "MODIFIED") -> tuple[str, str, dict]:
    return ("Session", typ, {"metadata": {"name": name, "generation": gen, "resourceVersion": str(rv)}})


def _pod(name: str, uid: str, rv: int, typ: str, session: str = "s0") -> tuple[str, str, dict]:
    return ("Pod", typ, {"metadata": {"name": name, "uid": uid, "resourceVersion": str(rv),
                                      "labels": {"kfold.dev/session": session}}})


def test_a_deletion_recorded_before_the_spec_change_that_asked_for_it_is_not_a_violation():
    events = [_session("s0", 1, 10, "ADDED"), _pod("s0-g1", "u1", 11, "ADDED"),
              _pod("s0-g1", "u1", 21, "DELETED"),    # the pod watch delivered first ...
              _session("s0", 2, 20)]                 # ... the spec change the apiserver made before it
    assert healthy_pods_deleted(events) == []
    assert [e[2]["metadata"]["resourceVersion"] for e in in_apiserver_order(events)] == ["10", "11", "20", "21"]


def test_a_deletion_no_spec_change_asked_for_is_one():
    events = [_session("s0", 1, 10, "ADDED"), _pod("s0-g1", "u1", 11, "ADDED"),
              _session("s1", 2, 12), _pod("s0-g1", "u1", 13, "DELETED")]
    assert len(healthy_pods_deleted(events)) == 1


def test_a_spec_change_after_the_deletion_does_not_excuse_it():
    events = [_session("s0", 1, 10, "ADDED"), _pod("s0-g1", "u1", 11, "ADDED"),
              _session("s0", 2, 30), _pod("s0-g1", "u1", 20, "DELETED")]
    assert healthy_pods_deleted(events) != []


def test_a_pod_made_again_under_its_name_is_judged_as_a_new_pod():
    events = [_session("s0", 1, 10, "ADDED"), _pod("s0-g1", "u1", 11, "ADDED"),
              _session("s0", 2, 12), _pod("s0-g1", "u1", 13, "DELETED"),       # asked: fine
              _pod("s0-g1", "u2", 14, "ADDED"), _pod("s0-g1", "u2", 15, "DELETED")]   # not asked since u2
    out = healthy_pods_deleted(events)
    assert len(out) == 1 and "u2" in out[0]


def test_without_integer_resource_versions_the_recorded_order_stands():
    events = [("Session", "ADDED", {"metadata": {"name": "s0", "generation": 1}}),
              ("Pod", "ADDED", {"metadata": {"name": "p", "uid": "u", "labels": {"kfold.dev/session": "s0"}}})]
    assert in_apiserver_order(events) == events
