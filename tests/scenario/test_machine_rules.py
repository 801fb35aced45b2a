"""Rules of the session machine pinned from the spec and the Kubernetes API contract (issue 34,
item 3: survivors of the mutation sample over engine/machines), driven through ``World``."""
from __future__ import annotations

import pytest

from tests.scenario.test_session_answers import _service_replacing
from tests.scenario.test_session_endpoints import EXISTING_SERVICE
from tests.scenario.test_session_support import ENV_SPEC, KEY, SPEC, World, owned_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def _stopped_to_secret(w: World) -> None:
    """Stop a Ready Session with env: its pod, Service and Ingress go; the Secret read is next."""
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    w.answer("delete", "Pod", when=10)
    w.observe_pod(10, event="DELETED")
    for kind in ("Service", "Ingress"):
        if w.pending("get", kind):
            w.answer("get", kind, when=11, obj=owned_obj(kind))
            w.answer("delete", kind, when=11)


def test_a_teardown_read_refused_says_it_cannot_read_and_is_evented_on_the_session():
    w = World().to_ready(ENV_SPEC)
    _stopped_to_secret(w)
    w.answer("get", "Secret", "forbidden", when=11, message="secrets is forbidden")
    cond = w.condition("TeardownComplete")
    assert cond["reason"] == "TeardownBlocked"
    assert cond["message"].startswith("cannot read Secret demo-env: forbidden")
    [event] = [e for e in w.effects("post_event") if e.reason == "TeardownBlocked"]
    assert event.key == f"{KEY}#events" and event.regarding["kind"] == "Session"


def test_an_ended_app_container_is_evented_on_its_pod():
    """An Event's involvedObject names the object by apiVersion, kind, name, uid and namespace."""
    w = World().to_ready()
    w.observe_pod(20, phase="Running", ip="10.0.0.7", node="node-a", ready=True, ended={"web": ("Error", 3)})
    [event] = [e for e in w.effects("event") if e.reason == "RunEnded"]
    assert event.involved == {"apiVersion": "v1", "kind": "Pod", "name": "demo-g1", "uid": "pod-uid-1",
                              "namespace": "team"}
    assert event.event_type == "Warning", "a non-zero exit code"


def test_an_endpoint_error_is_reported_under_its_kind():
    w = _service_replacing()
    for n in range(12):
        if not w.pending("replace", "Service"):
            break
        w.answer("replace", "Service", "conflict", when=8 + n, status_reason="Conflict")
        if w.pending("get", "Service"):
            w.answer("get", "Service", when=8 + n, obj=EXISTING_SERVICE)
    w.answer("create", "Ingress", when=30, obj={})
    cond = w.condition("EndpointsPublished")
    assert cond["reason"] == "UpsertFailed" and cond["message"].startswith("Service: conflict")


def test_an_endpoint_deleted_leaves_no_error_behind():
    w = World().to_ready()
    w.submit({**SPEC, "apps": [{"name": "web", "io": "tty"}]}, 20)   # nothing left to route
    w.answer("get", "Service", when=21, obj=owned_obj("Service"))
    w.answer("delete", "Service", when=22)
    if w.pending("get", "Ingress"):
        w.answer("get", "Ingress", when=22, obj=owned_obj("Ingress"))
        w.answer("delete", "Ingress", when=22)
    assert w.decision().service.error == "" and w.decision().ingress.error == ""
    assert not [c for c in w.status()["conditions"] if c["reason"] == "UpsertFailed"]
