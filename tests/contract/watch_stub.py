"""A local stub apiserver for LIST and WATCH of one resource, with scripted faults.

Each LIST request takes the next reply from ``lists``, each WATCH request (``watch=true``) the next
from ``watches``. When a script runs out, a LIST answers ``default_list`` and a WATCH stalls (sends
headers, then nothing) until the stub stops. Every request is recorded with its parsed query.

Replies:
- ``ListReply(items, rv)``: a 200 list.
- ``WatchReply(events, end)``: a 200 chunked stream of events (dicts, or raw ``bytes`` lines, or a
  float = pause that many seconds), then ``end``: "close" (clean end, like a server timeout),
  "stall" (keep the connection open, send nothing, until the client hangs up) or "reset" (TCP RST mid-stream).
- ``StatusReply(code, reason, retry_after)``: an error with a ``Status`` body.
Every reply has ``date``: the ``Date`` header sent (``None`` = no header; any string is sent as is,
garbage included). The stub never reads the wall clock for it.
"""
from __future__ import annotations

import json
import select
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable
from urllib.parse import parse_qs, urlsplit

from kubernetes import client as k8s

DEFAULT_DATE = "Tue, 01 Jan 2030 00:00:00 GMT"   # 1_893_456_000_000 ms
DEFAULT_DATE_MS = 1_893_456_000_000


@dataclass
class ListReply:
    items: list[dict[str, Any]] = field(default_factory=list)
    rv: str = "100"
    date: str | None = DEFAULT_DATE


@dataclass
class WatchReply:
    events: Iterable[Any] = ()
    end: str = "close"          # close | stall | reset
    date: str | None = DEFAULT_DATE
    lines_per_chunk: int = 1


@dataclass
class StatusReply:
    code: int
    reason: str = ""
    message: str = ""
    retry_after: str | None = None
    date: str | None = DEFAULT_DATE


@dataclass(frozen=True)
class Request:
    kind: str                   # "list" | "watch"
    path: str
    query: dict[str, str]


def pod(name: str, rv: str, namespace: str = "ns", uid: str = "", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                         "resourceVersion": rv, "labels": dict(labels)}}


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(rv: str) -> dict[str, Any]:
    return event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}})


def gone_event(message: str = "too old resource version") -> dict[str, Any]:
    return event("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "code": 410, "reason": "Expired", "message": message})


class StubApiserver:
    def __init__(self, lists: Iterable[Any] = (), watches: Iterable[Any] = (),
                 default_list: ListReply | None = None):
        self.lists = list(lists)
        self.watches = list(watches)
        self.default_list = default_list or ListReply()
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "StubApiserver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "StubApiserver":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def api_client(self) -> k8s.ApiClient:
        cfg = k8s.Configuration()
        cfg.host = self.url
        return k8s.ApiClient(cfg)

    def of_kind(self, kind: str) -> list[Request]:
        return [r for r in self.requests if r.kind == kind]

    def next_reply(self, raw_path: str) -> Any:
        parts = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        kind = "watch" if query.get("watch") in ("true", "1", "True") else "list"
        with self._lock:
            self.requests.append(Request(kind, parts.path, query))
            script = self.watches if kind == "watch" else self.lists
            if script:
                return script.pop(0)
        return self.default_list if kind == "list" else WatchReply(end="stall")


def _handler_for(stub: StubApiserver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            reply = stub.next_reply(self.path)
            if isinstance(reply, ListReply):
                self._send_list(reply)
            elif isinstance(reply, StatusReply):
                self._send_status(reply)
            else:
                self._send_watch(reply)

        def _head(self, code: int, date: str | None, extra: dict[str, str]) -> None:
            self.send_response_only(code)
            if date is not None:
                self.send_header("Date", date)
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()

        def _send_body(self, code: int, date: str | None, body: dict[str, Any], extra: dict[str, str]) -> None:
            data = json.dumps(body).encode()
            self._head(code, date, {"Content-Type": "application/json",
                                    "Content-Length": str(len(data)), **extra})
            self.wfile.write(data)

        def _send_list(self, r: ListReply) -> None:
            body = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": r.rv},
                    "items": r.items}
            self._send_body(200, r.date, body, {})

        def _send_status(self, r: StatusReply) -> None:
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": r.code,
                    "reason": r.reason, "message": r.message}
            extra = {"Retry-After": r.retry_after} if r.retry_after is not None else {}
            self._send_body(r.code, r.date, body, extra)

        def _send_watch(self, r: WatchReply) -> None:
            self._head(200, r.date, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
            try:
                self._stream(r)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return
            self._finish(r.end)

        def _stream(self, r: WatchReply) -> None:
            pending: list[bytes] = []
            for item in r.events:
                if isinstance(item, (int, float)):
                    self._chunk(pending)
                    if stub.stopping.wait(item):
                        return
                    continue
                pending.append(item if isinstance(item, bytes) else json.dumps(item).encode())
                if len(pending) >= r.lines_per_chunk:
                    self._chunk(pending)
            self._chunk(pending)

        def _chunk(self, lines: list[bytes]) -> None:
            if lines:
                data = b"".join(line + b"\n" for line in lines)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                lines.clear()

        def _finish(self, end: str) -> None:
            if end == "close":
                self.wfile.write(b"0\r\n\r\n")
            elif end == "stall":
                self._hold_until_client_leaves()
                self.close_connection = True
            elif end == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

        def _hold_until_client_leaves(self) -> None:
            """Send nothing until the stub stops or the client hangs up: a stalled stream the
            observer abandoned must not hold a server thread until the end of the test."""
            while not stub.stopping.wait(0.05):
                readable, _, _ = select.select([self.connection], [], [], 0)
                if readable:
                    try:
                        if not self.connection.recv(1, socket.MSG_PEEK):
                            return          # EOF: the client closed the stream
                    except OSError:
                        return

        def finish(self) -> None:
            try:
                super().finish()
            except OSError:
                pass

    return Handler
