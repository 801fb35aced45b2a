"""What the REAL kubernetes client puts on the wire for the pod machine's effects.

A recording stub apiserver on 127.0.0.1 answers; the assertions read the recorded requests."""
from __future__ import annotations

import socket

import pytest
from kubernetes.client import ApiClient, Configuration, CoreV1Api
from kubernetes.client.exceptions import ApiException

from engine.effects import kube_calls
from engine.effects.kube_errors import classify
from engine.effects.models import DeleteObject, EnsureNamespace, GetObject, ListObjects
from tests.contract.stub_apiserver import StubApiServer, status_body
from tests.harness import ms

POD_PATH = "/api/v1/namespaces/ns/pods/s1-g1"
SELECTOR = "app.kubernetes.io/managed-by=kfold"


def pod_ref(cls, **fields):
    return cls(id="1.0", machine="pod", key="local/ns/s1-g1", api_version="v1", kind="Pod",
               namespace="ns", name="s1-g1", **fields)


def a_pod(uid="A", rv="5"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s1-g1", "namespace": "ns", "uid": uid,
                                                          "resourceVersion": rv}}


@pytest.fixture
def stub():
    with StubApiServer() as s:
        yield s


def test_a_pod_delete_sends_its_fence_as_preconditions_and_no_grace_period(stub):
    stub.answer("DELETE", POD_PATH, 200, a_pod(rv="6"))
    out = kube_calls.delete_pod(stub.core_v1(), pod_ref(DeleteObject, uid="A", rv="5"))
    [req] = stub.requests
    assert (req.method, req.path) == ("DELETE", POD_PATH)
    assert req.body["preconditions"] == {"uid": "A", "resourceVersion": "5"}
    assert req.body["propagationPolicy"] == "Background"
    assert "gracePeriodSeconds" not in req.body and "gracePeriodSeconds" not in req.query
    assert out["metadata"]["resourceVersion"] == "6"


def test_an_unfenced_pod_delete_is_refused_before_anything_is_sent(stub):
    with pytest.raises(ValueError, match="without a uid\\+resourceVersion fence"):
        kube_calls.delete_pod(stub.core_v1(), pod_ref(DeleteObject, uid="A", rv=""))
    assert stub.requests == []


def test_a_failed_precondition_comes_back_as_conflict_not_already_exists(stub):
    stub.answer("DELETE", POD_PATH, 409, status_body(
        409, "Conflict", "Precondition failed: UID in precondition: A, UID in object meta: B", "s1-g1", "pods"))
    with pytest.raises(ApiException) as caught:
        kube_calls.delete_pod(stub.core_v1(), pod_ref(DeleteObject, uid="A", rv="5"))
    assert classify(caught.value)[:3] == ("conflict", "Conflict", 409)


def test_a_quorum_pod_read_sends_no_resource_version(stub):
    stub.answer("GET", POD_PATH, 200, a_pod())
    assert kube_calls.read_pod(stub.core_v1(), pod_ref(GetObject))["metadata"]["uid"] == "A"
    [req] = stub.requests
    assert (req.method, req.path) == ("GET", POD_PATH) and "resourceVersion" not in req.query


def test_a_pod_that_is_absent_reads_as_not_found(stub):
    stub.answer("GET", POD_PATH, 404, status_body(404, "NotFound", 'pods "s1-g1" not found', "s1-g1", "pods"))
    with pytest.raises(ApiException) as caught:
        kube_calls.read_pod(stub.core_v1(), pod_ref(GetObject))
    assert classify(caught.value).result == "not_found"


def test_a_404_page_from_a_proxy_is_not_proof_of_absence(stub):
    stub.answer("GET", POD_PATH, 404, b"<html>404 page not found</html>")
    with pytest.raises(ApiException) as caught:
        kube_calls.read_pod(stub.core_v1(), pod_ref(GetObject))
    assert classify(caught.value).result == "error"


def secrets_list(namespace="ns"):
    return ListObjects(id="1.0", machine="pod", key="local/ns/#sweep", api_version="v1", kind="Secret",
                       namespace=namespace, label_selector=SELECTOR)


def test_the_sweep_list_is_a_quorum_list_by_the_kfold_label_dated_by_its_own_response(stub):
    stub.answer("GET", "/api/v1/namespaces/ns/secrets", 200,
                {"kind": "SecretList", "items": [{"metadata": {"name": "s1-env"}}]})
    items, at = kube_calls.list_secrets(stub.core_v1(), secrets_list())
    [req] = stub.requests
    assert req.query == {"labelSelector": [SELECTOR]}
    assert items == [{"metadata": {"name": "s1-env"}}]
    assert at == ms("2030-01-01T00:00:00Z")


