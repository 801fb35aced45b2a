"""Open a journal for offline use: a SQLite journal file or its JSONL export, detected by content.

- ``iter_records`` yields records in sequence order up to ``until``. A broken checksum chain
  raises ``JournalCorrupt`` naming the first bad sequence number; no record past it is yielded.
- ``first_bad_seq`` verifies the chain (from ``from_seq``) without folding (SQLite only; a JSONL
  export carries no checksums: it is meant to be edited, and the fold's own sequence check still
  applies).
- ``latest_snapshot`` is the newest state snapshot at or before a seq (SQLite only).
- ``history_start`` is where the kept history begins: 1, or after the records retention cut
  (SQLite only; a JSONL file begins where it begins).
"""
from __future__ import annotations

import asyncio
from typing import Iterator

from journal.records import Record

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(16) == SQLITE_MAGIC


def first_bad_seq(path: str, from_seq: int = 1) -> int | None:
    if not is_sqlite(path):
        return None
    return asyncio.run(_with_journal(path, lambda j: j.verify(from_seq)))


def latest_snapshot(path: str, until: int | None = None) -> tuple[int, bytes] | None:
    """``(seq, data)`` of the newest snapshot at or before ``until``; ``JournalCorrupt`` if its
    checksum fails."""
    return asyncio.run(_with_journal(path, lambda j: j.latest_snapshot(until)))


def history_start(path: str) -> int:
    if not is_sqlite(path):
        return 1
    return asyncio.run(_with_journal(path, _first_seq))


async def _first_seq(journal) -> int:
    return journal.first_seq


async def _with_journal(path: str, use):
    from journal.sqlite import SqliteJournal
    journal = SqliteJournal(path, readonly=True)
    await journal.open()
    try:
        return await use(journal)
    finally:
        await journal.close()


def iter_records(path: str, until: int | None = None, from_seq: int = 1, projected: bool = False) -> Iterator[Record]:
    """``projected``: records as the fold reads them (``Journal.read_batches``); only to fold."""
    if is_sqlite(path):
        yield from _iter_sqlite(path, until, from_seq, projected)
        return
    from journal.jsonl import read_jsonl
    for rec in read_jsonl(path):
        if until is not None and rec.seq > until:
            return
        if rec.seq >= from_seq:
            yield rec


def _iter_sqlite(path: str, until: int | None, from_seq: int = 1, projected: bool = False) -> Iterator[Record]:
    from journal.sqlite import SqliteJournal
    from journal.store import PARSE_BATCH
    loop = asyncio.new_event_loop()
    journal = SqliteJournal(path, readonly=True)
    try:
        loop.run_until_complete(journal.open())
        rows_read = journal.read_rows(from_seq, until, views=projected)
        try:  # the loop turns once per fetched batch; the rows are parsed and yielded a slice at a time
            while True:
                try:
                    rows = loop.run_until_complete(rows_read.__anext__())
                except StopAsyncIteration:
                    break
                for i in range(0, len(rows), PARSE_BATCH):
                    yield from journal.parse(rows[i:i + PARSE_BATCH], projected)
        finally:
            loop.run_until_complete(rows_read.aclose())
    finally:
        loop.run_until_complete(journal.close())
        loop.close()


def input_error_code(exc: BaseException) -> int | None:
    """The exit code for a journal kfold cannot read as asked (3: broken checksum chain; 2: a
    malformed JSONL line, an unknown record kind, a newer schema, a fold error, an unreadable
    file), or None for anything else (a bug: let it raise)."""
    from engine.core import FoldError
    from journal.records import RecordError
    from journal.store import JournalCorrupt, JournalError
    if isinstance(exc, JournalCorrupt):
        return 3
    if isinstance(exc, (JournalError, RecordError, FoldError, OSError)):
        return 2
    return None
