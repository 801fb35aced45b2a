#!/usr/bin/env python3
"""A longer simulator soak than CI's: many seeds, longer runs, bounded by wall time.

    .venv/bin/python scripts/sim_soak.py [--first 10000] [--seeds 2000] [--steps 400]
                                         [--sessions 4] [--minutes 20] [--out sim-soak]

Each seed is ``kfold sim --seed N --steps S --sessions K`` with every fault (a second daemon,
pauses and a skewed second cluster included). A failure prints the seed and invariant, writes its
journal (and the second daemon's) and world log under --out, and the shrunk reproduction
(``kfold sim ...``). Ends with a summary: seeds run, steps, failures by invariant, faults fired.
Exit 1 if any seed failed. Not run in CI (tests/sim/test_sim_seeds.py is the CI slice)."""
from __future__ import annotations

import argparse
import collections
import logging
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--first", type=int, default=10_000)
    p.add_argument("--seeds", type=int, default=2000)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--out", default="sim-soak")
    p.add_argument("--no-shrink", action="store_true")
    a = p.parse_args()
    from kfold.sim.report import shrink, write_journal
    from kfold.sim.world import Options, simulate
    logging.disable(logging.CRITICAL)
    out, started = Path(a.out), time.monotonic()
    failures: collections.Counter[str] = collections.Counter()
    fired: collections.Counter[str] = collections.Counter()
    runs = steps = 0
    for seed in range(a.first, a.first + a.seeds):
        if time.monotonic() - started > a.minutes * 60:
            print(f"time budget of {a.minutes} min reached")
            break
        opts = Options(seed=seed, steps=a.steps, sessions=a.sessions)
        r = simulate(opts)
        runs, steps = runs + 1, steps + r.steps
        fired.update(r.fired)
        if r.failure is None:
            continue
        failures[r.failure.invariant] += 1
        out.mkdir(parents=True, exist_ok=True)
        journal = write_journal(r.store, out / f"seed-{seed}.sqlite")
        for i, other in enumerate(r.others):   # the second daemon's (second_daemon)
            write_journal(other, out / f"seed-{seed}-daemon{i + 2}.sqlite")
        (out / f"seed-{seed}.world.txt").write_text("\n".join(r.world_log) + "\n")
        print(f"seed {seed}: FAILED {r.failure.invariant} at step {r.failure.step}: {r.failure.detail}\n"
              f"  journal {journal}", flush=True)
        if not a.no_shrink:
            small, _ = shrink(opts, r.failure.invariant, budget=20)
            print(f"  reproduce: kfold sim --seed {seed} --steps {small.steps} --sessions {small.sessions} "
                  f"--faults {','.join(small.faults) or 'none'}", flush=True)
    took = time.monotonic() - started
    print(f"{runs} seeds, {steps} steps in {took:.0f}s; failures: {dict(failures) or 'none'}")
    print(f"faults fired: {dict(sorted(fired.items()))}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
