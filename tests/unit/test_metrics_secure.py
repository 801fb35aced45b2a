"""``/metrics`` on its own port: HTTPS with a self-signed or a mounted (and rotated) certificate,
and every request judged by the apiserver's TokenReview and SubjectAccessReview, cached as
controller-runtime caches them. The apiserver here is a recording fake answering as the real one
does (tests/e2e/test_metrics_auth.py runs the same against kube-apiserver)."""
from __future__ import annotations

import asyncio
import socket
import ssl

import pytest

from engine.effects.io.transport import Response, TransportError
from kfold.daemon.http import HttpServer, servers
from kfold.daemon.secure import (ACCESS_REVIEWS, TOKEN_REVIEWS, CertError, DelegatedAuth, ServingCert, bearer,
                                 check_cert_dir, self_signed)

USERS = {"prom-token": {"username": "system:serviceaccount:mon:prometheus", "uid": "u-1",
                        "groups": ["system:serviceaccounts", "system:authenticated"], "extra": {"x": ["1"]}},
         "other-token": {"username": "system:serviceaccount:mon:other", "uid": "u-2", "groups": []}}
ALLOWED = {"system:serviceaccount:mon:prometheus"}


class Apiserver:
    """Answers TokenReviews from USERS and SubjectAccessReviews from ALLOWED; records each body."""

    def __init__(self, status: int = 201, fail: bool = False):
        self.sent: list[tuple[str, dict]] = []
        self.status, self.fail = status, fail

    async def call(self, req):
        self.sent.append((req.path, req.body))
        if self.fail:
            raise TransportError("connection refused")
        if self.status != 201:
            return Response(self.status, {}, {"kind": "Status", "message": "tokenreviews is forbidden"})
        spec = req.body["spec"]
        if req.path == TOKEN_REVIEWS:
            user = USERS.get(spec["token"])
            return Response(201, {}, {"status": {"authenticated": True, "user": user} if user else {"authenticated": False}})
        allowed = spec["user"] in ALLOWED and spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return Response(201, {}, {"status": {"allowed": allowed}})

    def kinds(self) -> list[str]:
        return [p.rsplit("/", 1)[1] for p, _ in self.sent]


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def check(auth, authorization: str | None, path: str = "/metrics"):
    headers = {"authorization": authorization} if authorization is not None else {}
    return asyncio.run(auth.check("GET", path, headers))


@pytest.mark.parametrize("header, answer", [
    (None, (401, "Unauthorized\n")),
    ("Basic cHJvbTp4", (401, "Unauthorized\n")),
    ("Bearer ", (401, "Unauthorized\n")),
    ("Bearer not-a-token", (401, "Unauthorized\n")),
    ("Bearer other-token", (403, "Authorization denied for user system:serviceaccount:mon:other\n")),
    ("Bearer prom-token", None),
    ("bearer prom-token", None),
], ids=["no header", "basic", "empty bearer", "unknown token", "not allowed", "allowed", "scheme any case"])
def test_who_may_read_metrics_is_the_apiservers_answer(header, answer):
    assert check(DelegatedAuth(Apiserver(), "local"), header) == answer


def test_the_reviews_carry_the_users_identity_and_the_non_resource_path_and_verb():
    api = Apiserver()
    check(DelegatedAuth(api, "local"), "Bearer prom-token")
    (_, tr), (_, sar) = api.sent
    assert tr == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "prom-token"}}
    assert sar["kind"] == "SubjectAccessReview" and sar["spec"] == {
        "user": "system:serviceaccount:mon:prometheus", "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"], "extra": {"x": ["1"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}


def test_answers_are_cached_a_token_1_minute_an_allow_5_minutes_a_deny_30_seconds():
    api, clock = Apiserver(), Clock()
    auth = DelegatedAuth(api, "local", clock=clock)
    for _ in range(3):
        assert check(auth, "Bearer prom-token") is None
        assert check(auth, "Bearer other-token")[0] == 403
    assert api.kinds() == ["tokenreviews", "subjectaccessreviews"] * 2
    clock.t += 31     # the deny expired, the allow and both tokens did not
    check(auth, "Bearer prom-token"), check(auth, "Bearer other-token")
    assert api.kinds()[4:] == ["subjectaccessreviews"]
    clock.t += 30     # 61 s: both tokens are reviewed again; the allow (5 min) still holds
    check(auth, "Bearer prom-token")
    assert api.kinds()[5:] == ["tokenreviews"]
    clock.t += 240    # 301 s: the allow expired too
    check(auth, "Bearer prom-token")
    assert api.kinds()[6:] == ["tokenreviews", "subjectaccessreviews"]


def test_the_cache_never_keeps_the_token():
    auth = DelegatedAuth(Apiserver(), "local")
    check(auth, "Bearer prom-token")
    assert "prom-token" not in repr(auth._tokens._items) and "prom-token" not in repr(auth._access._items)


@pytest.mark.parametrize("api", [Apiserver(status=403), Apiserver(fail=True)], ids=["403 from the apiserver", "unreachable"])
def test_an_apiserver_that_cannot_review_is_500_and_one_warning_naming_the_fix(api, caplog):
    auth = DelegatedAuth(api, "local")
    for _ in range(3):
        assert check(auth, "Bearer prom-token") == (500, "Authentication failed\n")
    (warning,) = [r for r in caplog.records if r.name == "kfold.metrics"]
    assert "TokenReview" in warning.getMessage() and "kfold-metrics-auth" in warning.getMessage()
    assert "prom-token" not in caplog.text


def test_bearer_parses_the_authorization_header():
    assert bearer("Bearer abc") == "abc" and bearer("BEARER  abc ") == "abc"
    assert bearer(None) is bearer("") is bearer("Bearer") is bearer("Token abc") is None


# ---- the certificate ----

def write_pair(directory, host="localhost"):
    cert, key = self_signed(host)
    directory.mkdir(exist_ok=True)
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)
    return cert


