"""Writing a run's journal for ``kfold replay``/``kfold trace``, and shrinking a failing run.

``write_journal(store, path)`` copies the run's (last life's) journal into a SQLite journal file.
``shrink(opts)`` searches for a smaller run that fails the same invariant: fewer steps (halving,
then trimming), fewer sessions, then fewer faults (each dropped while it still fails). The seed
stays; each candidate is a complete re-run, so the reproduction is exact by construction.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from kfold.sim.world import Options, Result, simulate


def write_journal(store: Any, path: str | Path) -> Path:
    path = Path(path)
    if path.exists():
        path.unlink()
    asyncio.run(_copy(store, path))
    return path


async def _copy(store: Any, path: Path) -> None:
    from journal.memory import MemoryJournal
    from journal.sqlite import SqliteJournal
    src, dst = MemoryJournal(store), SqliteJournal(path)
    await src.open()
    await dst.open()
    try:
        batch: list[Any] = []
        async for rec in src.read(1):
            batch.append(rec)
            if len(batch) == 500:
                await dst.append(batch)
                batch = []
        if batch:
            await dst.append(batch)
    finally:
        await dst.close()
        await src.close()


def shrink(opts: Options, invariant: str, budget: int = 40,
           run: Callable[[Options], Result] = simulate) -> tuple[Options, Result | None]:
    """The smallest options found (within ``budget`` re-runs) that still fail ``invariant``."""
    best, best_result, tries = opts, None, 0

    def fails(candidate: Options) -> Result | None:
        nonlocal tries
        tries += 1
        r = run(candidate)
        return r if r.failure is not None and r.failure.invariant == invariant else None

    def attempt(candidate: Options) -> bool:
        nonlocal best, best_result
        if tries >= budget or candidate == best:
            return False
        r = fails(candidate)
        if r is not None:
            best, best_result = candidate, r
            return True
        return False

    while best.steps > 1 and attempt(replace(best, steps=best.steps // 2)):
        pass
    for cut in (0.75, 0.9):
        attempt(replace(best, steps=max(1, int(best.steps * cut))))
    while best.sessions > 1 and attempt(replace(best, sessions=best.sessions - 1)):
        pass
    for fault in list(best.faults):
        attempt(replace(best, faults=tuple(f for f in best.faults if f != fault)))
    return best, best_result
