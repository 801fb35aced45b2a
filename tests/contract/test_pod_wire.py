"""What the daemon's executor puts on the wire for the pod machine's effects.

Every test drives the REAL path the daemon uses: ``Executor(KubeTransport(client_for), ...)``
-> ``engine.effects.io.ops`` -> the official client's ``param_serialize``/``call_api`` -> a recording
stub apiserver on 127.0.0.1. The assertions read the ``Outcome`` draft and the recorded requests.
"""
from __future__ import annotations

import socket

import pytest
from kubernetes.client import ApiClient, Configuration

from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.transport import KubeTransport
from engine.effects.models import DeleteObject, EnsureNamespace, GetObject, ListObjects
from tests.contract.stub_apiserver import StubApiServer, status_body
from tests.harness import ms

POD_PATH = "/api/v1/namespaces/ns/pods/s1-g1"
SELECTOR = "app.kubernetes.io/managed-by=kfold"
T2030 = ms("2030-01-01T00:00:00Z")


def pod_ref(cls, **fields):
    return cls(id="1.0", machine="pod", key="local/ns/s1-g1", cluster="local", api_version="v1", kind="Pod",
               namespace="ns", name="s1-g1", **fields)


def a_pod(uid="A", rv="5"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s1-g1", "namespace": "ns", "uid": uid,
                                                          "resourceVersion": rv}}


class Wire:
    """The daemon's executor over ``KubeTransport`` to one stub; ``run(effect)`` -> Outcome draft."""

    def __init__(self, client: ApiClient):
        self.clients: list[tuple[str, str]] = []
        self.clock = ServerClock()

        def client_for(cluster: str, tenant: str) -> ApiClient:
            self.clients.append((cluster, tenant))
            return client

        self.executor = Executor(KubeTransport(client_for, max_threads=2), self.clock, self._sink)

    async def _sink(self, outcome):  # ``run`` hands back the draft; the sink is never reached
        raise AssertionError(f"unexpected sink call: {outcome}")

    async def run(self, effect):
        return await self.executor.run(effect)


@pytest.fixture
def stub():
    with StubApiServer() as s:
        yield s


@pytest.fixture
async def wire(stub):
    w = Wire(stub.api_client())
    yield w
    await w.executor.close()


def close_to_2030(at):
    return at is not None and T2030 <= at < T2030 + 10_000


# -- deleting a pod ---------------------------------------------------------------------------------

async def test_a_pod_delete_sends_its_fence_as_preconditions_and_no_grace_period(stub, wire):
    """Seed 001:16-18 and seed 001:217-220: a pod delete carries uid and resourceVersion
    preconditions and never sets gracePeriodSeconds."""
    stub.answer("DELETE", POD_PATH, 200, a_pod(rv="6"))
    out = await wire.run(pod_ref(DeleteObject, uid="A", rv="5"))
    [req] = stub.requests
    assert (req.method, req.path) == ("DELETE", POD_PATH)
    assert req.body["preconditions"] == {"uid": "A", "resourceVersion": "5"}
    assert req.body["propagationPolicy"] == "Background"
    assert "gracePeriodSeconds" not in req.body and "gracePeriodSeconds" not in req.query
    assert (out.result, out.code) == ("ok", 200)
    assert out.obj["metadata"]["resourceVersion"] == "6"
    assert (out.effect_id, out.machine, out.key) == ("1.0", "pod", "local/ns/s1-g1")
    assert close_to_2030(out.at)  # the server clock, from the reply's Date
    assert wire.clients == [("local", "")]


@pytest.mark.parametrize("fence", [dict(uid="A", rv=""), dict(uid="", rv="5"), dict()],
                         ids=["no-resource-version", "no-uid", "no-fence"])
async def test_an_unfenced_pod_delete_is_refused_before_anything_is_sent(fence, stub, wire):
    stub.answer("DELETE", POD_PATH, 200, a_pod())
    out = await wire.run(pod_ref(DeleteObject, **fence))
    assert out.result == "refused" and "uid+resourceVersion fence" in out.message
    assert stub.requests == [] and wire.clients == []
    assert out.retry_after_ms is None


async def test_a_failed_precondition_comes_back_as_conflict_not_already_exists(stub, wire):
    """Seed 001:228-231: a failed precondition is Conflict, not AlreadyExists."""
    stub.answer("DELETE", POD_PATH, 409, status_body(
        409, "Conflict", "Precondition failed: UID in precondition: A, UID in object meta: B", "s1-g1", "pods"))
    out = await wire.run(pod_ref(DeleteObject, uid="A", rv="5"))
    assert (out.result, out.status_reason, out.code) == ("conflict", "Conflict", 409)
    assert "Precondition failed" in out.message and out.obj is None
    assert len(stub.requests) == 1  # an unsafe effect is never repeated by the executor


# -- reading a pod ----------------------------------------------------------------------------------

