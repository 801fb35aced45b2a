"""Raw LIST / WATCH requests through the kubernetes client, and a thread that pumps a watch stream.

Why not ``kubernetes.watch.Watch.stream``: it turns a 410 into an exception only sometimes, hides
BOOKMARKs' raw objects, deserializes into models we do not want, and cannot tell "server ended the
stream" from "stream stalled". We send the request through ``ApiClient.param_serialize`` +
the client's pool manager (auth, TLS and proxies stay the client's job; the response is the
raw, unread urllib3 response; see ``open_get`` for why not ``call_api``) and read the bytes ourselves.

Why a thread per stream: the official client is blocking (urllib3). One reader thread per open
watch blocks in ``recv`` and hands whole lines, in batches, to the event loop through a bounded
``asyncio.Queue``. The event loop never blocks, so idle detection (``asyncio.timeout``) keeps
working while the thread is stuck, and the bounded queue carries backpressure from the journal
back to the socket (the thread stops reading when the loop is behind). ``kubernetes.aio`` would
need a second client stack next to the executor's; a thread costs one OS thread per watched kind.

Guarantees:
- ``HttpStatusError`` carries the HTTP code, the Status ``reason`` parsed from the body (never
  the HTTP phrase) and ``Retry-After`` in seconds when given.
- ``LinePump`` delivers every complete line in order, then exactly one ``StreamEnd`` (with the
  error when the stream broke); batches already queued when one is taken come merged into it.
  A partial last line is dropped when the stream broke, delivered when it ended cleanly.
  ``close()`` unblocks the reader thread (socket read-shutdown).
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Callable

import orjson
import urllib3

from engine.effects.io.clock import parse_http_date
from engine.effects.k8s_names import DNS1123_LABEL, check
from engine.effects.io.os_thread import name_this_thread
from engine.effects.models import Json

READ_CHUNK = 65536
QUEUE_BATCHES = 64
MERGED_LINES = 1000


def resource_path(api_version: str, plural: str, namespace: str = "") -> str:
    """``/api/v1[/namespaces/ns]/pods`` or ``/apis/group/version[/namespaces/ns]/plural``; the
    namespace must be a DNS-1123 label (``InvalidObjectName`` otherwise, before any request)."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if not namespace:
        return f"{base}/{plural}"
    return f"{base}/namespaces/{check(namespace, DNS1123_LABEL, 'watched namespace')}/{plural}"


class HttpStatusError(Exception):
    """A non-2xx answer from the apiserver."""

    def __init__(self, code: int, reason: str, message: str, retry_after_s: float | None):
        super().__init__(f"HTTP {code} {reason}: {message}".strip())
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after_s = retry_after_s


def open_get(api_client: Any, path: str, query: list[tuple[str, Any]],
             timeout: tuple[float, float]) -> urllib3.BaseHTTPResponse:
    """Send a GET (blocking) and return the unread urllib3 response, whatever its status.

    The URL and headers (auth included) come from ``ApiClient.param_serialize``; the request goes
    through the client's own pool manager (TLS, client certificates, proxies) but with
    ``retries=False``: the client's default urllib3 ``Retry(3)`` would silently sleep a 429's
    ``Retry-After`` and resend, hiding it from the observer's own backoff and counters."""
    method, url, headers, _body, _post = api_client.param_serialize(
        method="GET", resource_path=path, query_params=list(query),
        header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
    resp = api_client.rest_client.pool_manager.request(
        method, url, headers=headers, retries=False, preload_content=False,
        timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]))
    note = getattr(api_client, "note_request", None)   # the registry's client counts what it sends
    if note is not None:
        note(method, url, resp.status)
    return resp


def raise_for_status(resp: Any) -> None:
    """Read and close a non-2xx response, raising ``HttpStatusError``; a 2xx passes untouched."""
    if 200 <= resp.status <= 299:
        return
    try:
        body = resp.data or b""
    finally:
        close_quietly(resp)
    status = _json_or_empty(body)
    reason = status.get("reason", "") if isinstance(status, dict) else ""
    message = status.get("message", "") if isinstance(status, dict) else ""
    raise HttpStatusError(resp.status, reason, message, retry_after_seconds(resp.headers))


def read_json(resp: urllib3.BaseHTTPResponse) -> Json:
    """The whole body of a 2xx response as JSON (blocking); closes the response."""
    try:
        return orjson.loads(resp.data)
    finally:
        close_quietly(resp)


