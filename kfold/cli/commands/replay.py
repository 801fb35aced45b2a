"""``kfold replay JOURNAL [--until SEQ] [--check] [--up-to-corruption] [--from-snapshot]``.

A journal whose oldest records were cut by retention (``journal.retention``), and an export of
it, is replayed from the snapshot its kept history continues (``kfold.offline.sources.start_point``), and
the output says where its history begins; ``--check`` then compares every effect journaled after
that snapshot (those emitted before it are in the snapshot's pending effects).

``--from-snapshot`` starts from the newest snapshot at or before ``--until`` (the daemon writes one
as ``journal.snapshot_ratio`` and friends say; an export carries the one it starts from) and
refolds only the records after it:
the same state as a full replay (tested), in the time of the tail. The records before the snapshot
are not read, so their chain is not verified either; a full replay does both.

On a terminal, stderr shows progress (records done / total, rate, time left); see
``kfold.offline.progress``.

The summary is followed by every object the machines track with its state (``MACHINE KEY STATE``;
``-o wide`` adds generation, target and rv; ``-o json|yaml`` prints the summary and the objects as
data). With ``--check``, a divergence names the fields that differ (``spec.ports[0].port: expected 80,
got 8080``: expected = journaled, got = recomputed), or an effect the current code emits that the
journal never issued (its key's head when the daemon was issuing; see ``kfold.offline.replay``).

Exit codes: 0 folded (and, with --check, no divergence); 1 divergence; 2 unreadable input (a
malformed or truncated JSONL file, a newer schema, a fold error); 3 a broken checksum chain (in a
journal, or in a sealed export: a record altered or missing).
"""
from __future__ import annotations

import sys


EXAMPLES = """examples:
  kfold replay journal.db                      # summary, then each object and its state
  kfold replay journal.db --check              # compare every journaled effect with the current code
  kfold replay export.jsonl --until 4200 -o wide
  kfold replay journal.db -o json | jq '.objects[] | select(.state == "Failed")'

exit codes: 0 folded (and, with --check, no divergence); 1 a divergence (its differing fields, or
the effect the journal never issued, on stderr); 2 bad arguments or unreadable input; 3 a broken checksum chain."""


def register(sub) -> None:
    import argparse
    from kfold.cli.args import seq_number
    p = sub.add_parser("replay", help="refold a journal (SQLite or JSONL) with the current code", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Refold a journal with the current code; list the objects it tracks and their state.")
    p.add_argument("journal", help="journal file (SQLite) or its JSONL export")
    p.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table",
                   help="the objects as an aligned table (default), a wider one, or the whole result as json/yaml")
    p.add_argument("--until", type=seq_number, default=None, metavar="SEQ", help="stop after this sequence number")
    p.add_argument("--check", action="store_true",
                   help="compare recomputed effects with the journaled ones; stop at the first divergence")
    p.add_argument("--up-to-corruption", action="store_true",
                   help="on a broken checksum chain, fold the records before the first bad one (still exits 3)")
    p.add_argument("--from-snapshot", action="store_true",
                   help="start from the newest snapshot at or before --until and refold only the records after it "
                        "(the records before it are neither read nor verified)")
    p.set_defaults(func=run)


