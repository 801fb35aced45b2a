"""``/healthz``, ``/readyz`` and ``/metrics`` (Prometheus text format 0.0.4).

Why a stdlib ``asyncio.start_server`` and not aiohttp: three GET endpoints with tiny bodies need
no framework; it runs on the daemon's own event loop (no thread), adds no dependency to the
install, and cannot block the committer. aiohttp is installed only as a transitive dependency of
``kubernetes`` and is not something kfold should start relying on.

Guarantees:
- ``/healthz`` is 200 while the committer task is alive (a dead committer = restart me).
- ``/readyz`` is 200 only after every observer has journaled its initial list (or found its kind
  not served, ``Observer.absent``: a cluster without the Repo CRD is ready); with leader
  election its second line says ``leader of lease NS/NAME, term N`` or ``standby for lease ...``
  (a standby is ready: its watches are warm). ``/metrics`` then adds ``kfold_leader``,
  ``kfold_leader_transitions_total`` and ``kfold_leader_fenced_requests_total`` (``leader_metrics``).
- ``/metrics``: the families of ``kfold.daemon.metrics`` (docs/metrics.md lists them), rendered by
  prometheus_client from the daemon's own registry.
- ``servers``: the probes on ``http.listen``, plain HTTP; ``/metrics`` beside them when
  ``metrics.listen`` is null, else alone on that port, over HTTPS behind ``kfold.daemon.secure``'s
  TokenReview + SubjectAccessReview unless ``metrics.secure`` is false.
- A server that cannot bind raises ``BindError`` naming its config field.
"""
from __future__ import annotations

import asyncio
import http
import ssl
import time
from typing import Any, Awaitable, Callable, Mapping

from kfold.daemon.metrics import CONTENT_TYPE, Histogram, Metrics, Scrape, families_text, leader_families

__all__ = ["BindError", "HttpServer", "Histogram", "Metrics", "routes_for", "servers", "leader_text", "leader_metrics"]

Guard = Callable[[str, str, Mapping[str, str]], Awaitable["tuple[int, str] | None"]]
MAX_HEADERS = 100


class BindError(OSError):
    """A listen address that could not be bound; ``field`` is its config field (``http.listen``)."""

    def __init__(self, field: str, exc: OSError):
        super().__init__(exc.errno, exc.strerror or str(exc))
        self.field = field