def test_the_sweep_of_all_namespaces_lists_cluster_wide(stub):
    stub.answer("GET", "/api/v1/secrets", 200, {"kind": "SecretList", "items": []})
    assert kube_calls.list_secrets(stub.core_v1(), secrets_list(namespace="")) == ([], ms("2030-01-01T00:00:00Z"))
    assert stub.requests[0].query == {"labelSelector": [SELECTOR]}


@pytest.mark.parametrize("date", [None, "not a date", "Tue, 45 Jan 2030 00:00:00 GMT"], ids=["missing", "garbage", "impossible"])
def test_a_missing_or_malformed_date_gives_no_clock_but_keeps_the_items(date, stub):
    stub.answer("GET", "/api/v1/namespaces/ns/secrets", 200, {"kind": "SecretList", "items": [{}]}, date=date)
    assert kube_calls.list_secrets(stub.core_v1(), secrets_list()) == ([{}], None)


def test_the_pod_list_of_a_sweep_is_a_quorum_list_too(stub):
    stub.answer("GET", "/api/v1/namespaces/ns/pods", 200, {"kind": "PodList", "items": [a_pod()]})
    eff = secrets_list().model_copy(update={"kind": "Pod"})
    items, _ = kube_calls.list_pods(stub.core_v1(), eff)
    assert [p["metadata"]["uid"] for p in items] == ["A"]
    assert stub.requests[0].query == {"labelSelector": [SELECTOR]}


def test_a_swept_secret_is_deleted_with_a_uid_precondition_and_no_grace_period(stub):
    stub.answer("DELETE", "/api/v1/namespaces/ns/secrets/s1-env", 200, {"kind": "Status", "status": "Success"})
    eff = DeleteObject(id="1.0", machine="pod", key="local/ns/#sweep", api_version="v1", kind="Secret",
                       namespace="ns", name="s1-env", uid="uid-1")
    kube_calls.delete_secret(stub.core_v1(), eff)
    body = stub.requests[0].body
    assert body["preconditions"] == {"uid": "uid-1"} and "gracePeriodSeconds" not in body


def ensure():
    return EnsureNamespace(id="1.0", machine="pod", key="local/team-a/", namespace="team-a",
                           labels={"app.kubernetes.io/managed-by": "kfold"})


def test_an_existing_namespace_is_only_read(stub):
    stub.answer("GET", "/api/v1/namespaces/team-a", 200, {"kind": "Namespace", "metadata": {"name": "team-a"}})
    kube_calls.ensure_namespace(stub.core_v1(), ensure())
    assert [(r.method, r.path) for r in stub.requests] == [("GET", "/api/v1/namespaces/team-a")]


@pytest.mark.parametrize("created", [(201, {"kind": "Namespace"}),
                                     (409, status_body(409, "AlreadyExists", "exists", "team-a", "namespaces"))],
                         ids=["created", "raced-and-already-exists"])
def test_an_absent_namespace_is_created_with_the_kfold_label(created, stub):
    stub.answer("GET", "/api/v1/namespaces/team-a", 404, status_body(404, "NotFound", "nf", "team-a", "namespaces"))
    stub.answer("POST", "/api/v1/namespaces", *created)
    kube_calls.ensure_namespace(stub.core_v1(), ensure())
    post = stub.requests[-1]
    assert post.body["metadata"] == {"name": "team-a", "labels": {"app.kubernetes.io/managed-by": "kfold"}}


def test_a_forbidden_namespace_create_is_reported_as_forbidden_and_nothing_else_is_tried(stub):
    stub.answer("GET", "/api/v1/namespaces/team-a", 403, status_body(403, "Forbidden", "cannot get", "team-a", "namespaces"))
    stub.answer("POST", "/api/v1/namespaces", 403, status_body(403, "Forbidden", "cannot create", "team-a", "namespaces"))
    with pytest.raises(ApiException) as caught:
        kube_calls.ensure_namespace(stub.core_v1(), ensure())
    assert classify(caught.value).result == "forbidden"
    assert [r.path for r in stub.requests] == ["/api/v1/namespaces/team-a", "/api/v1/namespaces"]


def test_a_refused_connection_is_transient_never_not_found():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = Configuration(host=f"http://127.0.0.1:{port}")
    cfg.retries = 0
    with pytest.raises(Exception) as caught:
        kube_calls.read_pod(CoreV1Api(ApiClient(cfg)), pod_ref(GetObject))
    assert classify(caught.value).result == "transient"

