"""What ``/metrics`` exposes, as ``prometheus_client`` collectors on one registry per daemon.

Why prometheus_client: it is the Prometheus project's own Python client, so the exposition
(``# HELP``/``# TYPE``, escaping, float formatting, OpenMetrics negotiation), the process and
platform collectors and the parser the tests read the page with are the reference ones, not
kfold's. Each ``Metrics`` owns a ``CollectorRegistry`` (never the global one): tests and several
daemons in one process never see each other's series.

Guarantees:
- Two kinds of sources, never a second copy of the fold's state. Accumulators (counters and
  histograms of things that happened: records folded, effects answered, latencies, bring-ups)
  are updated by the daemon as they happen; plain lists indexed by bucket, because ``folded``
  runs once per record on the hot path (the library's instruments take a lock per observation
  and kfold's daemon is one thread). Everything about *now* (Sessions per phase, effects in
  flight, quarantine, watches, the journal and its filesystem, leadership, readiness) is
  computed from the live objects when Prometheus scrapes (``ScrapeCollector``).
- Bounded cardinality: no label names a Session, a pod or an effect. Labels are phases, effect
  types and results, failure reasons (at most ``MAX_REASONS``, then ``Other``), watches (one per
  configured kind and namespace), clients (one per cluster) and leases.
- Time to Ready is measured on the home apiserver's clock as kfold reads it (``ServerClocks``):
  from the record that began a generation's bring-up (a Session created, or its spec changed) to
  the record whose fold made it Ready. Bring-ups begun before this process started are not
  observed (their start is not known to it).
"""
from __future__ import annotations

import asyncio
import os
import platform
import re
import sys
import threading
import time
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from engine.machines.base import object_key
from engine.machines.session.model import BRINGING_UP, PHASES, SessionDecision

BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)
# Latencies inside the daemon: fine around the milliseconds a fold and a commit take, coarse up to
# the seconds a throttled or failing round trip can.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
                   60.0, 120.0)
# A sandbox bring-up: an adopted pod in half a second, an image pull and clones in minutes; past the
# default start deadline (3 min) and up to 10 min, beyond which it is +Inf.
READY_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0)
MAX_REASONS = 32
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REASON = re.compile(r"[A-Za-z][A-Za-z0-9]{0,63}")


class Histogram:
    """A histogram accumulator per label value; ``family`` exposes it (cumulative ``le`` buckets)."""

    def __init__(self, name: str, buckets: tuple[float, ...], label: str | None = None, help: str = "") -> None:
        self.name, self.buckets, self.label, self.help = name, buckets, label, help
        self._series: dict[str, list[Any]] = {}   # label value -> [counts per bucket, sum, count]

    def observe(self, seconds: float, value: str = "") -> None:
        series = self._series.get(value)
        if series is None:
            series = self._series[value] = [[0] * (len(self.buckets) + 1), 0.0, 0]
        series[0][bisect_left(self.buckets, seconds)] += 1
        series[1] += seconds
        series[2] += 1

    def family(self) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(self.name, self.help, labels=[self.label] if self.label else None)
        for value, (counts, total, _n) in sorted(self._series.items()):
            acc, buckets = 0, []
            for b, c in zip(self.buckets + (float("inf"),), counts):
                acc += c
                buckets.append((floatToGoString(b), acc))
            fam.add_metric([value] if self.label else [], buckets, total)
        return fam


@dataclass
class Scrape:
    """The live objects a scrape reads (``routes_for`` builds one per request)."""

    observers: list[Any] = field(default_factory=list)
    journal_bytes: int = 0
    journal: Any = None            # journal.retention.JournalStats, when known
    journal_path: str | None = None
    skew_ms: int | None = None
    seq: int = 0
    quarantine: Any = ()
    state: Any = None              # engine.core.State
    ready: bool | None = None      # what /readyz answers (None: not known)
    leader: Any = None             # kfold.daemon.leader elector or kfold.daemon.shards.Shards
    event_series: int | None = None   # Event series the executor remembers (engine.effects.io.event_series)
    bookkeeping: Any = None        # the daemon's own per-key and per-effect maps: name -> entries
    now: float = field(default_factory=time.monotonic)


