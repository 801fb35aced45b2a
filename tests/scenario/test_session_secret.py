"""The session Secret says what the current spec's env implies (issue 33, item 5).

``<session>-env`` records the env references of the spec (annotation ``kfold.dev/env-refs``,
``NAME=secret/key`` joined by commas) and holds no data. When the env references change, the next
generation's Secret says the new ones; when the spec has none, the Secret is deleted (fenced by
its uid, only if it is this Session's) before the next pod, and no pod references it.
The expected annotation is derived here from the spec, not from kfold's manifest code.
"""
from __future__ import annotations

import json

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_lost_journal import _adopt_everything, _ready_session
from tests.scenario.test_session_support import ENV_SPEC, KEY, SPEC, World, at, owned_obj, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

TWO = {**SPEC, "env": [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}},
                       {"name": "DB", "secretRef": {"name": "db", "key": "url"}}]}
OTHER_APP = {"app": "billing"}


def _refs(spec: dict) -> str:
    return ",".join(f"{e['name']}={e['secretRef']['name']}/{e['secretRef']['key']}" for e in spec.get("env") or ())


def _secret(spec: dict, labels: dict | None = None, rv: str = "77") -> dict:
    obj = owned_obj("Secret", labels=labels)
    obj["metadata"].update(resourceVersion=rv, annotations={"kfold.dev/env-refs": _refs(spec)})
    return {**obj, "apiVersion": "v1", "type": "Opaque"}


def _ready_with(spec: dict) -> World:
    """Ready at generation 1; the Secret's create answered with the Secret (its uid known)."""
    w = World()
    w.submit(spec)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(spec, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "Secret", obj=_secret(spec))
    w.answer("create", "Pod", when=1, obj=pod_obj(1))
    w.run_pod(5)
    w.publish_endpoints(6)
    assert w.phase == "Ready" and w.decision().generation == 1
    return w


def _old_pod_gone(w: World, gen: int, when: float) -> None:
    """Generation ``gen``'s pod, released by the change, is gone: the next one may be made (seed 002)."""
    w.answer("delete", "Pod", when=when)
    w.observe_pod(when, gen=gen, event="DELETED")


def _met_at_generation_2(after: dict) -> World:
    """Ready with TWO's Secret, then changed to ``after`` (a new generation): the old pod gone, the
    Secret's create meets AlreadyExists and its read finds TWO's references."""
    w = _ready_with(TWO)
    w.submit(after, 10)
    _old_pod_gone(w, 1, 10)
    assert w.decision().generation == 2
    w.answer("create", "Secret", "already_exists", when=11, status_reason="AlreadyExists")
    w.answer("get", "Secret", when=11, obj=_secret(TWO))
    return w


def _pod_refs_session_secret(w: World) -> bool:
    manifest = [e for e in w.effects("create", "Pod")][-1].manifest
    return "demo-env" in json.dumps(manifest)


@pytest.mark.parametrize("after", [ENV_SPEC, {**SPEC, "env": [{"name": "DB", "secretRef": {"name": "db2", "key": "url"}}]}],
                         ids=["shrunk", "changed"])
def test_env_refs_that_change_replace_the_secret_with_the_new_ones(after):
    w = _met_at_generation_2(after)
    [put] = w.pending("replace", "Secret")
    assert put.manifest["metadata"]["annotations"] == {"kfold.dev/env-refs": _refs(after)}
    assert (put.manifest["metadata"]["uid"], put.manifest["metadata"]["resourceVersion"]) == ("secret-uid", "77")
    assert "data" not in put.manifest and "stringData" not in put.manifest
    assert w.pod_creates() == ["demo-g1"], "the pod waits for the Secret"
    w.answer("replace", "Secret", when=12, obj=_secret(after, rv="78"))
    assert w.pod_creates() == ["demo-g1", "demo-g2"]


def test_a_secret_that_already_says_the_spec_is_adopted_as_it_is():
    w = _met_at_generation_2({**TWO, "image": "registry.example/ws:2"})   # a new generation, the same env
    assert not w.effects("replace", "Secret") and w.pod_creates() == ["demo-g1", "demo-g2"]


def test_a_replace_that_conflicts_reads_and_decides_again():
    w = _met_at_generation_2(ENV_SPEC)
    w.answer("replace", "Secret", "conflict", when=12, status_reason="Conflict")
    w.answer("create", "Secret", "already_exists", when=13, status_reason="AlreadyExists")
    w.answer("get", "Secret", when=13, obj=_secret(ENV_SPEC, rv="90"))
    assert len(w.effects("replace", "Secret")) == 1 and w.pod_creates() == ["demo-g1", "demo-g2"]


def test_env_that_goes_deletes_the_secret_by_its_uid_before_the_next_pod():
    w = _ready_with(ENV_SPEC)
    w.submit(SPEC, 10)
    _old_pod_gone(w, 1, 10)
    [delete] = w.pending("delete", "Secret")
    assert delete.uid == "secret-uid" and delete.name == "demo-env"
    assert w.pod_creates() == ["demo-g1"], "the pod waits for the Secret to go"
    w.answer("delete", "Secret", when=11)
    assert w.pod_creates() == ["demo-g1", "demo-g2"]
    assert not _pod_refs_session_secret(w)
    w.answer("create", "Pod", when=19, obj=pod_obj(2))
    w.submit({**SPEC, "image": "registry.example/ws:2"}, 20)   # a later generation: nothing more to drop
    _old_pod_gone(w, 2, 20)
    assert len(w.effects("delete", "Secret")) == 1 and not w.effects("get", "Secret")
    assert w.pod_creates()[-1] == "demo-g3"


