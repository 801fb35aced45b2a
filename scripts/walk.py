#!/usr/bin/env python3
"""walk.py - which of kfold's source files one fold step enters.

Folds the golden journal (tests/data/golden_session.jsonl) up to a point, then folds one record
with a profiler on and prints every file of this repository whose code ran, with the number of
calls made into it. Two walks (issue 35's measure of how far a reader must follow one input):

  pod        the pod ``demo-g1`` first seen Running while its Session brings up
  configure  ``session.configure`` folded again once that Session is first seen Ready

Both points are found by what the records say, not by their seq, so a re-recorded golden journal
walks the same steps. Before issue 35 (main 1b697e0, this script run there) the pod walk entered
16 files and the configure walk 15; tests/unit/test_walk.py holds both at half of that or less.

Usage: python scripts/walk.py [pod|configure ...] [--json] [--functions]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.core import fold, fold_many, initial_state  # noqa: E402
from journal.jsonl import read_jsonl  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden_session.jsonl"


def _phase(r) -> str:
    return ((getattr(r, "obj", None) or {}).get("status") or {}).get("phase", "")


def _first(records: list, kind: str, phase: str) -> int:
    """The index of the first observation of a ``kind`` whose status.phase is ``phase``."""
    return next(i for i, r in enumerate(records)
                if r.rec == "observed" and r.kind == kind and _phase(r) == phase)


def _points(name: str, records: list) -> tuple[int, int]:
    """(how many records to fold first, the index of the record then folded with the profiler on)."""
    if name == "pod":
        i = _first(records, "Pod", "Running")
        return i, i
    return _first(records, "Session", "Ready") + 1, 0   # the boot's session.configure, again


WALKS = ("pod", "configure")
PLACES = ("engine", "journal", "kfold")


def walk(name: str, functions: bool = False) -> Counter:
    """Calls per file entered (``functions``: per ``file:function``)."""
    records = list(read_jsonl(GOLDEN))
    before, at = _points(name, records)
    state, _ = fold_many(initial_state(), records[:before])
    record = records[at].model_copy(update={"seq": records[before - 1].seq + 1})
    calls: Counter = Counter()

    def prof(frame, event, _arg):
        if event == "call":
            f = frame.f_code.co_filename
            if f.startswith(str(ROOT) + os.sep):
                rel = os.path.relpath(f, ROOT)
                if rel.split(os.sep, 1)[0] in PLACES:
                    calls[f"{rel}:{frame.f_code.co_name}" if functions else rel] += 1
    sys.setprofile(prof)
    try:
        fold(state, record)
    finally:
        sys.setprofile(None)
    return calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("walks", nargs="*", metavar="WALK", help="pod, configure (default: both)")
    ap.add_argument("--json", action="store_true", help="one JSON object: walk -> {file: calls}")
    ap.add_argument("--functions", action="store_true", help="count calls per function (file:function)")
    a = ap.parse_args()
    for w in a.walks:
        if w not in WALKS:
            ap.exit(2, f"walk.py: unknown walk {w!r}: choose from {', '.join(sorted(WALKS))}\n")
    a.walks = a.walks or sorted(WALKS)
    out = {w: dict(sorted(walk(w, a.functions).items())) for w in a.walks}
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    for w, files in out.items():
        print(f"{w}: {len({f.split(':')[0] for f in files})} files, {sum(files.values())} calls")
        for f, n in files.items():
            print(f"  {n:5d}  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
