"""``/healthz``, ``/readyz`` and ``/metrics`` (Prometheus text format 0.0.4).

Why a stdlib ``asyncio.start_server`` and not aiohttp: three GET endpoints with tiny bodies need
no framework; it runs on the daemon's own event loop (no thread), adds no dependency to the
install, and cannot block the committer. aiohttp is installed only as a transitive dependency of
``kubernetes`` and is not something kfold should start relying on.

Guarantees:
- ``/healthz`` is 200 while the committer task is alive (a dead committer = restart me).
- ``/readyz`` is 200 only after every observer has journaled its initial list.
- ``/metrics``: ``kfold_records_ingested_total{rec}``, ``kfold_fold_seconds`` (histogram),
  ``kfold_effects_total{type,result}``, ``kfold_watch_restarts_total{kind,reason}``,
  ``kfold_watch_synced{cluster,kind,namespace}`` (one per watch, 1 once its first list is journaled),
  ``kfold_journal_bytes`` (file + WAL on disk), ``kfold_journal_records``, ``kfold_journal_snapshots``,
  ``kfold_journal_first_seq`` (where the kept history begins), ``kfold_server_clock_skew_seconds`` (server reading minus local wall
  clock: the one place the wall clock is read, for display only), ``kfold_state_seq``.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any, Callable

BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)


class Metrics:
    def __init__(self) -> None:
        self.ingested: Counter[str] = Counter()
        self.effects: Counter[tuple[str, str]] = Counter()
        self.fold_buckets = [0] * (len(BUCKETS) + 1)
        self.fold_sum = 0.0
        self.fold_count = 0

    def folded(self, rec: Any, seconds: float) -> None:
        self.ingested[rec.rec] += 1
        self.fold_sum += seconds
        self.fold_count += 1
        i = next((i for i, b in enumerate(BUCKETS) if seconds <= b), len(BUCKETS))
        self.fold_buckets[i] += 1

    def effect_done(self, effect_type: str, result: str) -> None:
        self.effects[(effect_type, result)] += 1

    def render(self, observers: list[Any], journal_bytes: int, skew_ms: int | None, seq: int,
               journal: Any = None) -> str:
        """``journal``: a ``journal.retention.JournalStats`` (records, snapshots, first seq) when known."""
        out = ["# TYPE kfold_records_ingested_total counter"]
        out += [f'kfold_records_ingested_total{{rec="{k}"}} {v}' for k, v in sorted(self.ingested.items())]
        out += self._histogram()
        out.append("# TYPE kfold_effects_total counter")
        out += [f'kfold_effects_total{{type="{t}",result="{r}"}} {v}' for (t, r), v in sorted(self.effects.items())]
        out.append("# TYPE kfold_watch_restarts_total counter")
        for o in observers:
            for reason, n in sorted(getattr(o, "restarts", {}).items()):
                out.append(f'kfold_watch_restarts_total{{cluster="{o.cluster}",kind="{o.kind}",'
                           f'namespace="{o.namespace}",reason="{reason}"}} {n}')
        out.append("# TYPE kfold_watch_synced gauge")  # one per watch: 1 once its first list is journaled
        out += [f'kfold_watch_synced{{cluster="{o.cluster}",kind="{o.kind}",namespace="{o.namespace}"}} '
                f'{1 if getattr(o, "synced", False) else 0}' for o in observers]
        out += ["# TYPE kfold_journal_bytes gauge", f"kfold_journal_bytes {journal_bytes}"]
        if journal is not None:
            for name, value in (("records", journal.records), ("snapshots", journal.snapshots),
                                ("first_seq", journal.first_seq)):
                out += [f"# TYPE kfold_journal_{name} gauge", f"kfold_journal_{name} {value}"]
        out += ["# TYPE kfold_state_seq gauge", f"kfold_state_seq {seq}"]
        if skew_ms is not None:
            out += ["# TYPE kfold_server_clock_skew_seconds gauge", f"kfold_server_clock_skew_seconds {skew_ms / 1000:.3f}"]
        return "\n".join(out) + "\n"

    def _histogram(self) -> list[str]:
        out, acc = ["# TYPE kfold_fold_seconds histogram"], 0
        for b, n in zip(BUCKETS + (float("inf"),), self.fold_buckets):
            acc += n
            out.append(f'kfold_fold_seconds_bucket{{le="{"+Inf" if b == float("inf") else b}"}} {acc}')
        return out + [f"kfold_fold_seconds_sum {self.fold_sum:.6f}", f"kfold_fold_seconds_count {self.fold_count}"]


class HttpServer:
    """``routes``: path -> callable returning (status, content_type, body)."""

    def __init__(self, host: str, port: int, routes: dict[str, Callable[[], tuple[int, str, str]]]):
        self.host, self.port, self.routes = host, port, routes
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):  # not wait_for: it can swallow a cancel on 3.11
                line = (await reader.readline()).decode("latin-1").split()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            status, ctype, body = self._route(line)
            data = body.encode()
            writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    def _route(self, line: list[str]) -> tuple[int, str, str]:
        if len(line) < 2 or line[0] != "GET":
            return 405, "text/plain", "only GET\n"
        handler = self.routes.get(line[1].split("?")[0])
        return handler() if handler else (404, "text/plain", "not found\n")


def routes_for(daemon: Any, observers: list[Any], metrics: Metrics) -> dict[str, Callable[[], tuple[int, str, str]]]:
    def healthz() -> tuple[int, str, str]:
        alive = any(t.get_name() == "committer" and not t.done() for t in daemon._tasks)
        return (200, "text/plain", "ok\n") if alive else (503, "text/plain", "committer stopped\n")

    def readyz() -> tuple[int, str, str]:
        waiting = [f"{o.cluster}/{o.namespace or '*'}/{o.kind}" + (f" ({o.problem})" if getattr(o, "problem", None) else "")
                   for o in observers if not o.synced]
        return (200, "text/plain", "ready\n") if not waiting else (503, "text/plain", "waiting for initial list: " + ", ".join(waiting) + "\n")

    def metrics_page() -> tuple[int, str, str]:
        skew = daemon.clock.skew_ms(int(time.time() * 1000))
        stats = daemon.journal.stats() if hasattr(daemon.journal, "stats") else None
        size = stats.bytes if stats is not None else daemon.journal.size_bytes()
        body = metrics.render(observers, size, skew, daemon.state.seq, stats)
        return 200, "text/plain; version=0.0.4", body

    return {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics_page}
