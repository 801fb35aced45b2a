"""The export format (``journal.jsonl``): the header and the snapshot it carries, chain lines, the
end line; and what the seal finds inside an export: a record missing or altered, a file cut short."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from journal.chain import JournalCorrupt, link
from journal.jsonl import CHAIN_EVERY, ExportWriter, JsonlError, Start, positioned, read_start
from journal.records import Command, dump_record
from tests.harness import T0
from tests.unit.test_export_cut import _edit


def commands(first: int, n: int) -> list[Command]:
    return [Command(seq=s, at=T0 + s, name="noop", args={"i": s}) for s in range(first, first + n)]


def write(path: Path, records, start: Start) -> Path:
    with open(path, "wb") as f:
        w = ExportWriter(f, start)
        w.rows((r.seq, r.at, r.rec, dump_record(r)) for r in records)
        w.end()
    return path


def test_a_sealed_export_carries_its_start_snapshot_verbatim_and_chain_lines_every_block(tmp_path):
    snap = (40, b'{"format":1,"seq":40}')
    records = commands(41, 2 * CHAIN_EVERY + 5)
    path = write(tmp_path / "x.jsonl", records, Start(41, snap, 12345))
    lines = path.read_bytes().splitlines()
    header = orjson.loads(lines[0])
    assert header["kfold_export"] == 1 and header["first_seq"] == 41 and header["chain"] == 12345
    assert lines[1] == snap[1]
    marks = [orjson.loads(l) for l in lines if l.startswith(b'{"kfold_')][1:]
    chk = 12345
    for r in records:
        chk = link(chk, r.seq, r.at, r.rec, dump_record(r))
    assert marks[:2] == [{"kfold_chain": 140, "chk": marks[0]["chk"]}, {"kfold_chain": 240, "chk": marks[1]["chk"]}]
    assert marks[-1] == {"kfold_end": 245, "records": 205, "chk": chk}
    assert read_start(path) == Start(41, snap, 12345)
    assert [r for r, _ in positioned(path)] == records


def test_an_unsealed_whole_export_is_plain_records_as_before(tmp_path):
    records = commands(1, 3)
    path = write(tmp_path / "x.jsonl", records, Start(1, None, None))
    assert path.read_bytes() == b"".join(dump_record(r) + b"\n" for r in records)
    assert [r for r, _ in positioned(path)] == records


def test_a_record_missing_inside_the_export_is_named_and_nothing_after_it_is_yielded(tmp_path):
    path = write(tmp_path / "x.jsonl", commands(41, 250), Start(41, (40, b"{}"), 7))
    _edit(path, 180, lambda line: [])
    got = []
    with pytest.raises(JournalCorrupt, match="record 180 is missing") as err:
        got.extend(r.seq for r, _ in positioned(path))
    assert err.value.seq == 180 and got == list(range(41, 141)), "only the verified blocks before it"


def test_an_altered_record_is_named_by_its_block(tmp_path):
    path = write(tmp_path / "x.jsonl", commands(41, 250), Start(41, (40, b"{}"), 7))
    _edit(path, 180, lambda line: [line.replace(b'"i":180', b'"i":181')])
    with pytest.raises(JournalCorrupt, match=r"checksum mismatch in records 141\.\.240") as err:
        list(positioned(path))
    assert err.value.seq == 141


def test_an_altered_snapshot_is_refused(tmp_path):
    path = write(tmp_path / "x.jsonl", commands(41, 3), Start(41, (40, b'{"seq":40}'), 7))
    path.write_bytes(path.read_bytes().replace(b'{"seq":40}', b'{"seq":41}', 1))
    with pytest.raises(JournalCorrupt, match="snapshot's checksum does not match"):
        read_start(path)


@pytest.mark.parametrize("cut_at", ["end-line", "mid-line", "after-header"])
def test_a_truncated_export_is_refused_as_cut_short(tmp_path, cut_at):
    path = write(tmp_path / "x.jsonl", commands(41, 30), Start(41, (40, b"{}"), 7))
    data = path.read_bytes()
    data = {"end-line": data[:data.rindex(b'{"kfold_end"')], "mid-line": data[:len(data) // 2],
            "after-header": data[:data.index(b"\n") + 1]}[cut_at]
    path.write_bytes(data)
    with pytest.raises(JsonlError):
        list(positioned(path))
