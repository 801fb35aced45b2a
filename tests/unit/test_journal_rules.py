"""Journal rules the mutation run (scripts/mutation.py, journal) found unpinned, each stated from
its contract: the JSONL reader's errors, the SQLite store's refusals and its space pragmas,
retention's archive, and redaction of last-applied annotations, Secret-shaped items and effects."""
from __future__ import annotations
