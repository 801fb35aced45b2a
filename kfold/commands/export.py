"""``kfold export JOURNAL [-o FILE]``: the journal as JSONL (one record per line), editable.

On a terminal, stderr shows progress while it writes (``kfold.progress``)."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("export", help="write a journal as JSONL (for bug reports; kfold replay reads it)")
    p.add_argument("journal")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument("--until", type=int, default=None, metavar="SEQ")
    p.set_defaults(func=run)


def run(args) -> int:
    from journal.jsonl import export_jsonl
    from kfold.progress import counted
    from kfold.sources import history_start, input_error_code, iter_records

    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    try:
        first = history_start(args.journal)
        if first > 1:
            print(f"kfold export: history begins at seq {first} (records before it were cut by retention)",
                  file=sys.stderr)
        n = export_jsonl(counted(iter_records(args.journal, args.until, first), args.journal, "export", args.until,
                                 from_seq=first), out)
    except Exception as exc:
        code = input_error_code(exc)
        if code is None:
            raise
        kept = " (records before it were written)" if code == 3 else ""
        print(f"kfold export: {args.journal}: {exc}{kept}", file=sys.stderr)
        return code
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    print(f"kfold export: {n} records", file=sys.stderr)
    return 0
