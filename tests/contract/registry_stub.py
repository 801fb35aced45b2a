"""A tiny local apiserver stub for the registry's contract tests (stdlib http.server on 127.0.0.1).

It records every request that ARRIVES (method, path, the raw request-target exactly as it came
off the wire, Authorization), so a test can prove that a
refused request never left the process. It answers: node list (with allocatable GPUs), namespaced
lists (empty), ``/version``, a Secret GET from ``secrets``; 401 for an unknown bearer token; 404
Status for anything else; a
fixed ``Date`` header so registration time is server time, not the test's clock.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

FIXED_DATE = "Sat, 01 Jan 2000 00:00:00 GMT"
FIXED_DATE_MS = 946684800000


def node(name: str, **allocatable: str) -> dict:
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def kubeconfig(server: str, token: str | None, *, user_extra: str = "", cluster_extra: str = "") -> str:
    """A one-context kubeconfig (cluster and user both named ``stub``); ``token=None`` leaves the
    user with only ``user_extra`` (each extra starts with a newline and a 4-space indent)."""
    token_line = f"\n    token: {token}" if token is not None else ""
    return f"""apiVersion: v1
kind: Config
current-context: stub
contexts:
- name: stub
  context: {{cluster: stub, user: stub}}
clusters:
- name: stub
  cluster:
    server: {server}{cluster_extra}
users:
- name: stub
  user:{token_line}{user_extra}
"""


@dataclass
class Arrived:
    method: str
    path: str
    authorization: str
    target: str = ""   # the raw request-target (path and query, undecoded)
    user_agent: str = ""
    at: float = 0.0    # time.monotonic() when it arrived


@dataclass
class ApiStub:
    tokens: set[str] = field(default_factory=lambda: {"stub-token"})
    nodes: list[dict] = field(default_factory=list)
    date: str = FIXED_DATE
    arrived: list[Arrived] = field(default_factory=list)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)   # (ns, name) -> data
    server: ThreadingHTTPServer | None = None
    tls: ssl.SSLContext | None = None   # set by ``start(stub, tls=...)``: serve HTTPS
    # Set: the node list is held (unanswered, the connection open) until it is set or 60 s pass.
    hold_nodes: threading.Event | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def kubeconfig(self, token: str = "stub-token", **extra: str) -> str:
        return kubeconfig(self.url, token, **extra)

    def paths(self) -> list[str]:
        return [a.path for a in self.arrived]

    def answer(self, handler: BaseHTTPRequestHandler) -> tuple[int, dict]:
        path = handler.path.split("?", 1)[0]
        self.arrived.append(Arrived(handler.command, path, handler.headers.get("Authorization", ""), handler.path,
                                    handler.headers.get("User-Agent", ""), time.monotonic()))
        client_cert = self.tls is not None and bool(handler.connection.getpeercert())
        if not client_cert and handler.headers.get("Authorization", "") not in {f"Bearer {t}" for t in self.tokens}:
            return 401, status(401, "Unauthorized", "Unauthorized")
        if path == "/api/v1/nodes":
            if self.hold_nodes is not None:
                self.hold_nodes.wait(60)
            return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": self.nodes}
        if path.startswith("/api/v1/namespaces/") and "/secrets/" in path:
            ns, name = path.split("/")[4], path.split("/")[6]
            if (ns, name) in self.secrets:
                return 200, {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns},
                             "data": self.secrets[(ns, name)]}
            return 404, status(404, "NotFound", f'secrets "{name}" not found')
        if path == "/version":
            return 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-stub"}
        if path.startswith("/api/v1/namespaces/") and path.count("/") == 5:
            return 200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}
        return 404, status(404, "NotFound", f"{path} not found")


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}


def _handler(stub: ApiStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            code, body = stub.answer(self)
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def date_time_string(self, timestamp=None) -> str:  # the server's clock is the stub's
            return stub.date

        def log_message(self, *args) -> None:
            pass

    return Handler


def start(stub: ApiStub, tls: ssl.SSLContext | None = None) -> ApiStub:
    """Serve ``stub`` on 127.0.0.1 (HTTPS with ``tls``; a verified client certificate then
    authenticates like a known token)."""
    stub.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    if tls is not None:
        stub.tls = tls
        stub.server.socket = tls.wrap_socket(stub.server.socket, server_side=True)
    threading.Thread(target=stub.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return stub


@pytest.fixture
def api_stub():
    stub = start(ApiStub(nodes=[node("n1", **{"nvidia.com/gpu": "8"}),
                                node("n2", **{"amd.com/gpu": "4", "nvidia.com/gpu": "bogus"}),
                                node("n3")]))
    yield stub
    if stub.hold_nodes is not None:
        stub.hold_nodes.set()
    stub.server.shutdown()
    stub.server.server_close()
