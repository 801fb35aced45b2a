#!/usr/bin/env python3
"""Many-seed run of kfold behind the view-perturbation proxy (issue 34; CI runs five fixed cases in
tests/e2e/test_perturbed.py; the proxy and the oracles are tests/e2e/perturb.py).

    python scripts/perturbed.py [--seeds 10] [--first 100] [--crash]

Needs the local control plane (scripts/controlplane.sh start). Per seed, on a fresh namespace:
four Sessions through bring-up, suspend, set-apps, resume, stop and delete, with stale cached
reads, expired and stalled watches, late and lost write answers drawn from the seed (--crash:
instead, a SIGKILL right after the K-th write of pods or services, K and the kind from the seed,
restarted on its journal or, every third seed, on a fresh one). Prints one line per seed and a
summary (a failure: the seed, the faults, the oracle's finding, the journals and logs kept under
--keep); exits 1 if any seed failed.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="how many seeds (default 10)")
    ap.add_argument("--first", type=int, default=100, help="the first seed (default 100)")
    ap.add_argument("--crash", action="store_true", help="crash after a write instead of perturbing the view")
    ap.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "kfold-perturbed",
                    help="where a failed seed's journals and logs are kept")
    args = ap.parse_args()

    from kubernetes import client
    from tests.e2e.conftest import discard_namespace, wait_for
    from tests.e2e.drills import drill_admin, keep_failed
    from tests.e2e.perturb import Faults
    from tests.e2e.test_perturbed import Run, _create_all, _life

    cp, admin = drill_admin()
    failed = 0
    for seed in range(args.first, args.first + args.seeds):
        rng = random.Random(seed)
        ns = f"perturb-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
        with tempfile.TemporaryDirectory(prefix="kfold-perturb-") as tmp:
            if args.crash:
                kind, k, fresh = rng.choice(["pods", "services"]), rng.randint(1, 4), seed % 3 == 0
                faults, what = Faults(kill_after=(kind, k)), f"crash after {kind} write {k}, fresh journal {fresh}"
            else:
                faults = Faults(stale_reads=rng.uniform(0.2, 0.8), watch_expire=rng.uniform(0, 0.5),
                                watch_stall=rng.uniform(0, 0.2), stall_s=12, watch_lag_s=rng.uniform(0, 1),
                                hold_write=rng.uniform(0, 0.3),
                                drop_write=rng.uniform(0, 0.1))
                what = f"{faults}"
            t = time.monotonic()
            r = Run(admin, cp, ns, Path(tmp), faults, seed)
            try:
                r.start()
                names = _create_all(r)
                if args.crash:
                    wait_for(lambda: r.proxy.killed.is_set() or None, 60, what="the crash")
                    wait_for(lambda: r.daemons[-1].proc.poll() is not None or None, 20, what="kfold run killed")
                    r.proxy.revive()
                    r.start(fresh_journal=fresh)
                _life(r, names)
                r.finish()
                print(f"seed {seed}: ok, {len(r.proxy.injected)} injected ({time.monotonic() - t:.0f} s) {what}",
                      flush=True)
            except AssertionError as exc:
                failed += 1
                keep = keep_failed(args.keep, seed, r.daemons)
                print(f"seed {seed}: FAILED {what}\n  {exc}\n  journals and logs: {keep}", flush=True)
            finally:
                r.close()
                discard_namespace(admin, ns)
    print(f"{args.seeds - failed}/{args.seeds} seeds passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