class BringUps:
    """Time to Ready and failures by reason, from the Session decisions before and after a fold."""

    def __init__(self) -> None:
        self.to_ready = Histogram("kfold_session_time_to_ready_seconds", READY_BUCKETS, help=(
            "From the record that began a Session generation's bring-up (created, or spec changed) to the "
            "fold that made it Ready, on the home apiserver's clock as kfold reads it."))
        self.failures: Counter[str] = Counter()
        self._began: dict[str, tuple[int, int]] = {}   # Session key -> (generation, server ms) while bringing up

    def __len__(self) -> int:
        """Bring-ups being timed now (one per Session bringing up)."""
        return len(self._began)

    def moved(self, before: Any, after: Any, records: Iterable[Any], effects: Iterable[Iterable[Any]],
              clock: Any) -> None:
        old, new = before.table("session"), after.table("session")
        if old is new:
            return
        keys: dict[str, Any] = {}
        for rec, emitted in zip(records, effects):
            if getattr(rec, "kind", "") == "Session" and getattr(rec, "name", ""):
                keys[object_key(rec.cluster, rec.namespace, rec.name)] = rec
            for e in emitted:
                keys.setdefault(e.key, rec)
        for key, rec in keys.items():
            d = new.get(key)
            if isinstance(d, SessionDecision):
                self._step(key, old.get(key), d, rec, clock)
            elif key in self._began and d is None:
                del self._began[key]

    def _step(self, key: str, was: Any, d: SessionDecision, rec: Any, clock: Any) -> None:
        if d.gone or d.deleting:
            self._began.pop(key, None)
        elif d.phase in BRINGING_UP:
            began = self._began.get(key)
            if began is not None and began[0] == 0:   # seen before its first generation began: same bring-up
                self._began[key] = (d.generation, began[1])
            elif began is None or began[0] != d.generation:
                self._began[key] = (d.generation, _home_ms(rec, d, clock))
        elif d.phase == "Ready":
            began = self._began.pop(key, None)
            ready_at = _home_ms(rec, d, clock)
            if began is not None and began[0] == d.generation and began[1] is not None and ready_at is not None:
                self.to_ready.observe(max(0, ready_at - began[1]) / 1000)   # no server time either side: not timed
        else:
            self._began.pop(key, None)
        if d.phase == "Failed" and d.failure is not None and not (
                isinstance(was, SessionDecision) and was.phase == "Failed" and was.failure == d.failure):
            self.failures[self._reason(d.failure.reason)] += 1

    def _reason(self, reason: str) -> str:
        if not _REASON.fullmatch(reason) or (reason not in self.failures and len(self.failures) >= MAX_REASONS):
            return "Other"
        return reason


def _home_ms(rec: Any, d: SessionDecision, clock: Any) -> int | None:
    """The home apiserver's time of ``rec``: its own stamp when the home cluster stamped it; None when
    no server time is known (a record stamped before any ``Date`` was read)."""
    if getattr(rec, "cluster", None) == d.home or clock is None:
        return rec.at
    read = clock.for_cluster(d.home).now_ms() if hasattr(clock, "for_cluster") else clock.now_ms()
    return rec.at if read is None else read


class Metrics:
    """The daemon's accumulators and its registry. ``bind`` adds what a scrape computes."""

    def __init__(self) -> None:
        self.ingested: Counter[str] = Counter()
        self.effects: Counter[tuple[str, str]] = Counter()
        self.fold = Histogram("kfold_fold_seconds", BUCKETS, help="Time one record took to fold (the pure step).")
        self.event_to_fold = Histogram("kfold_event_to_fold_seconds", LATENCY_BUCKETS, help=(
            "A draft handed to the daemon -> its record folded (daemon's monotonic clock)."))
        self.fold_to_issue = Histogram("kfold_fold_to_effect_issued_seconds", LATENCY_BUCKETS, label="held", help=(
            "The fold that emitted an effect -> the effect journaled as issued and handed to the executor; "
            "held=true: not issued by the commit that emitted it (its key was busy)."))
        self.event_to_issue = Histogram("kfold_event_to_effect_issued_seconds", LATENCY_BUCKETS, label="held", help=(
            "The draft whose fold emitted an effect -> the effect handed to the executor."))
        self.round_trip = Histogram("kfold_effect_round_trip_seconds", LATENCY_BUCKETS, label="type", help=(
            "An effect handed to the executor -> its outcome back."))
        self.durable = Histogram("kfold_journal_flush_to_durable_seconds", LATENCY_BUCKETS, help=(
            "A commit's transaction handed to the journal -> durable on disk."))
        self.gc_pause = Histogram("kfold_gc_pause_seconds", LATENCY_BUCKETS, label="generation", help=(
            "Each pass of CPython's cyclic garbage collector (it stops the event loop)."))
        self.bringups = BringUps()
        self._gc_started = 0.0
        self.clients: Callable[[], list[Any]] = lambda: []   # the registry's clients (limiters)
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(_Accumulated(self))
        self._scrape: ScrapeCollector | None = None

    def bind(self, source: Callable[[], Scrape]) -> None:
        """What every scrape computes from the live objects (one source per registry)."""
        if self._scrape is not None:
            self.registry.unregister(self._scrape)
        self._scrape = ScrapeCollector(source, self.clients)
        self.registry.register(self._scrape)

    def text(self) -> str:
        return generate_latest(self.registry).decode()

    def watch_gc(self) -> None:
        """Time every pass of CPython's cyclic collector (it stops the loop: a latency source)."""
        import gc
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
        """The page for these live values (tools and tests; the daemon binds ``routes_for``'s)."""
        self.bind(lambda: Scrape(observers=observers, journal_bytes=journal_bytes, skew_ms=skew_ms, seq=seq,
                                 quarantine=quarantine, journal=journal))
        return self.text()


