"""Open a journal for offline use: a SQLite journal file or its JSONL export, detected by content.

Every offline command (``kfold replay``, ``trace``, ``ui``, ``repos``, ``export``) opens its input
here, so each accepts what kfold writes: a SQLite journal, whole or with its head cut by retention,
an export of either (``journal.jsonl``: it carries the snapshot its records continue), an archive.

- ``start_point`` is where a fold of the file begins: from nothing at seq 1, or from the snapshot
  the kept history continues (the oldest kept one of a cut journal; the one an export carries),
  with a line saying so. ``JournalError`` when that snapshot is missing or does not load.
- ``iter_records`` yields records in sequence order up to ``until``. A broken checksum chain
  (SQLite, or a sealed export) raises ``JournalCorrupt`` naming the first bad sequence number (an
  export's altered byte: the first of its block); no record past it is yielded.
- ``first_bad_seq`` verifies the chain (from ``from_seq``) without folding (None: intact, or an
  unsealed export, which is trusted as written; the fold's own sequence check still applies).
- ``latest_snapshot`` is the newest state snapshot at or before a seq.
- ``history_start`` is where the kept history begins: 1, after the records retention cut, or an
  export's first record.
- ``is_sqlite`` tells the two apart by content; any other binary file (compressed, an archive, an
  executable) is ``NotAJournal`` saying what it is, never parsed as JSON lines.
- ``export`` writes a file's records from ``history_start`` as a sealed export with that snapshot.
"""
from __future__ import annotations

import asyncio
from typing import IO, Any, Iterable, Iterator

from journal.chain import JournalError
from journal.records import Record

SQLITE_MAGIC = b"SQLite format 3\x00"


class NotAJournal(JournalError):
    """A file that is neither a SQLite journal nor text (so not a JSONL export either)."""


# What a binary file that is neither journal nor export is, by its first bytes, and what to do.
_NOT_A_JOURNAL = (
    (b"\x1f\x8b", "gzip-compressed data; decompress it first (gunzip -k FILE)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data; decompress it first (zstd -d FILE)"),
    (b"\xfd7zXZ\x00", "xz-compressed data; decompress it first (xz -dk FILE)"),
    (b"BZh", "bzip2-compressed data; decompress it first (bunzip2 -k FILE)"),
    (b"PK\x03\x04", "a zip archive; unpack the journal from it first (unzip FILE)"),
    (b"\x37\x7f\x06\x82", "a SQLite write-ahead log (the -wal file beside a journal); open the journal file itself"),
    (b"\x37\x7f\x06\x83", "a SQLite write-ahead log (the -wal file beside a journal); open the journal file itself"),
    (b"\x7fELF", "an executable (ELF)"),
)
_SNIFF = 4096


def is_sqlite(path: str) -> bool:
    """True for a SQLite file, False for text (a JSONL export, or text that is not one: its first
    bad line is reported when read). Any other binary file raises ``NotAJournal`` saying what it
    is (compressed, an archive, ...) rather than letting its bytes be parsed as JSON lines."""
    with open(path, "rb") as fh:
        head = fh.read(_SNIFF)
    if head.startswith(SQLITE_MAGIC):
        return True
    what = binary_kind(head)
    if what:
        raise NotAJournal(f"not a kfold journal: it is {what}; kfold reads a SQLite journal or its JSONL "
                          f"export (kfold export JOURNAL -o FILE)")
    return False


def binary_kind(head: bytes) -> str:
    """What the first bytes of a file say it is when it is not text ("" for text)."""
    import codecs
    for magic, what in _NOT_A_JOURNAL:
        if head.startswith(magic):
            return what
    if head[257:262] == b"ustar":
        return "a tar archive; unpack the journal from it first (tar -xf FILE)"
    try:   # a multi-byte character cut at the end of the sniffed bytes is still text
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "binary data, neither SQLite nor text"
    return "binary data, neither SQLite nor text" if b"\x00" in head else ""


