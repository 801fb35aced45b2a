"""Own before touching (issue 12, item 3; DESIGN invariant 10): a same-name Service, Ingress or
Secret that is not this Session's is reported and left alone; teardown deletes only what carries
this Session's labels, fenced by the uid it read."""
from __future__ import annotations

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import ENV_SPEC, SPEC, World, owned_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

OTHER_APP = {"app": "billing"}


def _secret_exists() -> World:
    """Bring-up (with env references, so with a Secret) to the Secret create, answered AlreadyExists."""
    w = World()
    w.submit(ENV_SPEC)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(ENV_SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "Secret", "already_exists", status_reason="AlreadyExists")
    return w


def test_a_foreign_service_of_the_same_name_fails_the_session_and_is_never_replaced():
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    w.answer("create", "Service", "already_exists", when=6, status_reason="AlreadyExists")
    w.answer("get", "Service", when=7, obj=owned_obj("Service", labels=OTHER_APP))
    assert w.phase == "Failed"
    cond = w.condition("Ready")
    assert cond["reason"] == "NameTaken"
    assert cond["message"].startswith("Service team/demo already exists and is not Session demo's")
    assert "managed-by=-, session=-" in cond["message"] and "untouched" in cond["message"]
    assert not w.effects("replace", "Service") and not w.effects("delete", "Service")


@pytest.mark.parametrize("labels", [OTHER_APP, {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "other"}],
                         ids=["another-app", "another-session"])
def test_a_foreign_secret_of_the_same_name_fails_the_bring_up_before_any_pod(labels):
    w = _secret_exists()
    w.answer("get", "Secret", obj=owned_obj("Secret", labels=labels))
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"].startswith("Secret team/demo-env already exists and is not Session demo's")
    assert not w.effects("create", "Pod") and not w.effects("delete")


def test_this_sessions_own_secret_is_adopted():
    w = _secret_exists()
    w.answer("get", "Secret", obj=owned_obj("Secret"))
    assert w.phase == "Creating" and w.pod_creates() == ["demo-g1"]


@pytest.mark.parametrize("ours", [True, False], ids=["ours", "foreign"])
def test_stop_leaves_a_foreign_secret_untouched_and_deletes_its_own_by_uid(ours):
    w = World().to_ready(ENV_SPEC)
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    assert not w.pending("get", "Service") and not w.pending("get", "Ingress"), "they go with the pod"
    w.answer("get", "Secret", when=11, obj=owned_obj("Secret", labels=None if ours else OTHER_APP))
    deletes = [(e.kind, e.uid) for e in w.effects("delete") if e.kind != "Pod"]
    assert deletes == ([("Secret", "secret-uid")] if ours else []), "only its own object, fenced by uid"
    if ours:
        w.answer("delete", "Secret", when=12)
    assert w.decision().teardown == ()


def test_a_delete_whose_uid_precondition_fails_reads_again():
    w = World().to_ready(ENV_SPEC)
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    w.answer("get", "Secret", when=11, obj=owned_obj("Secret"))
    w.answer("delete", "Secret", "conflict", when=12, status_reason="Conflict")
    replaced = owned_obj("Secret", labels=OTHER_APP)
    w.answer("get", "Secret", when=13, obj=replaced)
    assert [e.uid for e in w.effects("delete", "Secret")] == ["secret-uid"], "the replacement is not deleted"
    assert "Secret" not in w.decision().teardown


@pytest.mark.parametrize("ours", [True, False], ids=["ours", "foreign"])
def test_an_endpoint_no_longer_wanted_is_read_then_deleted_only_if_ours(ours):
    w = World().to_ready()
    w.submit({**SPEC, "apps": [{"name": "web", "io": "tty"}]}, 20)   # ports-only change: nothing left to route
    assert w.pod_creates() == ["demo-g1"], "a ports-only change keeps the pod"
    assert not [e for e in w.effects("delete") if e.kind in ("Service", "Ingress")], "nothing deleted unread"
    w.answer("get", "Service", when=21, obj=owned_obj("Service", labels=None if ours else OTHER_APP))
    deletes = [(e.kind, e.uid) for e in w.effects("delete") if e.kind == "Service"]
    assert deletes == ([("Service", "service-uid")] if ours else [])
    assert w.phase == "Ready", "an object kfold no longer wants is never a reason to fail"


def test_a_secret_whose_create_answered_is_deleted_by_that_uid_without_a_read_first():
    w = World()
    w.submit(ENV_SPEC)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(ENV_SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "Secret", obj=owned_obj("Secret"))
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    assert not w.pending("get", "Secret"), "its uid is known from the create: no read"
    delete = w.pending("delete", "Secret")[0]
    assert delete.uid == "secret-uid"
    w.answer("delete", "Secret", "conflict", when=11, status_reason="Conflict")   # replaced since: read, decide again
    w.answer("get", "Secret", when=12, obj=owned_obj("Secret", labels=OTHER_APP))
    assert [e.uid for e in w.effects("delete", "Secret")] == ["secret-uid"], "the replacement is not deleted"
    assert w.decision().teardown == ()


def test_a_service_found_taken_over_is_no_longer_taken_for_kfolds_own():
    """kfold created the Service; a re-route reads it and finds another owner's object under the
    name: the Session fails NameTaken, and what kfold believed the apiserver held of its own is
    forgotten, so the next generation asks again from the start (a create, never a replace of it)."""
    from tests.scenario.test_session_support import pod_obj
    w = World().to_ready()
    moved = {**SPEC, "apps": [{"name": "web", "ports": [{"port": 9090}], "io": "tty"}]}
    w.submit(moved, 10)
    w.answer("get", "Service", when=11, obj=owned_obj("Service", labels=OTHER_APP))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "NameTaken"
    w.answer("delete", "Pod", when=12)
    w.observe_pod(12, gen=1, event="DELETED")
    before = len(w.s.effects)
    w.submit({**moved, "image": "registry.example/ws:2"}, 20)
    w.answer("create", "Pod", when=21, obj=pod_obj(w.decision().generation))
    w.observe_pod(22, phase="Running", ip="10.0.0.9", node="node-a", ready=True)
    sent = [e.type for e in w.s.effects[before:] if getattr(e, "kind", "") == "Service"]
    assert sent[:1] == ["create"]
