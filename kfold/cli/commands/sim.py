"""``kfold sim``: a seeded, deterministic whole-system simulation (see kfold/sim/world.py).

Exit 0 when every invariant held, 1 when one failed: the seed, the invariant and the step are
printed, the journal is written to ``--out`` (SQLite: ``kfold replay``/``kfold trace`` open it),
and, unless ``--no-shrink``, a shorter run failing the same invariant is searched and printed as
the command that reproduces it. Exit 2: bad arguments (an unknown fault, a negative count).
"""
from __future__ import annotations

import logging
from pathlib import Path


EXAMPLES = """examples:
  kfold sim --seed 7                              # one seed, every fault
  kfold sim --seeds 50 --steps 400 --faults watch_drop,conflict
  kfold sim --seed 7 --faults none --journal --out /tmp/sim   # keep the journal of a passing run

exit codes: 0 every invariant held; 1 an invariant failed (seed, step and journal printed); 2 bad arguments."""


def register(sub) -> None:
    import argparse
    from kfold.cli.args import count
    from kfold.sim.world import FAULTS
    p = sub.add_parser("sim", help="run a seeded simulation of kfold against a simulated apiserver with faults",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="A seeded, deterministic whole-system simulation that checks kfold's invariants.")
    p.add_argument("--seed", type=count, default=0, help="the first seed (default 0)")
    p.add_argument("--steps", type=count, default=200, help="steps with faults and users, before the run settles")
    p.add_argument("--sessions", type=count, default=3, help="Sessions the simulated users create (default 3)")
    p.add_argument("--faults", type=parse_faults, default=FAULTS,
                   help=f"comma-separated subset of: {', '.join(FAULTS)}; 'all' (default) or 'none'")
    p.add_argument("--seeds", type=count, default=1, help="run this many consecutive seeds from --seed")
    p.add_argument("--out", default="sim-out", help="directory for the journal of a failing run")
    p.add_argument("--no-shrink", action="store_true", help="do not search a shorter failing run")
    p.add_argument("--journal", action="store_true", help="write the journal even when the run passes")
    p.set_defaults(func=run)


def parse_faults(text: str) -> tuple[str, ...]:
    """``--faults``: 'all', 'none' or known fault names (argparse exits 2 on an unknown one)."""
    import argparse
    from kfold.sim.world import FAULTS
    if text == "all":
        return FAULTS
    if text in ("none", ""):
        return ()
    asked = tuple(f.strip() for f in text.split(",") if f.strip())
    for f in asked:
        if f not in FAULTS:
            raise argparse.ArgumentTypeError(f"unknown fault {f!r}; known: {', '.join(FAULTS)}, or 'all'/'none'")
    return asked


def run(args) -> int:
    faults = args.faults
    logging.disable(logging.CRITICAL)  # the daemon's own logs would drown the report
    try:
        return _run_seeds(args, faults)
    finally:
        logging.disable(logging.NOTSET)


def _run_seeds(args, faults: tuple[str, ...]) -> int:
    from kfold.sim.report import shrink, write_journal
    from kfold.sim.world import Options, simulate
    out = Path(args.out)
    failed = 0
    for seed in range(args.seed, args.seed + args.seeds):
        opts = Options(seed=seed, steps=args.steps, sessions=args.sessions, faults=faults)
        r = simulate(opts)
        fired = ", ".join(f"{k}={v}" for k, v in r.fired.items()) or "none"
        if r.failure is None:
            print(f"seed {seed}: ok: {r.steps} steps, {r.records} records, journal sha256 {r.digest[:16]}; "
                  f"faults fired: {fired}")
            if args.journal:
                out.mkdir(parents=True, exist_ok=True)
                print(f"  journal: {write_journal(r.store, out / f'seed-{seed}.sqlite')}")
                _others(r, out, seed)
            continue
        failed += 1
        out.mkdir(parents=True, exist_ok=True)
        path = write_journal(r.store, out / f"seed-{seed}.sqlite")
        print(f"seed {seed}: FAILED invariant {r.failure.invariant} at step {r.failure.step}: {r.failure.detail}")
        print(f"  faults fired: {fired}")
        print(f"  journal: {path}  (kfold replay {path}; kfold trace {path} local/team/<session>)"
              + (f"; {len(r.lost)} earlier journal(s) were lost by the run itself" if r.lost else ""))
        _others(r, out, seed)
        world = out / f"seed-{seed}.world.txt"
        world.write_text("\n".join(r.world_log) + "\n")
        print(f"  what the world did ({world}):")
        for line in r.world_log[-12:]:
            print(f"    {line}")
        if not args.no_shrink:
            small, sr = shrink(opts, r.failure.invariant)
            if sr is not None:
                spath = write_journal(sr.store, out / f"seed-{seed}-shrunk.sqlite")
                print(f"  shrunk: kfold sim --seed {seed} --steps {small.steps} --sessions {small.sessions} "
                      f"--faults {','.join(small.faults) or 'none'}  ({sr.records} records, journal {spath})")
    return 1 if failed else 0


def _others(r, out: Path, seed: int) -> None:
    """The second daemon's journal (``second_daemon``), beside the first's."""
    from kfold.sim.report import write_journal
    for i, other in enumerate(r.others):
        print(f"  second daemon's journal: {write_journal(other, out / f'seed-{seed}-daemon{i + 2}.sqlite')}")