async def test_a_quorum_pod_read_sends_no_resource_version(stub, wire):
    """Seed 001:13-15: a read leaves resourceVersion unset (quorum)."""
    stub.answer("GET", POD_PATH, 200, a_pod())
    out = await wire.run(pod_ref(GetObject))
    assert out.result == "ok" and out.obj["metadata"]["uid"] == "A"
    [req] = stub.requests
    assert (req.method, req.path) == ("GET", POD_PATH)
    assert "resourceVersion" not in req.query and "resourceVersionMatch" not in req.query


async def test_a_pod_that_is_absent_reads_as_not_found(stub, wire):
    stub.answer("GET", POD_PATH, 404, status_body(404, "NotFound", 'pods "s1-g1" not found', "s1-g1", "pods"))
    out = await wire.run(pod_ref(GetObject))
    assert (out.result, out.status_reason, out.code) == ("not_found", "NotFound", 404)


async def test_a_404_page_from_a_proxy_is_not_proof_of_absence(stub, wire):
    stub.answer("GET", POD_PATH, 404, b"<html>404 page not found</html>", headers={"Content-Type": "text/html"})
    out = await wire.run(pod_ref(GetObject))
    assert out.result == "error" and out.code == 404


# -- the sweep --------------------------------------------------------------------------------------

def secrets_list(namespace="ns", kind="Secret"):
    return ListObjects(id="1.0", machine="pod", key="local/ns/#sweep", cluster="local", api_version="v1",
                       kind=kind, namespace=namespace, label_selector=SELECTOR)


async def test_the_sweep_list_is_a_quorum_list_by_the_kfold_label_dated_by_its_own_response(stub, wire):
    """Seed 001:102-106: a list is a quorum list by label selector."""
    stub.answer("GET", "/api/v1/namespaces/ns/secrets", 200,
                {"kind": "SecretList", "items": [{"metadata": {"name": "s1-env"}}]})
    out = await wire.run(secrets_list())
    [req] = stub.requests
    assert (req.method, req.path) == ("GET", "/api/v1/namespaces/ns/secrets")
    assert req.query == {"labelSelector": [SELECTOR]}
    assert out.result == "ok"
    assert [i["metadata"]["name"] for i in out.items] == ["s1-env"]
    assert out.at == T2030


async def test_the_sweep_of_all_namespaces_lists_cluster_wide(stub, wire):
    stub.answer("GET", "/api/v1/secrets", 200, {"kind": "SecretList", "items": []})
    out = await wire.run(secrets_list(namespace=""))
    assert (out.result, out.items, out.at) == ("ok", (), T2030)
    [req] = stub.requests
    assert req.path == "/api/v1/secrets" and req.query == {"labelSelector": [SELECTOR]}


async def test_a_listed_secret_never_carries_its_data_into_the_outcome(stub, wire):
    stub.answer("GET", "/api/v1/namespaces/ns/secrets", 200,
                {"kind": "SecretList", "items": [{"metadata": {"name": "s1-env"}, "data": {"K": "c2VjcmV0"}}]})
    out = await wire.run(secrets_list())
    assert [set(i) for i in out.items] == [{"apiVersion", "kind", "metadata"}]


@pytest.mark.parametrize("date", [None, "not a date", "Tue, 45 Jan 2030 00:00:00 GMT"], ids=["missing", "garbage", "impossible"])
async def test_a_missing_or_malformed_date_gives_no_clock_but_keeps_the_items(date, stub, wire):
    """Seed 001:117-119: a missing or malformed Date gives no clock (the sweep skips), the items still
    returned."""
    # An earlier reply set the server clock; the list is still dated ONLY by its own response.
    stub.answer("GET", POD_PATH, 200, a_pod(), date="Wed, 02 Jan 2030 00:00:00 GMT")
    assert (await wire.run(pod_ref(GetObject))).result == "ok"
    assert wire.clock.now_ms() is not None
    stub.answer("GET", "/api/v1/namespaces/ns/secrets", 200, {"kind": "SecretList", "items": [{}]}, date=date)
    out = await wire.run(secrets_list())
    assert out.result == "ok" and out.at is None
    assert out.items == ({"apiVersion": "v1", "kind": "Secret"},)


async def test_a_list_is_dated_by_its_own_response_not_an_earlier_one(stub, wire):
    stub.answer("GET", POD_PATH, 200, a_pod(), date="Wed, 02 Jan 2030 00:00:00 GMT")
    await wire.run(pod_ref(GetObject))
    stub.answer("GET", "/api/v1/namespaces/ns/secrets", 200, {"kind": "SecretList", "items": []})
    assert (await wire.run(secrets_list())).at == T2030


async def test_the_pod_list_of_a_sweep_is_a_quorum_list_too(stub, wire):
    stub.answer("GET", "/api/v1/namespaces/ns/pods", 200, {"kind": "PodList", "items": [a_pod()]})
    out = await wire.run(secrets_list(kind="Pod"))
    assert out.result == "ok" and [p["metadata"]["uid"] for p in out.items] == ["A"]
    [req] = stub.requests
    assert req.path == "/api/v1/namespaces/ns/pods" and req.query == {"labelSelector": [SELECTOR]}
    assert out.at == T2030


