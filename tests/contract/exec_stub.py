"""A local HTTP stub apiserver: ``FakeApiServer`` served over real HTTP for the real executor.

``with ExecStub() as stub:`` starts it on 127.0.0.1 (ephemeral port) in a thread; ``stub.server``
is the ``FakeApiServer`` behind it (inject faults there), ``stub.api_client()`` a real
``kubernetes.client.ApiClient`` pointing at it.

Guarantees: the Date header is exactly the fake's (``send_response_only``: the stdlib handler's
own wall-clock Date is never sent); an injected ``reset`` closes the socket without a response.
"""
from __future__ import annotations

import json
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from engine.effects.io.transport import TransportError
from engine.effects.io.fake import FakeApiServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stub: "ExecStub"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        try:
            with self.stub.lock:
                reply, override = self.stub.server.handle(self.command, url.path, dict(parse_qsl(url.query)), body)
        except TransportError:
            self._reset()
            return
        payload = override if override is not None else json.dumps(reply.data).encode()
        self.send_response_only(reply.status)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class ExecStub:
    def __init__(self, server: FakeApiServer | None = None):
        self.server = server or FakeApiServer()
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"stub": self})
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def api_client(self) -> Any:
        from kubernetes.client import ApiClient, Configuration
        cfg = Configuration(host=self.url)
        cfg.retries = False  # a reset must reach the executor, not be retried by urllib3
        return ApiClient(cfg)

    def __enter__(self) -> "ExecStub":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._http.shutdown()
        self._http.server_close()


# -- the executor's two ports, for contract tests ------------------------------------------------
import pytest  # noqa: E402

from engine.effects.io.clock import ServerClock  # noqa: E402
from engine.effects.io.executor import Executor  # noqa: E402
from engine.effects.io.transport import KubeTransport  # noqa: E402
from engine.effects.io.fake import FakeTransport  # noqa: E402


class Port:
    """An executor bound to one ``FakeApiServer``; ``run(effect)`` -> Outcome draft."""

    def __init__(self, server: FakeApiServer, transport, env):
        self.server = server
        self.clock = ServerClock()
        self.outcomes = []
        self.executor = Executor(transport, self.clock, self._sink, env=env)

    async def _sink(self, outcome):
        self.outcomes.append(outcome)

    async def run(self, effect, attempt: int = 0):
        return await self.executor.run(effect, attempt)


ENV = {"KFOLD_TEST_TOKEN": "s3cr3t-value"}


@pytest.fixture(params=["fake", "http-stub"])
async def port(request):
    server = FakeApiServer()
    server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}})
    if request.param == "fake":
        p = Port(server, FakeTransport(server), ENV)
        yield p
        await p.executor.close()
        return
    with ExecStub(server) as stub:
        client = stub.api_client()
        p = Port(server, KubeTransport(lambda _c, _t: client, max_threads=4), ENV)
        yield p
        await p.executor.close()
