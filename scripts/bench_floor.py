#!/usr/bin/env python3
"""Floors under ``bench_journal.py``: what CPython and SQLite alone cost on the same rows.

    python scripts/bench_floor.py [--events 1000000] [--objects 10000] [--batch 1000]

Same workload as ``bench_journal.py`` (1.2 KB Pod events over ``--objects`` pods). Nothing of
kfold runs here except the row format (``journal.chain.link``); each line is an upper bound for
the matching kfold figure on this machine, with parts of kfold's work left out on purpose:

replay floors (one process, from a journal file written first):
  fetch          ``SELECT seq, at, kind, payload, chk`` in order, ``fetchmany``: rows only
  fetch+verify   + the chained CRC-32 of every row (what replay must do before trusting a row)
  fetch+verify+decode  + ``orjson.loads`` of every payload (a fold needs the object)
ingest floor:
  dumps+link+insert    ``orjson.dumps`` of each draft + chained CRC in the main thread, one
                       multi-row INSERT + COMMIT (fsync, synchronous=FULL) per batch in a writer
                       thread, the next batch serialized while the previous one commits; no
                       redaction, no validation, no fold

kfold's replay adds parsing into records and the fold to "fetch+verify+decode"; kfold's ingest
adds redaction, stamping and the fold to "dumps+link+insert".
"""
from __future__ import annotations

import argparse
import gc
import os
import queue
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_journal import T0, pod_template  # noqa: E402
from journal.chain import link  # noqa: E402

SCHEMA = ("CREATE TABLE journal (seq INTEGER PRIMARY KEY, at INTEGER, kind TEXT NOT NULL,"
          " payload BLOB NOT NULL, chk INTEGER NOT NULL)")


def drafts(objects: int, first: int, n: int) -> list[dict]:
    """``n`` records as the journal serializes them (``Observed.__dict__``), from seq ``first``."""
    out = []
    for seq in range(first, first + n):
        t = pod_template(seq % objects)
        md = {**t["metadata"], "resourceVersion": str(100 + seq)}
        out.append({"seq": seq, "at": T0 + seq, "rec": "observed", "cluster": "local", "api_version": "v1",
                    "kind": "Pod", "namespace": md["namespace"], "name": md["name"], "uid": md["uid"],
                    "rv": md["resourceVersion"], "event": "MODIFIED", "obj": {**t, "metadata": md}})
    return out


def ingest_floor(path: str, args) -> float:
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(SCHEMA)
    db.commit()
    sql = "INSERT INTO journal VALUES " + ", ".join(["(?, ?, ?, ?, ?)"] * args.batch)
    todo: queue.Queue = queue.Queue(maxsize=1)
    done: queue.Queue = queue.Queue()

    def writer() -> None:
        while (rows := todo.get()) is not None:
            db.execute(sql if len(rows) == args.batch else
                       "INSERT INTO journal VALUES " + ", ".join(["(?, ?, ?, ?, ?)"] * len(rows)),
                       [v for row in rows for v in row])
            db.commit()
            done.put(None)

    thread = threading.Thread(target=writer)
    thread.start()
    spent, prev, seq, inflight, dumps = 0.0, 0, 1, False, orjson.dumps
    while seq <= args.events:
        batch = drafts(args.objects, seq, min(args.batch, args.events - seq + 1))  # untimed: the apiserver
        start = time.perf_counter()
        rows = []
        for d in batch:
            payload = dumps(d)
            prev = link(prev, d["seq"], d["at"], "observed", payload)
            rows.append((d["seq"], d["at"], "observed", payload, prev))
        if inflight:
            done.get()
        todo.put(rows)
        inflight = True
        seq += len(batch)
        spent += time.perf_counter() - start
    start = time.perf_counter()
    done.get()
    todo.put(None)
    thread.join()
    db.close()
    return spent + time.perf_counter() - start


def replay_floor(path: str, args, verify: bool, decode: bool) -> float:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    start = time.perf_counter()
    cur = db.execute("SELECT seq, at, kind, payload, chk FROM journal ORDER BY seq")
    prev, loads = 0, orjson.loads
    while rows := cur.fetchmany(2000):
        for seq, at, kind, payload, chk in rows:
            if verify:
                prev = link(prev, seq, at, kind, payload)
                if prev != chk:
                    raise SystemExit(f"chain broken at {seq}")
            if decode:
                loads(payload)
    spent = time.perf_counter() - start
    db.close()
    return spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=1000)
    args = p.parse_args()
    gc.set_threshold(100_000, 50, 100)
    tmp = tempfile.mkdtemp(prefix="kfold-floor-")
    path = os.path.join(tmp, "floor.sqlite")
    try:
        print(f"floors: {args.events:,} events over {args.objects:,} pods, batch {args.batch}, "
              f"cpus={os.cpu_count()}, load={os.getloadavg()[0]:.1f}")
        t = ingest_floor(path, args)
        print(f"ingest floor  dumps+link+insert         {args.events / t:>10,.0f} events/s  ({t:6.2f} s)")
        for label, verify, decode in (("fetch", False, False), ("fetch+verify", True, False),
                                      ("fetch+verify+decode", True, True)):
            t = replay_floor(path, args, verify, decode)
            print(f"replay floor  {label:<25} {args.events / t:>10,.0f} events/s  ({t:6.2f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
