"""Contract rules of the machines' public helpers, each pinned from its docstring or the Kubernetes
API contract (issue 34, item 3: the mutation sample over engine/machines)."""
from __future__ import annotations

import pytest

from engine.machines.base import remember
from engine.machines.pod.machine import view_of
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


@pytest.mark.parametrize("item", [{"url": ""}, {}, {"url": 3}])
def test_a_repository_without_a_url_is_refused_as_required(item):
    out = validate({"image": "busybox", "repositories": [item]}, "c1", ("c1",), "s1")
    assert isinstance(out, SpecError)
    assert out.message == "spec.repositories[0].url: required"
