"""Bounds are enforced by the client from ``reach`` before any request leaves the process."""

import pytest
from kubernetes import watch
from kubernetes.client import ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, V1Namespace, V1ObjectMeta

from kfold.registry import DirectoryCredentials, OutOfBounds, RegistrationIndex, Registry
from tests.contract.registry_stub import api_stub  # noqa: F401


@pytest.fixture
def registry(tmp_path):
    return Registry(RegistrationIndex(tmp_path / "index"), DirectoryCredentials(tmp_path / "creds"))


@pytest.fixture
def shared(registry, api_stub):
    """Cluster 'shared' registered to acme, bounded to team-a and team-b; probe traffic cleared."""
    registry.register("acme", "shared", api_stub.kubeconfig(), namespaces=["team-a", "team-b"])
    api_stub.arrived.clear()
    return CoreV1Api(registry.reach("acme", "shared"))


def refused_without_sending(api_stub, call, match):
    before = len(api_stub.arrived)
    with pytest.raises(OutOfBounds, match=match):
        call()
    assert len(api_stub.arrived) == before, "a refused request reached the apiserver"


def test_a_request_inside_the_bound_reaches_the_cluster(shared, api_stub):
    shared.list_namespaced_pod("team-a")
    assert api_stub.paths() == ["/api/v1/namespaces/team-a/pods"]


def test_a_request_outside_the_bound_is_refused_before_it_is_sent(shared, api_stub):
    refused_without_sending(api_stub, lambda: shared.list_namespaced_pod("team-c"), "'team-c' is outside")


@pytest.mark.parametrize(
    "operation",
    [
        lambda core: core.list_node(),
        lambda core: core.list_namespace(),
        lambda core: core.read_namespace("team-a"),
        lambda core: core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name="team-z"))),
        lambda core: core.list_pod_for_all_namespaces(),
        lambda core: ApiextensionsV1Api(core.api_client).list_custom_resource_definition(),
        lambda core: CustomObjectsApi(core.api_client).list_cluster_custom_object("kfold.dev", "v1", "sessions"),
    ],
    ids=["nodes", "namespaces", "read-namespace", "create-namespace", "all-namespace-pods", "crds", "cluster-custom"],
)
def test_cluster_scoped_operations_are_refused_on_a_bounded_registration(shared, api_stub, operation):
    refused_without_sending(api_stub, lambda: operation(shared), "cluster-scoped operations are not available")


def test_a_bound_tightened_while_the_client_is_cached_applies_to_the_next_request(registry, api_stub, shared):
    """Seed 004:398-403: a cached client takes the fresh record: a tightened bound applies at once."""
    shared.list_namespaced_pod("team-b")
    assert len(api_stub.arrived) == 1
    registry.register("acme", "shared", api_stub.kubeconfig(), namespaces=["team-a"])  # same credential
    assert registry.reach("acme", "shared") is shared.api_client, "the cached client is reused"
    api_stub.arrived.clear()
    refused_without_sending(api_stub, lambda: shared.list_namespaced_pod("team-b"), "'team-b' is outside")


def test_the_bound_is_read_fresh_from_the_index_on_every_request(registry, api_stub, shared, tmp_path):
    index = RegistrationIndex(tmp_path / "index")
    index.update("acme", lambda rs: tuple(r.model_copy(update={"namespaces": ("team-a",)}) for r in rs))
    refused_without_sending(api_stub, lambda: shared.list_namespaced_pod("team-b"), "'team-b' is outside")


def test_a_watch_outside_the_bound_is_refused_before_it_is_sent(shared, api_stub):
    stream = watch.Watch().stream(shared.list_namespaced_pod, "team-c", timeout_seconds=1)
    refused_without_sending(api_stub, lambda: next(stream), "'team-c' is outside")


def test_an_exec_stream_outside_the_bound_is_refused_before_it_is_sent(shared, api_stub):
    from kubernetes.stream import stream

    call = lambda: stream(shared.connect_get_namespaced_pod_exec, "p", "team-c", command=["ls"])  # noqa: E731
    refused_without_sending(api_stub, call, "'team-c' is outside")


def test_raw_call_api_is_checked_too(shared, api_stub):
    client = shared.api_client
    refused_without_sending(api_stub, lambda: client.call_api("GET", api_stub.url + "/api/v1/nodes"), "cluster-scoped")


def test_an_unbounded_registration_may_address_the_whole_cluster(registry, api_stub):
    registry.register("acme", "own", api_stub.kubeconfig())
    core = CoreV1Api(registry.reach("acme", "own"))
    assert len(core.list_node().items) == 3
    core.list_namespaced_pod("anything")


def test_the_client_takes_a_token_per_request(registry, api_stub):
    registry.register("acme", "own", api_stub.kubeconfig())
    client = registry.reach("acme", "own")
    taken = []
    client.limiter.acquire = lambda: taken.append(1) or 0.0
    CoreV1Api(client).list_namespaced_pod("a")
    CoreV1Api(client).list_node()
    assert len(taken) == 2
    assert (client.limiter.qps, client.limiter.burst) == (50.0, 100)
    assert client.configuration.connection_pool_maxsize == 100

