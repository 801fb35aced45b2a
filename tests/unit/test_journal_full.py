"""A full volume: the batch that does not fit is refused with the fix, nothing before it is lost,
and the journal goes on once there is room. (SQLite's ``max_page_count`` plays the full disk: it
fails an insert with the same ``SQLITE_FULL``.)"""
from __future__ import annotations

import pytest

from journal.records import Command
from journal.sqlite import SqliteJournal
from journal.store import JournalFull


@pytest.mark.asyncio
async def test_a_full_volume_refuses_the_batch_keeps_everything_before_and_the_journal_goes_on(tmp_path):
    path = tmp_path / "journal.db"
    j = SqliteJournal(path)
    await j.open()
    try:
        await j.append([Command(name=f"c{i}") for i in range(10)])
        async with j._db.execute("PRAGMA page_count") as cur:
            (pages,) = await cur.fetchone()
        await j._db.execute(f"PRAGMA max_page_count = {pages + 2}")
        with pytest.raises(JournalFull) as err:
            await j.append([Command(name="big", args={"pad": "x" * 50_000}) for _ in range(5)])
        message = str(err.value)
        assert "no room to journal seq 11..15" in message and "everything up to seq 10 is intact" in message
        assert "MB free" in message and "move journal.path" in message
        assert j.last_seq == 10
        await j._db.execute("PRAGMA max_page_count = 1073741823")  # room again
        assert [r.seq for r in await j.append([Command(name="after")])] == [11]
        assert await j.verify() is None
        assert [r.name for r in [rec async for rec in j.read()]] == [f"c{i}" for i in range(10)] + ["after"]
    finally:
        await j.close()
