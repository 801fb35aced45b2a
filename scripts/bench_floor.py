#!/usr/bin/env python3
"""Floors under the journal benchmarks: what CPython and SQLite alone cost on the same rows.

    python scripts/bench_floor.py [--events 300000] [--objects 5000] [--batch 512]

Standalone it journals ``scripts/workload.py``'s realistic events first (plain rows, no kfold);
``bench_journal.py`` calls ``ingest_floor`` and ``replay_floor`` on the very journal file kfold
wrote in the same run, so its ratios compare like with like. Nothing of kfold runs here except the
row format (``journal.chain.link``); each line is an upper bound for the matching kfold figure on
this machine, with parts of kfold's work left out on purpose:

replay floors (one process, from a journal file):
  fetch          ``SELECT seq, at, kind, payload, chk`` in order, ``fetchmany``: rows only
  fetch+verify   + the chained CRC-32 of every row (what replay must do before trusting a row)
  fetch+verify+decode  + ``orjson.loads`` of every payload (a fold needs the object)
  projection, 2 processes  a design that skips the decode: each row also stores a ~180-byte
                 projection (what the machines decide on); a reader process fetches and verifies
                 rows and ships the projections; the main process decodes only those and runs a
                 toy fold (one map update per event, ~1 us, a fraction of a real Pod fold)
ingest floor:
  dumps+link+insert    ``orjson.dumps`` of each record's dict + chained CRC in the main thread,
                       one multi-row INSERT + COMMIT (fsync, synchronous=FULL) per batch in a
                       writer thread, the next batch serialized while the previous one commits;
                       no redaction, no validation, no fold

kfold's replay adds parsing into records and the fold to "fetch+verify+decode"; kfold's ingest
adds decoding the watch line, building the record, redaction, stamping, the fold and snapshots
to "dumps+link+insert".
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
import multiprocessing as mp
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal.chain import link  # noqa: E402
from workload import World, variants  # noqa: E402

T0 = 1_893_456_000_000

SCHEMA = ("CREATE TABLE journal (seq INTEGER PRIMARY KEY, at INTEGER, kind TEXT NOT NULL,"
          " payload BLOB NOT NULL, chk INTEGER NOT NULL)")


def drafts(pool: list[bytes], first: int, n: int) -> list[dict]:
    """``n`` records as the journal serializes them (``Observed.__dict__``), from seq ``first``."""
    out = []
    for seq in range(first, first + n):
        ev = orjson.loads(pool[seq % len(pool)])
        obj = ev["object"]
        md = obj["metadata"] = {**obj["metadata"], "resourceVersion": str(1000 + seq)}
        out.append({"seq": seq, "at": T0 + seq, "rec": "observed", "cluster": "local", "api_version": "v1",
                    "kind": obj["kind"], "namespace": md["namespace"], "name": md["name"], "uid": md["uid"],
                    "rv": md["resourceVersion"], "event": ev["type"], "obj": obj})
    return out


def journal_batches(path: str, batch: int):
    """The records of a kfold journal file as dicts, ``batch`` at a time (decoded lazily)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    cur = db.execute("SELECT payload FROM journal ORDER BY seq")
    while rows := cur.fetchmany(batch):
        yield [orjson.loads(p) for (p,) in rows]
    db.close()


def ingest_floor(path: str, batches, size: int) -> tuple[float, int]:
    """(seconds, records): dumps+link+insert of each batch (the batches' making is not timed)."""
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(SCHEMA)
    db.commit()
    todo: queue.Queue = queue.Queue(maxsize=1)
    done: queue.Queue = queue.Queue()

    def writer() -> None:
        while (rows := todo.get()) is not None:
            db.execute("INSERT INTO journal VALUES " + ", ".join(["(?, ?, ?, ?, ?)"] * len(rows)),
                       [v for row in rows for v in row])
            db.commit()
            done.put(None)

    thread = threading.Thread(target=writer)
    thread.start()
    spent, prev, seq, inflight, dumps, n = 0.0, 0, 1, False, orjson.dumps, 0
    for batch in batches:  # untimed: the stand-in for the apiserver
        start = time.perf_counter()
        rows = []
        for d in batch:
            payload = dumps(d)
            prev = link(prev, seq, d["at"], d["rec"], payload)
            rows.append((seq, d["at"], d["rec"], payload, prev))
            seq += 1
        if inflight:
            done.get()
        todo.put(rows)
        inflight, n = True, n + len(rows)
        spent += time.perf_counter() - start
    start = time.perf_counter()
    if inflight:
        done.get()
    todo.put(None)
    thread.join()
    db.close()
    return spent + time.perf_counter() - start, n


