"""``kfold export JOURNAL [-o FILE] [--since SEQ] [--until SEQ] [--unsealed]``: the journal as JSONL.

The export (format: ``journal.jsonl``, docs/journal.md) holds the kept history: from seq 1, or,
when retention cut the journal's head, from the oldest kept snapshot, which it carries, so
``kfold replay``, ``replay --check``, ``trace``, ``ui`` and ``repos`` read it as they read the
journal. ``--since SEQ`` begins later, at the newest snapshot before SEQ (a smaller file for a
long journal; record SEQ and all after it are in it). It is sealed onto the journal's checksum chain, so a reader finds a record altered,
missing or cut off; ``--unsealed`` leaves the seal out, for a file meant to be edited by hand.

On a terminal, stderr shows progress while it writes (``kfold.offline.progress``)."""
from __future__ import annotations

import sys


EXAMPLES = """examples:
  kfold export /var/lib/kfold/journal.db -o bug-report.jsonl
  kfold export journal.db --since 120000 --until 125000 -o window.jsonl
  kfold export journal.db --unsealed | less

exit codes: 0 written; 2 unreadable input or bad arguments; 3 a broken checksum chain (the records
before it were written)."""


def register(sub) -> None:
    import argparse
    from kfold.cli.args import seq_number
    p = sub.add_parser("export", help="write a journal as JSONL (for bug reports; kfold replay reads it)",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("journal", help="journal file (SQLite) or a JSONL export")
    p.add_argument("-o", "--output", default="-", metavar="FILE", help="output file (default: stdout)")
    p.add_argument("--until", type=seq_number, default=None, metavar="SEQ", help="stop after this sequence number")
    p.add_argument("--since", type=seq_number, default=None, metavar="SEQ",
                   help="begin at the newest snapshot before SEQ (SQLite journals): record SEQ and every one after "
                        "it are in the export, which carries that snapshot")
    p.add_argument("--unsealed", action="store_true",
                   help="no checksum chain: readers trust the file as written (for hand edits)")
    p.set_defaults(func=run)


def run(args) -> int:
    from kfold.offline.progress import counted
    from kfold.offline.sources import export, input_error, input_error_code

    def progress(rows, first):
        return counted(rows, args.journal, "export", args.until, from_seq=first)

    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    try:
        first, n = export(args.journal, out, args.until, sealed=not args.unsealed, progress=progress, since=args.since)
    except Exception as exc:
        code = input_error_code(exc)
        if code is None:
            raise
        kept = " (records before it were written, without the end line)" if code == 3 else ""
        print(f"kfold export: {args.journal}: {input_error(exc)}{kept}", file=sys.stderr)
        return code
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    if first > 1:
        why = "--since" if args.since is not None and args.since >= first else "retention cut the records before it"
        print(f"kfold export: the export begins at seq {first} ({why}) and carries the snapshot at seq {first - 1}",
              file=sys.stderr)
    print(f"kfold export: {n} records", file=sys.stderr)
    return 0
