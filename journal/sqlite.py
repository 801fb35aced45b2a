"""``SqliteJournal``: the journal in one SQLite file (WAL), through aiosqlite.

Layout: ``journal(seq INTEGER PRIMARY KEY, at, kind, payload BLOB, chk, view BLOB)`` (the primary
key refuses a duplicate seq; ``view`` is the row's projection, ``journal.projection``, or NULL),
``meta(key, value)`` (schema version, salt, writer version, head) and ``snapshots(seq PRIMARY KEY,
data, chk)``. Rows are only ever inserted. A journal made before projections (no ``view`` column)
gets the column when opened for writing (its old rows keep NULL: read from their payloads); opened
read-only it is read without projections.

Durability choice: ``synchronous=FULL`` by default. In WAL mode NORMAL survives a process crash
but may lose the last transactions on power loss; FULL fsyncs the WAL at every commit. Invariant 3
("journal first") is about effects performed after a record is durable, so a lost tail would
turn performed effects into unknown ones; with group commit one fsync covers a whole batch, which
keeps FULL affordable (``scripts/bench_journal.py --synchronous`` measures both).

Space: a new journal is created with ``auto_vacuum=INCREMENTAL`` (it can only be chosen before
the first table exists), so after a retention cut ``incremental_vacuum`` hands the freed pages back
and the file shrinks; a journal created before that is converted by one full ``VACUUM`` at its
first cut (it needs free space about the file's size, once). ``journal_size_limit`` truncates the
WAL after checkpoints, so it does not keep the size of the largest transaction ever written.

Two connections: the writer (used only by the writer task, one transaction per batch) and a
read-only reader, so a read never sees a transaction that is still open.
"""
from __future__ import annotations

import functools
import shutil
import sqlite3
from pathlib import Path

import aiosqlite

from journal.chain import DuplicateSeq, JournalCorrupt, JournalError, JournalFull, Row, check_schema, kfold_version
from journal.records import SCHEMA_VERSION
from journal.redact import new_salt
from journal.store import Journal

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, at INTEGER, kind TEXT NOT NULL,"
    " payload BLOB NOT NULL, chk INTEGER NOT NULL, view BLOB)",
    "CREATE TABLE IF NOT EXISTS snapshots (seq INTEGER PRIMARY KEY, data BLOB NOT NULL, chk INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
)
# Rows go in as multi-row INSERTs, not ``executemany``: executemany binds and steps row by row and
# takes the GIL back from the folding thread for every row (measured: 10k rows/s while the main
# thread computes, against 60k for 500-row statements, 94k vs 153k when idle). One statement per
# 500 rows (3000 parameters, under SQLite's 32766 limit) holds the GIL only to bind.
_ROWS_PER_INSERT = 500
_WAL_LIMIT = 64 << 20      # journal_size_limit: the WAL is truncated to this after a checkpoint
_INCREMENTAL = 2           # PRAGMA auto_vacuum's value for INCREMENTAL


@functools.lru_cache(maxsize=8)
def _insert(n: int) -> str:
    return "INSERT INTO journal (seq, at, kind, payload, chk, view) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?)"] * n)


