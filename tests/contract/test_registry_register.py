"""Register / deregister against a local stub apiserver: probe, inventory, server time, refusals."""

import socket

import pytest
from kubernetes.client import CoreV1Api

from kfold.registry import (
    DirectoryCredentials,
    Inventory,
    KubeconfigRefused,
    NotRegistered,
    RegistrationIndex,
    Registry,
    Unreachable,
)
from tests.contract.registry_stub import FIXED_DATE_MS, api_stub, kubeconfig, node  # noqa: F401


@pytest.fixture
def registry(tmp_path):
    return Registry(RegistrationIndex(tmp_path / "index"), DirectoryCredentials(tmp_path / "creds"))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_register_probes_the_cluster_and_records_its_inventory_at_server_time(registry, api_stub, frozen_world):
    """Seed 004:545-552: the probe's node list is the inventory (nodes and GPUs); seed 004:328: the
    registration time is server time (the probe's Date), not the local clock."""
    record = registry.register("acme", "gpu-east", api_stub.kubeconfig(), provider="lux", default=True)
    assert api_stub.paths() == ["/api/v1/nodes"]
    assert api_stub.arrived[0].authorization == "Bearer stub-token"
    assert record.inventory == Inventory(nodes=3, nvidia_gpu=8, amd_gpu=4)
    assert record.registered_at == FIXED_DATE_MS
    assert (record.endpoint, record.provider, record.default) == (api_stub.url, "lux", True)
    assert registry.list("acme") == (record,)


def test_an_unreachable_cluster_is_refused_at_register_with_the_reason(registry):
    """Seed 004:317-320: a cluster unreachable with the credential is not registered."""
    with pytest.raises(Unreachable, match="unreachable with this credential: .*Connection refused"):
        registry.register("acme", "dark", kubeconfig(f"http://127.0.0.1:{closed_port()}", "t"))
    assert registry.list("acme") == ()
    with pytest.raises(NotRegistered):
        registry.reach("acme", "dark")


def test_a_credential_the_cluster_rejects_is_refused_with_the_status(registry, api_stub):
    with pytest.raises(Unreachable, match="HTTP 401 Unauthorized"):
        registry.register("acme", "gpu-east", api_stub.kubeconfig("wrong-token"))
    assert registry.list("acme") == ()


def test_a_refused_kubeconfig_never_reaches_the_cluster(registry, api_stub):
    exec_user = "\n    exec: {command: fetch-token}"
    with pytest.raises(KubeconfigRefused, match="exec credential plugin"):
        registry.register("acme", "gpu-east", api_stub.kubeconfig(user_extra=exec_user))
    assert api_stub.arrived == []


def test_re_registering_replaces_the_credential_and_refreshes_the_inventory(registry, api_stub):
    """Seed 004:290-292: re-registering replaces the credential and refreshes the inventory."""
    registry.register("acme", "gpu-east", api_stub.kubeconfig())
    old_client = registry.reach("acme", "gpu-east")
    api_stub.tokens = {"rotated-token"}
    api_stub.nodes.append(node("n4", **{"nvidia.com/gpu": "2"}))
    record = registry.register("acme", "gpu-east", api_stub.kubeconfig("rotated-token"))
    assert record.inventory == Inventory(nodes=4, nvidia_gpu=10, amd_gpu=4)
    assert len(registry.list("acme")) == 1
    client = registry.reach("acme", "gpu-east")
    assert client is not old_client
    CoreV1Api(client).list_namespaced_pod("team-a")
    assert api_stub.arrived[-1].authorization == "Bearer rotated-token"


def test_a_new_default_clears_the_tenants_previous_default(registry, api_stub):
    registry.register("acme", "one", api_stub.kubeconfig(), default=True)
    registry.register("acme", "two", api_stub.kubeconfig(), default=True)
    assert {r.name: r.default for r in registry.list("acme")} == {"one": False, "two": True}


def test_deregister_removes_the_record_and_destroys_the_credential(registry, api_stub, tmp_path):
    """Seed 004:341-346: deregister removes the record and destroys the credential."""
    registry.register("acme", "gpu-east", api_stub.kubeconfig())
    assert (tmp_path / "creds" / "acme.gpu-east").exists()
    client = registry.reach("acme", "gpu-east")
    registry.deregister("acme", "gpu-east")
    assert registry.list("acme") == ()
    assert not (tmp_path / "creds" / "acme.gpu-east").exists()
    with pytest.raises(NotRegistered):
        registry.reach("acme", "gpu-east")
    before = len(api_stub.arrived)
    with pytest.raises(NotRegistered):
        CoreV1Api(client).list_namespaced_pod("team-a")
    assert len(api_stub.arrived) == before


def test_a_bounded_registration_probes_its_namespaces_and_records_no_node_inventory(registry, api_stub):
    record = registry.register("acme", "shared", api_stub.kubeconfig(), namespaces=["team-a", "team-b"])
    assert api_stub.paths() == ["/api/v1/namespaces/team-a/pods", "/api/v1/namespaces/team-b/pods"]
    assert record.inventory is None and record.registered_at == FIXED_DATE_MS


def test_an_invalid_name_or_bound_is_refused_before_anything_is_sent(registry, api_stub):
    from kfold.registry import InvalidName

    with pytest.raises(InvalidName, match="cluster name"):
        registry.register("acme", "a..b", api_stub.kubeconfig())
    with pytest.raises(InvalidName, match="namespace \"Team_A\""):
        registry.register("acme", "ok", api_stub.kubeconfig(), namespaces=["Team_A"])
    assert api_stub.arrived == []


def test_every_request_says_it_comes_from_kfold(registry, api_stub):
    """Seed 004:416 (``cfg.UserAgent = "hanzo-k8s"``: the program names itself): every request to a
    registered cluster, the probe's and a reached client's, carries the User-Agent ``kfold``."""
    registry.register("acme", "gpu-east", api_stub.kubeconfig())
    CoreV1Api(registry.reach("acme", "gpu-east")).list_namespaced_pod("default")
    assert [a.path for a in api_stub.arrived] == ["/api/v1/nodes", "/api/v1/namespaces/default/pods"]
    assert {a.user_agent for a in api_stub.arrived} == {"kfold"}


def test_a_cluster_that_does_not_answer_the_probe_in_15_s_is_refused(registry, api_stub):
    """Seed 004:62-66 and 539 (``probeTimeout = 15 * time.Second`` bounds the one read a
    registration makes): a cluster that accepts the node list and never answers it is refused as
    unreachable 15 s after the request, and nothing is registered."""
    import threading
    import time
    api_stub.hold_nodes = threading.Event()
    with pytest.raises(Unreachable, match="unreachable with this credential"):
        registry.register("acme", "slow", api_stub.kubeconfig())
    waited = time.monotonic() - api_stub.arrived[0].at
    assert 14.5 <= waited < 15.9, f"the probe waited {waited:.2f} s"
    assert registry.list("acme") == ()
