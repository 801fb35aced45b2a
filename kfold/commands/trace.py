"""``kfold trace JOURNAL KEY``: every record that changed KEY's decision, with the effects on it."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("trace", help="show how the decisions about one object evolved in a journal")
    p.add_argument("journal")
    p.add_argument("key", help="object key <cluster>/<namespace>/<name>, as in replay output")
    p.add_argument("--until", type=int, default=None, metavar="SEQ")
    p.set_defaults(func=run)


def run(args) -> int:
    from kfold.replay import trace
    from kfold.sources import input_error_code, iter_records

    shown = 0
    try:
        for line in trace(iter_records(args.journal, args.until), args.key):
            print(line)
            shown += 1
    except Exception as exc:
        code = input_error_code(exc)
        if code is None:
            raise
        print(f"kfold trace: {args.journal}: {exc}", file=sys.stderr)
        return code
    if not shown:
        hint = "" if args.key.count("/") >= 2 else \
            " (a key is <cluster>/<namespace>/<name>, as `kfold replay` and the logs show it, e.g. local/ns/demo)"
        print(f"kfold trace: no record touched {args.key}{hint}", file=sys.stderr)
        return 1
    return 0