class _Accumulated:
    """Families of what happened since start (counters, histograms) and the build's identity."""

    def __init__(self, m: Metrics) -> None:
        self.m = m

    def collect(self) -> Iterator[Metric]:
        m = self.m
        yield build_info()
        yield _counter("kfold_records_ingested", "Records folded, by record type.", ["rec"],
                       [((k,), v) for k, v in sorted(m.ingested.items())])
        for h in (m.fold, m.event_to_fold, m.fold_to_issue, m.event_to_issue, m.round_trip, m.durable, m.gc_pause,
                  m.bringups.to_ready):
            yield h.family()
        yield _counter("kfold_effects", "Effect outcomes by effect type and result (ok, transient, conflict, ...).",
                       ["type", "result"], sorted(m.effects.items()))
        yield _counter("kfold_session_failures", "Sessions that became Failed, by status reason.", ["reason"],
                       [((k,), v) for k, v in sorted(m.bringups.failures.items())])


def build_info() -> GaugeMetricFamily:
    from kfold import __version__
    fam = GaugeMetricFamily("kfold_build_info", "Always 1; labels name the kfold build and its interpreter.",
                            labels=["version", "python", "implementation", "platform"])
    fam.add_metric([__version__, platform.python_version(), sys.implementation.name, sys.platform], 1)
    return fam


def _counter(name: str, doc: str, labels: list[str], samples: Iterable[tuple[Iterable[str], float]]) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=labels)
    for values, v in samples:
        fam.add_metric(list(values), v)
    return fam


def _gauge(name: str, doc: str, value: float | None = None, labels: list[str] | None = None,
           samples: Iterable[tuple[Iterable[str], float]] = ()) -> GaugeMetricFamily:
    fam = GaugeMetricFamily(name, doc, value=value, labels=labels)
    for values, v in samples:
        fam.add_metric(list(values), v)
    return fam


