"""``MemoryJournal``: the journal in memory, with the same behaviour as ``SqliteJournal``.

For fast tests and the contract suite. The rows live in a ``MemoryStore`` that two journals can
share (to play two writers on one journal) and that offers tampering hooks (``tamper``, ``delete``,
``truncate``, ``meta``) so corruption tests run against both implementations. The checksum chain,
head, schema check, group commit and redaction are the shared ``journal.store.Journal`` code.
"""
from __future__ import annotations

import asyncio

from journal.chain import DuplicateSeq, JournalCorrupt, Row, check_schema, kfold_version
from journal.records import SCHEMA_VERSION
from journal.redact import new_salt
from journal.store import Journal


class MemoryStore:
    """The "file": rows by seq, snapshots, and meta. Test hooks below change it behind the journal."""

    def __init__(self) -> None:
        self.rows: dict[int, Row] = {}
        self.snapshots: dict[int, tuple[int, bytes, int]] = {}
        self.meta: dict[str, object] = {"schema_version": SCHEMA_VERSION, "salt": new_salt(),
                                        "written_by": kfold_version(), "head": (0, 0),
                                        "base": (0, 0)}

    def tamper(self, seq: int, payload: bytes | None = None, chk: int | None = None) -> None:
        s, at, kind, old, old_chk, view = self.rows[seq]
        self.rows[seq] = (s, at, kind, old if payload is None else payload, old_chk if chk is None else chk, view)

    def tamper_view(self, seq: int, view: bytes | None) -> None:
        """Replace the stored projection of ``seq`` (``journal.projection``)."""
        self.rows[seq] = self.rows[seq][:5] + (view,)

    def delete(self, seq: int) -> None:
        del self.rows[seq]

    def truncate(self, after: int) -> None:
        for seq in [s for s in self.rows if s > after]:
            del self.rows[seq]


class MemoryJournal(Journal):
    def __init__(self, store: MemoryStore | None = None):
        super().__init__()
        self.store = store or MemoryStore()

    async def _load_meta(self) -> tuple[bytes, int, int]:
        meta = self.store.meta
        check_schema(int(meta["schema_version"]), str(meta["written_by"]), "the in-memory journal")
        seq, chk = meta["head"]
        return meta["salt"], seq, chk

    async def _commit(self, rows: list[Row], snaps: list[tuple[int, bytes, int]], head: tuple[int, int]) -> None:
        await asyncio.sleep(0)  # a commit takes a turn of the loop, as the real store's does
        taken = [r[0] for r in rows if r[0] in self.store.rows]
        if taken:
            raise DuplicateSeq(f"seq {taken[0]} refused by the store: already journaled")
        self.store.rows.update((r[0], r) for r in rows)
        for snap in snaps:
            self.store.snapshots.setdefault(snap[0], snap)
        self.store.meta["head"] = head

    async def _load_history(self) -> tuple[tuple[int, int], list[int], int]:
        seqs = sorted(self.store.snapshots)
        return self.store.meta.get("base", (0, 0)), seqs, len(self.store.snapshots[seqs[-1]][1]) if seqs else 0

    async def _cut(self, upto: int, chk: int) -> None:
        await asyncio.sleep(0)
        for seq in [s for s in self.store.rows if s <= upto]:
            del self.store.rows[seq]
        for seq in [s for s in self.store.snapshots if s < upto]:
            del self.store.snapshots[seq]
        self.store.meta["base"] = (upto, chk)

    async def _shrink(self) -> None:
        return None

    def size_bytes(self) -> int:
        """Payload and snapshot bytes held (the in-memory stand-in for the file's size)."""
        return (sum(len(r[3]) for r in self.store.rows.values())
                + sum(len(s[1]) for s in self.store.snapshots.values()))

    async def _fetch(self, first: int, last: int, views: bool = False) -> list[Row]:
        rows = self.store.rows
        found = [rows[s] for s in range(first, last + 1) if s in rows]
        return found if views else [r[:5] + (None,) for r in found]

    async def _chk_before(self, seq: int) -> int:
        if seq <= 1:
            return 0
        row = self.store.rows.get(seq - 1)
        if row is None:
            raise JournalCorrupt(seq - 1, f"record {seq - 1} is missing")
        return row[4]

    async def _snapshot_at_most(self, seq: int) -> tuple[int, bytes, int] | None:
        best = max((s for s in self.store.snapshots if s <= seq), default=None)
        return None if best is None else self.store.snapshots[best]

    async def _release(self) -> None:
        return None
