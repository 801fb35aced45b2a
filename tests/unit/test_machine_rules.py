"""Contract rules of the machines' public helpers, each pinned from its docstring or the Kubernetes
API contract (issue 34, item 3: the mutation sample over engine/machines)."""
from __future__ import annotations

import pytest

from engine.machines.base import InDoubt, remember
from engine.machines.pod.machine import _op_in_doubt, view_of
from engine.machines.pod.records import PodOp, secret_ref
from engine.machines.repo.bindings import bindings_of
from engine.machines.session import manifests
from engine.machines.session.owned import conflict
from engine.machines.session.spec import Spec, SpecError, validate
from engine.repo_names import RepoUrlError


def test_remember_drops_the_oldest_entry_once_full():
    memo: dict[str, int] = {}
    for i, k in enumerate("abc"):
        assert remember(memo, k, i, limit=2) == i
    assert memo == {"b": 1, "c": 2}


def test_view_of_a_bare_object_has_no_uid_unless_given():
    assert view_of({"metadata": {}}).uid == ""
    assert view_of(None).uid == ""
    assert view_of({"metadata": {}}, uid="u1").uid == "u1"


def test_bindings_refusal_names_the_value_given():
    with pytest.raises(RepoUrlError) as exc:
        bindings_of("https://example.com/a.git")
    assert exc.value.value == "https://example.com/a.git"
    assert "https://example.com/a.git" in str(exc.value)


def test_workspace_claim_owner_reference_is_a_kubernetes_owner_reference():
    claim = manifests.workspace_claim("s1", "ns", "standard", "1Gi", "ReadWriteOnce", session_uid="u1")
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "name": "s1", "uid": "u1"}]


def test_seeded_pod_runs_the_seed_script_through_sh_c():
    spec = validate({"image": "busybox"}, "c1", ("c1",), "s1")
    assert isinstance(spec, Spec)
    init = manifests.pod("s1", "ns", 1, spec, seed="s1-seed")["spec"]["initContainers"]
    assert [c["command"][:2] for c in init] == [["sh", "-c"]]


def test_conflict_message_names_the_other_objects_labels():
    obj = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "helm", "kfold.dev/session": "other"}}}
    text = conflict("Service", "ns", "s1", obj, "s1")
    assert "managed-by=helm" in text and "session=other" in text
    for bare in ({}, {"metadata": None}, None):
        assert "(labels: managed-by=-, session=-)" in conflict("Service", "ns", "s1", bare, "s1")


@pytest.mark.parametrize("item, message", [
    ({}, "spec.repositories[0].url: required"),
    ({"url": ""}, "spec.repositories[0].url: '' is not a clone url of at most 2048 characters"),
    ({"url": 3}, "spec.repositories[0].url: 3 is not a string"),
])
def test_a_repository_without_a_url_is_refused_naming_the_field(item, message):
    out = validate({"image": "busybox", "repositories": [item]}, "c1", ("c1",), "s1")
    assert isinstance(out, SpecError)
    assert out.message == message


@pytest.mark.parametrize("env, field, words", [
    ([{"name": "TOKEN", "value": "literal"}], "spec.env[0].value", "use secretRef"),
    ([{"name": "TOKEN", "secretRef": {"name": "creds"}}], "spec.env[0].secretRef.key", "required"),
    ([{"secretRef": {"name": "creds", "key": "token"}}], "spec.env[0].name", "required"),
])
def test_an_env_entry_that_is_no_secret_reference_is_refused_saying_what_to_use(env, field, words):
    out = validate({"image": "busybox", "env": env}, "c1", ("c1",), "s1")
    assert isinstance(out, SpecError) and out.field == field
    assert words in out.message.replace("name that Secret's key in secretRef", "use secretRef")


def test_an_operation_in_doubt_is_decided_again_on_its_own_key_with_nothing_awaited_and_no_deadline():
    """A create or delete in doubt after a restart is re-decided from its entry (a quorum read
    next): the effect it awaited is gone, and so is the budget deadline it was started under."""
    seen = []
    resolve = _op_in_doubt(lambda ctx, key, e: seen.append((ctx, key, e)))
    entry = PodOp(op="create", awaiting="7.1", deadline=123)
    resolve("ctx", "local/ns/p", entry, InDoubt(effect=None))
    assert seen == [("ctx", "local/ns/p", entry.but(awaiting="", deadline=None))]


def test_a_listed_secret_is_reduced_without_raising_even_when_its_metadata_is_bare():
    ref = secret_ref({"metadata": {}})
    assert (ref.namespace, ref.name, ref.uid, ref.session) == ("", "", "", "")


def test_a_session_name_too_long_for_its_pod_names_is_refused_naming_metadata_name():
    """``<session>-g<N>`` and the Service/Ingress/Secret suffixes must fit a 63-character name."""
    out = validate({"image": "busybox"}, "c1", ("c1",), "s" * 51)
    assert isinstance(out, SpecError)
    assert out.message == "metadata.name: at most 50 characters, not 51 (kfold names the pods <session>-g<N>)"
    assert isinstance(validate({"image": "busybox"}, "c1", ("c1",), "s" * 50), Spec)
