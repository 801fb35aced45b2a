#!/usr/bin/env python3
"""walk.py - which of kfold's source files one fold step enters.

Folds the golden journal (tests/data/golden_session.jsonl) up to a point, then folds one record
with a profiler on and prints every file of this repository whose code ran, with the number of
calls made into it. Two walks (issue 35's measure of how far a reader must follow one input):

  pod        the pod ``demo-g1`` MODIFIED while its Session brings up (journal record 22)
  configure  ``session.configure`` folded again while that Session is Ready (after record 35)

Usage: python scripts/walk.py [pod|configure ...] [--json]
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
WALKS = {"pod": (21, 22), "configure": (35, 1)}   # (fold records 1..N first, then fold this record)
PLACES = ("engine", "journal", "kfold")


def walk(name: str) -> Counter:
    before, seq = WALKS[name]
    records = list(read_jsonl(GOLDEN))
    state, _ = fold_many(initial_state(), records[:before])
    record = records[seq - 1].model_copy(update={"seq": before + 1})
    calls: Counter = Counter()

    def prof(frame, event, _arg):
        if event == "call":
            f = frame.f_code.co_filename
            if f.startswith(str(ROOT) + os.sep):
                rel = os.path.relpath(f, ROOT)
                if rel.split(os.sep, 1)[0] in PLACES:
                    calls[rel] += 1
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
    a = ap.parse_args()
    for w in a.walks:
        if w not in WALKS:
            ap.exit(2, f"walk.py: unknown walk {w!r}: choose from {', '.join(sorted(WALKS))}\n")
    a.walks = a.walks or sorted(WALKS)
    out = {w: dict(sorted(walk(w).items())) for w in a.walks}
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    for w, files in out.items():
        print(f"{w}: {len(files)} files, {sum(files.values())} calls")
        for f, n in files.items():
            print(f"  {n:5d}  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
