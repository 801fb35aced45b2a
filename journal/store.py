"""The journal port: append-only, checksum-chained, group-committed, redacted before append.

Expected flow: ``async with SqliteJournal(path) as j`` (or ``MemoryJournal()``); a caller appends
with ``committed = await j.append(drafts)``. The daemon's committer instead seals ahead of the
disk: ``records = j.seal(drafts)`` (numbered, redacted, chained, into the open transaction), folds
them, seals what the fold issued, then ``await j.flush()``: one transaction for both, and the
next batch is sealed and folded while this one commits. ``j.prepare(drafts)`` beforehand (the
daemon's ``submit`` does) redacts and serializes drafts while an earlier transaction commits, so
sealing them only numbers and chains them.

Guarantees (both implementations; ``tests/contract/test_journal_contract.py``):
- ONE writer task. Flushes (and ``append`` calls) that queue while a transaction is in flight are
  gathered into the next transaction (group commit; ``transactions`` counts them), committed in
  the order they were sealed. ``append`` returns the stamped records only after their transaction
  committed; ``seal``'s records are not durable until their ``flush`` resolved. A transaction that
  fails voids what was sealed onto it (its futures raise the same error) and the next seal starts
  from the last committed record.
- Sequence numbers are assigned at sealing: 1, 2, 3... with no gap, across batches and reopen.
  A draft that already carries a ``seq`` must be exactly the next one (``DuplicateSeq`` if it is
  already journaled, ``JournalError`` for a gap); the store refuses a duplicate too (primary key),
  which catches a second writer on the same journal.
- Before anything is serialized, observed objects and outcome objects are redacted with the
  journal's salt (``journal.redact``); the records returned are the redacted ones, so the fold sees
  exactly what a replay will read back (a Pod draft made by ``prepare``/``prepare_one`` comes back
  holding its projection: what ``kfold replay`` folds; its row holds the whole object).
- Each row's ``chk`` is CRC-32 chained to the previous row over ``(seq, at, kind, payload)``; the
  ``meta`` head (last seq and chk) commits in the same transaction. A flipped byte, a missing row
  or a truncated tail raises ``JournalCorrupt(seq, reason)`` at the first bad seq; reading yields
  every record before it and none after. Nothing journaled is ever rewritten.

Retention (``journal.retention``): with ``journal.retention`` set, each stored snapshot may cut
the records up to the oldest kept snapshot (``cut``); the chain then starts from the stored
checksum of the last record cut (``meta`` ``base``), history begins at ``first_seq`` and a read
from before it raises ``JournalCut`` naming where it begins. ``stats()`` is what /metrics shows.

Caveats: CRC-32 detects corruption (every burst up to 32 bits, any single-bit flip) but is not a
MAC: someone rewriting the file on purpose can recompute the chain. A read covers the head
committed when it started; records appended meanwhile are left for the next read.
"""
from __future__ import annotations

import asyncio
import sys
from typing import Any, AsyncIterator, Sequence

from journal.chain import (DuplicateSeq, JournalCorrupt, JournalError, JournalFull, Row, check_rows, check_schema,
                           dump, kfold_version, link, parse_payloads, snapshot_chk, stamp)
from journal import projection
from journal.records import Record, parse_record
from journal.redact import Redactor
from journal.retention import JournalCut, Retaining, Retention

__all__ = ["DuplicateSeq", "Journal", "JournalCorrupt", "JournalCut", "JournalError", "JournalFull", "Row",
           "check_schema", "kfold_version", "READ_BATCH"]

READ_BATCH = 2000
# Rows are fetched and verified READ_BATCH at a time but parsed and yielded in slices: a parsed
# 1.2 KB Pod record is ~60 objects, and 2000 of them alive at once cost 2-3x more per record
# (cold memory, collector passes over the whole batch) than a slice the caller folds and drops.
# 64 rather than 128 since replay reads projections (smaller records, freed while still cached:
# ~10% less CPU per record measured on the benchmark's journal).
PARSE_BATCH = 64
# ``prepare``: a draft's payload starts with its seq (the first field), -1 until it is numbered
_UNNUMBERED = b'{"seq":-1,'
_UNNUMBERED_LEN = len(_UNNUMBERED)
_AHEAD_MAX = 100_000
_HELD_HERE = 2   # ``sys.getrefcount`` of a prepared draft that only ``_ahead`` holds (its tuple + the call's argument)


