"""A pod create refused because its namespace's ServiceAccount does not exist yet (issue 46 item 4).

With ServiceAccount admission on, every new namespace has a window before the controller manager
makes its ``default`` ServiceAccount; a pod created in it is refused with the answer recorded in
``tests/data/apiserver/pod_create_no_default_serviceaccount.json`` (a real kube-apiserver's, built
into the exception the client raises and classified by the executor's own ``classify``). kfold
creates the pod again on the one backoff (``engine.backoff.POD_CREATE``) within the create's
budget: the Session stays Creating, never Failed, and comes up once the create is accepted.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import backoff
from engine.effects.io.kube_errors import classify
from tests.scenario.test_session_support import SPEC, World, at, pod_obj
from tests.unit.test_kube_errors import raised

pytestmark = pytest.mark.usefixtures("frozen_world")

RECORDED = Path(__file__).resolve().parents[1] / "data" / "apiserver" / "pod_create_no_default_serviceaccount.json"


def refusal() -> dict:
    """The recorded answer as the executor journals it: ``Outcome`` fields from ``classify``."""
    doc = json.loads(RECORDED.read_text())
    got = classify(raised(doc["status"], json.dumps(doc["body"]).encode(), doc["headers"]))
    return {"result": got.result, "status_reason": got.status_reason, "code": got.code,
            "message": got.message, "retry_after_ms": got.retry_after_ms}


def _refuse(w: World, when: float) -> None:
    w.answer("create", "Pod", when=when, **refusal())


def test_the_recorded_answer_is_a_forbidden_naming_the_missing_serviceaccount():
    r = refusal()
    assert (r["result"], r["status_reason"], r["code"]) == ("forbidden", "Forbidden", 403)
    assert 'error looking up service account sa-race-stopped/default: serviceaccount "default" not found' in r["message"]


def test_a_refused_create_is_sent_again_on_the_backoff_and_the_session_comes_up():
    w = World().to_creating(SPEC, when=1)
    _refuse(w, 2)
    assert w.phase == "Creating" and w.pod_creates() == ["demo-g1"]
    # failure n waits delay_ms(n - 1): 1 s, 2 s, 4 s, ... of server time after each refusal
    sent_at = [2.0]
    for n in (1, 2, 3):
        due = sent_at[-1] + backoff.delay_ms(n - 1) / 1000
        w.s.advance_to(at(due) - 1)
        assert len(w.pod_creates()) == n, f"create {n + 1} went before its backoff was over"
        w.s.advance_to(at(due))
        assert len(w.pod_creates()) == n + 1
        if n < 3:
            _refuse(w, due)
            sent_at.append(due)
    assert w.phase == "Creating"
    w.answer("create", "Pod", when=sent_at[-1] + 5, obj=pod_obj(1))
    w.run_pod(sent_at[-1] + 6)
    w.publish_endpoints(sent_at[-1] + 6)
    assert w.phase == "Ready"
    assert w.pod_creates() == ["demo-g1"] * 4


def test_the_first_refusal_is_logged_once_naming_the_serviceaccount():
    w = World().to_creating(SPEC, when=1)
    _refuse(w, 2)
    w.s.advance_to(at(3))
    _refuse(w, 3)
    logs = [e.message for e in w.s.effects if e.type == "log" and "ServiceAccount" in e.message]
    assert len(logs) == 1, logs
    assert "demo-g1" in logs[0] and 'serviceaccount "default" not found' in logs[0]


def test_an_rbac_refusal_of_the_create_still_fails_the_session():
    w = World().to_creating(SPEC, when=1)
    w.answer("create", "Pod", "forbidden", when=2, status_reason="Forbidden", code=403,
             message='pods is forbidden: User "system:serviceaccount:kfold:kfold" cannot create resource "pods"')
    assert w.phase == "Failed"
    assert w.condition("Ready")["reason"] == "PodCreateFailed"
