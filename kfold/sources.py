"""Open a journal for offline use: a SQLite journal file or its JSONL export, detected by content.

``iter_records`` yields records in sequence order up to ``until``. A broken checksum chain raises
``JournalCorrupt`` naming the first bad sequence number before any record past it is yielded.
"""
from __future__ import annotations

import asyncio
from typing import Iterator

from journal.records import Record

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(16) == SQLITE_MAGIC


def iter_records(path: str, until: int | None = None) -> Iterator[Record]:
    if is_sqlite(path):
        yield from _iter_sqlite(path, until)
        return
    from journal.jsonl import read_jsonl
    for rec in read_jsonl(path):
        if until is not None and rec.seq > until:
            return
        yield rec


def _iter_sqlite(path: str, until: int | None) -> Iterator[Record]:
    from journal.sqlite import SqliteJournal
    loop = asyncio.new_event_loop()
    journal = SqliteJournal(path, readonly=True)
    try:
        loop.run_until_complete(journal.open())
        agen = journal.read(1, until).__aiter__()
        while True:
            try:
                rec = loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                break
            yield rec
    finally:
        loop.run_until_complete(journal.close())
        loop.close()
