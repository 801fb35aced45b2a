"""The journal as the daemon sees it, and an in-memory one for tests.

The daemon needs: ``open()``, ``append(drafts) -> stamped records`` (durable when it returns),
``read(from_seq)`` (async iterator, in order), ``put_snapshot(seq, data)``,
``latest_snapshot() -> (seq, data) | None``, ``close()``, and ``size_bytes()`` for /metrics.
``open_journal(path)`` adapts the SQLite store (``journal.sqlite`` or ``journal.store``) to it.

``writer_lock(path)``: one ``kfold run`` per journal file (see its docstring).

``MemoryJournal`` keeps everything in lists; ``crash()`` returns a new journal holding exactly what
was appended (as a kill -9 would leave a durable journal), for recovery tests.
"""
from __future__ import annotations

import fcntl
import importlib
import os
import socket
from typing import IO, Any, AsyncIterator, Protocol


class Journal(Protocol):
    async def open(self) -> None: ...
    async def append(self, drafts: list[Any]) -> list[Any]: ...
    def read(self, from_seq: int = 1) -> AsyncIterator[Any]: ...
    async def put_snapshot(self, seq: int, data: bytes) -> None: ...
    async def latest_snapshot(self) -> tuple[int, bytes] | None: ...
    async def close(self) -> None: ...
    def size_bytes(self) -> int: ...


class MemoryJournal:
    def __init__(self) -> None:
        self.records: list[Any] = []
        self.snapshots: list[tuple[int, bytes]] = []
        self.closed = False
        self.appends = 0

    async def open(self) -> None:
        self.closed = False

    async def append(self, drafts: list[Any]) -> list[Any]:
        stamped = [d.stamped(len(self.records) + i + 1) for i, d in enumerate(drafts)]
        self.records.extend(stamped)
        self.appends += 1
        return stamped

    async def read(self, from_seq: int = 1) -> AsyncIterator[Any]:
        for rec in list(self.records[from_seq - 1:]):
            yield rec

    async def put_snapshot(self, seq: int, data: bytes) -> None:
        self.snapshots.append((seq, data))

    async def latest_snapshot(self) -> tuple[int, bytes] | None:
        return self.snapshots[-1] if self.snapshots else None

    async def close(self) -> None:
        self.closed = True

    def size_bytes(self) -> int:
        return sum(len(r.model_dump_json()) for r in self.records)

    def crash(self) -> "MemoryJournal":
        """What a restarted process would find: the same records and snapshots, nothing else."""
        j = MemoryJournal()
        j.records, j.snapshots = list(self.records), list(self.snapshots)
        return j


class SqliteAdapter:
    """Wraps the journal engineer's ``SqliteJournal`` (method names probed once, at open)."""

    def __init__(self, inner: Any, path: str):
        self.inner, self.path = inner, path

    async def open(self) -> None:
        await self.inner.open()

    async def append(self, drafts: list[Any]) -> list[Any]:
        return list(await self.inner.append(drafts))

    async def read(self, from_seq: int = 1) -> AsyncIterator[Any]:
        async for rec in self.inner.read(from_seq):
            yield rec

    async def put_snapshot(self, seq: int, data: bytes) -> None:
        await self.inner.put_snapshot(seq, data)

    async def latest_snapshot(self) -> tuple[int, bytes] | None:
        snap = await self.inner.latest_snapshot()
        if snap is None:
            return None
        if isinstance(snap, tuple):
            return int(snap[0]), bytes(snap[1])
        return int(getattr(snap, "seq")), bytes(getattr(snap, "data"))

    async def close(self) -> None:
        await self.inner.close()

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        return total


def open_journal(path: str) -> Journal:
    """The SQLite journal at ``path`` (not yet opened)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    for module in ("journal.sqlite", "journal.store"):
        try:
            cls = getattr(importlib.import_module(module), "SqliteJournal")
        except (ImportError, AttributeError):
            continue
        return SqliteAdapter(cls(path), path)
    raise RuntimeError("kfold: no SQLite journal store in this install (journal.sqlite.SqliteJournal)")


def writer_lock(path: str) -> IO[str]:
    """Hold an exclusive lock on ``<path>.lock`` for as long as the returned file stays open.

    Two daemons on one journal would both act on the cluster before the store's primary key
    stopped one of them at its first append (deletes included). So ``kfold run`` takes this lock
    before it reads anything; a second one is refused with the holder's pid and host and the fix.
    Caveat: ``flock`` binds processes sharing one kernel and a local filesystem (two containers on
    one node mounting the same volume included), not over NFS: keep the journal on a local volume.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lock = open(f"{path}.lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "a process that left no pid"
        lock.close()
        from journal.store import JournalError
        raise JournalError(f"is in use by another kfold run ({holder}); one daemon per journal: stop that "
                           f"one first, or give this one its own journal.path") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    lock.flush()
    return lock
