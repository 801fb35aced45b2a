"""``kfold replay JOURNAL [--until SEQ] [--check] [--up-to-corruption]``."""
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
    from journal.store import JournalCorrupt, JournalError
    from journal.jsonl import JsonlError
    from kfold.replay import replay
    from kfold.sources import iter_records

    corrupt = None
    good: list = []

    def records():
        nonlocal corrupt
        try:
            for rec in iter_records(args.journal, args.until):
                yield rec
        except JournalCorrupt as exc:
            corrupt = exc

    try:
        if args.up_to_corruption:
            result = replay(records(), check=args.check)
        else:
            source = records()
            good = list(_until_corrupt(source))
            if corrupt is not None:
                print(f"kfold replay: {args.journal}: {corrupt}", file=sys.stderr)
                print("kfold replay: refusing to fold a corrupt journal; "
                      "--up-to-corruption folds the records before the first bad one", file=sys.stderr)
                return 3
            result = replay(good, check=args.check)
    except (JournalError, JsonlError, OSError) as exc:
        print(f"kfold replay: {args.journal}: {exc}", file=sys.stderr)
        return 2
    print(result.summary())
    if corrupt is not None:
        print(f"kfold replay: stopped before corruption: {corrupt}", file=sys.stderr)
        return 3
    if result.divergence is not None:
        print(result.divergence.describe(), file=sys.stderr)
        return 1
    if args.check:
        print("check: every journaled effect matches the current code")
    return 0


def _until_corrupt(source):
    # Materialise only after verifying the whole chain, so nothing past a bad record is folded.
    return list(source)
