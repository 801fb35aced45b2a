#!/usr/bin/env python3
"""Soak: millions of realistic Pod events through ``kfold run``'s path; the journal stays bounded.

    python scripts/soak_journal.py [--events 5000000] [--objects 5000] [--keep-snapshots 4]
                                   [--ratio 20] [--min-mb 4] [--every 100000] [--journal PATH]

The path is the daemon's own: a stub apiserver in a child process streams the Pod watch
(``scripts/workload.py``: ~2 KB pods, ~5% with credentials in the open) -> ``Observer`` (decode,
redact with the journal's redactor) -> ``Daemon.submit`` -> the committer (journal append with
group commit and fsync, fold with the real machines, snapshots by ``--ratio``/``--min-mb``) ->
``SqliteJournal`` with ``Retention(keep_snapshots)``, which cuts and vacuums after each snapshot.

Every ``--every`` events it prints the file size (database + WAL), records and snapshots kept,
where history begins, and the rate. At the end: the largest and smallest size seen after the
first retention cycle (the first cut), which must stay within a small band (flat) while the events
ingested keep growing, and the snapshot bytes against the record bytes kept. Exit 1 when the
size after the first cycle grew by more than ``--tolerance`` (default 1.5x its first value).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal.retention import Retention, SnapshotPolicy  # noqa: E402
from journal.sqlite import SqliteJournal  # noqa: E402
from kfold.daemon import gc_policy  # noqa: E402
from workload import start_daemon, start_stub, watch_observer  # noqa: E402


async def soak(args, path: str) -> list[dict]:
    journal = SqliteJournal(path)
    journal.retention = Retention(keep_snapshots=args.keep_snapshots)
    daemon = await start_daemon(journal, SnapshotPolicy(ratio=args.ratio, min_bytes=int(args.min_mb * (1 << 20))))
    gc_policy.freeze()
    url, stop_stub = start_stub(args.objects, 0, args.events)
    observer = watch_observer(url, daemon)
    task = asyncio.create_task(observer.run())
    rows, start, next_mark = [], time.perf_counter(), args.every
    try:
        while daemon.state.seq < args.events:
            await asyncio.sleep(0.5)
            if task.done():
                raise RuntimeError(f"the observer stopped: {task.exception()!r}")
            if daemon.state.seq >= next_mark or daemon.state.seq >= args.events:
                rows.append(mark(journal, daemon.state.seq, time.perf_counter() - start))
                next_mark += args.every
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        stop_stub()
        await daemon.stop()
    return rows


def mark(journal: SqliteJournal, seq: int, elapsed: float) -> dict:
    s = journal.stats()
    row = {"seq": seq, "s": elapsed, "bytes": s.bytes, "records": s.records, "snapshots": s.snapshots,
           "first_seq": s.first_seq, "snapshot_bytes": journal.last_snapshot_bytes}
    print(f"{seq:>10,} events {elapsed:8.0f} s {seq / elapsed:>8,.0f} ev/s | file {s.bytes / 1e6:8.1f} MB | "
          f"records kept {s.records:>9,} | snapshots {s.snapshots} (newest {journal.last_snapshot_bytes / 1e6:.1f} MB) | "
          f"history from seq {s.first_seq:,}", flush=True)
    return row


def verdict(rows: list[dict], tolerance: float) -> int:
    cut = [r for r in rows if r["first_seq"] > 1]
    if not cut:
        print("no retention cycle completed: run more events or lower --min-mb/--ratio")
        return 1
    after = [r["bytes"] for r in cut]
    last = rows[-1]
    print(f"\nfirst cut by event {cut[0]['seq']:,}; file size after it: min {min(after) / 1e6:.1f} MB, "
          f"max {max(after) / 1e6:.1f} MB, last {after[-1] / 1e6:.1f} MB over {last['seq'] - cut[0]['seq']:,} more events")
    print(f"per kept record: {last['bytes'] / last['records']:,.0f} bytes on disk; newest snapshot "
          f"{last['snapshot_bytes'] / 1e6:.1f} MB; rate {last['seq'] / last['s']:,.0f} ev/s overall")
    ok = max(after) <= tolerance * after[0]
    print("bounded: yes" if ok else f"bounded: NO (grew past {tolerance}x the size after the first cut)")
    return 0 if ok else 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=5_000_000)
    p.add_argument("--objects", type=int, default=5_000)
    p.add_argument("--keep-snapshots", type=int, default=4)
    p.add_argument("--ratio", type=float, default=20.0)
    p.add_argument("--min-mb", type=float, default=4.0)
    p.add_argument("--every", type=int, default=100_000, help="print a line every N events")
    p.add_argument("--tolerance", type=float, default=1.5)
    p.add_argument("--journal", help="journal file (default: a temporary one, removed at the end)")
    args = p.parse_args()
    gc_policy.set_thresholds()
    print(f"soak: {args.events:,} Pod events over {args.objects:,} pods through observer -> committer -> "
          f"journal -> fold; keep {args.keep_snapshots} snapshots, snapshot at {args.ratio:g}x its size "
          f"(>= {args.min_mb:g} MB); cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="kfold-soak-") as tmp:
        rows = asyncio.run(soak(args, args.journal or os.path.join(tmp, "journal.db")))
    sys.exit(verdict(rows, args.tolerance))


if __name__ == "__main__":
    main()
