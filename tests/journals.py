"""The in-memory journal as daemon tests use it: ``journal.memory.MemoryJournal`` (the contract-
tested one) plus what those tests read back, and a kill -9 (``crash``)."""
from __future__ import annotations

from typing import Any

from journal.memory import MemoryJournal, MemoryStore
from journal.records import parse_record


class TestJournal(MemoryJournal):
    """Opens itself on first use, so a test can hand a fresh one to a ``Daemon``."""

    __test__ = False

    def __init__(self, store: MemoryStore | None = None):
        super().__init__(store)
        self.closed = False

    async def _ready(self) -> None:
        if not self._opened:
            await self.open()

    async def append(self, drafts):
        await self._ready()
        return await super().append(drafts)

    def seal(self, drafts):
        if not self._opened:   # the daemon seals synchronously: open the in-memory store at once
            opening = self.open()
            try:
                opening.send(None)
            except StopIteration:
                pass
            else:
                raise AssertionError("the in-memory journal suspended while opening")
        return super().seal(drafts)

    async def read(self, from_seq: int = 1, until: int | None = None):
        await self._ready()
        async for rec in super().read(from_seq, until):
            yield rec

    async def latest_snapshot(self, max_seq: int | None = None):
        await self._ready()
        return await super().latest_snapshot(max_seq)

    async def close(self) -> None:
        await super().close()
        self.closed = True

    @property
    def records(self) -> list[Any]:
        return [parse_record(row[3]) for _, row in sorted(self.store.rows.items())]

    @property
    def snapshots(self) -> list[tuple[int, bytes]]:
        return [(seq, data) for seq, (_, data, _) in sorted(self.store.snapshots.items())]

    def crash(self) -> "TestJournal":
        """What a restarted process would find: the same records and snapshots, nothing else."""
        return TestJournal(self.store)
