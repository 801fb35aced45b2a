"""Property test: whatever names and paths a caller hands the registry's client, nothing outside
the namespace bound arrives at the apiserver, and what arrives is exactly what was checked.

Four doors are fuzzed against a recording HTTP stub (tests/contract/registry_stub.py): the typed
API, raw ``call_api``, watches (the kubernetes ``Watch`` and kfold's own raw-pool watch request),
and the executor's effects. Inputs are built from hostile atoms: dot segments, ``%2e%2e``,
``%2f``, ``//``, backslashes, trailing dots, unicode look-alikes, overlong names, query strings
that smuggle a path. The oracle reads each arrived request-target the way the apiserver does
(percent-decode, split on '/') independently of kfold's own classifier.
Fixed seed (``derandomize``) and bounded examples: a few seconds in CI.
"""
from __future__ import annotations

import asyncio
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kubernetes import watch
from kubernetes.client import Configuration, CoreV1Api, CustomObjectsApi, NetworkingV1Api

from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.transport import KubeTransport
from engine.effects.models import (CreateObject, DeleteObject, GetObject, ListObjects, PatchObject,
                                   ReplaceObject)
from engine.effects.io.watch import close_quietly, open_get
from kfold.registry import (
    BoundedApiClient, DirectoryCredentials, OutOfBounds, Registration, RegistrationIndex, Registry, UnsafePath, bounds,
)
from tests.contract.registry_stub import ApiStub, start

BOUND = ("sb-acme", "sb-acme2")
FUZZ = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

ATOMS = [
    "..", ".", "%2e", "%2E", "%2e%2e", "%2E%2E", ".%2e", "%2f", "%2F", "/", "//", "\\", "%5c", "%5C",
    "?", "%3f", "#", "%23", "%00", "%252e%252e", "%252f", ";", "..;", "%", "~", " ", "\t", "\n",
    "sb-acme", "sb-acme2", "other", "kube-system", "sb-acme.", "sb-acme..", "ｓｂ-acme", "sb-аcme",
    "sb‐acme", "ａ", "\u200b", "a", "p", "secrets", "pods", "namespaces", "-", "A", "x" * 64,
    "y" * 254, "?/../../other/pods", "&x=/../../nodes", "?watch=true#/../x", "/../other/pods",
    "%2F..%2Fother", "/namespaces/other", "\\..\\other",
]
hostile = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=5).map("".join) | st.text(max_size=20)
namespace = st.sampled_from(BOUND) | hostile
name = st.sampled_from(["p", "s.x", "web"]) | hostile


# -- the apiserver's reading of a request-target (independent of kfold.registry.bounds) ---------

def segments_as_the_apiserver_reads(target: str) -> list[str]:
    return unquote(target.split("?", 1)[0]).strip("/").split("/")


def inside_the_bound(method: str, target: str) -> bool:
    parts = segments_as_the_apiserver_reads(target)
    if any(p in ("", ".", "..") for p in parts):
        return False
    if method == "GET" and (parts in (["api"], ["apis"], ["version"]) or
                            (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) <= 3)):
        return True  # discovery
    rest = parts[2:] if parts[0] == "api" else parts[3:] if parts[0] == "apis" else []
    if rest[:1] == ["watch"]:
        rest = rest[1:]
    return (len(rest) >= 3 and rest[0] == "namespaces" and rest[1] in BOUND
            and rest[2] not in ("status", "finalize"))


# -- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    stub = start(ApiStub())
    root = tmp_path_factory.mktemp("registry")
    registry = Registry(RegistrationIndex(root / "index"), DirectoryCredentials(root / "creds"))
    registry.register("acme", "edge", stub.kubeconfig(), namespaces=list(BOUND))
    yield stub, registry
    registry.close()
    stub.server.shutdown()
    stub.server.server_close()


@pytest.fixture
def checked(monkeypatch):
    """Every (method, target) the registry's check admitted, at any layer."""
    admitted: list[tuple[str, str]] = []
    real = bounds.admit

    def recording(record, method, target):
        real(record, method, target)
        admitted.append((method.upper(), target))

    monkeypatch.setattr(bounds, "admit", recording)
    return admitted


def attempt(stub: ApiStub, admitted: list, call) -> None:
    """Run ``call``; whatever it did, every request that arrived is inside the bound and was
    admitted by the check exactly as it arrived (Checked is sent)."""
    stub.arrived.clear()
    admitted.clear()
    try:
        call()
    except Exception:  # refusals, 404s from the stub, the client library's own ValueErrors
        pass
    for got in stub.arrived:
        assert inside_the_bound(got.method, got.target), f"{got.method} {got.target} left the bound"
        assert (got.method, got.target) in admitted, f"{got.method} {got.target} arrived but was never checked"


# -- the four doors --------------------------------------------------------------------------------

