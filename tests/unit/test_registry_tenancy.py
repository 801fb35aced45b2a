"""Tenancy: another tenant's cluster answers exactly like a cluster that does not exist."""

import pytest

from kfold.registry import (
    BoundedApiClient,
    CredentialMissing,
    Kubeconfig,
    MemoryCredentials,
    NotRegistered,
    Registration,
    RegistrationIndex,
    Registry,
)

KUBECONFIG = """apiVersion: v1
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
"""


@pytest.fixture
def registry(tmp_path):
    """Tenant 'beta' owns cluster 'gpu-east'; tenant 'acme' owns 'own'. No network is touched."""
    index, creds = RegistrationIndex(tmp_path), MemoryCredentials()
    for tenant, name in (("beta", "gpu-east"), ("acme", "own")):
        index.update(tenant, lambda rs, n=name, t=tenant: (Registration(name=n, tenant=t),))
        creds.put(f"{tenant}.{name}", Kubeconfig(KUBECONFIG))
    return Registry(index, creds, tenants={"team-acme": "acme", "team-beta": "beta"})


def refusal(call):
    with pytest.raises(NotRegistered) as refused:
        call()
    return type(refused.value), str(refused.value)


def test_the_refusal_reads_no_cluster_named_x_is_registered_for_this_org(registry):
    assert refusal(lambda: registry.reach("acme", "nope"))[1] == "no cluster named nope is registered for this tenant"


@pytest.mark.parametrize("operation", ["reach", "get", "deregister", "resolve_namespace"])
def test_another_tenants_cluster_is_indistinguishable_from_a_missing_one(registry, operation):
    """Seed 004:34-36: another tenant's cluster is not found, exactly like a missing one."""
    args = (None,) if operation == "resolve_namespace" else ()
    ask = lambda: getattr(registry, operation)("acme", "gpu-east", *args)  # noqa: E731
    while_beta_owns_it = refusal(ask)
    registry.deregister("beta", "gpu-east")
    once_nobody_has_it = refusal(ask)
    assert while_beta_owns_it == once_nobody_has_it


def test_a_refused_deregister_leaves_the_other_tenants_cluster_in_place(registry):
    refusal(lambda: registry.deregister("acme", "gpu-east"))
    assert [r.name for r in registry.list("beta")] == ["gpu-east"]


def test_the_owner_reaches_its_own_cluster(registry):
    assert isinstance(registry.reach("beta", "gpu-east"), BoundedApiClient)


def test_a_sessions_tenant_comes_from_its_namespace_and_cannot_reach_another_tenants_cluster(registry):
    tenant = registry.tenant_for_namespace("team-acme")
    assert tenant == "acme"
    assert refusal(lambda: registry.reach(tenant, "gpu-east"))[1] == (
        "no cluster named gpu-east is registered for this tenant")


def test_an_unmapped_namespace_has_no_tenant_and_reaches_no_registered_cluster(registry):
    assert registry.tenant_for_namespace("elsewhere") is None
    refusal(lambda: registry.reach(None, "gpu-east"))


def test_an_invalid_name_is_simply_not_registered(registry):
    assert refusal(lambda: registry.reach("acme", "../beta.gpu-east"))[0] is NotRegistered


def test_a_record_whose_credential_is_gone_says_to_re_register(tmp_path):
    """Seed 004:409-411: a record whose credential is gone says to re-register."""
    index = RegistrationIndex(tmp_path)
    index.update("acme", lambda rs: (Registration(name="own", tenant="acme"),))
    with pytest.raises(CredentialMissing, match="re-register it"):
        Registry(index, MemoryCredentials()).reach("acme", "own")


def test_reach_reuses_the_client_until_the_credential_changes(registry):
    """Once the held read is due (tests/unit/test_registry_held_credentials.py says when)."""
    registry.credential_refresh_s = 0
    registry._credentials.put("acme.own", Kubeconfig(KUBECONFIG))
    first = registry.reach("acme", "own")
    assert registry.reach("acme", "own") is first
    registry._credentials.put("acme.own", Kubeconfig(KUBECONFIG + "# rotated\n"))
    assert registry.reach("acme", "own") is not first


def test_list_all_spans_tenants_and_list_is_one_tenants_view(registry):
    assert [r.name for r in registry.list("acme")] == ["own"]
    assert sorted(r.name for r in registry.list_all()) == ["gpu-east", "own"]


# -- seed 004: names are trimmed of surrounding whitespace (Register and Reach) ----------------------

@pytest.mark.parametrize("padded", [" own", "own ", "\town\n"])
def test_reach_and_get_trim_the_name(registry, padded):
    assert registry.reach("acme", padded) is registry.reach("acme", "own")
    assert registry.get("acme", padded).name == "own"


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_a_blank_name_after_trimming_is_not_registered(registry, blank):
    refusal(lambda: registry.reach("acme", blank))


def test_register_trims_the_name_and_deregister_finds_it_padded(registry, monkeypatch):
    """Seed 004:304: register and Reach trim the name."""
    monkeypatch.setattr(registry, "_probed", lambda draft, _kubeconfig: draft)  # no network
    record = registry.register("acme", "  edge \n", KUBECONFIG)
    assert record.name == "edge"
    assert [r.name for r in registry.list("acme")] == ["own", "edge"]
    assert isinstance(registry.reach("acme", "edge"), BoundedApiClient)
    assert registry.deregister("acme", " edge ").name == "edge"
    assert [r.name for r in registry.list("acme")] == ["own"]
    refusal(lambda: registry.reach("acme", "edge"))