class SqliteJournal(Journal):
    def __init__(self, path: str | Path, synchronous: str = "FULL", readonly: bool = False):
        super().__init__()
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError("synchronous must be FULL or NORMAL")
        self.path = str(path)
        self.synchronous = synchronous
        self.readonly = readonly  # offline readers (replay, export): nothing is created or written
        self._db: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._views = "view"  # the projection column, or NULL in its place (a journal made before it)

    async def _load_meta(self) -> tuple[bytes, int, int]:
        if self.readonly:
            return await self._load_meta_readonly()
        self._db = await aiosqlite.connect(self.path)
        try:
            await self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before any table: see the module doc
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute(f"PRAGMA journal_size_limit={_WAL_LIMIT}")
            await self._db.execute(f"PRAGMA synchronous={self.synchronous}")
            meta = await self._meta_or_create()
            check_schema(int(meta["schema_version"]), _text(meta.get("written_by")), self.path)
            if not await _has_views(self._db):  # made before projections: the column, NULL in old rows
                await self._db.execute("ALTER TABLE journal ADD COLUMN view BLOB")
                await self._db.commit()
        except BaseException as exc:
            await self._db.close()
            if _is_full(exc):
                raise JournalFull(f"{self.path}: no room to open or create the journal ({self._free()} on "
                                  f"its volume): free space on the volume or move journal.path to a "
                                  f"larger one, then start kfold again") from None
            raise
        self._reader = await aiosqlite.connect(self.path)
        await self._reader.execute("PRAGMA query_only=1")
        seq, chk = _text(meta["head"]).split()
        return bytes(meta["salt"]), int(seq), int(chk)

    async def _load_meta_readonly(self) -> tuple[bytes, int, int]:
        self._db = await aiosqlite.connect(f"file:{Path(self.path).absolute()}?mode=ro", uri=True)
        self._reader = self._db
        try:
            async with self._db.execute("SELECT name FROM sqlite_master WHERE name='meta'") as cur:
                if await cur.fetchone() is None:
                    raise JournalError(f"{self.path} is not a kfold journal (no meta table)")
            async with self._db.execute("SELECT key, value FROM meta") as cur:
                meta = {k: v for k, v in await cur.fetchall()}
            check_schema(int(meta["schema_version"]), _text(meta.get("written_by")), self.path)
            self._views = "view" if await _has_views(self._db) else "NULL"
        except BaseException:
            await self._release()
            raise
        seq, chk = _text(meta["head"]).split()
        return bytes(meta["salt"]), int(seq), int(chk)

    async def _meta_or_create(self) -> dict[str, object]:
        async with self._db.execute("SELECT name FROM sqlite_master WHERE name='meta'") as cur:
            exists = await cur.fetchone() is not None
        if not exists:
            for stmt in _SCHEMA:
                await self._db.execute(stmt)
            await self._db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", [
                ("schema_version", str(SCHEMA_VERSION)), ("salt", new_salt()),
                ("written_by", kfold_version()), ("head", "0 0")])
            await self._db.commit()
        async with self._db.execute("SELECT key, value FROM meta") as cur:
            return {k: v for k, v in await cur.fetchall()}

    async def _commit(self, rows: list[Row], snaps: list[tuple[int, bytes, int]], head: tuple[int, int]) -> None:
        # The whole transaction is ONE call on aiosqlite's thread (its ``_execute``, pinned in
        # constraints.txt): one await per statement would need the event loop between statements,
        # and the loop is busy folding the next batch (``Journal.seal`` runs ahead) meanwhile.
        try:
            await self._db._execute(_transaction, self._db._conn, rows, snaps, head)
        except sqlite3.IntegrityError as exc:
            raise DuplicateSeq(f"seq {rows[0][0]}..{rows[-1][0]} refused by the store: {exc}") from None
        except sqlite3.OperationalError as exc:
            if _is_full(exc):
                raise self._full(rows, head) from None
            raise

    def _free(self) -> str:
        try:
            return f"{shutil.disk_usage(Path(self.path).absolute().parent).free / 1e6:.1f} MB free"
        except OSError:
            return "free space unknown"

    def _full(self, rows: list[Row], head: tuple[int, int]) -> JournalFull:
        if not rows:  # a snapshot alone: no record was refused
            return JournalFull(
                f"{self.path}: no room to store a snapshot ({self._free()} on its volume): every record "
                f"up to seq {head[0]} is intact; free space on the volume or move journal.path to a "
                f"larger one, then start kfold again")
        first = rows[0][0]
        return JournalFull(
            f"{self.path}: no room to journal seq {first}..{head[0]} ({self._free()} on its volume): that batch "
            f"was not journaled and everything up to seq {first - 1} is intact; free space on the "
            f"volume or move journal.path to a larger one, then start kfold again")

    async def _load_history(self) -> tuple[tuple[int, int], list[int], int]:
        async with self._reader.execute("SELECT value FROM meta WHERE key = 'base'") as cur:
            row = await cur.fetchone()
        seq, chk = _text(row[0]).split() if row else (0, 0)
        async with self._reader.execute("SELECT seq, length(data) FROM snapshots ORDER BY seq") as cur:
            snaps = await cur.fetchall()
        return (int(seq), int(chk)), [s for s, _ in snaps], snaps[-1][1] if snaps else 0

    async def _cut(self, upto: int, chk: int) -> None:
        db = self._db
        try:
            await db.execute("DELETE FROM journal WHERE seq <= ?", (upto,))
            await db.execute("DELETE FROM snapshots WHERE seq < ?", (upto,))
            await db.execute("INSERT OR REPLACE INTO meta VALUES ('base', ?)", (f"{upto} {chk}",))
            await db.commit()
        except BaseException:
            await db.rollback()
            raise

    async def _shrink(self) -> None:
        async with self._db.execute("PRAGMA auto_vacuum") as cur:
            (mode,) = await cur.fetchone()
        if mode != _INCREMENTAL:  # a journal created before auto_vacuum: converted once
            await self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            await self._db.execute("VACUUM")
        else:  # stepped to the end (each step frees pages), then committed
            await self._db.execute_fetchall("PRAGMA incremental_vacuum")
            await self._db.commit()
        await self._db.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")

    def size_bytes(self) -> int:
        """The database file plus its WAL (what the volume holds)."""
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += Path(self.path + suffix).stat().st_size
            except OSError:
                pass
        return total

    async def _fetch(self, first: int, last: int, views: bool = False) -> list[Row]:
        # one call on aiosqlite's thread (not execute + fetchall + close): a fetch started ahead
        # runs there whole while the loop's thread parses and folds (Journal.read_batches)
        return list(await self._reader.execute_fetchall(
            f"SELECT seq, at, kind, payload, chk, {self._views if views else 'NULL'} FROM journal"
            " WHERE seq BETWEEN ? AND ? ORDER BY seq", (first, last)))

    async def _chk_before(self, seq: int) -> int:
        if seq <= 1:
            return 0
        async with self._reader.execute("SELECT chk FROM journal WHERE seq = ?", (seq - 1,)) as cur:
            row = await cur.fetchone()
        if row is None:
            raise JournalCorrupt(seq - 1, f"record {seq - 1} is missing")
        return row[0]

    async def _snapshot_at_most(self, seq: int) -> tuple[int, bytes, int] | None:
        async with self._reader.execute(
                "SELECT seq, data, chk FROM snapshots WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)) as cur:
            return await cur.fetchone()

    async def _release(self) -> None:
        for conn in {id(c): c for c in (self._reader, self._db) if c is not None}.values():
            await conn.close()
        self._reader = self._db = None


def _transaction(db: sqlite3.Connection, rows: list[Row], snaps: list[tuple[int, bytes, int]],
                 head: tuple[int, int]) -> None:
    """Insert rows and snapshots, set the head, commit; roll back on any error (store's thread)."""
    try:
        for i in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[i:i + _ROWS_PER_INSERT]
            db.execute(_insert(len(chunk)), [v for row in chunk for v in row])
        if snaps:
            db.executemany("INSERT OR IGNORE INTO snapshots VALUES (?, ?, ?)", snaps)
        db.execute("UPDATE meta SET value = ? WHERE key = 'head'", (f"{head[0]} {head[1]}",))
        db.commit()
    except BaseException:
        db.rollback()
        raise


async def _has_views(db: aiosqlite.Connection) -> bool:
    return any(col[1] == "view" for col in await db.execute_fetchall("PRAGMA table_info(journal)"))


def _is_full(exc: BaseException) -> bool:
    """SQLITE_FULL: the volume (or ``max_page_count``) has no room."""
    return isinstance(exc, sqlite3.OperationalError) and (
        getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "is full" in str(exc))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


__all__ = ["SqliteJournal"]
