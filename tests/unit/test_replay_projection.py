"""``kfold replay`` on SQLite journals folds Pod records from their projections
(``journal.projection``) and ends exactly where a replay of the whole records ends: the golden
journal, a journal made before projections (read as it is, then given the column on a writable
open), and a journal whose projections were damaged (read from the payloads instead). A damaged
payload is still refused at its seq."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from journal.jsonl import read_jsonl
from journal.sqlite import SqliteJournal
from kfold.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_session.jsonl"


def journal_of(path: Path, records: list) -> Path:
    async def go():
        async with SqliteJournal(path) as j:
            await j.append(records)
    asyncio.run(go())
    return path


def replayed(capsys, *argv: str) -> tuple[int, str]:
    code = main(["replay", *argv])
    out, err = capsys.readouterr()
    return code, out + err


def pod_rows(path: Path) -> list[tuple[int, bytes | None]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT seq, payload, view FROM journal WHERE kind = 'observed' ORDER BY seq").fetchall()
    return [(seq, view) for seq, payload, view in rows if json.loads(payload)["kind"] == "Pod"]


@pytest.fixture
def golden(tmp_path, capsys) -> tuple[Path, str]:
    """The golden journal as a SQLite journal, and what replaying the JSONL prints."""
    code, expected = replayed(capsys, str(GOLDEN), "--check")
    assert code == 0, expected
    return journal_of(tmp_path / "golden.sqlite", list(read_jsonl(GOLDEN))), expected


def test_the_golden_journal_replays_from_its_projections_as_from_its_records(golden, capsys):
    path, expected = golden
    rows = pod_rows(path)
    assert len(rows) >= 10 and all(view is not None for _, view in rows)
    assert replayed(capsys, str(path), "--check") == (0, expected)


def test_a_journal_made_before_projections_replays_and_gets_them_on_a_writable_open(golden, capsys):
    path, expected = golden
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE journal DROP COLUMN view")  # what a journal of an earlier kfold looks like
    assert replayed(capsys, str(path), "--check") == (0, expected)  # read-only: no column, no change
    with sqlite3.connect(path) as db:
        assert "view" not in [c[1] for c in db.execute("PRAGMA table_info(journal)")]
    records = list(read_jsonl(GOLDEN))
    pod = next(r for r in records if r.rec == "observed" and r.kind == "Pod")

    async def append_one():
        async with SqliteJournal(path) as j:
            return await j.append([pod.model_copy(update={"seq": -1, "rv": "999"})])
    (added,) = asyncio.run(append_one())
    rows = pod_rows(path)
    assert [seq for seq, view in rows if view is not None] == [added.seq]  # old rows keep no projection
    code, out = replayed(capsys, str(path), "--check")
    assert code == 0 and f"records folded: {len(records) + 1}" in out


def test_damaged_projections_are_read_from_the_payloads_and_a_damaged_payload_is_refused(golden, capsys):
    path, expected = golden
    rows = pod_rows(path)
    with sqlite3.connect(path) as db:
        for seq, view in rows[::3]:  # a flipped bit in the object's JSON
            flipped = view[:-5] + bytes([view[-5] ^ 1]) + view[-4:]
            db.execute("UPDATE journal SET view = ? WHERE seq = ?", (flipped, seq))
        db.execute("UPDATE journal SET view = NULL WHERE seq = ?", (rows[1][0],))
    assert replayed(capsys, str(path), "--check") == (0, expected)
    seq = rows[4][0]
    with sqlite3.connect(path) as db:
        (payload,) = db.execute("SELECT payload FROM journal WHERE seq = ?", (seq,)).fetchone()
        db.execute("UPDATE journal SET payload = ? WHERE seq = ?", (payload.replace(b'"Pod"', b'"Pud"'), seq))
    code, out = replayed(capsys, str(path), "--check")
    assert code == 3 and f"checksum chain broken at seq {seq}" in out
