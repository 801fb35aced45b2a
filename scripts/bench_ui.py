#!/usr/bin/env python3
"""``kfold ui`` on a big journal: how long the one-time index takes, how big it is, and how long a
page of the timeline takes to serve (the browser only ever receives pages).

    python scripts/bench_ui.py [--events 1000000] [--objects 10000] [--keep DIR]

Journal: the golden session (tests/data/golden_session.jsonl) followed by ``--events`` observed Pod
events over ``--objects`` pods (``scripts/workload.py``'s world), in a SQLite journal.
Reported: journal write time (not part of the UI), index build time and rate, index size, and the
median of 20 requests to the real HTTP server for: the first page of everything, a page at the
end, a page of one pod's timeline from its middle, the Session with its related objects, one
record kind, one machine.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from workload import World, observed, variants  # noqa: E402
from journal.jsonl import read_jsonl  # noqa: E402
from journal.sqlite import SqliteJournal  # noqa: E402
from kfold.offline.ui.index import build  # noqa: E402
from kfold.offline.ui.server import Store, serve  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden_session.jsonl"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


async def write(path: Path, events: int, objects: int) -> None:
    pool = variants(World(objects), min(events, 20_000))   # the events cycle through this pool
    async with SqliteJournal(path, synchronous="NORMAL") as journal:
        await journal.append(list(read_jsonl(GOLDEN)))
        done, rv, at = 0, 10_000_000, 1_800_000_000_000
        while done < events:
            n = min(5000, events - done)
            await journal.append([observed(pool[(done + i) % len(pool)], rv + done + i, at + done + i) for i in range(n)])
            done += n


def timed(url: str, n: int = 20) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(n):
        start = time.perf_counter()
        size = len(NO_PROXY.open(url, timeout=60).read())
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--keep", help="keep the journal and index in this directory")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(args.keep or tmp)
        where.mkdir(parents=True, exist_ok=True)
        journal, index = where / "journal.sqlite", where / "index.sqlite"
        for f in (journal, index):
            f.unlink(missing_ok=True)
        start = time.perf_counter()
        asyncio.run(write(journal, args.events, args.objects))
        print(f"journal: {args.events + 107:,} records written in {time.perf_counter() - start:.1f}s "
              f"({journal.stat().st_size / 1e6:.0f} MB)")
        start = time.perf_counter()
        meta = build(str(journal), index)
        spent = time.perf_counter() - start
        print(f"index: {meta['records']:,} records in {spent:.1f}s ({meta['records'] / spent / 1e3:.1f}k records/s), "
              f"{index.stat().st_size / 1e6:.0f} MB")
        store = Store(index, str(journal))
        server = serve(store, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/api"
        db = store.db()
        session = db.execute("SELECT id FROM objects WHERE kind='Session'").fetchone()[0]
        pod = db.execute("SELECT id, first, last FROM objects WHERE kind='Pod' ORDER BY n DESC LIMIT 1").fetchone()
        last = meta["records"]
        for name, url in [
            ("first page, everything", f"{base}/records?limit=50"),
            ("last page, everything", f"{base}/records?from={last}&dir=around&limit=50"),
            ("one pod, from its middle", f"{base}/records?obj={pod[0]}&from={(pod[1] + pod[2]) // 2}&limit=50"),
            ("the Session with related objects", f"{base}/records?obj={session}&related=1&limit=50"),
            ("outcomes only, from the middle", f"{base}/records?kinds=outcome&from={last // 2}&limit=50"),
            ("machine pod, from the middle", f"{base}/records?machine=pod&from={last // 2}&limit=50"),
            ("objects list", f"{base}/objects?top=1&limit=100"),
            ("summary", f"{base}/summary"),
        ]:
            ms, size = timed(url)
            print(f"  {name}: {ms:.1f} ms median, {size / 1e3:.0f} KB")
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