class HttpServer:
    """``routes``: path -> callable returning (status, content_type, body). ``tls``: a callable
    returning the context each connection's handshake uses (``kfold.daemon.secure.ServingCert``);
    ``guard``: awaited before any route, with the method, path and headers (lower-cased names);
    (status, body) refuses the request."""

    def __init__(self, host: str, port: int, routes: dict[str, Callable[[], tuple[int, str, str]]],
                 tls: Callable[[], ssl.SSLContext] | None = None, guard: Guard | None = None,
                 field: str = "http.listen"):
        self.host, self.port, self.routes = host, port, routes
        self.tls, self.guard, self.field = tls, guard, field
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._handle, self.host, self.port)
        except OSError as exc:
            raise BindError(self.field, exc) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):  # not wait_for: it can swallow a cancel on 3.11
                if self.tls is not None:
                    await writer.start_tls(self.tls())
                line = (await reader.readline()).decode("latin-1").split()
                headers: dict[str, str] = {}
                while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, sep, value = raw.decode("latin-1").partition(":")
                    if sep and len(headers) < MAX_HEADERS:
                        headers[name.strip().lower()] = value.strip()
                status, ctype, body = await self._answer(line, headers)
            data = body.encode()
            extra = 'WWW-Authenticate: Bearer realm="kfold"\r\n' if status == 401 else ""
            writer.write(f"HTTP/1.1 {status} {_phrase(status)}\r\nContent-Type: {ctype}\r\n{extra}"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (TimeoutError, ConnectionError, ssl.SSLError, ValueError):   # ValueError: a line over 64 KiB
            pass
        finally:
            writer.close()

    async def _answer(self, line: list[str], headers: Mapping[str, str]) -> tuple[int, str, str]:
        path = line[1].split("?")[0] if len(line) >= 2 else ""
        if self.guard is not None and path in self.routes and line[0] == "GET":   # a known route only
            refused = await self.guard(line[0], path, headers)
            if refused is not None:
                return refused[0], "text/plain", refused[1]
        return self._route(line)

    def _route(self, line: list[str]) -> tuple[int, str, str]:
        if len(line) < 2 or line[0] != "GET":
            return 405, "text/plain", "only GET\n"
        handler = self.routes.get(line[1].split("?")[0])
        return handler() if handler else (404, "text/plain", "not found\n")


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def servers(cfg: Any, routes: dict[str, Callable[[], tuple[int, str, str]]], auth: Any = None,
            cert: Any = None) -> list[HttpServer]:
    """The probes' server, and ``/metrics``'s own when ``metrics.listen`` is set (module contract).
    ``auth`` (``DelegatedAuth``) and ``cert`` (``ServingCert``) are used with ``metrics.secure``."""
    page = {"/metrics": routes["/metrics"]}
    probes = {p: f for p, f in routes.items() if p != "/metrics"}
    if cfg.metrics.listen is None:
        return [HttpServer(*cfg.http.host_port, {**probes, **page})]
    secure = cfg.metrics.secure
    return [HttpServer(*cfg.http.host_port, probes),
            HttpServer(*cfg.metrics.host_port, page, tls=cert.current if secure else None,
                       guard=auth.check if secure else None, field="metrics.listen")]


def routes_for(daemon: Any, observers: list[Any], metrics: Metrics, leader: Any = None
               ) -> dict[str, Callable[[], tuple[int, str, str]]]:
    def healthz() -> tuple[int, str, str]:
        alive = any(t.get_name() == "committer" and not t.done() for t in daemon._tasks)
        return (200, "text/plain", "ok\n") if alive else (503, "text/plain", "committer stopped\n")

    def waiting() -> list[str]:
        return [f"{o.cluster}/{o.namespace or '*'}/{o.kind}" + (f" ({o.problem})" if getattr(o, "problem", None) else "")
                for o in observers if not o.synced and not o.optional and not getattr(o, "absent", False)]

    def readyz() -> tuple[int, str, str]:
        if waiting():
            return 503, "text/plain", "waiting for initial list: " + ", ".join(waiting()) + "\n"
        return 200, "text/plain", "ready\n" + (leader_text(leader) if leader is not None else "")

    def scrape() -> Scrape:
        stats = daemon.journal.stats()
        return Scrape(observers=observers, journal_bytes=stats.bytes, journal=stats,
                      journal_path=getattr(daemon.journal, "path", None),
                      skew_ms=daemon.clock.skew_ms(int(time.time() * 1000)), seq=daemon.state.seq,
                      quarantine=daemon.state.quarantine, state=daemon.state, ready=not waiting(), leader=leader,
                      event_series=getattr(daemon.executor, "event_series", None), bookkeeping=daemon.bookkeeping())

    metrics.bind(scrape)

    def metrics_page() -> tuple[int, str, str]:
        return 200, CONTENT_TYPE, metrics.text()

    return {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics_page}


def leader_text(e: Any) -> str:
    """/readyz's second line: a standby is ready too (its watches are warm; it takes over). With
    shards (``kfold.daemon.shards``): a summary line, then one line per shard."""
    if hasattr(e, "electors"):
        held = e.held()
        return (f"shards: {len(held)} of {e.shards} held ({', '.join(map(str, held)) or 'none'}), "
                f"{e.live} live replicas, as {e.holder}\n"
                + (f"taking no shard: {e.gate}\n" if getattr(e, "gate", None) else "")
                + "".join(f"shard {i}: {leader_text(x)}" for i, x in enumerate(e.electors)))
    term = e.term()
    if term is not None:
        return f"leader of lease {e.namespace}/{e.name}, term {term}, as {e.holder}\n"
    return f"standby for lease {e.namespace}/{e.name} (held by {e.observed_holder or 'nobody'}), as {e.holder}\n"


def leader_metrics(e: Any) -> str:
    """The lease families alone, as exposition text (``kfold.daemon.metrics.leader_families``)."""
    return families_text(leader_families(e))
