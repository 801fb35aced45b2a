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
- ``/metrics``: ``kfold_records_ingested_total{rec}``, ``kfold_fold_seconds`` (histogram),
  latency histograms measured on the daemon's monotonic clock (never inside the fold):
  ``kfold_event_to_fold_seconds`` (a draft handed to the daemon -> its record folded),
  ``kfold_fold_to_effect_issued_seconds{held}`` (the fold that emitted an effect -> the effect
  journaled as issued and handed to the executor; ``held="true"``: not issued by the commit that
  emitted it, because an earlier effect of its key was still in flight or waiting for a retry),
  ``kfold_event_to_effect_issued_seconds{held}`` (the draft whose fold emitted it -> the same hand-over),
  ``kfold_effect_round_trip_seconds{type}`` (handed to the executor -> its outcome back),
  ``kfold_journal_flush_to_durable_seconds`` (a commit's transaction handed to the journal -> durable:
  the disk's share of the above, waiting behind the transaction before it included),
  ``kfold_gc_pause_seconds{generation}`` (each pass of CPython's cyclic collector, which stops the loop),
  per client ``kfold_client_qps``/``kfold_client_burst`` (0 qps: no client-side limit) and
  ``kfold_client_limiter_wait_seconds_total``, ``kfold_client_requests_total{cluster,verb,resource,code}``,
  ``kfold_effects_total{type,result}``, ``kfold_watch_restarts_total{kind,reason}``,
  ``kfold_watch_synced{cluster,kind,namespace}`` (one per watch, 1 once its first list is journaled),
  ``kfold_journal_bytes`` (file + WAL on disk), ``kfold_journal_records``, ``kfold_journal_snapshots``,
  ``kfold_journal_first_seq`` (where the kept history begins), ``kfold_server_clock_skew_seconds`` (server reading minus local wall
  clock: the one place the wall clock is read, for display only), ``kfold_state_seq``.
"""
from __future__ import annotations

import asyncio
import gc
import time
from bisect import bisect_left
from collections import Counter
from typing import Any, Callable


BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)
# Latencies inside the daemon: fine around the milliseconds a fold and a commit take, coarse up to
# the seconds a throttled or failing round trip can.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
                   60.0, 120.0)


class Histogram:
    """A Prometheus histogram (cumulative ``le`` buckets, ``_sum``, ``_count``) per label value."""

    def __init__(self, name: str, buckets: tuple[float, ...], label: str | None = None) -> None:
        self.name, self.buckets, self.label = name, buckets, label
        self._series: dict[str, list[Any]] = {}   # label value -> [counts per bucket, sum, count]

    def observe(self, seconds: float, value: str = "") -> None:
        series = self._series.get(value)
        if series is None:
            series = self._series[value] = [[0] * (len(self.buckets) + 1), 0.0, 0]
        series[0][bisect_left(self.buckets, seconds)] += 1
        series[1] += seconds
        series[2] += 1

    def render(self) -> list[str]:
        out = [f"# TYPE {self.name} histogram"]
        for value, (counts, total, n) in sorted(self._series.items()):
            lab = f'{self.label}="{value}",' if self.label else ""
            acc = 0
            for b, c in zip(self.buckets + (float("inf"),), counts):
                acc += c
                out.append(f'{self.name}_bucket{{{lab}le="{"+Inf" if b == float("inf") else b}"}} {acc}')
            suffix = f"{{{lab[:-1]}}}" if lab else ""
            out += [f"{self.name}_sum{suffix} {total:.6f}", f"{self.name}_count{suffix} {n}"]
        return out


class Metrics:
    def __init__(self) -> None:
        self.ingested: Counter[str] = Counter()
        self.effects: Counter[tuple[str, str]] = Counter()
        self.fold = Histogram("kfold_fold_seconds", BUCKETS)
        self.event_to_fold = Histogram("kfold_event_to_fold_seconds", LATENCY_BUCKETS)
        self.fold_to_issue = Histogram("kfold_fold_to_effect_issued_seconds", LATENCY_BUCKETS, label="held")
        self.event_to_issue = Histogram("kfold_event_to_effect_issued_seconds", LATENCY_BUCKETS, label="held")
        self.round_trip = Histogram("kfold_effect_round_trip_seconds", LATENCY_BUCKETS, label="type")
        self.durable = Histogram("kfold_journal_flush_to_durable_seconds", LATENCY_BUCKETS)
        self.gc_pause = Histogram("kfold_gc_pause_seconds", LATENCY_BUCKETS, label="generation")
        self._gc_started = 0.0
        self.clients: Callable[[], list[Any]] = lambda: []   # the registry's clients (limiters)

    def watch_gc(self) -> None:
        """Time every pass of CPython's cyclic collector (it stops the loop: a latency source)."""
        if self._gc_callback not in gc.callbacks:
            gc.callbacks.append(self._gc_callback)

    def _gc_callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.gc_pause.observe(time.perf_counter() - self._gc_started, str(info.get("generation")))

    def folded(self, rec: Any, seconds: float) -> None:
        self.ingested[rec.rec] += 1
        self.fold.observe(seconds)

    def effect_done(self, effect_type: str, result: str) -> None:
        self.effects[(effect_type, result)] += 1

    def render(self, observers: list[Any], journal_bytes: int, skew_ms: int | None, seq: int,
               quarantine: Any = (), journal: Any = None) -> str:
        """``journal``: a ``journal.retention.JournalStats`` (records, snapshots, first seq) when known."""
        out = ["# TYPE kfold_records_ingested_total counter"]
        out += [f'kfold_records_ingested_total{{rec="{k}"}} {v}' for k, v in sorted(self.ingested.items())]
        for h in (self.fold, self.event_to_fold, self.fold_to_issue, self.event_to_issue, self.round_trip, self.durable,
                  self.gc_pause):
            out += h.render()
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
        out += self._limiters()
        out += ["# TYPE kfold_journal_bytes gauge", f"kfold_journal_bytes {journal_bytes}"]
        if journal is not None:
            for name, value in (("records", journal.records), ("snapshots", journal.snapshots),
                                ("first_seq", journal.first_seq)):
                out += [f"# TYPE kfold_journal_{name} gauge", f"kfold_journal_{name} {value}"]
        out += ["# TYPE kfold_state_seq gauge", f"kfold_state_seq {seq}"]
        objects = sum(1 for k in quarantine if not k.rpartition("/")[2].startswith("#"))
        out += ["# TYPE kfold_quarantined gauge",  # records a machine raised on (engine.core)
                f'kfold_quarantined{{what="object"}} {objects}',
                f'kfold_quarantined{{what="command"}} {len(quarantine) - objects}']
        if skew_ms is not None:
            out += ["# TYPE kfold_server_clock_skew_seconds gauge", f"kfold_server_clock_skew_seconds {skew_ms / 1000:.3f}"]
        return "\n".join(out) + "\n"

    def _limiters(self) -> list[str]:
        """Per client: its configured pacing (qps 0 = unlimited) and the time requests waited for it."""
        clients = self.clients()
        out = ["# TYPE kfold_client_qps gauge", "# TYPE kfold_client_burst gauge",
               "# TYPE kfold_client_limiter_wait_seconds_total counter"] if clients else []
        for c in clients:
            lab = f'cluster="{c.label}"'
            bucket = c.limiter
            out += [f"kfold_client_qps{{{lab}}} {c.limits.qps or 0:g}", f"kfold_client_burst{{{lab}}} {c.limits.burst}",
                    f"kfold_client_limiter_wait_seconds_total{{{lab}}} {bucket.waited_s if bucket else 0.0:.6f}"]
        if clients:
            out.append("# TYPE kfold_client_requests_total counter")
        for c in clients:
            out += [f'kfold_client_requests_total{{cluster="{c.label}",verb="{v}",resource="{r}",code="{code}"}} {n}'
                    for (v, r, code), n in sorted(c.requests.items())]
        return out


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


def routes_for(daemon: Any, observers: list[Any], metrics: Metrics, leader: Any = None
               ) -> dict[str, Callable[[], tuple[int, str, str]]]:
    def healthz() -> tuple[int, str, str]:
        alive = any(t.get_name() == "committer" and not t.done() for t in daemon._tasks)
        return (200, "text/plain", "ok\n") if alive else (503, "text/plain", "committer stopped\n")

    def readyz() -> tuple[int, str, str]:
        waiting = [f"{o.cluster}/{o.namespace or '*'}/{o.kind}" + (f" ({o.problem})" if getattr(o, "problem", None) else "")
                   for o in observers if not o.synced and not o.optional and not getattr(o, "absent", False)]
        if waiting:
            return 503, "text/plain", "waiting for initial list: " + ", ".join(waiting) + "\n"
        return 200, "text/plain", "ready\n" + (leader_text(leader) if leader is not None else "")

    def metrics_page() -> tuple[int, str, str]:
        skew = daemon.clock.skew_ms(int(time.time() * 1000))
        stats = daemon.journal.stats()
        size = stats.bytes
        body = metrics.render(observers, size, skew, daemon.state.seq, daemon.state.quarantine, stats)
        if leader is not None:
            body += leader_metrics(leader)
        return 200, "text/plain; version=0.0.4", body

    return {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics_page}


def leader_text(e: Any) -> str:
    """/readyz's second line: a standby is ready too (its watches are warm; it takes over). With
    shards (``kfold.shards``): a summary line, then one line per shard."""
    if hasattr(e, "electors"):
        held = e.held()
        return (f"shards: {len(held)} of {e.shards} held ({', '.join(map(str, held)) or 'none'}), "
                f"{e.live} live replicas, as {e.holder}\n"
                + "".join(f"shard {i}: {leader_text(x)}" for i, x in enumerate(e.electors)))
    term = e.term()
    if term is not None:
        return f"leader of lease {e.namespace}/{e.name}, term {term}, as {e.holder}\n"
    return f"standby for lease {e.namespace}/{e.name} (held by {e.observed_holder or 'nobody'}), as {e.holder}\n"


def leader_metrics(e: Any) -> str:
    """``kfold_leader{lease,holder,term}`` 1 while leading (0 standby, with term ""),
    ``kfold_leader_transitions_total{lease,what}`` (acquired, lost) and
    ``kfold_leader_fenced_requests_total`` (requests refused because the term had ended)."""
    electors = getattr(e, "electors", [e])
    gauge, moves = [], []
    for x in electors:
        term = x.term()
        lease = f'lease="{x.namespace}/{x.name}"' + (f',shard="{x.shard}"' if x.shard is not None else "")
        gauge.append(f'kfold_leader{{{lease},holder="{x.holder}",term="{"" if term is None else term}"}} {0 if term is None else 1}')
        moves += [f'kfold_leader_transitions_total{{{lease},what="acquired"}} {x.acquired}',
                  f'kfold_leader_transitions_total{{{lease},what="lost"}} {x.lost}']
    fenced = getattr(e, "fenced", None)
    fenced = fenced if isinstance(fenced, int) else fenced() if callable(fenced) else getattr(getattr(e, "fence", None), "fenced", 0)
    out = ["# TYPE kfold_leader gauge", *gauge, "# TYPE kfold_leader_transitions_total counter", *moves,
           "# TYPE kfold_leader_fenced_requests_total counter", f"kfold_leader_fenced_requests_total {fenced}"]
    if hasattr(e, "electors"):
        out += ["# TYPE kfold_shards_held gauge", f"kfold_shards_held {len(e.held())}",
                "# TYPE kfold_replicas_live gauge", f"kfold_replicas_live {e.live}"]
    return "\n".join(out) + "\n"
