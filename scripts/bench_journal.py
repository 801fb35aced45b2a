#!/usr/bin/env python3
"""Journal benchmark: durable ingest + fold, replay from disk, fold alone, raw SQLite inserts.

    python scripts/bench_journal.py [--events 1000000] [--objects 10000] [--batch 1000]
                                    [--synchronous FULL|NORMAL] [--profile] [--keep PATH]

Workload: ``--events`` synthetic observed Pod events over ``--objects`` pods (kfold-labelled, one
session each, ~1.2 KB of JSON), every event a MODIFIED with a new resourceVersion, every 7th a
phase change, ``at`` advancing 1 ms per event. Drafts are generated per batch outside the timers.

Reported (events/s):
(a) ingest: ``SqliteJournal.append`` of each batch through the writer task (redaction, chained
    checksum, one transaction + fsync per batch), then ``engine.fold`` of each committed record
    with the default machines. By default the next batch's append is in flight (SQLite insert and
    fsync in aiosqlite's thread) while the committed batch is folded; ``--no-pipeline`` disables.
(b) replay: ``read_batches`` from disk (fetch + chain verify + trusted parse of verified rows, in
    slices of ``PARSE_BATCH``) + ``fold_many`` of each slice, from seq 1.
(c) fold alone: the first ``--fold-sample`` journaled records, read into memory, folded again one
    ``fold`` at a time (the per-record cost ``kfold trace`` pays), then with ``fold_many`` per batch.
(d) raw: plain ``sqlite3.executemany`` of the same rows (same pragmas, same batches, one commit
    each) into a fresh file: the denominator of the ingest ratio. (The journal itself inserts with
    multi-row statements, see ``journal.sqlite``; (d) stays the plain executemany the issue names.)
``--gc``: tuned (the default: what ``kfold run`` and ``kfold replay`` do, see ``kfold.gc_policy``),
freeze (only ``gc.freeze()`` once booted) or default (CPython's thresholds, no freeze). Everything from the
first append to the last fold is timed in (a); only draft generation, which stands in for the
apiserver, is excluded.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import fold, fold_many, initial_state  # noqa: E402
from engine.core import default_machines  # noqa: E402
from engine.machines.base import Machine  # noqa: E402
from journal.records import Observed  # noqa: E402
from journal.sqlite import SqliteJournal  # noqa: E402
from kfold import gc_policy  # noqa: E402

T0 = 1_893_456_000_000
PHASES = ("Pending", "Running", "Running", "Succeeded")


def pod_template(i: int) -> dict:
    session = f"s{i:05d}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{session}-g1", "namespace": f"tenant-{i % 50}", "uid": f"6f1c2d3e-{i:08d}-4a5b-9c8d-7e6f5a4b3c2d",
                     "resourceVersion": "1", "creationTimestamp": "2030-01-01T00:00:00Z",
                     "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": session,
                                "kfold.dev/generation": "1"}},
        "spec": {"nodeName": f"node-{i % 20}", "restartPolicy": "Never", "serviceAccountName": "default",
                 "containers": [{"name": "sandbox", "image": "registry.local/sandbox:1.4.2",
                                 "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                                 "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]},
        "status": {"phase": "Running", "podIP": f"10.1.{i % 250}.{i % 200}", "hostIP": "192.168.0.10",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2030-01-01T00:00:05Z"},
                                  {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2030-01-01T00:00:01Z"}],
                   "containerStatuses": [{"name": "sandbox", "ready": True, "restartCount": 0,
                                          "image": "registry.local/sandbox:1.4.2",
                                          "state": {"running": {"startedAt": "2030-01-01T00:00:04Z"}}}]},
    }


class Workload:
    def __init__(self, objects: int):
        self.templates = [pod_template(i) for i in range(objects)]
        self.n = 0

    def batch(self, size: int) -> list[Observed]:
        out = []
        for _ in range(size):
            self.n += 1
            out.append(self.event(self.n))
        return out

    def event(self, n: int) -> Observed:
        t = self.templates[n % len(self.templates)]
        md = {**t["metadata"], "resourceVersion": str(100 + n)}
        phase = PHASES[(n // (7 * len(self.templates))) % len(PHASES)] if n % 7 == 0 else "Running"
        obj = {**t, "metadata": md, "status": {**t["status"], "phase": phase}}
        return Observed(at=T0 + n, cluster="local", api_version="v1", kind="Pod", namespace=md["namespace"],
                        name=md["name"], uid=md["uid"], rv=md["resourceVersion"], event="MODIFIED", obj=obj)


def active_machines() -> str:
    parts = []
    for m in default_machines().all:
        real = type(m).on_observed is not Machine.on_observed
        parts.append(f"{m.name}({'observes ' + ','.join(sorted(m.observes)) if real and m.observes else 'placeholder/no observe'})")
    return ", ".join(parts)


async def ingest(path: str, args) -> tuple[float, float]:
    """Returns (seconds in append + fold, seconds generating drafts, excluded from the first)."""
    work, state, gen, spent = Workload(args.objects), initial_state(), 0.0, 0.0
    async with SqliteJournal(path, synchronous=args.synchronous) as journal:
        left, pending = args.events, None
        while True:
            start = time.perf_counter()
            committed = await pending if pending else []  # after this, nothing is in flight
            g = time.perf_counter()
            drafts = work.batch(min(args.batch, left))  # the stand-in apiserver: not timed
            spent, gen, start = spent + g - start, gen + time.perf_counter() - g, time.perf_counter()
            left -= len(drafts)
            if args.pipeline:
                pending = asyncio.ensure_future(journal.append(drafts)) if drafts else None
                for _ in range(3 if pending else 0):  # let the writer hand the batch to SQLite
                    await asyncio.sleep(0)
            else:
                committed += await journal.append(drafts) if drafts else []
                pending = None
            if committed:
                state, _ = fold_many(state, committed)  # what the daemon's committer does with a run of observations
            spent += time.perf_counter() - start
            if not drafts and pending is None:
                break
        txs = journal.transactions
    print(f"    transactions: {txs}, final seq {state.seq}")
    return spent, gen


async def replay(path: str) -> tuple[float, int]:
    state = initial_state()
    start = time.perf_counter()
    async with SqliteJournal(path) as journal:
        async for batch in journal.read_batches():
            state, _ = fold_many(state, batch)
    return time.perf_counter() - start, state.seq


async def fold_alone(path: str, sample: int, batch: int) -> tuple[float, float, int]:
    """Fold the first ``sample`` journaled records again, from memory (read untimed): one ``fold``
    per record, then ``fold_many`` per ``batch``. Returns (seconds one by one, seconds batched, n)."""
    async with SqliteJournal(path) as journal:
        records = [r async for r in journal.read(until=sample)]
    gc.freeze()  # the sample is bench bookkeeping: keep the collector off it
    state = initial_state()
    start = time.perf_counter()
    for rec in records:
        state, _ = fold(state, rec)
    one = time.perf_counter() - start
    state = initial_state()
    start = time.perf_counter()
    for i in range(0, len(records), batch):
        state, _ = fold_many(state, records[i:i + batch])
    many = time.perf_counter() - start
    gc.unfreeze()
    return one, many, len(records)


def raw_insert(src: str, dst: str, args) -> float:
    """Plain sqlite3 executemany of the journal's own rows, batch by batch, one commit each."""
    source = sqlite3.connect(src)
    db = sqlite3.connect(dst)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={args.synchronous}")
    db.execute("CREATE TABLE journal (seq INTEGER PRIMARY KEY, at INTEGER, kind TEXT NOT NULL,"
               " payload BLOB NOT NULL, chk INTEGER NOT NULL)")
    spent, cur = 0.0, source.execute("SELECT seq, at, kind, payload, chk FROM journal ORDER BY seq")
    while rows := cur.fetchmany(args.batch):
        start = time.perf_counter()
        db.executemany("INSERT INTO journal VALUES (?, ?, ?, ?, ?)", rows)
        db.commit()
        spent += time.perf_counter() - start
    db.close()
    source.close()
    return spent


