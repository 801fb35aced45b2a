"""``kfold replay JOURNAL [--until SEQ] [--check] [--up-to-corruption]``.

Exit codes: 0 folded (and, with --check, no divergence); 1 divergence; 2 unreadable input (a
malformed JSONL line, a newer schema, a fold error); 3 a broken checksum chain.
"""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("replay", help="refold a journal (SQLite or JSONL) with the current code")
    p.add_argument("journal", help="journal file (SQLite) or its JSONL export")
    p.add_argument("--until", type=int, default=None, metavar="SEQ", help="stop after this sequence number")
    p.add_argument("--check", action="store_true",
                   help="compare recomputed effects with the journaled ones; stop at the first divergence")
    p.add_argument("--up-to-corruption", action="store_true",
                   help="on a broken checksum chain, fold the records before the first bad one (still exits 3)")
    p.set_defaults(func=run)


def run(args) -> int:
    from kfold.replay import replay
    from kfold.sources import first_bad_seq, input_error_code, iter_records

    name = f"kfold replay: {args.journal}"
    _tune_gc()
    try:
        bad = first_bad_seq(args.journal)
        if bad is not None and (args.until is None or bad <= args.until) and not args.up_to_corruption:
            print(f"{name}: checksum chain broken at seq {bad}; refusing to fold past it "
                  f"(--up-to-corruption folds records 1..{bad - 1})", file=sys.stderr)
            return 3
        until = args.until if bad is None else min(bad - 1, args.until or bad - 1)
        result = replay(iter_records(args.journal, until), check=args.check)
    except Exception as exc:
        code = input_error_code(exc)
        if code is None:
            raise
        print(f"{name}: {exc}", file=sys.stderr)
        return code
    print(result.summary())
    if result.divergence is not None:
        print(result.divergence.describe(), file=sys.stderr)
        return 1
    if bad is not None:
        print(f"{name}: stopped before the broken checksum chain at seq {bad}", file=sys.stderr)
        return 3
    if args.check:
        print("check: every journaled effect matches the current code")
    return 0


def _tune_gc() -> None:
    """See ``kfold.gc_policy``: young collections rarely, nothing loaded so far rescanned."""
    from kfold import gc_policy
    gc_policy.set_thresholds()
    gc_policy.freeze()
