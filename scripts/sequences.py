#!/usr/bin/env python3
"""Many-seed run of the spec-derived operation sequences (issue 34; CI runs two seeds in
tests/e2e/test_sequences.py; the oracle is tests/e2e/sequences.py).

    python scripts/sequences.py [--seeds 20] [--first 100] [--sessions 3] [--steps 12]

Needs the local control plane (scripts/controlplane.sh start). Per seed, on a fresh namespace and
a fresh journal, ``kfold run`` as its least-privilege ServiceAccount drives --sessions Sessions
through --steps rounds of random spec changes; after each round every Session must settle for its
spec within the bound and match what the spec implies; afterwards ``kfold replay --check`` must be
clean. Prints one line per seed (a failure: the seed, every step so far, the difference, the
journal kept under --keep) and a summary; exits 1 if any seed failed.
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
    ap.add_argument("--seeds", type=int, default=20, help="how many seeds (default 20)")
    ap.add_argument("--first", type=int, default=100, help="the first seed (default 100)")
    ap.add_argument("--sessions", type=int, default=3, help="Sessions driven at once (default 3)")
    ap.add_argument("--steps", type=int, default=12, help="rounds per seed (default 12)")
    ap.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "kfold-sequences",
                    help="where a failed seed's journal and log are kept")
    args = ap.parse_args()

    from kubernetes import client
    from tests.e2e.conftest import Daemon, discard_namespace, install_rbac, service_account_kubeconfig
    from tests.e2e.drills import drill_admin, keep_failed
    from tests.e2e.driver import replay_check
    from tests.e2e.sequences import Driver, run

    cp, admin = drill_admin()
    failed, steps = 0, 0
    for seed in range(args.first, args.first + args.seeds):
        ns = f"seq-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
        with tempfile.TemporaryDirectory(prefix="kfold-seq-") as tmp:
            install_rbac(admin, "kfold-e2e", [ns])
            kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", Path(tmp) / "sa.kubeconfig")
            daemon = Daemon(Path(tmp), str(kubeconfig), [ns]).start()
            t = time.monotonic()
            try:
                run(Driver(admin, ns), seed, sessions=args.sessions, steps=args.steps)
                daemon.stop()
                replay_check(daemon.journal)
                steps += args.sessions * args.steps
                print(f"seed {seed}: ok ({time.monotonic() - t:.0f} s)", flush=True)
            except AssertionError as exc:
                failed += 1
                daemon.stop()
                keep = keep_failed(args.keep, seed, [daemon])
                print(f"seed {seed}: FAILED {exc}\n  journal and log: {keep}", flush=True)
            finally:
                daemon.stop()
                discard_namespace(admin, ns)
    print(f"{args.seeds - failed}/{args.seeds} seeds passed, {steps} steps checked")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