def run(args) -> int:
    from kfold.offline.progress import counted
    from kfold.offline.replay import replay
    from kfold.offline.sources import first_bad_seq, input_error, input_error_code, iter_records

    name = f"kfold replay: {args.journal}"
    _tune_gc()
    try:
        start, note = _starting_point(args) if args.from_snapshot else _history_start(args)
        from_seq = start.seq + 1 if start is not None else 1
        # One pass: the reader verifies the chain as it goes and stops at the first bad link,
        # which ``_UpToCorruption`` turns into the end of the records (and remembers). Without
        # --up-to-corruption the records before it were folded for nothing; the answer is still 3.
        records = iter_records(args.journal, args.until, from_seq, projected=True)  # Pods from their projections
        records = _UpToCorruption(counted(records, args.journal, "replay --check" if args.check else "replay",
                                          args.until, from_seq=from_seq))
        result = replay(records, check=args.check, state=start)
        bad = records.bad
        if bad is None and result.divergence is not None:  # a broken chain after it still wins
            bad = first_bad_seq(args.journal, result.divergence.at_seq)
            bad = bad if bad is not None and (args.until is None or bad <= args.until) else None
    except Exception as exc:
        code = input_error_code(exc)
        if code is None:
            raise
        print(f"{name}: {input_error(exc)}", file=sys.stderr)
        return code
    if bad is not None and not args.up_to_corruption:
        why = f" ({records.reason})" if records.reason else ""
        print(f"{name}: checksum chain broken at seq {bad}{why}; refusing to fold past it "
              f"(--up-to-corruption folds records {from_seq}..{bad - 1})", file=sys.stderr)
        return 3
    _print(args, note, result)
    if result.divergence is not None:
        print(result.divergence.describe(), file=sys.stderr)
        return 1
    if bad is not None:
        print(f"{name}: stopped before the broken checksum chain at seq {bad}", file=sys.stderr)
        return 3
    if args.check:
        print("check: every journaled effect matches the current code")
    return 0


class _UpToCorruption:
    """The records of ``it`` until it raises ``JournalCorrupt``; ``bad`` is then its seq, ``reason`` its reason."""

    def __init__(self, it):
        self.it, self.bad, self.reason = it, None, ""

    def __iter__(self):
        from journal.store import JournalCorrupt
        try:
            yield from self.it
        except JournalCorrupt as exc:
            self.bad, self.reason = exc.seq, exc.reason


def _history_start(args) -> tuple:
    """(None, "") for a whole journal; else the state its kept history continues and a line saying so."""
    from kfold.offline.sources import start_point
    state, _, note = start_point(args.journal, args.until)
    return state, note


def _starting_point(args) -> tuple:
    """(state to start from or None, a line saying where replay started)."""
    from kfold.offline.sources import SnapshotUnreadable, history_start, latest_snapshot, stored_state
    snap = latest_snapshot(args.journal, args.until)
    if snap is None:
        state, note = _history_start(args)
        return state, note or f"no snapshot at or before seq {args.until or 'the end'}: folded from seq 1"
    try:
        state = stored_state(args.journal, snap)
    except SnapshotUnreadable as exc:  # a snapshot this kfold cannot read: a whole journal's records can be
        if exc.newer or history_start(args.journal) > 1:   # (a newer kfold's decisions follow it: not refolded)
            raise
        return None, f"snapshot at seq {snap[0]} not used ({exc}): folded from seq 1"
    return state, (f"started from the snapshot at seq {snap[0]}; records 1..{snap[0]} were neither "
                   f"read nor verified (a full replay does both)")


def _print(args, note: str, result) -> None:
    from kfold.offline.replay import objects
    rows = objects(result.state, wide=args.output != "table")
    if args.output in ("json", "yaml"):
        from kfold.cli.table import dump
        data = {"note": note or None, "records": result.records, "last_seq": result.state.seq,
                "effects": dict(sorted(result.effects.items())), "pending_effects": len(result.state.pending),
                "timers": len(result.state.timers), "in_flight": result.in_flight,
                "quarantined": sorted(result.state.quarantine), "objects": rows,
                "divergence": result.divergence.describe() if result.divergence is not None else None}
        print(dump(data, args.output))
        return
    from kfold.cli.table import table
    if note:
        print(note)
    print(result.summary())
    if rows:
        print()
        print(table(rows, ("machine", "key", "state") + (() if args.output == "table" else
                                                           ("generation", "target", "rv"))))


def _tune_gc() -> None:
    """See ``kfold.daemon.gc_policy``: young collections rarely, nothing loaded so far rescanned."""
    from kfold.daemon import gc_policy
    gc_policy.set_thresholds()
    gc_policy.freeze()
