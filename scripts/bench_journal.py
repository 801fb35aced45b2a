#!/usr/bin/env python3
"""Journal benchmark on realistic events, through the daemon's own path, with its floors, as ratios.

    python scripts/bench_journal.py [--events 300000] [--objects 5000] [--secrets 50] [--runs 3]
                                    [--batch 512] [--feeders 2] [--profile ingest|replay] [--keep DIR]

Workload (``scripts/workload.py``): ``--objects`` realistic pods (~2 KB of JSON each; containers
with env, the service-account token volume, owner references, conditions, varied statuses and
names), one event in ``--secrets`` a Secret, ~5% of pods with credentials in the open. A pool of
four events per pod is kept as JSON lines; each event decodes one (as the watch does) under a new
resourceVersion.

Per run, all on one journal file and in one process:
(a) ingest: ``--feeders`` tasks ``Daemon.submit`` batches of ``--batch`` drafts to ``kfold run``'s
    committer, each draft prepared as it is made (``Journal.prepare_one``: redaction,
    serialization, projection), as ``kfold run``'s observers do: journal append (chained checksum,
    one transaction + fsync per batch), fold with the real machines, effects released, snapshots
    by the configured policy (``journal.retention.SnapshotPolicy`` defaults). Timed from the first
    submit to the last commit; the time spent making drafts (the observer's decode and
    ``Observed`` build, on the same thread, timed per draft) is reported apart and left out of the
    ratio, as the floor leaves it out; the preparing is counted as ingest.
(b) replay: ``kfold replay JOURNAL`` in-process (the command: verify, read, parse, fold, summary);
    and, for reference, the bare ``read_batches(projected=True)`` + ``fold_many`` loop.
floors (``scripts/bench_floor.py``) on the same rows: ingest = ``orjson.dumps`` + chained CRC +
    multi-row INSERT/COMMIT per batch; replay = fetch + verify + ``orjson.loads``.
snapshots: bytes of all snapshots the daemon wrote / bytes of all record payloads; projections
    (``journal.projection``, what replay folds of a Pod event) likewise, stored beside the payloads.

Printed: each run, then the median of each figure and of each ratio over ``--runs``, with the
machine's load average (the figures are only comparable within a run on a shared machine), and
the CPU time per event of each side (this process, every thread; the floors' batch making left
out): with no idle core, the rates follow the CPU each side needs, which the load changes less
than it changes the rates (a core kept busy by other work does not overlap a transaction).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import os
import pstats
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_floor import ingest_floor, journal_batches, replay_floor  # noqa: E402
from engine import fold_many, initial_state  # noqa: E402
from journal.sqlite import SqliteJournal  # noqa: E402
from kfold.daemon import gc_policy  # noqa: E402
from workload import World, observed, start_daemon, variants  # noqa: E402

T0 = 1_893_456_000_000


async def ingest(path: str, pool: list[bytes], args) -> tuple[float, float, float]:
    """(seconds from the first submit to the last commit, of which making drafts, CPU seconds of
    making drafts): the drafts are made on the loop's thread, so their time adds to the wall time
    and is subtracted for the committer's own rate (the floor does not make drafts either)."""
    daemon = await start_daemon(SqliteJournal(path))
    gc_policy.freeze()  # as kfold run does once recovered
    todo, making = iter(range(0, args.events, args.batch)), [0.0]

    async def feeder() -> None:
        prepare, clock = daemon.journal.prepare_one, time.perf_counter
        for first in todo:
            drafts = []
            for k in range(first, min(first + args.batch, args.events)):
                t = clock()
                draft = observed(pool[k % len(pool)], 1000 + k, T0 + k)
                making[0] += clock() - t   # CPU-bound on this thread: its wall time is its CPU time
                drafts.append(prepare(draft))   # as the observer does, per event: counted as ingest
            await daemon.submit(drafts)

    start = time.perf_counter()
    await asyncio.gather(*(feeder() for _ in range(args.feeders)))
    spent = time.perf_counter() - start
    await daemon.stop()
    return spent, making[0], making[0]


def replay_command(path: str) -> float:
    from kfold.cli import main
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["replay", path])
    assert code == 0, f"kfold replay exited {code}"
    return time.perf_counter() - start


async def replay_loop(path: str) -> float:
    state, start = initial_state(), time.perf_counter()
    async with SqliteJournal(path, readonly=True) as journal:
        async for batch in journal.read_batches(projected=True):
            state, _ = fold_many(state, batch)
    return time.perf_counter() - start