def profiled(label: str, enabled: bool, fn, *a):
    if not enabled:
        return fn(*a)
    prof = cProfile.Profile()
    result = prof.runcall(fn, *a)
    print(f"\n--- profile: {label} (top 20 by own time) ---")
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return result


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>10,.0f} events/s  ({seconds:6.2f} s)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    p.add_argument("--fold-sample", type=int, default=200_000, help="records folded for (c)")
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                   help="append, wait, fold, in strict turn (default: next append in flight while folding)")
    p.add_argument("--gc", choices=("default", "freeze", "tuned"), default="tuned",
                   help="tuned (default): what kfold run and kfold replay do (kfold.gc_policy: "
                        "raised thresholds, gc.freeze() once booted); freeze: only the freeze; "
                        "default: CPython's own thresholds, no freeze")
    p.add_argument("--profile", action="store_true", help="cProfile top-20 for ingest and replay")
    p.add_argument("--keep", help="write the journal here instead of a temporary directory")
    args = p.parse_args()
    if args.gc == "tuned":
        gc_policy.set_thresholds()
    if args.gc in ("freeze", "tuned"):
        default_machines()
        gc.freeze()  # modules, schemas, machines: what a booted daemon holds before its first event
    tmp = tempfile.mkdtemp(prefix="kfold-bench-")
    try:
        run(args, tmp, args.keep or os.path.join(tmp, "journal.sqlite"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # 1M events is ~1.4 GB per file


def run(args: argparse.Namespace, tmp: str, path: str) -> None:
    print(f"kfold journal bench: {args.events:,} events over {args.objects:,} pods, batch {args.batch}, "
          f"synchronous={args.synchronous}, "
          f"gc={args.gc}, pipeline={args.pipeline}, cpus={os.cpu_count()}, load={os.getloadavg()[0]:.1f}")
    print(f"machines: {active_machines()}")
    spent, gen = profiled("ingest", args.profile, lambda: asyncio.run(ingest(path, args)))
    size = os.path.getsize(path)
    r_spent, r_seq = profiled("replay", args.profile, lambda: asyncio.run(replay(path)))
    assert r_seq == args.events, f"replay folded {r_seq} of {args.events}"
    f_spent, m_spent, f_n = asyncio.run(fold_alone(path, args.fold_sample, args.batch))
    raw = raw_insert(path, os.path.join(tmp, "raw.sqlite"), args)
    print(f"(a) ingest (append + fold) {rate(args.events, spent)}   [draft generation excluded: {gen:.2f} s]")
    print(f"(b) replay (read+verify+parse+fold) {rate(args.events, r_spent)}")
    print(f"(c) fold alone (in memory) {rate(f_n, f_spent)}   [first {f_n:,} records, one fold each]")
    print(f"    fold_many, same records    {rate(f_n, m_spent)}   [batches of {args.batch}]")
    print(f"(d) raw sqlite3 executemany {rate(args.events, raw)}")
    print(f"ingest / raw insert ratio: {raw / spent:.3f}   journal file: {size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
