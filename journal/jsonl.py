"""JSONL: one record per line, for bug reports, hand edits and ``kfold replay FILE.jsonl``.

Guarantees:
- ``export_jsonl`` writes each record as ``dump_record`` JSON on its own line, in the order given.
  Journal records are already redacted, so an export holds no secret material.
- ``read_jsonl`` yields records lazily and stops at the first bad line with ``JsonlError`` naming
  the line number and the field (``line 7: field observed.name: Field required``). An unknown record
  kind is an error, never skipped. Empty lines are allowed (they are not records).

Caveat: JSONL carries no checksum chain: an edited file is trusted as written (that is its point).
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import orjson

from journal.records import RECORD_KINDS, Record, RecordError, dump_record, parse_record


class JsonlError(RecordError):
    """A JSONL line that is not a valid record; ``line`` is 1-based."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


def export_jsonl(records: Iterable[Record], out: IO[Any]) -> int:
    """Write ``records`` to ``out`` (a binary or text stream); return how many were written."""
    text = isinstance(out, io.TextIOBase)
    n = 0
    for rec in records:
        line = dump_record(rec) + b"\n"
        out.write(line.decode() if text else line)
        n += 1
    return n


def read_jsonl(path: str | Path) -> Iterator[Record]:
    """Records from a JSONL file, in file order. See the module docstring for errors."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                yield parse_line(line, number)


def parse_line(line: bytes | str, number: int) -> Record:
    """One JSONL line as a record, or ``JsonlError`` naming ``number`` and the field."""
    where = f"line {number}"
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise JsonlError(number, f"{where}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise JsonlError(number, f"{where}: a record must be a JSON object, not {type(data).__name__}")
    if "rec" not in data:
        raise JsonlError(number, f"{where}: field rec: Field required (the record kind)")
    if data["rec"] not in RECORD_KINDS:
        raise JsonlError(number, f"{where}: field rec: unknown record kind {data['rec']!r}; "
                                 f"expected one of {', '.join(RECORD_KINDS)}")
    try:
        return parse_record(line, where=where)
    except RecordError as exc:
        raise JsonlError(number, str(exc)) from None
