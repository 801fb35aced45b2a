"""Map what the Kubernetes client raises onto the journal's ``Outcome.result`` vocabulary.

This is the executor's boundary (httpcore ``map_exceptions`` style): one function, ``classify``,
decides what an exception *means* for the machine that asked.

Guarantees:
- Apiserver errors are classified by the Status body's ``reason`` (``json.loads(e.body)``), never
  by ``ApiException.reason``, which is only the HTTP phrase. ``AlreadyExists`` and ``Conflict``
  are both 409 and are told apart by reason alone.
- An empty or missing reason matches no specific reason; the code class decides, and a 404 or 409
  without a Status reason is ``error``: a 404 from a proxy or a missing resource type is no proof
  that an object is absent. ``NotFound`` also requires ``details.name`` for the same reason.
- A transport error (reset, timeout, DNS, refused connection) is ``transient``: the request may or
  may not have happened. It is never ``not_found``.
- ``parse_http_date`` never raises: a missing or malformed Date is ``None``.

Caveats:
- ``ApiException(status=0)`` is what the client raises for TLS errors (and for a request it could
  not build); it is classified ``transient`` because nothing proves the request was not sent.
"""
from __future__ import annotations

import json
import socket
from typing import Any, NamedTuple

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from engine.effects.io.clock import parse_http_date  # noqa: F401 - one parser, re-exported for callers

_BY_REASON = {
    "AlreadyExists": "already_exists",
    "Conflict": "conflict",
    "NotFound": "not_found",
    "Gone": "gone",
    "Expired": "gone",
    "Forbidden": "forbidden",
    "Invalid": "invalid",
    "BadRequest": "invalid",
    "TooManyRequests": "transient",
    "ServerTimeout": "transient",
    "Timeout": "transient",
    "InternalError": "transient",
    "ServiceUnavailable": "transient",
}
_TRANSPORT = (urllib3.exceptions.HTTPError, ConnectionError, socket.gaierror, TimeoutError, OSError)


class Classified(NamedTuple):
    result: str
    status_reason: str
    code: int
    message: str
    retry_after_ms: int | None


def classify(exc: BaseException) -> Classified:
    """What ``exc`` means: ``(result, status_reason, code, message, retry_after_ms)``."""
    if isinstance(exc, ApiException):
        return _from_api(exc)
    if isinstance(exc, _TRANSPORT):
        return Classified("transient", "", 0, transport_reason(exc), None)
    return Classified("error", "", 0, f"unexpected error: {_describe(exc)}", None)


def _from_api(exc: ApiException) -> Classified:
    code = int(exc.status or 0)
    if code == 0:
        return Classified("transient", "", 0, f"no HTTP response: {exc.reason}", None)
    status = status_body(exc.body)
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or f"HTTP {code} {exc.reason or ''}".strip())
    return Classified(_result(code, reason, status), reason, code, message, _retry_after(exc, status))


def _result(code: int, reason: str, status: dict[str, Any]) -> str:
    by_reason = _BY_REASON.get(reason)
    if by_reason == "not_found" and not (status.get("details") or {}).get("name"):
        return "error"  # "the server could not find the requested resource": no object named
    return by_reason or _by_code(code)


def _by_code(code: int) -> str:
    """The code class, used only when the Status reason names nothing we know."""
    if code == 410:
        return "gone"
    if code == 403:
        return "forbidden"
    if code in (400, 422):
        return "invalid"
    if code == 429 or 500 <= code <= 599:
        return "transient"
    return "error"


def status_body(body: Any) -> dict[str, Any]:
    """The body as a ``Status`` object, or ``{}`` if it is not one (HTML, garbage, empty)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return {}
    return data if isinstance(data, dict) and data.get("kind") == "Status" else {}


def _retry_after(exc: ApiException, status: dict[str, Any]) -> int | None:
    seconds = _seconds((exc.headers or {}).get("Retry-After"))
    if seconds is None:
        seconds = _seconds((status.get("details") or {}).get("retryAfterSeconds"))
    return None if seconds is None else seconds * 1000


def _seconds(value: Any) -> int | None:
    try:
        seconds = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_ERRNO_WORDS = {"ECONNREFUSED": "connection refused", "ECONNRESET": "connection reset",
                "ETIMEDOUT": "connection timed out", "EHOSTUNREACH": "host unreachable",
                "ENETUNREACH": "network unreachable", "EPIPE": "connection closed"}


def transport_reason(exc: BaseException) -> str:
    """A transport failure in a few words (``connection refused``, ``name resolution failed``,
    ``TLS: certificate verify failed``, ``read timed out``): the innermost cause, without the
    client's internal class names and object addresses."""
    import errno
    import ssl
    chain, cur = [], exc
    while isinstance(cur, BaseException) and all(cur is not c for c in chain):
        chain.append(cur)
        nxt = getattr(cur, "reason", None)
        cur = nxt if isinstance(nxt, BaseException) else (cur.__cause__ or cur.__context__)
    for cur in reversed(chain):   # innermost first
        if isinstance(cur, ssl.SSLError):
            return f"TLS: {getattr(cur, 'reason', None) or cur.strerror or cur}".replace("_", " ").lower()
        if isinstance(cur, socket.gaierror):
            return "name resolution failed"
        if isinstance(cur, OSError) and cur.errno:
            name = errno.errorcode.get(cur.errno, "")
            return _ERRNO_WORDS.get(name) or (cur.strerror or name).lower()
    text = " ".join(str(c) for c in chain)
    for words, short in (("Errno 111", "connection refused"), ("Connection refused", "connection refused"),
                         ("Name or service not known", "name resolution failed"),
                         ("Temporary failure in name resolution", "name resolution failed"),
                         ("No route to host", "host unreachable"), ("CERTIFICATE_VERIFY_FAILED", "TLS: certificate verify failed"),
                         ("Read timed out", "read timed out"), ("timed out", "connection timed out"),
                         ("Connection reset", "connection reset"), ("RemoteDisconnected", "connection closed by the server")):
        if words in text:
            return short
    return f"transport error: {_describe(chain[-1])}"