TYPED = [
    lambda core, n, ns: core.read_namespaced_secret(n, ns),
    lambda core, n, ns: core.delete_namespaced_secret(n, ns),
    lambda core, n, ns: core.delete_namespaced_pod(n, ns),
    lambda core, n, ns: core.list_namespaced_pod(ns),
    lambda core, n, ns: core.patch_namespaced_pod_status(n, ns, {}),
    lambda core, n, ns: core.read_namespace(ns),
    lambda core, n, ns: NetworkingV1Api(core.api_client).read_namespaced_ingress(n, ns),
    lambda core, n, ns: CustomObjectsApi(core.api_client).get_namespaced_custom_object(
        "kfold.dev", "v1alpha1", ns, n, "x"),
    lambda core, n, ns: CustomObjectsApi(core.api_client).delete_namespaced_custom_object(
        "kfold.dev", "v1alpha1", ns, "sessions", n),
]


@FUZZ
@given(op=st.sampled_from(TYPED), n=name, ns=namespace)
@example(op=TYPED[1], n="..", ns="sb-acme").via("issue 19: DELETE secrets/.. reached the namespace")
@example(op=TYPED[1], n=".", ns="sb-acme").via("issue 19: DELETE secrets/. reached the collection")
@example(op=TYPED[0], n="s.x", ns="sb-acme").via("a valid read arrives")
def test_typed_api(world, checked, op, n, ns):
    stub, registry = world
    attempt(stub, checked, lambda: op(CoreV1Api(registry.reach("acme", "edge")), n, ns))


PREFIXES = ["/api/v1/namespaces/sb-acme/", "/api/v1/namespaces/", "/apis/kfold.dev/v1alpha1/namespaces/sb-acme/",
            "/api/v1/", "/", "/api/v1/watch/namespaces/sb-acme/"]


@FUZZ
@given(method=st.sampled_from(["GET", "DELETE", "POST", "PUT", "PATCH"]), prefix=st.sampled_from(PREFIXES),
       tail=st.lists(hostile, min_size=1, max_size=4).map("/".join))
@example(method="GET", prefix="/api/v1/namespaces/", tail="sb-acme/../other/pods").via("issue 19")
@example(method="DELETE", prefix="/api/v1/namespaces/", tail="sb-acme/pods/../../other/pods/p").via("issue 19")
@example(method="DELETE", prefix="/api/v1/namespaces/sb-acme/", tail="secrets/..").via("issue 19")
@example(method="GET", prefix="/api/v1/namespaces/sb-acme/", tail="pods?x=/../../other/pods").via("query smuggle")
@example(method="GET", prefix="/api/v1/namespaces/sb-acme/", tail="pods").via("a valid list arrives")
def test_raw_call_api(world, checked, method, prefix, tail):
    stub, registry = world
    client = registry.reach("acme", "edge")
    attempt(stub, checked, lambda: client.call_api(method, stub.url + prefix + tail, body={} if method != "GET" else None))


@FUZZ
@given(ns=namespace, path_tail=hostile, raw=st.booleans())
@example(ns="sb-acme", path_tail="pods", raw=True).via("kfold's own watch request arrives")
@example(ns="sb-acme", path_tail="../../other/pods", raw=True).via("urllib3 would collapse the dots")
def test_watches(world, checked, ns, path_tail, raw):
    stub, registry = world
    client = registry.reach("acme", "edge")
    if raw:  # kfold's observer: param_serialize, then the client's pool manager directly (no call_api)
        def call():
            close_quietly(open_get(client, f"/api/v1/namespaces/{ns}/{path_tail}", [("watch", "true")], (2.0, 2.0)))
    else:
        def call():
            stream = watch.Watch().stream(CoreV1Api(client).list_namespaced_pod, ns, timeout_seconds=1,
                                          _request_timeout=2)
            next(stream, None)
    attempt(stub, checked, call)


EFFECTS = [
    lambda n, ns: GetObject(api_version="v1", kind="Secret", namespace=ns, name=n, **REF),
    lambda n, ns: DeleteObject(api_version="v1", kind="Secret", namespace=ns, name=n, **REF),
    lambda n, ns: DeleteObject(api_version="v1", kind="Pod", namespace=ns, name=n, uid="u", rv="1", **REF),
    lambda n, ns: PatchObject(api_version="v1", kind="Pod", namespace=ns, name=n, patch={}, subresource="status", **REF),
    lambda n, ns: ReplaceObject(api_version="networking.k8s.io/v1", kind="Ingress", namespace=ns, name=n,
                                manifest={}, **REF),
    lambda n, ns: CreateObject(api_version="v1", kind="Service", namespace=ns, name=n, manifest={}, **REF),
    lambda n, ns: ListObjects(api_version="v1", kind="Pod", namespace=ns, label_selector=n, **REF),
]
REF = dict(id="1.0", machine="fuzz", key="k", cluster="edge", tenant="acme")


