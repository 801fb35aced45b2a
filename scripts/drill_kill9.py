#!/usr/bin/env python3
"""Many-seed version of the burst kill -9 drill (issue 12 item 1; CI runs two seeds in
tests/e2e/test_kill9_burst.py).

    python scripts/drill_kill9.py [--seeds 16] [--first 1] [--sessions 20] [--window 6]

Needs the local control plane (scripts/controlplane.sh start). Per seed, on a fresh namespace and a
fresh journal: N Sessions created at once, ``kfold run`` killed with SIGKILL at a moment drawn from
the seed within --window seconds, restarted on the same journal (journaling its pod lists
--late-list seconds after the apiserver answered them, through the test-only hook
KFOLD_TEST_LATE_LIST, so that kfold's own creates land before a list that predates them); every Session must be Ready with
exactly one pod and none Failed; after the Sessions are deleted nothing kfold made may be left.
Prints one line per seed and a summary; exits 1 if any seed failed.
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
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--window", type=float, default=3.0, help="kill within this many seconds of the burst")
    ap.add_argument("--late-list", type=float, default=2.0,
                    help="the restarted daemon journals its pod lists this late (0 = no test hook)")
    args = ap.parse_args()

    from kubernetes import client
    from tests.e2e.conftest import Daemon, discard_namespace
    from tests.e2e.drills import Cluster, burst_kill9, drill_admin

    cp, admin = drill_admin()
    failed = 0
    for seed in range(args.first, args.first + args.seeds):
        ns = f"drill-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
        cluster, daemons = Cluster(admin, ns), []
        with tempfile.TemporaryDirectory(prefix="kfold-drill-") as tmp:
            def start(env: dict[str, str]) -> Daemon:
                daemons.append(Daemon(Path(tmp), cp["kubeconfig"], [ns]).start(env=env))
                return daemons[-1]
            t = time.monotonic()
            try:
                env = {"KFOLD_TEST_LATE_LIST": f"Pod:{args.late_list}"} if args.late_list else {}
                figures = burst_kill9(cluster, start, seed, sessions=args.sessions, kill_window_s=args.window,
                                      restart_env=env)
                print(f"seed {seed}: ok {figures} ({time.monotonic() - t:.0f} s)", flush=True)
            except AssertionError as exc:
                failed += 1
                print(f"seed {seed}: FAILED {exc}; logs: {[str(d.log) for d in daemons]}", flush=True)
                for d in daemons:
                    print(d.log.read_text()[-2000:])
            finally:
                for d in daemons:
                    d.stop()
                discard_namespace(admin, ns)   # its Leases too
    print(f"{args.seeds - failed}/{args.seeds} seeds passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
