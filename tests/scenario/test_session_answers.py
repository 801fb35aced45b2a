"""Answers and doubts the session machine must act on (issue 34, item 3: mutation survivors).

Each test states a rule from the spec or the Kubernetes API contract and drives the full engine
through ``World``: a replace keeps an object's uid, an in-doubt write or read is done again, a
Conflict is read and decided again within the endpoint's try bound, a blocked teardown says why.
"""
from __future__ import annotations

import pytest

from tests.scenario.test_session_bringup import _relay
from tests.scenario.test_session_secret import _met_at_generation_2, _old_pod_gone, _secret
from tests.scenario.test_session_endpoints import EXISTING_SERVICE
from tests.scenario.test_session_support import FINALIZER, ENV_SPEC, SPEC, World, at, owned_obj, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def _in_doubt(w: World, effect: object, when: float) -> tuple:
    return w.s.command("effect.in_doubt", at(when), effect_id=effect.id)


# -- the Secret --------------------------------------------------------------------------------

def test_an_adopted_secret_replaced_is_later_deleted_by_the_uid_it_was_read_with():
    """A PUT keeps an object's uid (metadata.uid is immutable): the Secret replaced at adoption is
    the one read, so when env goes its delete is fenced by that uid without reading it again, even
    when the replace answered without the object."""
    w = _met_at_generation_2(ENV_SPEC)
    w.answer("replace", "Secret", when=12, obj={})
    w.answer("create", "Pod", when=13, obj=pod_obj(2))
    w.submit(SPEC, 20)
    _old_pod_gone(w, 2, 20)
    assert [e.uid for e in w.pending("delete", "Secret")] == ["secret-uid"]
    assert not w.pending("get", "Secret")


def _reading_secret() -> World:
    """The Secret's create met AlreadyExists; its read is in flight."""
    w = World()
    w.submit(ENV_SPEC)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(ENV_SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "Secret", "already_exists", when=1, status_reason="AlreadyExists")
    return w


def test_a_secret_gone_between_alreadyexists_and_the_read_is_created_again():
    w = _reading_secret()
    w.answer("get", "Secret", "not_found", when=2)
    assert len(w.pending("create", "Secret")) == 1, "absent since: created again"
    assert not w.pod_creates(), "the pod waits for its Secret"


def test_a_secret_read_in_doubt_is_decided_again_not_waited_on_for_ever():
    w = _reading_secret()
    [read] = w.pending("get", "Secret")
    _in_doubt(w, read, 2)
    w.s.advance_to(at(60))
    assert w.pending("create", "Secret") or w.pending("get", "Secret"), "the Secret is asked for again"
    creates, reads = len(w.effects("create", "Secret")), len(w.effects("get", "Secret"))
    assert creates + reads >= 3


# -- the status --------------------------------------------------------------------------------

def test_a_status_write_in_doubt_is_written_again():
    """A write in doubt may not have landed: the status it carried is written again."""
    w = World().to_ready()
    [write] = [e for e in w.s.pending("patch") if e.subresource == "status"]
    before = len(w.effects("patch", "Session"))
    _in_doubt(w, write, 7)
    w.run_pod(8)
    after = [e for e in w.effects("patch", "Session") if e.subresource == "status"]
    assert len(w.effects("patch", "Session")) > before and after[-1].patch["status"]["phase"] == "Ready"


# -- the endpoints -----------------------------------------------------------------------------

def _service_replacing() -> World:
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    w.answer("create", "Service", "already_exists", when=6)
    w.answer("get", "Service", when=7, obj=EXISTING_SERVICE)
    assert w.pending("replace", "Service")
    return w


def test_a_service_replace_that_conflicts_is_read_and_replaced_again():
    """409 Conflict on a PUT fenced by resourceVersion: the object changed since the read; read it
    again and replace with the new resourceVersion."""
    w = _service_replacing()
    w.answer("replace", "Service", "conflict", when=8, status_reason="Conflict")
    assert len(w.pending("get", "Service")) == 1
    w.answer("get", "Service", when=9, obj={**EXISTING_SERVICE, "metadata": {**EXISTING_SERVICE["metadata"],
                                                                           "resourceVersion": "78"}})
    [again] = w.pending("replace", "Service")
    assert again.manifest["metadata"]["resourceVersion"] == "78"


def test_regression_a_service_replace_that_always_conflicts_stops_at_the_try_bound():
    """Found by mutation testing (session.endpoints.endpoint_outcome survived a conflict not counted):
    a replace answered Conflict was read and replaced again for ever, the try bound never checked.
    Rule: retries of one manifest are bounded (engine.backoff.ENDPOINT, 4 tries); the last error is kept for status."""
    w = _service_replacing()
    for n in range(12):
        if not w.pending("replace", "Service"):
            break
        w.answer("replace", "Service", "conflict", when=8 + n, status_reason="Conflict")
        if w.pending("get", "Service"):
            w.answer("get", "Service", when=8 + n, obj=EXISTING_SERVICE)
    assert not w.pending("replace", "Service") and not w.pending("get", "Service"), "its tries are spent"
    assert len(w.effects("replace", "Service")) == 4
    w.answer("create", "Ingress", when=30, obj={})
    cond = w.condition("EndpointsPublished")
    assert w.phase == "Ready" and cond["reason"] == "UpsertFailed"
    assert cond["message"].startswith("Service: conflict"), "each error under its kind"


