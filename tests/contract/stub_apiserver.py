"""A tiny recording apiserver stub: real HTTP on 127.0.0.1 (ephemeral port), canned answers.

    with StubApiServer() as stub:
        stub.answer("DELETE", "/api/v1/namespaces/ns/pods/p", 200, {"kind": "Pod", ...})
        client = stub.api_client()      # the REAL kubernetes ApiClient, pointed at the stub
        executor = Executor(KubeTransport(lambda cluster, tenant: client), ServerClock(), sink)
        out = await executor.run(effect)  # the daemon's own path: engine.effects.io.ops -> KubeTransport
        stub.requests[-1].body          # what the client actually sent

Guarantees: every request is recorded (method, path, query, headers, JSON body) before it is
answered. An unanswered route gets a 599 Status so a missing stub never looks like NotFound.
The Date header is exactly the answer's ``date`` (default ``DATE``; ``None`` sends none): the
stdlib handler's own wall-clock Date is never sent.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes.client import ApiClient, Configuration, CoreV1Api

DATE = "Tue, 01 Jan 2030 00:00:00 GMT"
_DEFAULT = object()


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Answer:
    status: int
    body: Any
    date: str | None = DATE
    headers: dict[str, str] = field(default_factory=dict)
    once: bool = False


def status_body(code: int, reason: str, message: str = "", name: str = "", kind: str = "") -> dict[str, Any]:
    """A Status exactly as the apiserver writes it."""
    details = {"name": name, "kind": kind} if name else {}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details, "code": code}


class StubApiServer:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._answers: dict[tuple[str, str], list[Answer]] = {}
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, method: str, path: str, status: int, body: Any, date: Any = _DEFAULT,
               headers: dict[str, str] | None = None, once: bool = False) -> None:
        """Answer ``method path`` (query ignored); ``once`` answers are used first, in order."""
        a = Answer(status, body, DATE if date is _DEFAULT else date, headers or {}, once)
        with self._lock:
            self._answers.setdefault((method, path), []).append(a)

    def api_client(self) -> ApiClient:
        """A real ``ApiClient`` for the stub; urllib3 retries off, so every request is seen once."""
        cfg = Configuration(host=self.url)
        cfg.retries = False
        return ApiClient(cfg)

    def core_v1(self) -> CoreV1Api:
        return CoreV1Api(self.api_client())

    def _take(self, method: str, path: str) -> Answer:
        with self._lock:
            queue = self._answers.get((method, path), [])
            for i, a in enumerate(queue):
                if a.once:
                    return queue.pop(i)
            if queue:
                return queue[-1]
        return Answer(599, status_body(599, "", f"stub: no answer for {method} {path}"))

    def __enter__(self) -> "StubApiServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_for(stub: StubApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            stub.requests.append(Request(self.command, url.path, parse_qs(url.query),
                                         dict(self.headers.items()), json.loads(raw) if raw else None))
            self._reply(stub._take(self.command, url.path))

        def _reply(self, a: Answer) -> None:
            payload = a.body if isinstance(a.body, bytes) else json.dumps(a.body).encode()
            self.send_response_only(a.status)
            headers = {"Content-Type": "application/json", **a.headers, "Content-Length": str(len(payload))}
            if a.date is not None:
                headers["Date"] = a.date
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
