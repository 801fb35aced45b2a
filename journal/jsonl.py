"""JSONL: one record per line, for bug reports, retention archives and ``kfold replay FILE.jsonl``.

The file (docs/journal.md has the reader's view):

    {"kfold_export":1,"first_seq":57,"snapshot":{"seq":56,"chk":123},"chain":456}   header
    {"at":...,"format":1,"seq":56,"tables":{...},...}                               the snapshot
    {"seq":57,"at":...,"rec":"observed",...}                                          records 57, 58, ...
    {"kfold_chain":156,"chk":789}                                                     every CHAIN_EVERY records
    {"kfold_end":230,"records":174,"chk":1011}                                        the end

- The header says where the records begin (``first_seq``) and, when that is after seq 1, carries
  the state snapshot at ``first_seq - 1`` on the next line (the engine's snapshot bytes, verbatim:
  ``snapshot.chk`` is ``journal.chain.snapshot_chk`` of them), so a reader folds from it.
- A *sealed* file (``chain`` an integer) carries the journal's own checksum chain: ``chain`` is the
  chk of record ``first_seq - 1`` (0 before seq 1), each record line is its journal payload
  verbatim, and the chain lines and the end line give the chained chk (``journal.chain.link``)
  after their seq. A reader verifies every block of records before yielding any of it: a record
  missing or out of order is named exactly; an altered byte is named by the first seq of its block
  (``JournalCorrupt``; no record from that block on is yielded). A file that ends without its end
  line was cut short (``ExportTruncated``).
- An *unsealed* file (``chain`` null, or no header at all: a file whose first line is a record)
  is trusted as written, for hand edits: its chain and end lines, if any, are not checked. A file
  without a header begins at its first record and carries no snapshot.

Guarantees:
- Records in a journal are already redacted, and so is every state folded from them: an export
  holds no secret material (invariant 6). The salt is not exported.
- ``read_jsonl`` yields records lazily and stops at the first bad line with ``JsonlError`` naming
  the line number and the field (``line 7: field observed.name: Field required``). An unknown record
  kind is an error, never skipped. Empty lines are allowed (they are not records).

Caveat: like the journal's, the chain is CRC-32 (corruption, truncation and accidental edits are
found; someone rewriting the file on purpose can recompute it).
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import orjson

from journal.chain import JournalCorrupt, JournalError, link, snapshot_chk
from journal.records import RECORD_KINDS, Record, RecordError, dump_record, parse_record

FORMAT = 1
CHAIN_EVERY = 100          # records between two chain lines (an altered record is named to this)
_HEADER, _CHAIN, _END = "kfold_export", "kfold_chain", "kfold_end"
FIX = "export the journal again (kfold export JOURNAL -o FILE)"

RowOut = tuple[int, "int | None", str, bytes]   # seq, at, kind, payload: what the chain covers


class JsonlError(RecordError):
    """A JSONL line that is not a valid record; ``line`` is 1-based."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


class ExportTruncated(JsonlError):
    """A sealed export that ends before its end line: it was cut short."""


@dataclass(frozen=True)
class Start:
    """Where a JSONL file's records begin, and the snapshot they continue (None: from seq 1)."""
    first_seq: int = 1
    snapshot: tuple[int, bytes] | None = None
    chain: int | None = None     # the chk before ``first_seq``; None: unsealed


# -- writing ----------------------------------------------------------------------------------
def export_jsonl(records: Iterable[Record], out: IO[Any]) -> int:
    """Write ``records`` unsealed and without a header (a hand-made file's shape) to ``out``, a
    binary or text stream; return how many were written."""
    text = isinstance(out, io.TextIOBase)
    n = 0
    for rec in records:
        line = dump_record(rec) + b"\n"
        out.write(line.decode() if text else line)
        n += 1
    return n


class ExportWriter:
    """A file in the format above, written to a binary stream: ``rows`` (any number of calls, in
    seq order from ``start.first_seq``), then ``end()``. ``start.chain`` None writes it unsealed
    (no chain or end lines; no header either when it begins at seq 1 with no snapshot)."""

    def __init__(self, out: IO[bytes], start: Start):
        self.out, self.start = out, start
        self.records, self._prev, self._next = 0, start.chain, start.first_seq
        if start.snapshot is not None and start.snapshot[0] != start.first_seq - 1:
            raise ValueError(f"a snapshot at seq {start.snapshot[0]} does not precede seq {start.first_seq}")
        if start.chain is None and start.snapshot is None and start.first_seq == 1:
            return
        snap = None if start.snapshot is None else {"seq": start.snapshot[0], "chk": snapshot_chk(*start.snapshot)}
        out.write(orjson.dumps({_HEADER: FORMAT, "first_seq": start.first_seq, "snapshot": snap,
                                "chain": start.chain}) + b"\n")
        if start.snapshot is not None:
            out.write(start.snapshot[1] + b"\n")

    def rows(self, rows: Iterable[RowOut]) -> None:
        for seq, at, kind, payload in rows:
            if seq != self._next:
                raise JournalError(f"record {seq} cannot follow record {self._next - 1}: a gap in the source, "
                                   f"which an export cannot hold")
            self.out.write(payload + b"\n")
            self.records, self._next = self.records + 1, seq + 1
            if self._prev is not None:
                self._prev = link(self._prev, seq, at, kind, payload)
                if self.records % CHAIN_EVERY == 0:
                    self.out.write(orjson.dumps({_CHAIN: seq, "chk": self._prev}) + b"\n")

    def end(self) -> int:
        if self._prev is not None:
            self.out.write(orjson.dumps({_END: self._next - 1, "records": self.records, "chk": self._prev}) + b"\n")
        return self.records