def retry_after_seconds(headers: Any) -> float | None:
    """``Retry-After`` as seconds: delta-seconds, or an HTTP-date relative to the response's Date."""
    value = (headers or {}).get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    when, date = parse_http_date(value), parse_http_date(headers.get("Date"))
    return None if when is None or date is None else max(0.0, (when - date) / 1000)


def close_quietly(resp: Any) -> None:
    for step in (resp.close, resp.release_conn):
        try:
            step()
        except Exception:  # closing a broken connection may raise; nothing left to do
            pass


def _json_or_empty(body: bytes) -> Json:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}


@dataclass(frozen=True)
class StreamEnd:
    """The stream is over: ``error`` is None when the server ended it cleanly."""

    error: BaseException | None = None


class LinePump:
    """Reads a streaming response in a daemon thread; ``await next(timeout)`` yields line batches."""

    def __init__(self, resp: Any, loop: asyncio.AbstractEventLoop, name: str = "watch"):
        self._resp = resp
        self._loop = loop
        self._queue: asyncio.Queue = asyncio.Queue()
        self._credits = threading.Semaphore(QUEUE_BATCHES)
        self._closed = threading.Event()
        self._end: StreamEnd | None = None   # met while merging batches (``next``), returned next
        self._thread = threading.Thread(target=self._run, name=f"kfold-{name}", daemon=True)

    def start(self) -> "LinePump":
        self._thread.start()
        return self

    async def next(self, timeout: float) -> list[bytes] | StreamEnd:
        """The next batch of lines or the end; ``asyncio.TimeoutError`` after ``timeout`` of silence.

        A cancellation always propagates, even when a batch landed in the same loop iteration
        (the batch stays queued). Not ``asyncio.wait_for``: on Python 3.11 it returns the inner
        result and swallows a cancel that arrives once the inner ``get()`` has finished, so a
        cancelled observer would keep watching forever (bpo-42130, fixed only in 3.12)."""
        if self._end is not None:
            end, self._end = self._end, None
            return end
        async with asyncio.timeout(timeout):
            item = await self._queue.get()
        self._credits.release()
        if isinstance(item, StreamEnd):
            return item
        return self._with_queued(item)

    def _with_queued(self, lines: list[bytes]) -> list[bytes]:
        """``lines`` and every batch already queued behind them, as one batch (up to
        ``MERGED_LINES``): under load the reader queues many small batches, and each one the
        observer hands over separately is a journal commit it waits for. A ``StreamEnd`` met here
        is kept for the next call."""
        while len(lines) < MERGED_LINES and not self._queue.empty():
            more = self._queue.get_nowait()
            self._credits.release()
            if isinstance(more, StreamEnd):
                self._end = more
                break
            lines = lines + more
        return lines

    def close(self) -> None:
        """Stop reading (from the loop thread); the reader thread exits promptly."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._resp.shutdown()
        except Exception:  # already released or not shut-downable: the read timeout ends it
            pass

    def _run(self) -> None:
        name_this_thread("kfold-watch")
        error: BaseException | None = None
        try:
            self._pump_lines()
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, which classifies it
            error = exc
        finally:
            close_quietly(self._resp)
            self._put(StreamEnd(error))

    def _pump_lines(self) -> None:
        partial = b""
        for chunk in self._resp.stream(READ_CHUNK, decode_content=True):
            if self._closed.is_set():
                return
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()
            batch = [line for line in lines if line and not line.isspace()]   # (``strip`` copied each line)
            if batch and not self._put(batch):
                return
        if partial.strip():
            self._put([partial])

    def _put(self, item: Any) -> bool:
        """Block until the queue has room (backpressure), then hand ``item`` to the loop.
        False if the pump was closed or the loop is gone."""
        while not self._credits.acquire(timeout=0.2):
            if self._closed.is_set() or self._loop.is_closed():
                return False
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # loop closed
            return False
        return True


def decode_event(line: bytes) -> tuple[str, dict[str, Any]]:
    """A watch line -> ``(type, object)``; ``ValueError`` on anything else."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"watch line is not JSON: {exc}") from None
    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
        raise ValueError(f"watch line is not an event: {line[:120]!r}")
    return str(event.get("type", "")), event["object"]


Redactor = Callable[[str, dict[str, Any]], dict[str, Any]]