class ScrapeCollector:
    """Families computed at scrape time from ``source()``: the fold's state, the watches, the
    journal, the clients and the lease(s). Never cached: a scrape says what is true now."""

    def __init__(self, source: Callable[[], Scrape], clients: Callable[[], list[Any]] = lambda: []) -> None:
        self.source, self.clients = source, clients

    def collect(self) -> Iterator[Metric]:
        s = self.source()
        yield from self._watches(s)
        yield from self._limiters()
        yield from self._journal(s)
        yield _gauge("kfold_state_seq", "Sequence number of the last record folded.", s.seq)
        objects = sum(1 for k in s.quarantine if not k.rpartition("/")[2].startswith("#"))
        yield _gauge("kfold_quarantined", "Subjects a machine raised on (engine.core): objects frozen, commands refused.",
                     labels=["what"], samples=[(["object"], objects), (["command"], len(s.quarantine) - objects)])
        if s.skew_ms is not None:
            yield _gauge("kfold_server_clock_skew_seconds",
                         "Home apiserver's clock minus the local wall clock (display only).", s.skew_ms / 1000)
        if s.state is not None:
            yield sessions_by_phase(s.state)
            yield from effects_in_flight(s.state)
            yield from state_sizes(s.state)
        yield from runtime_sizes(s)
        if s.ready is not None:
            yield _gauge("kfold_ready", "1 while /readyz answers 200 (every required watch has its first list).",
                         1 if s.ready else 0)
        if s.leader is not None:
            yield from leader_families(s.leader)

    def _watches(self, s: Scrape) -> Iterator[Metric]:
        labels = ["cluster", "kind", "namespace"]
        watch = [(o, [o.cluster, o.kind, o.namespace]) for o in s.observers]
        yield _counter("kfold_watch_restarts", "Watch requests that ended, by reason (timeout, idle, gone, throttled, "
                       "error).", labels + ["reason"],
                       ((lab + [r], n) for o, lab in watch for r, n in sorted(getattr(o, "restarts", {}).items())))
        yield _gauge("kfold_watch_synced", "1 once the watch's first list is journaled.", labels=labels,
                     samples=((lab, 1 if getattr(o, "synced", False) else 0) for o, lab in watch))
        yield _gauge("kfold_watch_last_progress_age_seconds",
                     "Seconds since the watch last heard from the apiserver: a list journaled, a watch request "
                     "answered, events or bookmarks read.", labels=labels,
                     samples=((lab, max(0.0, s.now - o.progressed_at)) for o, lab in watch
                              if getattr(o, "progressed_at", None) is not None))
        yield _gauge("kfold_watch_objects", "Objects the watch remembers as journaled (uid and resourceVersion each).",
                     labels=labels, samples=((lab, len(getattr(o, "journaled", ()))) for o, lab in watch))

    def _limiters(self) -> Iterator[Metric]:
        clients = self.clients()
        if not clients:
            return
        per = [([c.label], c) for c in clients]
        yield _gauge("kfold_client_qps", "Configured client-side request rate per cluster (0: no limit).", labels=["cluster"],
                     samples=((lab, c.limits.qps or 0) for lab, c in per))
        yield _gauge("kfold_client_burst", "Configured client-side burst per cluster.", labels=["cluster"],
                     samples=((lab, c.limits.burst) for lab, c in per))
        yield _counter("kfold_client_limiter_wait_seconds", "Time requests waited for the client-side limiter.",
                       ["cluster"], ((lab, c.limiter.waited_s if c.limiter else 0.0) for lab, c in per))
        yield _counter("kfold_client_requests", "Requests kfold sent (watches included), by cluster, verb, resource and "
                       "HTTP code.", ["cluster", "verb", "resource", "code"],
                       (([c.label, v, r, str(code)], n) for _, c in per for (v, r, code), n in sorted(c.requests.items())))

    def _journal(self, s: Scrape) -> Iterator[Metric]:
        yield _gauge("kfold_journal_bytes", "Journal file plus its WAL on disk.", s.journal_bytes)
        if s.journal is not None:
            yield _gauge("kfold_journal_records", "Records the journal holds.", s.journal.records)
            yield _gauge("kfold_journal_snapshots", "Snapshots the journal holds.", s.journal.snapshots)
            yield _gauge("kfold_journal_first_seq", "Sequence number where the kept history begins.", s.journal.first_seq)
        if s.journal_path:
            try:
                fs = os.statvfs(os.path.dirname(os.path.abspath(s.journal_path)))
            except OSError:
                return
            yield _gauge("kfold_journal_filesystem_size_bytes", "Size of the filesystem holding the journal.",
                         fs.f_blocks * fs.f_frsize)
            yield _gauge("kfold_journal_filesystem_avail_bytes",
                         "Bytes free for kfold on the filesystem holding the journal.", fs.f_bavail * fs.f_frsize)


def sessions_by_phase(state: Any) -> GaugeMetricFamily:
    """Sessions kfold decides about now, by phase (every phase, 0 included); a deleted one is not counted."""
    counts = dict.fromkeys(PHASES, 0)
    for d in state.table("session").values():
        if isinstance(d, SessionDecision) and not d.gone:
            counts[d.phase] = counts.get(d.phase, 0) + 1
    return _gauge("kfold_sessions", "Sessions by phase, from the fold's state at scrape time.", labels=["phase"],
                  samples=(([p], n) for p, n in counts.items()))