# -- reading ----------------------------------------------------------------------------------
def read_jsonl(path: str | Path) -> Iterator[Record]:
    """Records from a JSONL file, in file order (a sealed file verified as it is read)."""
    for rec, _ in positioned(path):
        yield rec


def read_start(path: str | Path) -> Start:
    """The header of ``path`` (its snapshot verified), or ``Start()`` for a file without one."""
    with open(path, "rb") as f:
        return _Reader(f).start


def positioned(path: str | Path) -> Iterator[tuple[Record, int]]:
    """``(record, byte offset of its line)`` in file order; see the module docstring for errors."""
    with open(path, "rb") as f:
        yield from _Reader(f).records()


class _Reader:
    def __init__(self, f: IO[bytes]):
        self.f, self.number, self.pos = f, 0, 0
        self.pending: tuple[bytes, int, int] | None = None   # a first line that was a record
        self.start = self._header()

    def _lines(self) -> Iterator[tuple[bytes, int, int]]:
        if self.pending is not None:
            yield self.pending
            self.pending = None
        for line in self.f:
            self.number += 1
            pos, self.pos = self.pos, self.pos + len(line)
            if line.strip():
                yield line, self.number, pos

    def _header(self) -> Start:
        first = next(self._lines(), None)
        if first is None:
            return Start()
        data = _object(*first[:2])
        if _HEADER not in data:
            self.pending = first
            return Start()
        return self._start(data, first[1])

    def _start(self, head: dict[str, Any], number: int) -> Start:
        where = f"line {number}: the export header"
        if head[_HEADER] != FORMAT:
            raise JsonlError(number, f"{where} says format {head[_HEADER]!r}; this kfold reads format {FORMAT}: "
                                     f"read it with the kfold that wrote it")
        first, snap, chain = head.get("first_seq"), head.get("snapshot"), head.get("chain")
        if not _int(first) or first < 1 or not (chain is None or _int(chain)):
            raise JsonlError(number, f"{where} needs first_seq >= 1 and chain an integer or null; {FIX}")
        if snap is None:
            if first > 1:
                raise JsonlError(number, f"{where} begins at seq {first} without the snapshot before it; {FIX}")
            return Start(first, None, chain)
        if not isinstance(snap, dict) or snap.get("seq") != first - 1 or not _int(snap.get("chk")):
            raise JsonlError(number, f"{where}: snapshot must be {{\"seq\": {first - 1}, \"chk\": <int>}}; {FIX}")
        line = next(self._lines(), None)
        if line is None:
            raise ExportTruncated(number, f"{where} announces a snapshot but the file ends there: it was cut short; {FIX}")
        data = line[0].rstrip(b"\r\n")
        if snapshot_chk(first - 1, data) != snap["chk"]:
            raise JournalCorrupt(first - 1, f"line {line[1]}: the snapshot's checksum does not match: it was altered")
        return Start(first, (first - 1, data), chain)

    def records(self) -> Iterator[tuple[Record, int]]:
        """The records, each block of a sealed file verified before any of it is yielded."""
        sealed, prev, expect = self.start.chain is not None, self.start.chain, self.start.first_seq
        block: list[tuple[Record, int]] = []
        ended = False
        for line, number, pos in self._lines():
            if ended:
                raise JsonlError(number, f"line {number}: a line after the export's end line; {FIX}")
            data = _object(line, number)
            mark = _CHAIN if _CHAIN in data else _END if _END in data else None
            if mark is None:
                rec = _record(line, number, data)
                if sealed:
                    if rec.seq != expect:
                        raise JournalCorrupt(expect, f"line {number}: record {expect} is missing "
                                                     f"(the next in the file is {rec.seq})")
                    prev, expect = link(prev, rec.seq, rec.at, rec.rec, line.rstrip(b"\r\n")), expect + 1
                    block.append((rec, pos))
                else:
                    yield rec, pos
                continue
            if not sealed:
                continue
            _check_mark(data, mark, number, expect - 1, prev, block)
            yield from block
            block, ended = [], mark == _END
        if sealed and not ended:
            last = f"seq {expect - 1}" if expect > self.start.first_seq else "its header"
            raise ExportTruncated(self.number, f"the export ends after {last} without its end line: it was cut "
                                               f"short; {FIX}")


def _check_mark(data: dict[str, Any], mark: str, number: int, last: int, prev: int,
                block: list[tuple[Record, int]]) -> None:
    if data.get(mark) != last or not _int(data.get("chk")):
        raise JournalCorrupt(last + 1, f"line {number}: a chain line for seq {data.get(mark)!r} after record {last}: "
                                       f"records are missing or out of order")
    if data["chk"] != prev:
        first = block[0][0].seq if block else last
        raise JournalCorrupt(first, f"checksum mismatch in records {first}..{last} (line {number}): "
                                    f"a record there was altered")


def _object(line: bytes, number: int) -> dict[str, Any]:
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise JsonlError(number, f"line {number}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise JsonlError(number, f"line {number}: a record must be a JSON object, not {type(data).__name__}")
    return data


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_line(line: bytes | str, number: int) -> Record:
    """One JSONL line as a record, or ``JsonlError`` naming ``number`` and the field."""
    return _record(line, number, _object(line, number))


def _record(line: bytes | str, number: int, data: dict[str, Any]) -> Record:
    where = f"line {number}"
    if "rec" not in data:
        raise JsonlError(number, f"{where}: field rec: Field required (the record kind)")
    if data["rec"] not in RECORD_KINDS:
        raise JsonlError(number, f"{where}: field rec: unknown record kind {data['rec']!r}; "
                                 f"expected one of {', '.join(RECORD_KINDS)}")
    try:
        return parse_record(line, where=where)
    except RecordError as exc:
        raise JsonlError(number, str(exc)) from None
