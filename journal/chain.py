"""The journal's row format: errors, the chained checksum, and the record codec.

Guarantees:
- ``link`` chains CRC-32 over ``(seq, at, kind, payload)`` onto the previous row's checksum
  (0 before seq 1), so a flipped byte, a removed row or a reordered row breaks the chain at the
  first affected seq (``check_rows`` names it).
- ``dump``/``parse_payloads`` round-trip every record: ``parse_payloads(dump(r)) == [r]``.

Why CRC-32 rather than blake2b: the threat is corruption (torn writes, bad disks, hand edits), not
an adversary (who could recompute any unkeyed chain). ``zlib.crc32`` costs ~0.3 us per 1.2 KB row
against ~1.5 us for ``hashlib.blake2b`` here, on the ingest and replay hot paths.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any, Sequence

import orjson
from pydantic import BaseModel

from journal.records import SCHEMA_VERSION, Record, RecordAdapter, built, dump_record, trusted_record

_HEADER = struct.Struct(">qq")
_NO_AT = -(2 ** 63)

Row = tuple[int, "int | None", str, bytes, int, "bytes | None"]   # seq, at, kind, payload, chk, projection
# (the projection, ``journal.projection``: None where a row has none, or where the reader did not
# ask for it; the chain covers the first five fields only)


class JournalError(Exception):
    """The journal cannot be used as asked (too-new schema, gap, closed, second writer)."""


class DuplicateSeq(JournalError):
    """A sequence number that is already journaled."""


class JournalFull(JournalError):
    """The store has no room for a batch: nothing of it was journaled; everything before stays."""


class JournalCorrupt(JournalError):
    """The stored chain is broken at ``seq``: records from ``seq`` on cannot be trusted."""

    def __init__(self, seq: int, reason: str):
        super().__init__(f"journal corrupt at seq {seq}: {reason}")
        self.seq = seq
        self.reason = reason


def link(prev: int, seq: int, at: int | None, kind: str, payload: bytes) -> int:
    """The chained checksum of one row, given the previous row's (0 before seq 1)."""
    head = _HEADER.pack(seq, _NO_AT if at is None else at) + kind.encode()
    return zlib.crc32(payload, zlib.crc32(head, prev))


def snapshot_chk(seq: int, data: bytes) -> int:
    return zlib.crc32(data, zlib.crc32(_HEADER.pack(seq, 0)))


def kfold_version() -> str:
    try:
        from importlib.metadata import version
        return version("kfold")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


def check_schema(version: int, written_by: str, where: str) -> None:
    """Refuse a journal this code cannot read, saying which version and which kfold to use."""
    if version > SCHEMA_VERSION:
        raise JournalError(
            f"{where} was written with journal schema version {version} by kfold {written_by or '?'}; "
            f"this kfold ({kfold_version()}) reads schema version {SCHEMA_VERSION} at most: "
            f"use kfold {written_by or 'a newer kfold'} or later to read it")
    if version < SCHEMA_VERSION:
        raise JournalError(f"{where} has journal schema version {version}, older than {SCHEMA_VERSION}, "
                           f"and no migration exists: read it with the kfold that wrote it ({written_by or '?'})")


def stamp(rec: Record, seq: int) -> Record:
    """``rec.stamped(seq)`` without pydantic's generic copy (``copy.copy`` of three attributes):
    the same result, fields set included. Records have no extra or private attributes."""
    return built(type(rec), {**rec.__dict__, "seq": seq}, rec.__pydantic_fields_set__ | _SEQ)


_SEQ = frozenset({"seq"})


def dump(rec: Record) -> bytes:
    """JSON of a record: orjson on the fast path, ``dump_record`` for what orjson refuses
    (non-string keys, huge ints). Both parse back to an equal record."""
    try:
        return orjson.dumps(rec.__dict__, default=_model_fields)
    except TypeError:
        return dump_record(rec)


def _model_fields(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.__dict__
    raise TypeError


def parse_payloads(payloads: list[bytes]) -> list[Record]:
    """Records from verified payloads (the chain checked them): ``trusted_record`` of each.

    A payload orjson cannot decode is handed to pydantic's own JSON parser. Raises on a payload
    that is not a valid record. Caveat (as before this fast path): orjson reads an integer beyond
    64 bits as a float, so such a value inside ``obj``/``args`` comes back as an equal float."""
    out = []
    loads, build = orjson.loads, trusted_record
    for p in payloads:
        try:
            data = loads(p)
        except orjson.JSONDecodeError:
            out.append(RecordAdapter.validate_json(p))
            continue
        out.append(build(data))
    return out


def check_rows(rows: Sequence[Row], expect: int, prev: int) -> tuple[int, int, JournalCorrupt | None]:
    """Verify ``rows`` continue the chain at ``expect`` after checksum ``prev``.

    Returns (how many rows are good, chk of the last good row, the error at the first bad one)."""
    for i, (seq, at, kind, payload, chk, _) in enumerate(rows):
        if seq != expect:
            return i, prev, JournalCorrupt(expect, f"record {expect} is missing (next stored is {seq})")
        if link(prev, seq, at, kind, payload) != chk:
            return i, prev, JournalCorrupt(seq, "checksum mismatch: the stored record was altered")
        prev, expect = chk, expect + 1
    return len(rows), prev, None