def served_cert(port: int) -> bytes:
    """The leaf certificate the server presents (DER), read by a client that does not verify."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as s:
        return s.getpeercert(binary_form=True)


def test_a_missing_half_or_a_bad_pair_is_refused_naming_the_fix(tmp_path):
    check_cert_dir(None), check_cert_dir(str(tmp_path))   # nothing mounted: a self-signed one
    (tmp_path / "tls.crt").write_text("x")
    with pytest.raises(CertError, match=r"tls.key is missing beside tls.crt; mount both"):
        check_cert_dir(str(tmp_path))
    (tmp_path / "tls.key").write_text("y")
    with pytest.raises(CertError, match=r"cannot load tls.crt and tls.key .*mount a PEM certificate"):
        check_cert_dir(str(tmp_path))


def test_a_self_signed_certificate_is_for_localhost_and_loopback():
    from cryptography import x509
    cert = x509.load_pem_x509_certificate(self_signed("kfold-0")[0])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "kfold-0"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 365
    assert x509.load_pem_x509_certificate(self_signed("Bad_Host!")[0]).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName) == ["localhost"]


async def _serve(cert: ServingCert, guard=None):
    server = HttpServer("127.0.0.1", 0, {"/metrics": lambda: (200, "text/plain", "kfold_up 1\n")},
                        tls=cert.current, guard=guard)
    await server.start()
    return server


def test_a_mounted_certificate_is_served_and_a_rotated_one_from_the_next_connection(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    first = write_pair(tmp_path / "tls")
    cert = ServingCert(str(tmp_path / "tls"))
    assert not cert.self_signed

    async def go():
        server = await _serve(cert)
        try:
            a = await asyncio.to_thread(served_cert, server.port)
            second = write_pair(tmp_path / "tls")
            b = await asyncio.to_thread(served_cert, server.port)
            (tmp_path / "tls" / "tls.key").write_text("broken")   # a half-written rotation: the last good pair stays
            c = await asyncio.to_thread(served_cert, server.port)
            return a, b, c, second
        finally:
            await server.close()
    a, b, c, second = asyncio.run(go())

    def der(pem: bytes) -> bytes:
        return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)
    assert a == der(first) and b == c == der(second) and a != b


def test_https_with_the_guard_answers_401_403_and_200_and_a_plain_client_gets_nothing(tmp_path):
    import http.client
    auth = DelegatedAuth(Apiserver(), "local")

    def get(port, token=None):
        ctx = ssl._create_unverified_context()
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
        r = conn.getresponse()
        return r.status, r.getheader("WWW-Authenticate"), r.read().decode()

    def plain(port):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            return s.recv(1024)

    async def go():
        server = await _serve(ServingCert(None), auth.check)
        try:
            return [await asyncio.to_thread(get, server.port, t) for t in (None, "other-token", "prom-token")] + \
                [await asyncio.to_thread(plain, server.port)]
        finally:
            await server.close()
    none, other, prom, cleartext = asyncio.run(go())
    assert none == (401, 'Bearer realm="kfold"', "Unauthorized\n")
    assert other[0] == 403 and prom == (200, None, "kfold_up 1\n")
    assert b"kfold_up" not in cleartext


def test_servers_put_metrics_beside_the_probes_or_alone_on_their_port():
    from kfold.daemon.config import parse_config
    routes = {p: (lambda: (200, "text/plain", "")) for p in ("/healthz", "/readyz", "/metrics")}
    (one,) = servers(parse_config({"namespaces": ["a"]}), routes)
    assert set(one.routes) == {"/healthz", "/readyz", "/metrics"} and one.tls is None and one.guard is None
    cfg = parse_config({"namespaces": ["a"], "metrics": {"listen": "127.0.0.1:8443"}})
    auth, cert = DelegatedAuth(Apiserver(), "local"), ServingCert(None)
    probes, page = servers(cfg, routes, auth, cert)
    assert set(probes.routes) == {"/healthz", "/readyz"} and probes.tls is None and probes.guard is None
    assert set(page.routes) == {"/metrics"} and (page.host, page.port) == ("127.0.0.1", 8443)
    assert page.tls == cert.current and page.guard == auth.check and page.field == "metrics.listen"
    plain = parse_config({"namespaces": ["a"], "metrics": {"listen": ":9090", "secure": False}})
    assert [s.tls for s in servers(plain, routes)] == [None, None]


def test_metrics_and_probes_may_not_share_a_port():
    from kfold.daemon.config import ConfigError, parse_config
    with pytest.raises(ConfigError, match=r"field metrics: metrics.listen '0.0.0.0:8080' uses http.listen's port"):
        parse_config({"namespaces": ["a"], "metrics": {"listen": "0.0.0.0:8080"}})