async def test_a_swept_secret_is_deleted_with_a_uid_precondition_and_no_grace_period(stub, wire):
    stub.answer("DELETE", "/api/v1/namespaces/ns/secrets/s1-env", 200, {"kind": "Status", "status": "Success"})
    eff = DeleteObject(id="1.0", machine="pod", key="local/ns/#sweep", cluster="local", api_version="v1",
                       kind="Secret", namespace="ns", name="s1-env", uid="uid-1")
    out = await wire.run(eff)
    assert out.result == "ok"
    [req] = stub.requests
    assert (req.method, req.path) == ("DELETE", "/api/v1/namespaces/ns/secrets/s1-env")
    assert req.body["preconditions"] == {"uid": "uid-1"}
    assert "gracePeriodSeconds" not in req.body and "gracePeriodSeconds" not in req.query


# -- the session namespace --------------------------------------------------------------------------

def ensure():
    return EnsureNamespace(id="1.0", machine="pod", key="local/team-a/", cluster="local", namespace="team-a",
                           labels={"app.kubernetes.io/managed-by": "kfold"})


async def test_an_existing_namespace_is_only_read(stub, wire):
    """Seed 001:141-148: a namespace that exists is only read."""
    stub.answer("GET", "/api/v1/namespaces/team-a", 200, {"kind": "Namespace", "metadata": {"name": "team-a"}})
    out = await wire.run(ensure())
    assert out.result == "ok"
    [req] = stub.requests
    assert (req.method, req.path) == ("GET", "/api/v1/namespaces/team-a") and "resourceVersion" not in req.query


@pytest.mark.parametrize("created", [(201, {"kind": "Namespace"}),
                                     (409, status_body(409, "AlreadyExists", "exists", "team-a", "namespaces"))],
                         ids=["created", "raced-and-already-exists"])
async def test_an_absent_namespace_is_created_with_the_kfold_label(created, stub, wire):
    stub.answer("GET", "/api/v1/namespaces/team-a", 404, status_body(404, "NotFound", "nf", "team-a", "namespaces"))
    stub.answer("POST", "/api/v1/namespaces", *created)
    out = await wire.run(ensure())
    assert out.result == "ok"
    assert [(r.method, r.path) for r in stub.requests] == [("GET", "/api/v1/namespaces/team-a"),
                                                           ("POST", "/api/v1/namespaces")]
    post = stub.requests[-1]
    assert post.body["metadata"] == {"name": "team-a", "labels": {"app.kubernetes.io/managed-by": "kfold"}}


async def test_a_forbidden_namespace_create_is_reported_as_forbidden_and_nothing_else_is_tried(stub, wire):
    stub.answer("GET", "/api/v1/namespaces/team-a", 404, status_body(404, "NotFound", "nf", "team-a", "namespaces"))
    stub.answer("POST", "/api/v1/namespaces", 403, status_body(403, "Forbidden", "cannot create", "team-a", "namespaces"))
    out = await wire.run(ensure())
    assert (out.result, out.status_reason, out.code, out.step) == ("forbidden", "Forbidden", 403, "")
    assert [(r.method, r.path) for r in stub.requests] == [("GET", "/api/v1/namespaces/team-a"),
                                                           ("POST", "/api/v1/namespaces")]


async def test_a_forbidden_namespace_read_is_reported_as_forbidden_and_no_create_is_tried(stub, wire):
    stub.answer("GET", "/api/v1/namespaces/team-a", 403, status_body(403, "Forbidden", "cannot get", "team-a", "namespaces"))
    stub.answer("POST", "/api/v1/namespaces", 201, {"kind": "Namespace"})
    out = await wire.run(ensure())
    assert (out.result, out.status_reason, out.code, out.step) == ("forbidden", "Forbidden", 403, "check")
    assert [(r.method, r.path) for r in stub.requests] == [("GET", "/api/v1/namespaces/team-a")]


# -- no apiserver at all ----------------------------------------------------------------------------

@pytest.mark.parametrize("effect", [pod_ref(GetObject), pod_ref(DeleteObject, uid="A", rv="5"), secrets_list(), ensure()],
                         ids=["get", "delete", "list", "ensure-namespace"])
async def test_a_refused_connection_is_transient_never_not_found(effect):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = Configuration(host=f"http://127.0.0.1:{port}")
    cfg.retries = False
    client = ApiClient(cfg)
    executor = Executor(KubeTransport(lambda _c, _t: client, max_threads=1), ServerClock(), Wire._sink)
    try:
        out = await executor.run(effect)
    finally:
        await executor.close()
    assert out.result == "transient" and out.code == 0
    assert out.at is None  # no reply, no Date: the clock was never set
