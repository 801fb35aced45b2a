#!/usr/bin/env python3
"""Ingest benchmark: stub watch stream -> Observer -> kfold run's committer -> journal -> fold.

    python scripts/bench_ingest.py [--events 100000] [--objects 5000] [--runs 3] [--rate 0]

A stub apiserver (``tests/contract/watch_stub.py``) runs in a child process (so it does not share
the GIL with the pipeline) and serves an empty LIST, then one WATCH stream of ``--events``
realistic Pod events (``scripts/workload.py``: ~2 KB pods with containers, env, the service-account
token volume, owner references, conditions, varied statuses; ~5% with credentials in the open).
Each event carries, in a label (the projection keeps labels: the fold sees it), ``time.monotonic_ns()`` taken when the stub made its line
(CLOCK_MONOTONIC is system-wide on Linux, so the parent can compare it).

The pipeline is ``kfold run``'s: the Pod ``Observer`` (redacting with the journal's redactor)
submits to ``Daemon.submit``; the committer appends (``SqliteJournal``, ``--synchronous`` FULL by
default), folds with the real machines, releases effects and writes snapshots by the default
policy. The collector runs with ``kfold.daemon.gc_policy``, as in ``kfold run``.

Measured per run:
- events/s: events folded / (last fold - first event generated).
- latency p50/p99: from the stub making an event's line to the committer having folded it (read
  back from the folded record's label by a metrics hook on the daemon).
- floor: ``bench_floor.ingest_floor`` (dumps + chained CRC + multi-row INSERT/COMMIT per batch)
  over the rows this run journaled, in the same run: the ratio is daemon / floor.
With ``--rate 0`` the stub writes as fast as it can: the pipeline is saturated and latency is
mostly queueing. ``--rate N`` paces the stream at N/s. The median of ``--runs`` runs is printed.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_floor import ingest_floor, journal_batches  # noqa: E402
from journal.records import Observed  # noqa: E402
from journal.sqlite import SqliteJournal  # noqa: E402
from kfold.daemon import gc_policy  # noqa: E402
from kfold.daemon.http import Metrics  # noqa: E402
from workload import start_daemon, start_stub, watch_observer  # noqa: E402

SENT = "bench.kfold.dev/sent-ns"


class Latency(Metrics):
    """``kfold run``'s metrics (``kfold.daemon.http.Metrics``), and per folded record the time since the
    stub made its line."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[int] = []
        self.lat: list[int] = []
        self.done = asyncio.Event()
        self.want = 0

    def folded(self, rec: Any, seconds: float) -> None:
        super().folded(rec, seconds)
        if isinstance(rec, Observed):
            stamp = rec.obj.get("metadata", {}).get("labels", {}).get(SENT)
            if stamp:
                self.sent.append(int(stamp))
                self.lat.append(time.monotonic_ns() - self.sent[-1])
                if len(self.lat) >= self.want:
                    self.done.set()


async def one_run(n: int, objects: int, rate: float, chunk: int, synchronous: str) -> dict[str, Any]:
    url, stop_stub = start_stub(objects, 0, n, rate, chunk, stamp=SENT)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "journal.db")
        lat = Latency()
        lat.want = n
        daemon = await start_daemon(SqliteJournal(path, synchronous=synchronous), metrics=lat)
        gc_policy.freeze()
        observer = watch_observer(url, daemon)
        task = asyncio.create_task(observer.run())
        try:
            await asyncio.wait_for(lat.done.wait(), timeout=3600)
            end = time.monotonic_ns()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            stop_stub()
            await daemon.stop()
        t_floor, rows = ingest_floor(os.path.join(tmp, "floor.db"), journal_batches(path, 512), 512)
    out = _summary(lat.lat, (end - min(lat.sent)) / 1e9, observer)
    return out | {"floor": rows / t_floor, "ratio": out["events_per_s"] / (rows / t_floor)}


def _summary(lat: list[int], span_s: float, obs: Any) -> dict[str, Any]:
    ordered = sorted(lat)
    return {
        "events": len(lat),
        "events_per_s": len(lat) / span_s,
        "p50_ms": ordered[len(ordered) // 2] / 1e6,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1e6,
        "restarts": dict(obs.restarts),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--objects", type=int, default=5_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.0, help="events/s from the stub (0 = flat out)")
    ap.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    ap.add_argument("--chunk", type=int, default=64, help="event lines per HTTP chunk from the stub")
    args = ap.parse_args()
    gc_policy.set_thresholds()  # what kfold run does (kfold.daemon.gc_policy)
    runs = []
    for i in range(args.runs):
        load = os.getloadavg()[0]
        runs.append(asyncio.run(one_run(args.events, args.objects, args.rate, args.chunk, args.synchronous)) | {"load": load})
        r = runs[-1]
        print(f"run {i + 1}: load {load:.1f}; {r['events']} events, {r['events_per_s']:,.0f} events/s "
              f"(floor {r['floor']:,.0f}, ratio {r['ratio']:.2f}), p50 {r['p50_ms']:.2f} ms, "
              f"p99 {r['p99_ms']:.2f} ms, restarts {r['restarts']}", flush=True)
    med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
    print(f"median of {len(runs)}: {med('events_per_s'):,.0f} events/s, floor {med('floor'):,.0f}, "
          f"ratio {med('ratio'):.2f}, p50 {med('p50_ms'):.2f} ms, p99 {med('p99_ms'):.2f} ms")
    print(f"journal: SqliteJournal (synchronous={args.synchronous}); rate: {args.rate or 'flat out'}; machine: "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")


if __name__ == "__main__":
    main()
