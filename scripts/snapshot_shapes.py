#!/usr/bin/env python3
"""Record what a snapshot of the current format persists: tests/data/upgrade/format-N.json.

    python scripts/snapshot_shapes.py            # write format-FORMAT.json, if it is not there yet
    python scripts/snapshot_shapes.py --diff     # what changed against the recorded FORMAT

N is ``engine.migrations.FORMAT``. A format's file is written once: after a decision record or an
effect changed shape, bump FORMAT, add its migration (``engine.migrations.MIGRATIONS``), then run
this to record the new format. It refuses to overwrite a recorded format that differs (exit 1),
since that would hide a change an older snapshot cannot follow.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.migrations import FORMAT, shapes  # noqa: E402

DATA = REPO / "tests" / "data" / "upgrade"


def recorded(fmt: int = FORMAT) -> list[dict] | None:
    path = DATA / f"format-{fmt}.json"
    return json.loads(path.read_text()) if path.exists() else None


def key(shape: dict) -> str:
    return json.dumps(shape["fields"], sort_keys=True, separators=(",", ":"))


def diff(old: list[dict], new: list[dict]) -> list[str]:
    """One line per record shape that is only in ``old`` (gone or changed) or only in ``new``."""
    before, after = {key(s): s for s in old}, {key(s): s for s in new}
    gone = [f"  - {s['record']}: {', '.join(sorted(s['fields']))}" for k, s in before.items() if k not in after]
    came = [f"  + {s['record']}: {', '.join(sorted(s['fields']))}" for k, s in after.items() if k not in before]
    return sorted(gone) + sorted(came)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--diff", action="store_true", help="print what changed against the recorded format")
    args = ap.parse_args(argv)
    now, old = shapes(), recorded()
    if old is not None:
        lines = diff(old, now)
        if args.diff or lines:
            print("\n".join(lines) or f"snapshot format {FORMAT}: unchanged")
        if lines:
            print(f"snapshot_shapes: format {FORMAT} is recorded and the code persists another shape: bump "
                  f"engine.migrations.FORMAT to {FORMAT + 1}, add MIGRATIONS[{FORMAT + 1}], then run this again",
                  file=sys.stderr)
            return 1
        return 0
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / f"format-{FORMAT}.json").write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    print(f"snapshot_shapes: recorded format {FORMAT} ({len(now)} record shapes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