def replay_floor(path: str, verify: bool, decode: bool) -> float:
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


def projection_rows(src: str, dst: str) -> None:
    """``dst``: the rows of ``src`` plus a ``view`` column, as a projecting journal would store."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    db = sqlite3.connect(dst)
    db.execute(SCHEMA.replace("chk INTEGER NOT NULL)", "chk INTEGER NOT NULL, view BLOB NOT NULL)"))
    cur = source.execute("SELECT seq, at, kind, payload, chk FROM journal ORDER BY seq")
    prev = 0
    while rows := cur.fetchmany(10_000):
        out = []
        for seq, at, kind, payload, _ in rows:
            d = orjson.loads(payload)
            md = d["obj"]["metadata"]
            labels, status, spec = md.get("labels", {}), d["obj"].get("status", {}), d["obj"].get("spec", {})
            view = orjson.dumps([d["cluster"], d["namespace"], d["name"], d["uid"], d["rv"], d["event"],
                                 [labels.get("app.kubernetes.io/managed-by") == "kfold",
                                  labels.get("kfold.dev/session", ""), labels.get("kfold.dev/generation", ""),
                                  bool(md.get("deletionTimestamp"))],
                                 [status.get("phase", ""), status.get("podIP", ""),
                                  spec.get("nodeName", ""), True, "", None, []]])
            prev = link(link(prev, seq, at, kind, payload), seq, at, kind, view)  # the chain covers both
            out.append((seq, at, kind, payload, prev, view))
        db.executemany("INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?)", out)
    db.commit()
    db.close()
    source.close()


def _projection_reader(path: str, conn) -> None:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    cur = db.execute("SELECT seq, at, kind, payload, chk, view FROM journal ORDER BY seq")
    prev = 0
    while rows := cur.fetchmany(2000):
        views = []
        for seq, at, kind, payload, chk, view in rows:
            prev = link(link(prev, seq, at, kind, payload), seq, at, kind, view)
            if prev != chk:
                raise SystemExit(f"chain broken at {seq}")
            views.append(view)
        conn.send_bytes(b"[" + b",".join(views) + b"]")
    conn.send_bytes(b"")


def projection_floor(path: str) -> tuple[float, int]:
    import immutables
    recv, send = mp.Pipe(duplex=False)
    start = time.perf_counter()
    reader = mp.get_context("fork").Process(target=_projection_reader, args=(path, send))
    reader.start()
    send.close()  # the reader's end: EOF here if it dies
    table, n, loads = immutables.Map(), 0, orjson.loads
    while data := _recv(recv):
        mm = table.mutate()
        for v in loads(data):
            key = f"{v[0]}/{v[1]}/{v[2]}"
            e = mm.get(key)
            mm[key] = (v[3], v[4], v[6][3]) if e is None or e[0] != v[3] else (e[0], v[4], e[2])
            n += 1
        table = mm.finish()
    reader.join()
    if reader.exitcode:
        raise SystemExit(f"the reader process failed (exit {reader.exitcode})")
    return time.perf_counter() - start, n


def _recv(conn) -> bytes:
    try:
        return conn.recv_bytes()
    except EOFError:
        return b""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=300_000)
    p.add_argument("--objects", type=int, default=5_000)
    p.add_argument("--batch", type=int, default=512)
    args = p.parse_args()
    gc.set_threshold(100_000, 50, 100)
    pool = variants(World(args.objects, secrets=50), args.objects * 4)
    tmp = tempfile.mkdtemp(prefix="kfold-floor-")
    path = os.path.join(tmp, "floor.sqlite")
    try:
        print(f"floors: {args.events:,} realistic events over {args.objects:,} pods, batch {args.batch}, "
              f"cpus={os.cpu_count()}, load={os.getloadavg()[0]:.1f}")
        batches = (drafts(pool, s, min(args.batch, args.events - s + 1)) for s in range(1, args.events + 1, args.batch))
        t, n = ingest_floor(path, batches, args.batch)
        print(f"ingest floor  dumps+link+insert         {n / t:>10,.0f} events/s  ({t:6.2f} s)")
        for label, verify, decode in (("fetch", False, False), ("fetch+verify", True, False),
                                      ("fetch+verify+decode", True, True)):
            t = replay_floor(path, verify, decode)
            print(f"replay floor  {label:<25} {n / t:>10,.0f} events/s  ({t:6.2f} s)")
        projected = os.path.join(tmp, "projected.sqlite")
        projection_rows(path, projected)
        t, m = projection_floor(projected)
        assert m == n, f"the reader shipped {m} of {n}"
        print(f"replay floor  {'projection, 2 processes':<25} {n / t:>10,.0f} events/s  ({t:6.2f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