@pytest.mark.parametrize("ours", [True, False], ids=["ours", "foreign"])
def test_env_that_goes_with_the_uid_unknown_reads_and_deletes_only_its_own(ours):
    """The Secret's create answered without the object (no uid kept): read first."""
    w = World().to_ready(ENV_SPEC)
    w.submit(SPEC, 10)
    _old_pod_gone(w, 1, 10)
    assert not w.pending("delete", "Secret")
    w.answer("get", "Secret", when=12, obj=_secret(ENV_SPEC, labels=None if ours else OTHER_APP))
    assert [e.uid for e in w.effects("delete", "Secret")] == (["secret-uid"] if ours else [])
    if ours:
        w.answer("delete", "Secret", when=13)
    assert w.pod_creates() == ["demo-g1", "demo-g2"]
    assert w.decision().secret.made is False


def test_a_stop_after_env_went_sends_nothing_for_the_secret():
    w = _ready_with(ENV_SPEC)
    w.submit(SPEC, 10)
    _old_pod_gone(w, 1, 10)
    w.answer("delete", "Secret", when=11)
    w.submit({**SPEC, "stopped": True}, 20)
    assert len(w.effects("delete", "Secret")) == 1 and not w.effects("get", "Secret")


def test_a_replace_refused_fails_the_session_instead_of_asking_again():
    w = _met_at_generation_2(ENV_SPEC)
    w.answer("replace", "Secret", "forbidden", when=12)
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "SecretFailed"
    assert len(w.effects("replace", "Secret")) == 1 and not w.pending("create", "Secret")


# -- after a lost journal: the Secret an earlier spec made, found by the sweep's list --------------

def _resumed_without_env() -> World:
    """A fresh journal meets a Session Ready at generation 3 whose spec has no env; its pod is adopted."""
    w = World()
    w.s.observe(_ready_session(3, spec=SPEC), at(0))
    _adopt_everything(w, 3)
    assert w.phase == "Ready" and w.pod_creates() == ["demo-g3"]
    return w


def _listed(w: World, secret: dict, when: float = 30) -> list:
    """One orphan Secret sweep whose quorum list shows ``secret`` (created just now: inside the grace)."""
    [listed] = [e for e in w.s.command("pod.sweep_secrets", at(when), cluster="local", namespace="team")
                if e.type == "list"]
    secret["metadata"]["creationTimestamp"] = "2030-01-01T00:00:20Z"
    return [e for e in w.s.outcome(listed, "ok", at(when), items=(secret,)) if e.type == "delete"]


def test_after_a_lost_journal_the_sweeps_list_deletes_the_secret_a_spec_without_env_no_longer_wants():
    w = _resumed_without_env()
    before = len(w.s.effects)
    [delete] = _listed(w, _secret(ENV_SPEC, rv="301"))
    assert (delete.kind, delete.namespace, delete.name, delete.uid, delete.rv) == \
        ("Secret", "team", "demo-env", "secret-uid", "301"), "fenced by the uid and resourceVersion listed"
    [log] = [e for e in w.s.effects if e.type == "log" and e.key == KEY and "Secret team/demo-env" in e.message]
    assert log.message == ("session demo: Secret team/demo-env was made for env references its spec no longer "
                           "has (found by the Secret sweep's list); deleting it")
    assert not [e for e in w.s.effects[before:] if e.type == "get"], "the list is the proof: no read per Session"
    assert not w.effects("delete", "Pod") and w.phase == "Ready", "the running pod is untouched"
    w.answer("delete", "Secret", "conflict", when=31, status_reason="Conflict")   # changed since the list
    assert len(w.effects("delete", "Secret")) == 1, "a 409 waits for the next sweep's list"
    assert [d.rv for d in _listed(w, _secret(ENV_SPEC, rv="302"), when=400)] == ["302"]


@pytest.mark.parametrize("case", ["env-spec", "other-session-owner", "other-session-label"])
def test_the_sweeps_list_never_deletes_a_secret_the_spec_wants_or_that_is_not_this_sessions(case):
    if case == "env-spec":
        w = World()
        w.s.observe(_ready_session(3, spec=ENV_SPEC), at(0))
        _adopt_everything(w, 3)
        obj = _secret(ENV_SPEC, rv="301")
    else:
        w = _resumed_without_env()
        obj = _secret(ENV_SPEC, rv="301", labels={"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "other"}
                      if case == "other-session-label" else None)
        if case == "other-session-owner":
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "kfold.dev/v1alpha1", "kind": "Session",
                                                   "name": "demo", "uid": "uid-of-an-earlier-demo"}]
    assert _listed(w, obj) == []
    assert not w.effects("delete", "Secret")