def sizes(path: str) -> tuple[int, int, int, int]:
    """(records, record payload bytes, snapshot bytes, projection bytes) in the journal file."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        n, rec, views = db.execute("SELECT count(*), sum(length(payload)), coalesce(sum(length(view)), 0)"
                                   " FROM journal").fetchone()
        (snap,) = db.execute("SELECT coalesce(sum(length(data)), 0) FROM snapshots").fetchone()
    return n, rec, snap, views


def cpu_timed(fn, *a):
    """(fn's result, CPU seconds of this process, every thread, while it ran)."""
    start = time.process_time()
    result = fn(*a)
    return result, time.process_time() - start


class _Untimed:
    """Iterates ``it``, adding the calling thread's CPU time spent producing items to ``spent``
    (the floor's stand-in for the apiserver, left out of its CPU as out of its wall time)."""

    def __init__(self, it):
        self.it, self.spent = iter(it), 0.0

    def __iter__(self):
        return self

    def __next__(self):
        start = time.thread_time()
        try:
            return next(self.it)
        finally:
            self.spent += time.thread_time() - start


def profiled(enabled: bool, fn, *a):
    if not enabled:
        return fn(*a)
    prof = cProfile.Profile()
    result = prof.runcall(fn, *a)
    pstats.Stats(prof).sort_stats(os.environ.get("BENCH_SORT", "tottime")).print_stats(int(os.environ.get("BENCH_TOP", "25")))
    return result


def one_run(pool: list[bytes], args, tmp: str) -> dict[str, float]:
    path = os.path.join(tmp, "journal.sqlite")
    load = os.getloadavg()[0]
    (t_wall, t_making, c_making), c_in = cpu_timed(
        profiled, args.profile == "ingest", lambda: asyncio.run(ingest(path, pool, args)))
    t_in, c_in = t_wall - t_making, c_in - c_making
    n, rec_bytes, snap_bytes, view_bytes = sizes(path)
    t_replay, c_replay = cpu_timed(profiled, args.profile == "replay", replay_command, path)
    t_loop = asyncio.run(replay_loop(path))
    batches = _Untimed(journal_batches(path, args.batch))
    (t_floor_in, _), c_floor_in = cpu_timed(ingest_floor, os.path.join(tmp, "floor.sqlite"), batches, args.batch)
    c_floor_in -= batches.spent
    t_floor_re, c_floor_re = cpu_timed(replay_floor, path, True, True)
    out = {"load": load, "records": n, "ingest": n / t_in, "ingest_wall": n / t_wall, "floor_ingest": n / t_floor_in,
           "replay": n / t_replay, "replay_loop": n / t_loop, "floor_replay": n / t_floor_re,
           "record_mb": rec_bytes / 1e6, "snapshot_mb": snap_bytes / 1e6, "view_mb": view_bytes / 1e6}
    out |= {"ingest_ratio": out["ingest"] / out["floor_ingest"], "replay_ratio": out["replay"] / out["floor_replay"],
            "snapshot_ratio": snap_bytes / rec_bytes,
            "cpu_ingest_us": c_in / n * 1e6, "cpu_floor_ingest_us": c_floor_in / n * 1e6,
            "cpu_replay_us": c_replay / n * 1e6, "cpu_floor_replay_us": c_floor_re / n * 1e6}
    out |= {"cpu_ingest_ratio": c_floor_in / c_in, "cpu_replay_ratio": c_floor_re / c_replay}
    for f in Path(tmp).iterdir():
        f.unlink()
    return out


def show(label: str, r: dict[str, float]) -> None:
    print(f"{label}: load {r['load']:.1f}; {r['records']:,.0f} records, {r['record_mb']:.0f} MB + snapshots "
          f"{r['snapshot_mb']:.1f} MB ({r['snapshot_ratio']:.1%}) + projections {r['view_mb']:.1f} MB "
          f"({r['view_mb'] / r['record_mb']:.1%})\n"
          f"  ingest  {r['ingest']:>8,.0f} ev/s  floor {r['floor_ingest']:>8,.0f}  ratio {r['ingest_ratio']:.2f}"
          f"   (with the drafts' making, as the observer decodes: {r['ingest_wall']:,.0f} ev/s)\n"
          f"  replay  {r['replay']:>8,.0f} ev/s  floor {r['floor_replay']:>8,.0f}  ratio {r['replay_ratio']:.2f}"
          f"   (read+fold loop alone {r['replay_loop']:,.0f} ev/s)\n"
          f"  CPU per event, every thread (less sensitive to load than the rates): ingest {r['cpu_ingest_us']:.1f} us, "
          f"floor {r['cpu_floor_ingest_us']:.1f} us, ratio {r['cpu_ingest_ratio']:.2f}; replay {r['cpu_replay_us']:.1f} us, "
          f"floor {r['cpu_floor_replay_us']:.1f} us, ratio {r['cpu_replay_ratio']:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=300_000)
    p.add_argument("--objects", type=int, default=5_000)
    p.add_argument("--secrets", type=int, default=50, help="one event in N is a Secret (0: none)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--feeders", type=int, default=2, help="concurrent submitters (observers)")
    p.add_argument("--profile", choices=("ingest", "replay"), help="cProfile top-25 of one phase")
    p.add_argument("--keep", help="work in this directory instead of a temporary one")
    args = p.parse_args()
    gc_policy.set_thresholds()
    pool = variants(World(args.objects, secrets=args.secrets), args.objects * 4)
    print(f"kfold journal bench: {args.events:,} realistic events over {args.objects:,} pods "
          f"(mean {sum(map(len, pool)) / len(pool):,.0f} B/event), secrets 1/{args.secrets}, batch {args.batch}, "
          f"feeders {args.feeders}, cpus {os.cpu_count()}")
    tmp = args.keep or tempfile.mkdtemp(prefix="kfold-bench-")
    os.makedirs(tmp, exist_ok=True)
    try:
        runs = []
        for i in range(args.runs):
            runs.append(one_run(pool, args, tmp))
            show(f"run {i + 1}", runs[-1])
        show(f"median of {len(runs)}", {k: statistics.median(r[k] for r in runs) for k in runs[0]})
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
