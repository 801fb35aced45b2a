#!/usr/bin/env python3
"""Ingest benchmark: stub watch stream -> Observer -> journal -> fold.

    python scripts/bench_ingest.py [--events 100000] [--runs 3] [--rate 0] [--journal auto]

A stub apiserver (``tests/contract/watch_stub.py``) runs in a child process (so it does not share
the GIL with the pipeline) and serves an empty LIST, then one WATCH stream of ``--events`` Pod
events over 1000 pod names (ADDED, then MODIFIED, with a DELETED now and then), half of them
labelled managed-by kfold so the pod machine tracks them. Each event carries, in an annotation,
``time.monotonic_ns()`` taken when the stub generated its line (CLOCK_MONOTONIC is system-wide
on Linux, so the parent can compare it).

Measured per run:
- events/s: events folded / (last fold returned - first event generated).
- latency p50/p99: from the stub generating an event's line to ``fold`` returning for its record.
  Pod observations make no machine emit an effect (the pod machine only tracks them), so this is
  event-to-fold latency, which is where an effect would be returned; effects seen are counted.
With ``--rate 0`` the stub writes as fast as it can: the pipeline is saturated and latency is
mostly queueing (bounded by the observer's pump queue). ``--rate N`` paces the stream at N/s.

Journal: ``journal.sqlite.SqliteJournal`` (``--synchronous`` FULL by default) when importable;
otherwise a bench-local aiosqlite append-only table (WAL, synchronous=NORMAL, one transaction per
batch), reported as such. The observer redacts with the journal's own ``redactor`` (as the daemon
should) when it has one.
The median of ``--runs`` runs is printed. The collector runs with ``kfold.gc_policy``, as in
``kfold run``, and each committed batch is folded with ``engine.fold_many``, as the daemon does.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import fold_many, initial_state  # noqa: E402
from kfold import gc_policy  # noqa: E402
from engine.effects.clock import ServerClock  # noqa: E402
from engine.effects.observer import Observer  # noqa: E402
from journal.records import Observed, dump_record  # noqa: E402

SENT = "bench.kfold.dev/sent-ns"
SYNCHRONOUS = "FULL"
PODS = 1000
LINE = (b'{"type":"%s","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bench-%d",'
        b'"namespace":"bench","uid":"uid-%d","resourceVersion":"%d","labels":{%s},'
        b'"annotations":{"' + SENT.encode() + b'":"%d"}},"spec":{"containers":[{"name":"main",'
        b'"image":"busybox"}]},"status":{"phase":"Running"}}}')
MANAGED = b'"app.kubernetes.io/managed-by":"kfold","kfold.dev/session":"s%d","kfold.dev/generation":"1"'


def pod_lines(n: int, rate: float):
    """Event lines, each stamped with monotonic_ns when generated; pauses (floats) when paced."""
    step = 100
    for i in range(n):
        p = i % PODS
        kind = b"ADDED" if i < PODS else b"DELETED" if i % 97 == 0 else b"MODIFIED"
        labels = MANAGED % p if p % 2 == 0 else b""
        yield LINE % (kind, p, p, i + 2, labels, time.monotonic_ns())
        if rate and i % step == step - 1:
            yield step / rate


def serve(n: int, rate: float, chunk: int, conn: Any) -> None:
    from tests.contract.watch_stub import ListReply, StubApiserver, WatchReply
    stub = StubApiserver(lists=[ListReply([], rv="1")],
                         watches=[WatchReply(pod_lines(n, rate), end="stall", lines_per_chunk=chunk)])
    stub.start()
    conn.send(stub.url)
    conn.recv()  # wait until the parent is done
    stub.stop()


class LocalSqliteJournal:
    """Stand-in for journal.sqlite.SqliteJournal: seq primary key, one transaction per append."""

    def __init__(self, path: str):
        self.path, self.seq, self.db = path, 0, None

    async def open(self) -> "LocalSqliteJournal":
        import aiosqlite
        self.db = await aiosqlite.connect(self.path)
        await self.db.execute("PRAGMA journal_mode=WAL")
        await self.db.execute("PRAGMA synchronous=NORMAL")
        await self.db.execute("CREATE TABLE records (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
        return self

    async def append(self, drafts: list[Any]) -> list[Any]:
        stamped = [d.stamped(self.seq + 1 + i) for i, d in enumerate(drafts)]
        await self.db.executemany("INSERT INTO records (seq, payload) VALUES (?, ?)",
                                  [(r.seq, dump_record(r)) for r in stamped])
        await self.db.commit()
        self.seq += len(stamped)
        return stamped

    async def close(self) -> None:
        await self.db.close()


async def open_journal(path: str) -> tuple[Any, str]:
    try:
        from journal.sqlite import SqliteJournal  # type: ignore[import-not-found]
    except ImportError:
        return await LocalSqliteJournal(path).open(), "bench-local aiosqlite (journal.store not importable)"
    return await SqliteJournal(path, synchronous=SYNCHRONOUS).open(), f"journal.sqlite.SqliteJournal (synchronous={SYNCHRONOUS})"


async def one_run(n: int, rate: float, chunk: int) -> dict[str, Any]:
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=serve, args=(n, rate, chunk, child), daemon=True)
    proc.start()
    url = parent.recv()
    with tempfile.TemporaryDirectory() as tmp:
        journal, journal_kind = await open_journal(os.path.join(tmp, "journal.db"))
        try:
            result = await _pipeline(url, journal, n)
        finally:
            await journal.close()
    parent.send("done")
    proc.join(5)
    return {**result, "journal": journal_kind}


async def _pipeline(url: str, journal: Any, n: int) -> dict[str, Any]:
    from kubernetes import client as k8s
    cfg = k8s.Configuration()
    cfg.host = url
    state = [initial_state()]
    sent: list[int] = []
    latencies: list[int] = []
    counts = {"effects": 0}
    done = asyncio.Event()
    failure: list[BaseException] = []

    async def sink(drafts: list[Any]) -> None:
        try:
            await fold_batch(await journal.append(drafts))
        except Exception as exc:  # a fold error is a bug: stop the run instead of retrying
            failure.append(exc)
            done.set()

    async def fold_batch(records: list[Any]) -> None:
        state[0], per_record = fold_many(state[0], records)  # as the daemon folds a run of observations
        for rec, effects in zip(records, per_record):
            counts["effects"] += len(effects)
            stamp = rec.obj.get("metadata", {}).get("annotations", {}).get(SENT) if isinstance(rec, Observed) else None
            if stamp:
                sent.append(int(stamp))
                latencies.append(time.monotonic_ns() - sent[-1])
        if len(latencies) >= n:
            done.set()

    redactor = getattr(journal, "redactor", None)
    observer = Observer(lambda: k8s.ApiClient(cfg), "bench", "v1", "Pod", "pods", "", sink,
                        ServerClock(), redact=redactor.redact if redactor else None,
                        idle_timeout_s=30, server_timeout_s=600)
    task = asyncio.create_task(observer.run())
    await asyncio.wait_for(done.wait(), timeout=600)
    end = time.monotonic_ns()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if failure:
        raise failure[0]
    return _summary(latencies, (end - min(sent)) / 1e9, counts["effects"], observer)


def _summary(lat: list[int], span_s: float, effects: int, obs: Observer) -> dict[str, Any]:
    ordered = sorted(lat)
    return {
        "events": len(lat),
        "events_per_s": len(lat) / span_s,
        "p50_ms": ordered[len(ordered) // 2] / 1e6,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1e6,
        "effects": effects,
        "restarts": dict(obs.restarts),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.0, help="events/s from the stub (0 = flat out)")
    ap.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    ap.add_argument("--chunk", type=int, default=64, help="event lines per HTTP chunk from the stub")
    args = ap.parse_args()
    global SYNCHRONOUS
    SYNCHRONOUS = args.synchronous
    gc_policy.set_thresholds()  # what kfold run does (kfold.gc_policy)
    gc_policy.freeze()
    runs = [asyncio.run(one_run(args.events, args.rate, args.chunk)) for _ in range(args.runs)]
    for i, r in enumerate(runs, 1):
        print(f"run {i}: {r['events']} events, {r['events_per_s']:,.0f} events/s, "
              f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, effects {r['effects']}, "
              f"restarts {r['restarts']}")
    med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
    print(f"median of {len(runs)}: {med('events_per_s'):,.0f} events/s, p50 {med('p50_ms'):.2f} ms, "
          f"p99 {med('p99_ms'):.2f} ms")
    print(f"journal: {runs[0]['journal']}; rate: {args.rate or 'flat out'}; machine: "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")


if __name__ == "__main__":
    main()