class _Opened:
    """A SQLite journal opened read-only on its own event loop, for synchronous readers."""

    def __init__(self, path: str):
        from journal.sqlite import SqliteJournal
        self.loop = asyncio.new_event_loop()
        self.journal = SqliteJournal(path, readonly=True)
        try:
            self.run(self.journal.open())
        except BaseException as exc:
            self.loop.close()
            import sqlite3
            if isinstance(exc, sqlite3.DatabaseError):   # a SQLite header over bytes SQLite cannot read
                raise NotAJournal(f"a SQLite file SQLite cannot read ({exc}): damaged or cut short; "
                                  f"restore it from a backup or its export") from None
            raise

    def run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def rows(self, from_seq: int, until: int | None, views: bool = False) -> Iterator[list]:
        """Verified row batches (``Journal.read_rows``): the loop turns once per fetched batch."""
        rows_read = self.journal.read_rows(from_seq, until, views=views)
        try:
            while True:
                try:
                    yield self.run(rows_read.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self.run(rows_read.aclose())

    def __enter__(self) -> "_Opened":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.run(self.journal.close())
        finally:
            self.loop.close()


def first_bad_seq(path: str, from_seq: int = 1) -> int | None:
    from journal.chain import JournalCorrupt
    if is_sqlite(path):
        with _Opened(path) as j:
            return j.run(j.journal.verify(from_seq))
    try:
        for _ in iter_records(path, from_seq=from_seq):
            pass
    except JournalCorrupt as exc:
        return exc.seq
    return None


def latest_snapshot(path: str, until: int | None = None) -> tuple[int, bytes] | None:
    """``(seq, data)`` of the newest snapshot at or before ``until``; ``JournalCorrupt`` if its
    checksum fails."""
    if is_sqlite(path):
        with _Opened(path) as j:
            return j.run(j.journal.latest_snapshot(until))
    from journal.jsonl import read_start
    snap = read_start(path).snapshot
    return snap if snap is not None and (until is None or snap[0] <= until) else None


def history_start(path: str) -> int:
    if is_sqlite(path):
        with _Opened(path) as j:
            return j.journal.first_seq
    from journal.jsonl import read_start
    return read_start(path).first_seq


def start_point(path: str, until: int | None = None) -> tuple[Any, int, str]:
    """``(state or None, first seq to fold, a line saying where it starts or "")``; see the module doc.
    ``SnapshotUnreadable`` when the journal's newest snapshot is of a format newer than this kfold
    reads: a newer kfold decided the records before it, which this code would refold as its own."""
    first = history_start(path)
    _refuse_newer(path)
    if first == 1:
        return None, 1, ""
    snap = latest_snapshot(path, first - 1)
    _check_start(first, snap, until)
    state = stored_state(path, snap)
    why = "were cut by retention" if is_sqlite(path) else "are not in this export"
    return state, first, (f"history begins at seq {first}: records 1..{first - 1} {why}; "
                          f"started from the snapshot at seq {first - 1}")


class SnapshotUnreadable(JournalError):
    """A snapshot this kfold cannot read; ``newer``: a newer kfold wrote it."""

    def __init__(self, message: str, newer: bool = False):
        super().__init__(message)
        self.newer = newer


def _refuse_newer(path: str) -> None:
    from engine import migrations
    snap = latest_snapshot(path)
    if snap is None:
        return
    import orjson
    try:
        found = orjson.loads(snap[1]).get("format")
    except Exception:
        return   # unreadable: said where it is loaded
    if type(found) is int and found > migrations.FORMAT:
        stored_state(path, snap)   # raises, naming the versions


def stored_state(path: str, snap: tuple[int, bytes]) -> Any:
    """The state of the snapshot ``snap`` of ``path``; ``SnapshotUnreadable`` (exit 2) naming the
    versions for one this kfold cannot read (``engine.snapshot.load_stored``), or one edited past reading."""
    from engine import snapshot
    from journal.chain import kfold_version
    try:
        return snapshot.load_stored(snap[0], snap[1], "", kfold_version())   # the command names the file
    except snapshot.SnapshotFormatError as exc:
        raise SnapshotUnreadable(str(exc), exc.newer) from None
    except Exception as exc:  # an edited snapshot: no fold is possible
        raise SnapshotUnreadable(f"the snapshot at seq {snap[0]} does not load: {type(exc).__name__}: {exc}") from None


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
    from journal.store import PARSE_BATCH
    with _Opened(path) as j:
        for rows in j.rows(from_seq, until, views=projected):  # parsed and yielded a slice at a time
            for i in range(0, len(rows), PARSE_BATCH):
                yield from j.journal.parse(rows[i:i + PARSE_BATCH], projected)


def export(path: str, out: IO[bytes], until: int | None = None, sealed: bool = True,
           progress: Any = None, since: int | None = None) -> tuple[int, int]:
    """Write ``path``'s records from ``history_start`` (up to ``until``) to ``out`` as an export
    (``journal.jsonl``), with the snapshot they continue; ``sealed`` onto the journal's chain (a
    JSONL source is sealed afresh over its records as written). ``since`` (SQLite): begin instead
    after the newest snapshot before ``since``, so record ``since`` and all after it are in the
    export (from the history's start when no snapshot is). ``progress`` wraps the rows
    (``kfold.offline.progress.counted``). Returns (first seq, records written)."""
    from journal.jsonl import ExportWriter, Start
    wrap = progress or (lambda rows, first: rows)
    if is_sqlite(path):
        with _Opened(path) as j:
            first = j.journal.first_seq
            if since is not None and since > first:
                later = j.run(j.journal.latest_snapshot(since - 1))
                first = later[0] + 1 if later is not None and later[0] >= first else first
            snap = j.run(j.journal.latest_snapshot(first - 1)) if first > 1 else None
            _check_start(first, snap, until)
            chain = j.run(j.journal.chain_before(first)) if sealed else None
            writer = ExportWriter(out, Start(first, snap, chain))
            writer.rows(wrap((r[:4] for rows in j.rows(first, until) for r in rows), first))
            return first, writer.end()
    _, first, _ = start_point(path, until)
    snap = latest_snapshot(path, first - 1) if first > 1 else None
    writer = ExportWriter(out, Start(first, snap, 0 if sealed else None))
    writer.rows(wrap(_rows_of(iter_records(path, until)), first))
    return first, writer.end()


def _check_start(first: int, snap: tuple[int, bytes] | None, until: int | None) -> None:
    from journal.chain import JournalError
    if until is not None and until < first:
        raise JournalError(f"--until {until} is before the kept history, which begins at seq {first} "
                           f"(records 1..{first - 1} are not in this file; see journal.retention.archive_dir)")
    if first > 1 and (snap is None or snap[0] != first - 1):
        raise JournalError(f"history begins at seq {first} but the snapshot at seq {first - 1} is missing")


def _rows_of(records: Iterable[Record]) -> Iterator[tuple[int, int | None, str, bytes]]:
    from journal.records import dump_record
    for rec in records:
        yield rec.seq, rec.at, rec.rec, dump_record(rec)


def input_error(exc: BaseException) -> str:
    """The one line an offline command prints for an input it cannot read: the error, and for a
    bad JSONL line the fix (an export's own errors already name theirs)."""
    from journal.jsonl import FIX, JsonlError
    text = " ".join(str(exc).split())
    if isinstance(exc, JsonlError) and FIX not in text:
        return f"{text} (fix that line, or {FIX})"
    return text


def input_error_code(exc: BaseException) -> int | None:
    """The exit code for a journal kfold cannot read as asked (3: broken checksum chain; 2: a
    malformed or truncated JSONL file, an unknown record kind, a newer schema, a fold error, an
    unreadable file), or None for anything else (a bug: let it raise)."""
    from engine.core import FoldError
    from journal.records import RecordError
    from journal.store import JournalCorrupt, JournalError
    if isinstance(exc, JournalCorrupt):
        return 3
    if isinstance(exc, (JournalError, RecordError, FoldError, OSError)):
        return 2
    return None
