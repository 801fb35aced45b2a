"""How kfold's processes use CPython's cyclic collector.

Folding allocates ~60 short-lived objects per 1.2 KB record and keeps few of them (a small
decision record per object). With CPython's default thresholds (700, 10, 10) a full collection
runs every ~70k allocations and rescans every live object, the whole state and the loaded modules
included: in ``scripts/bench_journal.py`` that is a third of ingest and replay time. So:

- ``set_thresholds()``: a young collection every 100,000 net allocations instead of 700, and full
  ones as rarely as before relative to them. Only garbage in reference cycles waits longer;
  records, decisions and effects form none (reference counting frees them at once).
- ``freeze()``: what boot and recovery loaded (modules, schemas, machines, the recovered state)
  moves to the permanent generation and is never rescanned.

Used by ``kfold run`` (thresholds at start, freeze after recovery), ``kfold replay``/``trace``
and the benchmarks, which measure what the daemon does.
"""
from __future__ import annotations

import gc

THRESHOLDS = (100_000, 50, 100)


def set_thresholds() -> None:
    gc.set_threshold(*THRESHOLDS)


def freeze() -> None:
    gc.freeze()
