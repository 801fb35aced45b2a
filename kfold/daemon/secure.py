"""HTTPS for ``/metrics``, and who may read it, decided by the apiserver (``metrics.secure``).

As controller-runtime's metrics server with ``filters.WithAuthenticationAndAuthorization`` (what
kubebuilder's scaffold turns on):

- **Certificate** (``ServingCert``): ``tls.crt`` and ``tls.key`` in ``metrics.cert_dir`` when both
  are there (a mounted ``kubernetes.io/tls`` Secret), re-read at the first connection after either
  file changed, so a rotated Secret is served without a restart (a pair that no longer loads keeps
  the previous one, with one WARNING); neither file, or no ``cert_dir``: a self-signed certificate
  made at start (ECDSA P-256, for ``localhost``, ``127.0.0.1``, ``::1`` and the host's name, one
  year), as controller-runtime makes one. Only one of the two, or a pair that does not load, is a
  ``CertError`` naming the fix (``kfold run`` exits 2). TLS 1.2 at least.
- **Authentication** (``DelegatedAuth``): no ``Authorization: Bearer TOKEN`` header, or a token a
  TokenReview does not authenticate: 401. **Authorization**: a SubjectAccessReview for the user
  (name, uid, groups, extra) with the non-resource attributes ``path`` and ``verb`` (the HTTP
  method, lower-cased: ``get``); not allowed: 403. The apiserver not answering either review (a
  transport error, a status other than 201, e.g. kfold lacking the ClusterRole): 500, and one
  WARNING a minute naming the status and the fix. Nothing is served unless both allow it.
- **Caching**, controller-runtime's: a TokenReview's answer for 1 minute (keyed by the token's
  SHA-256, never the token itself), an allowed SubjectAccessReview for 5 minutes, a denied one
  for 30 seconds; at most ``CACHE_SIZE`` entries of each.
- kfold's ServiceAccount needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``
  (``METRICS_AUTH_RULES`` in kfold.daemon.manifests: the ClusterRole ``kfold-metrics-auth``); a
  scraper needs ``get`` on the non-resource URL ``/metrics`` (ClusterRole ``kfold-metrics-reader``).
- No token reaches a log, the journal or a reply.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from engine.effects.io.transport import Refused, Request, TransportError

log = logging.getLogger("kfold.metrics")

CERT, KEY = "tls.crt", "tls.key"
TOKEN_TTL, ALLOW_TTL, DENY_TTL = 60.0, 300.0, 30.0   # seconds, as controller-runtime's filter
CACHE_SIZE = 4096
WARN_EVERY = 60.0
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
FIX = ("kfold's ServiceAccount needs create on tokenreviews.authentication.k8s.io and "
       "subjectaccessreviews.authorization.k8s.io (the install's ClusterRole kfold-metrics-auth)")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class CertError(ValueError):
    """A metrics certificate kfold cannot serve; the message names the directory and the fix."""


def _pair(cert_dir: str | None) -> tuple[Path, Path] | None:
    if cert_dir is None:
        return None
    crt, key = Path(cert_dir) / CERT, Path(cert_dir) / KEY
    have = (crt.exists(), key.exists())
    if have == (False, False):
        return None
    if not all(have):
        raise CertError(f"metrics.cert_dir {cert_dir}: {KEY if have[0] else CERT} is missing beside "
                        f"{CERT if have[0] else KEY}; mount both (a kubernetes.io/tls Secret), or neither "
                        "for a self-signed certificate")
    return crt, key


def _load(ctx: ssl.SSLContext, crt: Path, key: Path) -> None:
    try:
        ctx.load_cert_chain(crt, key)
    except (ssl.SSLError, OSError) as exc:
        raise CertError(f"metrics.cert_dir {crt.parent}: cannot load {CERT} and {KEY} "
                        f"({getattr(exc, 'reason', None) or exc.strerror or exc}); mount a PEM certificate "
                        "and its private key") from None


def _context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def self_signed(hostname: str) -> tuple[bytes, bytes]:
    """(certificate, key) in PEM: ECDSA P-256, self-signed, a server certificate for one year."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kfold-metrics")])
    dns = ["localhost"] + ([hostname] if _DNS_NAME.match(hostname.lower()) and hostname != "localhost" else [])
    sans = [x509.DNSName(n) for n in dns] + [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1")]
    now = datetime.datetime.now(datetime.timezone.utc)   # the certificate's validity: the local clock, by nature
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def _load_self_signed(ctx: ssl.SSLContext) -> None:
    """``load_cert_chain`` reads files only: the pair is written to a private directory and removed."""
    import socket
    cert, key = self_signed(socket.gethostname())
    with tempfile.TemporaryDirectory(prefix="kfold-metrics-") as tmp:
        for name, data in ((CERT, cert), (KEY, key)):
            fd = os.open(os.path.join(tmp, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(os.path.join(tmp, CERT), os.path.join(tmp, KEY))


def serving_context(cert_dir: str | None) -> ssl.SSLContext:
    """A server context with ``cert_dir``'s pair, or a self-signed one (module contract)."""
    ctx = _context()
    pair = _pair(cert_dir)
    if pair is None:
        _load_self_signed(ctx)
    else:
        _load(ctx, *pair)
    return ctx


def check_cert_dir(cert_dir: str | None) -> None:
    """``CertError`` if ``cert_dir`` holds one file of the pair, or a pair that does not load."""
    pair = _pair(cert_dir)
    if pair is not None:
        _load(_context(), *pair)


class ServingCert:
    """The context to serve with; ``current()`` re-reads a mounted pair that changed (module contract)."""

    def __init__(self, cert_dir: str | None):
        self.cert_dir = cert_dir
        self.context = serving_context(cert_dir)
        self.self_signed = _pair(cert_dir) is None
        self._stamp = self._files()

    def _files(self) -> tuple[Any, ...]:
        pair = None if self.cert_dir is None else (Path(self.cert_dir) / CERT, Path(self.cert_dir) / KEY)
        if pair is None:
            return ()
        out = []
        for p in pair:
            try:
                st = p.stat()   # follows the Secret volume's ..data symlinks
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def current(self) -> ssl.SSLContext:
        stamp = self._files()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self.context, self.self_signed = serving_context(self.cert_dir), _pair(self.cert_dir) is None
                log.info("metrics certificate re-read from %s", self.cert_dir)
            except CertError as exc:
                log.warning("%s; still serving the previous certificate", exc)
        return self.context


def bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class ReviewFailed(Exception):
    """The apiserver did not answer a review (the reply's status, or the transport's error)."""


class _Cache:
    def __init__(self, clock: Callable[[], float]):
        self._clock, self._items = clock, {}

    def get(self, key: Any) -> Any:
        hit = self._items.get(key)
        if hit is None or hit[0] <= self._clock():
            self._items.pop(key, None)
            return None
        return hit[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        if len(self._items) >= CACHE_SIZE:
            now = self._clock()
            self._items = {k: v for k, v in self._items.items() if v[0] > now}
            if len(self._items) >= CACHE_SIZE:
                self._items.clear()
        self._items[key] = (self._clock() + ttl, value)


class DelegatedAuth:
    """``await check(method, path, headers)``: None to serve, else (status, body) (module contract).
    ``transport``: the home cluster's (kfold's own credentials), ``cluster``: its name."""

    def __init__(self, transport: Any, cluster: str, clock: Callable[[], float] = time.monotonic):
        self.transport, self.cluster, self._clock = transport, cluster, clock
        self._tokens, self._access = _Cache(clock), _Cache(clock)
        self._warned_at: float | None = None

    async def check(self, method: str, path: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
        token = bearer(headers.get("authorization"))
        if token is None:
            return 401, "Unauthorized\n"
        try:
            user = await self._authenticate(token)
        except ReviewFailed as exc:
            self._warn("TokenReview", exc)
            return 500, "Authentication failed\n"
        if user is None:
            return 401, "Unauthorized\n"
        name = user.get("username", "")
        try:
            allowed = await self._authorize(user, path, method.lower())
        except ReviewFailed as exc:
            self._warn("SubjectAccessReview", exc)
            return 500, f"Authorization for user {name} failed\n"
        return None if allowed else (403, f"Authorization denied for user {name}\n")

    async def _authenticate(self, token: str) -> dict[str, Any] | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        hit = self._tokens.get(key)
        if hit is not None:
            return hit or None
        status = await self._review(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                    "spec": {"token": token}})
        user = (status.get("user") or {}) if status.get("authenticated") else {}
        self._tokens.put(key, user, TOKEN_TTL)
        return user or None

    async def _authorize(self, user: dict[str, Any], path: str, verb: str) -> bool:
        extra = {k: list(v) for k, v in sorted((user.get("extra") or {}).items())}
        spec = {"user": user.get("username", ""), "uid": user.get("uid", ""), "groups": list(user.get("groups") or ()),
                "extra": extra, "nonResourceAttributes": {"path": path, "verb": verb}}
        key = repr(sorted(spec.items()))
        hit = self._access.get(key)
        if hit is not None:
            return hit
        status = await self._review(ACCESS_REVIEWS, {"apiVersion": "authorization.k8s.io/v1",
                                                     "kind": "SubjectAccessReview", "spec": spec})
        allowed = bool(status.get("allowed")) and not status.get("denied")
        self._access.put(key, allowed, ALLOW_TTL if allowed else DENY_TTL)
        return allowed

    async def _review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = await self.transport.call(Request(cluster=self.cluster, tenant="", method="POST", path=path, body=body))
        except (TransportError, Refused) as exc:
            raise ReviewFailed(str(exc) or type(exc).__name__) from None
        if reply.status not in (200, 201) or not isinstance(reply.data, dict):
            message = (reply.data or {}).get("message", "") if isinstance(reply.data, dict) else ""
            raise ReviewFailed(f"HTTP {reply.status}" + (f": {message}" if message else ""))
        return reply.data.get("status") or {}

    def _warn(self, what: str, exc: ReviewFailed) -> None:
        now = self._clock()
        if self._warned_at is None or now - self._warned_at >= WARN_EVERY:
            self._warned_at = now
            log.warning("metrics: the apiserver did not answer kfold's %s (%s): /metrics answers 500 meanwhile; %s",
                        what, exc, FIX)