def test_a_service_replace_whose_retries_the_executor_spent_is_not_repeated_by_the_machine():
    """One retry loop per request (issue 35): a replace is safe to repeat, so the executor repeats its
    transient answers (journaled, engine.backoff's schedule) and hands the machine a transient only
    once they are spent. The machine sends it no more (no loop nested in the executor's): the
    Session goes Ready with the error on its EndpointsPublished condition."""
    w = _service_replacing()
    w.answer("replace", "Service", "transient", when=8, message="etcdserver: request timed out")
    assert not w.pending("replace", "Service") and not w.pending("get", "Service")
    assert len(w.effects("replace", "Service")) == 1
    w.answer("create", "Ingress", when=30, obj={})
    cond = w.condition("EndpointsPublished")
    assert w.phase == "Ready" and cond["reason"] == "UpsertFailed"
    assert cond["message"].startswith("Service: transient: etcdserver: request timed out")


def test_a_service_create_answered_transient_is_repeated_by_the_machine_to_its_bound():
    """A create is not safe to repeat blindly, so the executor never repeats it: the machine's
    repeats (engine.backoff.ENDPOINT, 4 tries; an AlreadyExists answer would be read, then replaced)
    are its one retry loop."""
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    for n in range(8):
        if not w.pending("create", "Service"):
            break
        w.answer("create", "Service", "transient", when=6 + n, message="connection reset")
    assert len(w.effects("create", "Service")) == 4 and not w.pending("create", "Service")


# -- teardown ----------------------------------------------------------------------------------

def test_a_teardown_delete_refused_says_why_the_teardown_waits():
    w = World().to_ready(ENV_SPEC)
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    w.answer("delete", "Pod", when=10)
    w.observe_pod(10, event="DELETED")
    for kind in ("Service", "Ingress"):
        if w.pending("get", kind):
            w.answer("get", kind, when=11, obj=owned_obj(kind))
            w.answer("delete", kind, when=11)
    w.answer("get", "Secret", when=11, obj=owned_obj("Secret"))
    w.answer("delete", "Secret", "forbidden", when=11, message="secrets is forbidden")
    cond = w.condition("TeardownComplete")
    assert cond["status"] == "False" and cond["reason"] == "TeardownBlocked"
    assert "Secret" in cond["message"] and "demo-env" in cond["message"] and "forbidden" in cond["message"]


# -- through the repo machine ------------------------------------------------------------------

def test_a_repository_ensured_by_the_repo_machine_lets_the_pod_be_created():
    """The session asks the repo machine to ensure each repository and waits for its answer; the
    answer, sent back by the real repo machine, lets the bring-up go on to the pod."""
    w = World()
    w.submit({**SPEC, "repositories": [{"url": "https://github.com/org/app.git"}]})
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(w.spec, rv=str(w.rv), finalizers=(FINALIZER,)))
    assert not w.pod_creates()
    [create] = w.pending("create", "Repo")
    w.s.outcome(create, "ok", at(1), obj={**create.manifest, "metadata": {**create.manifest["metadata"],
                                                                          "uid": "repo-uid", "resourceVersion": "5"}})
    assert w.decision().repos[0].ensured
    assert w.pod_creates() == ["demo-g1"]


# -- the pod's app containers ------------------------------------------------------------------

def test_an_app_container_that_completed_is_reported_as_exited_with_its_code():
    w = World().to_ready()
    w.observe_pod(20, phase="Running", ip="10.0.0.7", node="node-a", ready=True, ended={"web": ("Completed", 0)})
    assert w.status()["runs"] == [{"app": "web", "generation": 1, "reason": "application container exited (code 0)",
                                   "exitCode": 0}]


def test_a_late_pod_created_answer_for_a_ready_sessions_pod_changes_nothing():
    """An answer about the pod that comes once the Session has moved past Creating is stale: the
    Session stays Ready and keeps deciding (a stop still tears it down)."""
    w = World().to_ready()
    before = w.decision()
    _relay(w, "pod_created", pod=f"local/team/demo-g{before.generation}", uid="pod-uid-1")
    assert w.phase == "Ready" and w.decision() == before
    assert not [e for e in w.s.effects if e.type == "log" and e.level == "error"], "decided, not quarantined"
    w.submit({**SPEC, "stopped": True}, 10)
    assert w.pending("delete", "Pod")