def effects_in_flight(state: Any) -> Iterator[GaugeMetricFamily]:
    issued = sum(1 for p in state.pending.values() if p.issued)
    yield _gauge("kfold_effects_in_flight", "Effects issued whose outcome is not folded yet.", issued)
    yield _gauge("kfold_effects_waiting", "Effects emitted but not issued yet (their key is busy, or a retry waits).",
                 len(state.pending) - issued)


def state_sizes(state: Any) -> Iterator[GaugeMetricFamily]:
    """How much the fold's state holds now: decisions per machine, timers per machine, retries waiting.
    Each is bounded by the objects kfold looks after; growth at a steady load is a leak."""
    yield _gauge("kfold_state_objects", "Decision records in the fold's state, by machine.", labels=["machine"],
                 samples=(([m], len(t)) for m, t in sorted(state.tables.items())))
    timers = Counter(t.machine for t in state.timers.values())
    yield _gauge("kfold_timers", "Timers set in the fold's state, by machine.", labels=["machine"],
                 samples=(([m], n) for m, n in sorted(timers.items())))
    yield _gauge("kfold_effects_retrying", "Effects waiting for a retry after a transient outcome.",
                 len(state.retrying or ()))


def runtime_sizes(s: Scrape) -> Iterator[GaugeMetricFamily]:
    """The process around the fold: asyncio tasks, threads, Event series, the daemon's own maps."""
    try:
        tasks = len(asyncio.all_tasks())
    except RuntimeError:   # no running loop (a tool rendering the page): not known
        tasks = None
    if tasks is not None:
        yield _gauge("kfold_asyncio_tasks", "asyncio tasks not done on the daemon's event loop.", tasks)
    yield _gauge("kfold_threads", "Threads alive in the process.", threading.active_count())
    if s.event_series is not None:
        yield _gauge("kfold_event_series", "Event series this process remembers to extend (events.k8s.io "
                     "series, dropped after 6 minutes unseen).", s.event_series)
    if s.bookkeeping:
        yield _gauge("kfold_bookkeeping_entries", "Entries in the daemon's own maps beside the fold's state "
                     "(per effect, per key, per timer), by map.", labels=["map"],
                     samples=(([k], v) for k, v in sorted(s.bookkeeping.items())))


def leader_families(e: Any) -> Iterator[Metric]:
    """``kfold_leader{lease,holder,term}`` 1 while leading (0 standby, with term ""),
    ``kfold_leader_transitions_total{lease,what}`` (acquired, lost) and
    ``kfold_leader_fenced_requests_total`` (requests refused because the term had ended)."""
    electors = getattr(e, "electors", [e])
    lease_labels = ["lease", "shard"] if any(x.shard is not None for x in electors) else ["lease"]
    gauge = GaugeMetricFamily("kfold_leader", "1 while this process holds the lease (term: its term), 0 on standby.",
                              labels=lease_labels + ["holder", "term"])
    moves = CounterMetricFamily("kfold_leader_transitions", "Lease terms acquired and lost.", labels=lease_labels + ["what"])
    for x in electors:
        term = x.term()
        lease = [f"{x.namespace}/{x.name}"] + ([str(x.shard)] if len(lease_labels) == 2 else [])
        gauge.add_metric(lease + [x.holder, "" if term is None else str(term)], 0 if term is None else 1)
        moves.add_metric(lease + ["acquired"], x.acquired)
        moves.add_metric(lease + ["lost"], x.lost)
    fenced = getattr(e, "fenced", None)
    fenced = fenced if isinstance(fenced, int) else fenced() if callable(fenced) else getattr(getattr(e, "fence", None), "fenced", 0)
    yield gauge
    yield moves
    yield _counter("kfold_leader_fenced_requests", "Requests refused because the term they were issued under had ended.",
                   [], [([], fenced)])
    if hasattr(e, "electors"):
        yield _gauge("kfold_shards_held", "Shards whose lease this process holds.", len(e.held()))
        yield _gauge("kfold_replicas_live", "Replicas seen alive (shard leases renewed).", e.live)


def families_text(families: Iterable[Metric]) -> str:
    """Exposition text of ``families`` alone (their own registry)."""
    reg = CollectorRegistry(auto_describe=False)
    fams = list(families)
    reg.register(_Fixed(fams))
    return generate_latest(reg).decode()


class _Fixed:
    def __init__(self, fams: list[Metric]) -> None:
        self.fams = fams

    def collect(self) -> list[Metric]:
        return self.fams