def run_effect(registry: Registry, effect) -> list:
    """The daemon's path: Executor -> engine.effects.io.ops -> KubeTransport -> the registry's client."""
    async def run():
        async def sink(_outcome):
            pass
        executor = Executor(KubeTransport(lambda cluster, tenant: registry.reach(tenant, cluster), max_threads=1),
                            ServerClock(), sink, env={})
        try:
            return await executor.run(effect)
        finally:
            await executor.close()

    return [asyncio.run(run())]


@FUZZ
@given(make=st.sampled_from(EFFECTS), n=name, ns=namespace)
@example(make=EFFECTS[0], n="..", ns="sb-acme").via("issue 19: GET of the namespace taken as a Secret")
@example(make=EFFECTS[1], n="..", ns="sb-acme").via("issue 19: DELETE of the namespace")
@example(make=EFFECTS[0], n="s.x", ns="sb-acme").via("a valid effect arrives")
def test_executor_effects(world, checked, make, n, ns):
    stub, registry = world
    outcomes = []
    attempt(stub, checked, lambda: outcomes.extend(run_effect(registry, make(n, ns))))
    if not stub.arrived:
        assert outcomes and outcomes[0].result == "refused", outcomes


def test_the_doors_do_send_valid_requests(world, checked):
    """The properties above are not vacuous: a valid request through each door arrives, as checked."""
    stub, registry = world
    client = registry.reach("acme", "edge")
    doors = {
        "typed": lambda: CoreV1Api(client).list_namespaced_pod("sb-acme2"),
        "call_api": lambda: client.call_api("GET", stub.url + "/api/v1/namespaces/sb-acme/pods"),
        "raw watch": lambda: close_quietly(open_get(client, "/api/v1/namespaces/sb-acme/pods",
                                                    [("watch", "true")], (2.0, 2.0))),
        "Watch": lambda: next(watch.Watch().stream(CoreV1Api(client).list_namespaced_pod, "sb-acme",
                                                   timeout_seconds=1, _request_timeout=2), None),
        "effect": lambda: run_effect(registry, EFFECTS[0]("s.x", "sb-acme")),
    }
    for door, call in doors.items():
        attempt(stub, checked, call)
        assert len(stub.arrived) == 1, door
        assert stub.arrived[0].target.startswith("/api/v1/namespaces/sb-acme"), door


def test_invariant_11_the_check_sees_what_urllib3_will_send(world, checked):
    """DESIGN invariant 11 (Checked is sent): urllib3 collapses dot segments AFTER every check above
    it; the check on the request line sees the collapsed target and refuses it."""
    stub, registry = world
    client = registry.reach("acme", "edge")
    stub.arrived.clear()
    with pytest.raises(OutOfBounds, match="'other' is outside"):
        client.rest_client.pool_manager.request("GET", stub.url + "/api/v1/namespaces/sb-acme/../other/pods")
    assert checked == [] and stub.arrived == []


@pytest.mark.parametrize("call", [
    lambda core: core.delete_namespaced_secret(".", "team"),
    lambda core: core.delete_namespaced_secret("..", "team"),
    lambda core: core.api_client.call_api("GET", core.api_client.configuration.host + "/api/v1/namespaces/t/../../nodes"),
    lambda core: core.api_client.call_api("GET", "http://127.0.0.2:9/api/v1/nodes"),
], ids=["dot", "dot-dot", "raw-dot-dot", "another-server"])
def test_an_unbounded_client_refuses_what_it_could_not_check_too(world, call):
    """No bound to protect, but a ``.`` name must still not delete a whole collection, and a raw URL
    on another server must not carry the credential there."""
    stub, registry = world
    registry.register("acme", "own", stub.kubeconfig())
    stub.arrived.clear()
    with pytest.raises(UnsafePath, match="refused before sending"):
        call(CoreV1Api(registry.reach("acme", "own")))
    assert stub.arrived == []


def test_through_an_http_proxy_the_absolute_form_request_line_is_checked_too(world):
    """Behind an HTTP proxy urllib3 writes ``GET http://server/path``: the check reads that form."""
    stub, _registry = world
    proxy = start(ApiStub())
    try:
        cfg = Configuration(host=stub.url)
        cfg.proxy, cfg.retries = proxy.url, False
        record = Registration(name="edge", tenant="acme", namespaces=list(BOUND))
        client = BoundedApiClient(cfg, label="acme/edge", record_source=lambda: record)
        with pytest.raises(OutOfBounds, match="'other' is outside"):
            client.rest_client.pool_manager.request("GET", stub.url + "/api/v1/namespaces/sb-acme/../other/pods")
        client.rest_client.pool_manager.request("GET", stub.url + "/api/v1/namespaces/sb-acme/pods")
        assert [a.target for a in proxy.arrived] == [stub.url + "/api/v1/namespaces/sb-acme/pods"]
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
