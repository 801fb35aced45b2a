"""``/metrics`` on a port of its own, over HTTPS, read only by whom the real apiserver allows.

``kfold run`` runs as the install's ServiceAccount with the install's RBAC (``rbac`` and
``metrics_rbac`` of ``kfold manifests``) and ``metrics.listen`` set: a ServiceAccount token bound to
the install's ``kfold-metrics-reader`` ClusterRole gets 200 and the page, one without it 403, a
request with no token or a token the apiserver does not know 401; the probes stay plain HTTP on
``http.listen``. Once with the self-signed certificate kfold makes, once with a mounted one the
client verifies (its own CA, the name ``localhost``). Without the ``kfold-metrics-auth`` binding
the apiserver refuses kfold's TokenReview: 500 and one WARNING naming the ClusterRole.
"""
from __future__ import annotations

import http.client
import ssl
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from kfold.daemon.manifests import metrics_rbac
from kfold.daemon.secure import self_signed
from tests.e2e.conftest import apply, free_port, install_rbac, service_account_kubeconfig


def token(admin, namespace: str, name: str) -> str:
    core = client.CoreV1Api(admin)
    apply(admin, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}])
    return core.create_namespaced_service_account_token(name, namespace, {"spec": {"expirationSeconds": 600}}).status.token


def get(port: int, bearer: str | None, ctx: ssl.SSLContext, host: str = "127.0.0.1") -> tuple[int, str]:
    conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {bearer}"} if bearer else {})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


@pytest.fixture
def scrapers(admin, namespace):
    """(token bound to kfold-metrics-reader, token bound to nothing), both ServiceAccounts of ``namespace``."""
    rbac = client.RbacAuthorizationV1Api(admin)
    name = f"kfold-e2e-scraper-{uuid.uuid4().hex[:6]}"
    apply(admin, [d for d in metrics_rbac("kfold-e2e") if d["kind"] == "ClusterRole"])
    rbac.create_cluster_role_binding({"metadata": {"name": name}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kfold-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}]})
    try:
        yield token(admin, namespace, "prometheus"), token(admin, namespace, "stranger")
    finally:
        rbac.delete_cluster_role_binding(name)


def kfold_with_metrics(admin, cp, namespace, daemon_factory, tmp_path: Path, metrics: dict, auth: bool = True):
    home = "kfold-e2e" if auth else "kfold-e2e-noauth"   # the latter: no kfold-metrics-auth binding
    install_rbac(admin, home, [namespace])
    if auth:
        apply(admin, metrics_rbac(home))
    kubeconfig = service_account_kubeconfig(admin, cp, home, tmp_path / "sa.kubeconfig")
    port = free_port()
    daemon = daemon_factory(str(kubeconfig), [namespace], {"metrics": {"listen": f"127.0.0.1:{port}", **metrics}})
    return daemon.start(), port


def test_a_reader_gets_200_a_stranger_403_no_or_a_bad_token_401(admin, cp, namespace, daemon_factory, tmp_path,
                                                               scrapers):
    reader, stranger = scrapers
    daemon, port = kfold_with_metrics(admin, cp, namespace, daemon_factory, tmp_path, {})
    status, page = get(port, reader, unverified())
    assert status == 200, page
    assert {f.name for f in text_string_to_metric_families(page)} >= {"kfold_build_info", "kfold_ready"}
    assert get(port, stranger, unverified()) == \
        (403, f"Authorization denied for user system:serviceaccount:{namespace}:stranger\n")
    assert get(port, None, unverified()) == (401, "Unauthorized\n")
    assert get(port, "not-a-token", unverified()) == (401, "Unauthorized\n")
    assert get(port, reader + "x", unverified())[0] == 401
    # the probes: plain HTTP on http.listen, and no /metrics there
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=5)
    conn.request("GET", "/readyz")
    assert conn.getresponse().status == 200
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=5)
    conn.request("GET", "/metrics")
    assert conn.getresponse().status == 404
    # the self-signed certificate does not verify; kfold's log never holds a token
    with pytest.raises(ssl.SSLCertVerificationError):
        get(port, reader, ssl.create_default_context())
    log = daemon.log.read_text()
    assert reader not in log and stranger not in log and f"https://127.0.0.1:{port}/metrics" in log


def test_a_mounted_certificate_is_served_and_verifies(admin, cp, namespace, daemon_factory, tmp_path, scrapers):
    reader, _ = scrapers
    certs = tmp_path / "tls"
    certs.mkdir()
    cert, key = self_signed("kfold-metrics.kfold.svc")
    (certs / "tls.crt").write_bytes(cert)
    (certs / "tls.key").write_bytes(key)
    _, port = kfold_with_metrics(admin, cp, namespace, daemon_factory, tmp_path, {"cert_dir": str(certs)})
    ctx = ssl.create_default_context(cadata=cert.decode())
    status, page = get(port, reader, ctx, host="localhost")
    assert status == 200 and "kfold_build_info" in page


def test_without_the_review_permissions_metrics_answer_500_and_the_log_names_the_clusterrole(
        admin, cp, namespace, daemon_factory, tmp_path, scrapers):
    reader, _ = scrapers
    daemon, port = kfold_with_metrics(admin, cp, namespace, daemon_factory, tmp_path, {}, auth=False)
    assert get(port, reader, unverified()) == (500, "Authentication failed\n")
    assert get(port, reader, unverified())[0] == 500
    warnings = [line for line in daemon.log.read_text().splitlines() if "TokenReview" in line]
    assert len(warnings) == 1 and "HTTP 403" in warnings[0] and "kfold-metrics-auth" in warnings[0], warnings
