#!/usr/bin/env python3
"""The full scale-out drill (issue 14 item 4; CI runs 30 Sessions in tests/e2e/test_shards.py).

    python scripts/drill_shards.py [--sessions 300] [--replicas 3] [--shards 6] [--kill-at 0.3] [--no-rejoin]

Needs the local control plane (scripts/controlplane.sh start). On a fresh namespace: --replicas
``kfold run`` daemons, each with its own journal, ``leader.shards`` = --shards; once the shards are
spread, --sessions Sessions are created (from a thread), and when --kill-at of their pods exist the
replica holding the most shards is SIGKILLed; once every Session is Ready a fresh replica joins.
Checked (tests/e2e/shard_drill.py): the dead replica's shards taken over within about the lease
time, the shards spread again after the join, every Session Ready with exactly one pod and no pod
deleted, no (shard, term) issued by two replicas and no two terms of a shard overlapping, every
effect under its Session's shard, every conflict resolved, no phase regression, ``kfold replay
--check`` of every journal. Prints the figures (and the load average: the machine is shared);
exits 1 on a failed check.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--shards", type=int, default=6)
    ap.add_argument("--kill-at", type=float, default=0.3, help="kill when this share of the pods exists")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for every Session to be Ready")
    ap.add_argument("--no-rejoin", action="store_true", help="do not start a fresh replica after the kill")
    args = ap.parse_args()

    from kubernetes import client
    from tests.e2e.conftest import discard_namespace
    from tests.e2e.drills import drill_admin
    from tests.e2e.shard_drill import shard_drill

    cp, admin = drill_admin()
    ns = f"drill-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
    t = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kfold-shards-") as tmp:
        try:
            figures = shard_drill(admin, cp, ns, Path(tmp), sessions=args.sessions, replicas=args.replicas,
                                  shards=args.shards, kill_at_pods=args.kill_at, ready_timeout=args.timeout,
                                  log_level="warning", rejoin=not args.no_rejoin)
            figures.pop("logs")
            print(f"ok in {time.monotonic() - t:.0f} s: {figures}", flush=True)
            return 0
        except AssertionError as exc:
            print(f"FAILED after {time.monotonic() - t:.0f} s: {exc}", flush=True)
            for log in sorted(Path(tmp).glob("*/kfold-*.log")):
                print(f"--- {log}\n{log.read_text()[-3000:]}")
            return 1
        finally:
            discard_namespace(admin, ns)   # its Leases too


if __name__ == "__main__":
    sys.exit(main())