class Journal(Retaining):
    """The port, with the behaviour shared by every implementation (retention: ``Retaining``).

    An implementation provides storage primitives: ``_load_meta``, ``_load_history``, ``_commit``,
    ``_fetch``, ``_chk_before``, ``_snapshot_at_most``, ``_cut``, ``_shrink``, ``size_bytes``,
    ``_release``."""

    READ_BATCH = READ_BATCH

    def __init__(self) -> None:
        self.transactions = 0
        self.redactor: Redactor | None = None
        self._queue: list[tuple[str, Any, asyncio.Future]] = []
        self._wake: asyncio.Event | None = None
        self._writer: asyncio.Task | None = None
        self._next = 1
        self._prev = 0
        self._failed: JournalError | None = None
        self._opened = False
        self.retention = Retention()
        self._base = (0, 0)               # (seq, chk) of the last record cut by retention
        self._snapshots: list[int] = []   # seqs of the stored snapshots, ascending
        self.last_snapshot_bytes = 0      # size of the newest snapshot
        self.bytes_since_snapshot = 0     # record payload bytes committed since it
        self._ahead: dict[int, tuple[Record, bytes, bytes | None]] = {}  # id(draft) -> (draft, payload, projection)
        self._open: list[Row] = []        # sealed, not yet flushed
        self._snext, self._sprev = 1, 0   # the head as sealed (ahead of ``_next``/``_prev``: committed)
        self._epoch = 0                   # bumped when a transaction fails: what was sealed after it is void
        self._broken: Exception | None = None
        self._void: Exception | None = None  # the open rows were voided by that failure: ``flush`` raises it

    # -- lifecycle ------------------------------------------------------------------------------
    async def open(self) -> "Journal":
        salt, head_seq, head_chk = await self._load_meta()
        self.redactor = Redactor(salt)
        self._next, self._prev = head_seq + 1, head_chk
        self._snext, self._sprev = self._next, self._prev
        self._base, self._snapshots, self.last_snapshot_bytes = await self._load_history()
        self._wake = asyncio.Event()
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        self._opened = True
        return self

    async def close(self) -> None:
        """Commit what is queued, stop the writer, release the store. Idempotent."""
        if not self._opened:
            return
        self._opened = False
        self._queue.append(("stop", None, asyncio.get_running_loop().create_future()))
        self._wake.set()
        await self._writer
        await self._release()

    async def __aenter__(self) -> "Journal":
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def salt(self) -> bytes:
        return self.redactor.salt

    @property
    def last_seq(self) -> int:
        """The last committed sequence number (0 when empty)."""
        return self._next - 1

    # -- writing --------------------------------------------------------------------------------
    async def append(self, drafts: Sequence[Record]) -> list[Record]:
        """Journal ``drafts`` in order; return them stamped and redacted once committed."""
        if not drafts:
            return []
        records = self.seal(drafts)
        await self.flush()
        return records

    def seal(self, drafts: Sequence[Record]) -> list[Record]:
        """Number, redact, serialize and chain ``drafts`` now, into the open transaction, and
        return them stamped and redacted: what a replay will read back. Nothing is durable until
        ``flush``'s future resolved, and nothing may leave the process on their account before
        (journal first). A caller may seal several times (records, then what folding them
        decided) and flush once: one transaction, one fsync. Sealing runs ahead of the store:
        while one transaction commits on the store's thread, the next is sealed and queued.
        Raises here (nothing of this call sealed) for a draft that cannot be journaled."""
        if not self._opened:
            raise JournalError("the journal is closed")
        if self._failed is not None:
            raise self._failed
        if self._void is not None:   # sealed before a transaction failed, not flushed yet
            raise JournalError(f"what was sealed before a failed transaction is not flushed yet: {self._void}")
        rows: list[Row] = []
        records, self._snext, self._sprev = self._prepare(list(drafts), self._snext, self._sprev, rows)
        self._open.extend(rows)
        return records

    def flush(self) -> "asyncio.Future[None]":
        """Hand the open transaction (everything sealed since the last flush) to the writer; the
        future resolves once it committed, or raises what it raised. Transactions commit in flush
        order; ones queued while another commits are merged into the next (group commit). If a
        transaction fails, what was sealed after it (chained onto it) fails with it, and the next
        seal starts again from the last committed record."""
        rows, self._open = self._open, []
        if not rows or self._void is not None:
            done = asyncio.get_running_loop().create_future()
            if self._void is not None:
                done.set_exception(self._void)
                self._void = None
            else:
                done.set_result(None)
            return done
        return self._enqueue("rows", (rows, self._epoch))

    def prepare(self, drafts: Sequence[Record]) -> list[Record]:
        """Do now, for ``drafts`` about to be appended, what ``append`` does to a draft that does
        not depend on its place: redaction, serialization, projection (``prepare_one`` of each
        draft not prepared yet). Returns the drafts to append in their stead; appended unchanged,
        sealing only numbers them, splices the seq into the payload and chains the checksum. A
        caller whose drafts arrive while a transaction is in flight (the daemon's ``submit``) so
        does this work meanwhile, instead of holding the next transaction back until it is done."""
        if self.redactor is None or self._failed is not None:
            return list(drafts)
        self._bound_ahead()
        ahead = self._ahead
        out = []
        for draft in drafts:
            hit = ahead.get(id(draft)) if ahead else None
            out.append(draft if hit is not None and hit[0] is draft else self.prepare_one(draft))
        return out

    def prepare_one(self, draft: Record) -> Record:
        """``prepare`` of one draft, as soon as it is made: an observer calls it per event, while
        the object it just decoded is still in the CPU's cache (prepared a batch later, each
        object is read from memory again: ~2.5x the time measured on realistic Pods).

        A draft of a projected kind (``journal.projection``: Pods) comes back holding only its
        projected object (a ``projection.Pruned``): what ``kfold replay`` folds, so the fold sees
        what a replay reads back, and the whole object is freed now instead of after its commit.
        Such a draft must be appended to this journal, once: its payload lives here until then
        (appended twice or elsewhere, sealing refuses it rather than journal the pruned object).
        Any other draft comes back redacted (or as given) and, appended twice or elsewhere, is
        prepared again there. A draft that cannot be prepared comes back as given: ``append``
        meets the same error and reports it."""
        if self.redactor is None or self._failed is not None or draft.seq != -1:
            return draft
        try:
            rec, payload = self.redactor.sealed(draft, dump(draft), dump)
        except Exception:
            return draft
        if not payload.startswith(_UNNUMBERED):
            return draft
        cut = projection.projected(rec)
        if cut is None:
            self._ahead[id(rec)] = (rec, payload, None)
            return rec
        out = projection.slim(rec, cut[0])
        self._ahead[id(out)] = (out, payload, cut[1])
        return out

    def _bound_ahead(self) -> None:
        """Forget prepared drafts that nobody can append any more (held only here: a submit that
        failed, an observer that stopped); a draft still held somewhere keeps its entry."""
        if len(self._ahead) > _AHEAD_MAX:
            self._ahead = {k: v for k, v in self._ahead.items() if sys.getrefcount(v[0]) > _HELD_HERE}

    async def put_snapshot(self, seq: int, data: bytes) -> None:
        """Store a state snapshot taken after folding ``seq``. The same bytes again is a no-op;
        different bytes for a stored seq are refused (nothing is rewritten)."""
        if not 0 < seq <= self.last_seq:
            raise JournalError(f"snapshot at seq {seq}: the journal ends at {self.last_seq}")
        stored = await self._snapshot_at_most(seq)
        if stored is not None and stored[0] == seq:
            if stored[1] != bytes(data):
                raise JournalError(f"a different snapshot is already stored at seq {seq}")
            return
        await self._submit("snapshot", (seq, bytes(data)))
        if self.retention.oldest_kept(self._snapshots) is not None:
            await self.cut()

    async def _submit(self, what: str, payload: Any) -> Any:
        return await self._enqueue(what, payload)

    def _enqueue(self, what: str, payload: Any) -> asyncio.Future:
        if not self._opened:
            raise JournalError("the journal is closed")
        if self._failed is not None:
            raise self._failed
        fut = asyncio.get_running_loop().create_future()
        self._queue.append((what, payload, fut))
        self._wake.set()
        return fut

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            jobs, self._queue = self._queue, []
            stop = any(what == "stop" for what, _, _ in jobs)
            work = [j for j in jobs if j[0] not in ("stop", "cut")]
            if work:
                await self._commit_jobs(work)
            for _, _, fut in (j for j in jobs if j[0] == "cut"):
                await self._cut_job(fut)
            if stop:
                return

    async def _commit_jobs(self, jobs: list[tuple[str, Any, asyncio.Future]]) -> None:
        rows: list[Row] = []
        snaps: list[tuple[int, bytes, int]] = []
        done: list[asyncio.Future] = []
        for what, payload, fut in jobs:
            if what == "rows":
                if payload[1] != self._epoch:  # chained onto a transaction that failed
                    fut.set_exception(self._broken)
                    continue
                rows.extend(payload[0])
            else:
                snaps.append((payload[0], payload[1], snapshot_chk(*payload)))
            done.append(fut)
        if not rows and not snaps:
            return
        head = (rows[-1][0], rows[-1][4]) if rows else (self._next - 1, self._prev)
        try:
            await self._commit(rows, snaps, head)
        except Exception as exc:  # rolled back: nothing of this transaction is journaled
            if isinstance(exc, DuplicateSeq):  # another writer appended: our head is stale
                exc = self._failed = DuplicateSeq(f"{exc}; another writer appended to this journal: reopen it")
            if rows:   # what was sealed after these rows chains onto them: it fails too
                self._epoch += 1
                self._broken = exc
                if self._open:
                    self._open, self._void = [], exc
                self._snext, self._sprev = self._next, self._prev
            for fut in done:
                fut.set_exception(exc)
            return
        if rows:
            self._next, self._prev = head[0] + 1, head[1]
        self.transactions += 1
        self.bytes_since_snapshot += sum(len(r[3]) for r in rows)
        for snap_seq, data, _ in snaps:
            self._snapshots = sorted({*self._snapshots, snap_seq})
            self.last_snapshot_bytes, self.bytes_since_snapshot = len(data), 0
        for fut in done:
            fut.set_result(None)

    def _prepare(self, drafts: list[Record], seq: int, prev: int, rows: list[Row]):
        out: list[Record] = []
        mine: list[Row] = []
        ahead = self._ahead
        for draft in drafts:
            hit = ahead.pop(id(draft), None) if ahead else None
            if hit is not None and hit[0] is draft and draft.seq == -1:  # prepared: only its number
                rec, payload, view = stamp(draft, seq), b'{"seq":%d,' % seq + hit[1][_UNNUMBERED_LEN:], hit[2]
            else:
                if type(getattr(draft, "obj", None)) is projection.Pruned:
                    raise JournalError(f"a prepared {draft.kind} draft ({draft.namespace}/{draft.name}) holds only its "
                                       "projection: append it once, to the journal that prepared it")
                rec = self._seal(draft, seq)
                rec, payload = self.redactor.sealed(rec, dump(rec), dump)
                view = projection.project(rec)
            prev = link(prev, seq, rec.at, rec.rec, payload)
            mine.append((seq, rec.at, rec.rec, payload, prev, projection.seal(view, prev)))
            out.append(rec)
            seq += 1
        rows.extend(mine)
        return out, seq, prev

    def _seal(self, draft: Record, seq: int) -> Record:
        if draft.seq == -1:
            return stamp(draft, seq)
        if draft.seq < seq:
            raise DuplicateSeq(f"seq {draft.seq} is already journaled (the next is {seq})")
        if draft.seq > seq:
            raise JournalError(f"seq {draft.seq} would leave a gap (the next is {seq})")
        return draft

    # -- reading --------------------------------------------------------------------------------
    async def read(self, from_seq: int = 1, until: int | None = None) -> AsyncIterator[Record]:
        """Records ``from_seq..until`` in order; see ``read_batches``."""
        async for batch in self.read_batches(from_seq, until):
            for rec in batch:
                yield rec

    async def read_batches(self, from_seq: int = 1, until: int | None = None,
                           projected: bool = False) -> AsyncIterator[list[Record]]:
        """Verified, parsed records in batches. On a broken chain: yields the good records before
        it, then raises ``JournalCorrupt`` naming the first bad seq (never yields past it).

        ``projected``: a row with a sound projection (``journal.projection``) is read from it, so
        its observed object holds only what the fold reads; for folding (``kfold replay``), never
        for showing or exporting records. Rows without one, or whose projection fails its crc, are
        read from their payloads. The chain is verified over the payloads either way."""
        rows_read = self.read_rows(from_seq, until, views=projected)
        try:
            async for rows in rows_read:
                for i in range(0, len(rows), PARSE_BATCH):  # parsed a slice at a time: see PARSE_BATCH
                    yield self.parse(rows[i:i + PARSE_BATCH], projected)
        finally:
            await rows_read.aclose()  # a reader that stopped early: the batch fetched ahead is dropped

    async def read_rows(self, from_seq: int = 1, until: int | None = None,
                        views: bool = False) -> AsyncIterator[list[Row]]:
        """``read_batches`` in two steps: the rows, verified, up to ``READ_BATCH`` at a time (with
        their projections if ``views``; the next batch is fetched meanwhile), the same error at the
        same place; ``parse`` makes records of them. A synchronous reader (``kfold.offline.sources``) so
        turns its event loop once per ``READ_BATCH`` rows instead of once per parsed slice."""
        end = self.last_seq if until is None else min(until, self.last_seq)
        head = self.last_seq
        expect, prev = from_seq, await self._anchor(from_seq)
        ahead = self._fetch_ahead(expect, end, views)
        try:
            while expect <= end:
                rows = await ahead
                good, prev, error = check_rows(rows, expect, prev)
                if error is None and good:  # the store's thread fetches the next batch meanwhile
                    ahead = self._fetch_ahead(expect + good, end, views)
                    await asyncio.sleep(0)  # (the fetch is handed to it before parsing starts)
                if good:
                    yield rows if good == len(rows) else rows[:good]
                if error is None and good == 0:
                    error = JournalCorrupt(expect, f"journal truncated: it ends before {expect} but its head is {head}")
                if error is not None:
                    raise error
                expect += good
        finally:
            ahead.cancel()  # a reader that stopped early: the batch fetched ahead is dropped

    def _fetch_ahead(self, first: int, end: int, views: bool = False) -> asyncio.Future:
        if first > end:
            done = asyncio.get_running_loop().create_future()
            done.set_result([])
            return done
        return asyncio.ensure_future(self._fetch(first, min(end, first + READ_BATCH - 1), views))

    def parse(self, rows: Sequence[Row], projected: bool = False) -> list[Record]:
        """Records from rows ``read_rows`` verified (see ``read_batches`` for ``projected``);
        ``JournalCorrupt`` at the first one that does not parse."""
        try:
            records = projection.parse_rows(rows) if projected else parse_payloads([r[3] for r in rows])
        except Exception:
            if projected:  # a sound crc but a projection that does not decode: the payloads decide
                return self.parse(rows)
            for seq, _, _, payload, _, _ in rows:  # find the first record that does not parse
                try:
                    parse_record(payload)
                except Exception as exc:
                    raise JournalCorrupt(seq, f"record does not parse: {exc}") from None
            raise
        for rec, row in zip(records, rows):
            if rec.seq != row[0]:
                if projected:
                    return self.parse(rows)
                raise JournalCorrupt(row[0], f"payload says seq {rec.seq}")
        return records

    async def verify(self, from_seq: int = 1) -> int | None:
        """The first bad sequence number (chain, gap or truncation) from ``from_seq`` on, or None
        when intact (from a later seq the chain is anchored on the stored checksum before it)."""
        end = self.last_seq
        if from_seq > end:
            return None
        try:
            expect, prev = from_seq, await self._anchor(from_seq)
        except JournalCorrupt as exc:
            return exc.seq
        while expect <= end:
            rows = await self._fetch(expect, min(end, expect + READ_BATCH - 1))
            good, prev, error = check_rows(rows, expect, prev)
            if error is not None or good == 0:
                return expect + good
            expect += good
        return None

    async def latest_snapshot(self, max_seq: int | None = None) -> tuple[int, bytes] | None:
        """The newest snapshot at or before ``max_seq``; ``JournalCorrupt`` if its checksum fails
        (ask again with ``max_seq=bad - 1`` to fall back to an older one)."""
        row = await self._snapshot_at_most(self.last_seq if max_seq is None else max_seq)
        if row is None:
            return None
        seq, data, chk = row
        if snapshot_chk(seq, data) != chk:
            raise JournalCorrupt(seq, "snapshot checksum mismatch")
        return seq, data

    # -- storage primitives (implemented by each store) ------------------------------------------
    async def _load_meta(self) -> tuple[bytes, int, int]:
        """Create or check the store; return (salt, head seq, head chk). Raise ``too_new``."""
        raise NotImplementedError

    async def _load_history(self) -> tuple[tuple[int, int], list[int], int]:
        """(base (seq, chk) of the last record cut, stored snapshot seqs ascending, newest's size)."""
        raise NotImplementedError

    async def _commit(self, rows: list[Row], snaps: list[tuple[int, bytes, int]], head: tuple[int, int]) -> None:
        """One transaction: insert rows and snapshots, set the head. ``DuplicateSeq`` on a taken seq."""
        raise NotImplementedError

    async def _cut(self, upto: int, chk: int) -> None:
        """One transaction: delete records ``<= upto`` and snapshots ``< upto``; base = (upto, chk)."""
        raise NotImplementedError

    async def _shrink(self) -> None:
        """Give the space freed by ``_cut`` back to the file system."""
        raise NotImplementedError

    def size_bytes(self) -> int:
        """What the journal takes on disk (or in memory) now."""
        raise NotImplementedError

    async def _fetch(self, first: int, last: int, views: bool = False) -> list[Row]:
        """Rows ``first..last`` in order; their projections only with ``views`` (else None)."""
        raise NotImplementedError

    async def _chk_before(self, seq: int) -> int:
        raise NotImplementedError

    async def _snapshot_at_most(self, seq: int) -> tuple[int, bytes, int] | None:
        raise NotImplementedError

    async def _release(self) -> None:
        raise NotImplementedError
