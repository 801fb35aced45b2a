"""JSONL export and import: round trip, and bad input named by line and field."""
from __future__ import annotations

import io

import pytest

from journal.jsonl import JsonlError, export_jsonl, read_jsonl
from journal.records import Command, Deadline, Observed, dump_record

RECORDS = [
    Command(seq=1, at=1_000, name="repo.bind", args={"env_present": ["GIT_TOKEN"]}),
    Observed(seq=2, at=1_001, cluster="c", api_version="v1", kind="Pod", namespace="ns", name="s-g1",
             event="ADDED", obj={"metadata": {"name": "s-g1"}}),
    Deadline(seq=3, at=2_000, timer="pod:c/ns/s-g1:budget", machine="pod", key="c/ns/s-g1", name="budget", due=1_999),
]


def write_lines(tmp_path, lines):
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_export_then_read_gives_the_same_records(tmp_path):
    path = tmp_path / "out.jsonl"
    with open(path, "wb") as f:
        assert export_jsonl(RECORDS, f) == 3
    assert list(read_jsonl(path)) == RECORDS
    assert path.read_bytes().count(b"\n") == 3


def test_export_writes_to_a_text_stream_too():
    out = io.StringIO()
    export_jsonl(RECORDS[:1], out)
    assert out.getvalue() == dump_record(RECORDS[0]).decode() + "\n"


def test_a_missing_field_names_the_line_and_the_field(tmp_path):
    bad = b'{"rec":"observed","seq":3,"cluster":"c","api_version":"v1","kind":"Pod","event":"ADDED"}'
    path = write_lines(tmp_path, [dump_record(r) for r in RECORDS[:2]] + [b"", b"", b"", b"", bad])
    with pytest.raises(JsonlError, match=r"^line 7: field observed\.name: Field required$") as err:
        list(read_jsonl(path))
    assert err.value.line == 7


@pytest.mark.parametrize("line, message", [
    (b'{"rec":"rumour","seq":1}', r"line 1: field rec: unknown record kind 'rumour'; expected one of observed, "),
    (b'{"seq":1,"name":"x"}', r"line 1: field rec: Field required"),
    (b'{"rec":"command","seq":1,"name":"x","at":"soon"}', r"line 1: field command\.at: Input should be a valid integer"),
    (b'{"rec":"command","seq":1,"name":"x","colour":"red"}', r"line 1: field command\.colour: Extra inputs"),
    (b'{"rec":"command",', r"line 1: not JSON"),
    (b'[1, 2]', r"line 1: a record must be a JSON object, not list"),
], ids=["unknown-kind", "no-kind", "wrong-type", "unknown-field", "truncated-json", "not-an-object"])
def test_a_bad_line_is_an_error_never_skipped(tmp_path, line, message):
    path = write_lines(tmp_path, [line, dump_record(RECORDS[0])])
    with pytest.raises(JsonlError, match=message):
        list(read_jsonl(path))


def test_records_before_a_bad_line_are_yielded_first(tmp_path):
    path = write_lines(tmp_path, [dump_record(RECORDS[0]), b'{"rec":"rumour"}'])
    records = read_jsonl(path)
    assert next(records) == RECORDS[0]
    with pytest.raises(JsonlError, match="line 2"):
        next(records)
