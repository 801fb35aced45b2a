"""The executor's port to an apiserver: one HTTP request in, one reply (or a typed failure) out.

Two implementations satisfy it and pass the same contract tests (tests/contract/):
- ``KubeTransport`` — the official ``kubernetes`` sync client, run in a bounded thread pool;
- ``engine.effects.io.fake.FakeTransport`` — an in-memory fake apiserver, for unit tests.

Why the sync client in threads rather than ``kubernetes.aio``: the sync ``ApiClient`` is what the
registry constructs and the rest of kfold uses, it is the only one with the full typed API and its
auth plugins (exec, OIDC, in-cluster token refresh), and a bounded pool caps concurrent requests
per daemon (a natural backpressure) without a second client stack to configure and close.
``ApiClient.param_serialize`` + ``call_api`` are used directly so every reply, error or not, keeps
its headers (``Date``, ``Retry-After``) and its raw Status body.

Guarantees:
- ``call`` returns a ``Response`` for every HTTP status, 2xx or not; it never raises for a status.
- ``TransportError``: no HTTP status came back (reset, timeout, TLS, DNS). The request may or may
  not have reached the apiserver; it is never to be read as NotFound.
- ``Refused``: nothing was sent (unknown cluster, namespace out of bounds, no client).
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

import orjson

from engine.effects.io.os_thread import name_this_thread
from engine.effects.models import Json

if TYPE_CHECKING:
    from kubernetes.client import ApiClient


class TransportError(Exception):
    """No response: the request may or may not have happened."""


class Refused(Exception):
    """Not sent: the target cannot be reached by policy or configuration."""


@dataclass(frozen=True, slots=True)
class Request:
    cluster: str
    tenant: str
    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    data: Any = None

    def header(self, name: str) -> str | None:
        exact = self.headers.get(name)
        if exact is not None:
            return exact
        low = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == low), None)


class Transport(Protocol):
    async def call(self, req: Request) -> Response: ...

    async def close(self) -> None: ...


def decode_body(raw: bytes | None) -> Json:
    """JSON body or ``None`` (an HTML error page from a proxy decodes to ``None``)."""
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except ValueError:   # orjson.JSONDecodeError is one
        return None


class KubeTransport:
    """``client_for(cluster, tenant) -> kubernetes.client.ApiClient`` comes from the registry.

    Caveat: ``client_for`` may raise for an unknown cluster or tenant; that becomes ``Refused``."""

    def __init__(self, client_for: Callable[[str, str], Any], max_threads: int = 16,
                 timeout: tuple[float, float] = (5.0, 30.0), before_send: Callable[[Request], None] | None = None):
        self._client_for = client_for
        self._before_send = before_send   # e.g. kfold.daemon.leader's fence: raises to send nothing (TransportError)
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="kfold-exec",
                                        initializer=name_this_thread, initargs=("kfold-exec",))
        self._timeout = timeout

    async def call(self, req: Request) -> Response:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._call_sync, req)

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _client(self, req: Request) -> "ApiClient":
        try:
            return self._client_for(req.cluster, req.tenant)
        except Exception as exc:  # registry errors: not found, out of bounds, bad kubeconfig
            raise Refused(f"cluster {req.cluster or '(home)'}: {exc}") from None

    def _call_sync(self, req: Request) -> Response:
        api = self._client(req)
        headers = {"Accept": "application/json", "Content-Type": req.content_type}
        encoded = getattr(api, "send_encoded", None)   # the registry's client: body encoded once, here
        try:
            method, url, hdrs, body, _ = api.param_serialize(
                req.method, req.path, query_params=list(req.query), header_params=headers,
                body=req.body if encoded is None else None, auth_settings=["BearerToken"])
            if encoded is not None and req.body is not None:
                body = _json_bytes(api, req.body)
            if self._before_send is not None:   # in the sending thread, as late as possible
                self._before_send(req)
            if encoded is None:
                resp = api.call_api(method, url, header_params=hdrs, body=body, _request_timeout=self._timeout)
                raw = resp.read()
            else:
                resp = encoded(method, url, hdrs, body, self._timeout)
                try:
                    raw = resp.data
                finally:
                    resp.release_conn()
        except Exception as exc:
            if _refused_before_sending(exc):
                raise Refused(f"cluster {req.cluster or '(home)'}: {exc}") from None
            raise _transport_error(exc) from None
        return Response(resp.status, dict(resp.headers), decode_body(raw))


def _json_bytes(api: Any, body: Any) -> bytes:
    """``body`` as JSON; what orjson cannot encode directly (a client model, say) goes through the
    client library's own ``sanitize_for_serialization`` first."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return orjson.dumps(api.sanitize_for_serialization(body))


class NotSent(Exception):
    """Raised by a client before any byte left the process (e.g. the registry's bounds check):
    the request certainly did not happen, so its outcome is ``refused``, never in doubt."""


def _refused_before_sending(exc: Exception) -> bool:
    return isinstance(exc, NotSent)


def _transport_error(exc: Exception) -> Exception:
    """Map client-library failures at the boundary: everything without a status is in doubt."""
    from kubernetes.client.exceptions import ApiException
    if isinstance(exc, ApiException) and exc.status:
        return TransportError(f"unexpected API exception {exc.status}: {exc.reason}")
    from engine.effects.io.kube_errors import transport_reason
    return TransportError(transport_reason(exc))
