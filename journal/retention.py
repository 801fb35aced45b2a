"""Retention: how much history a journal keeps, and when the daemon writes a snapshot.

A journal that lives for months must not grow without bound, and its snapshots must cost a small
fraction of its records. Both rules are here as plain data and small pure functions; the journal
applies retention (``Retaining``, the part of ``journal.store.Journal`` that cuts) and the daemon
the snapshot cadence.

Retention (``Retention(keep_snapshots, archive_dir)``): after each new snapshot the journal keeps
the newest ``keep_snapshots`` snapshots and the records after the OLDEST kept one; everything
older is cut (optionally written first, verified, to ``archive_dir/journal-<first>-<last>.jsonl``,
in ``kfold export``'s format, ``journal.jsonl``: sealed, with the snapshot it continues, so it
replays alone). History then begins
at ``oldest kept snapshot + 1``: a replay starts from that snapshot (``kfold replay`` does so by
itself and says so). ``keep_snapshots=0`` keeps everything (no cut).

Snapshot cadence (``SnapshotPolicy``): a snapshot is due once the record bytes appended since the
last one reach ``ratio`` times that snapshot's size (and at least ``min_bytes``), so snapshot bytes
stay near ``1/ratio`` of record bytes whatever the state size (a fixed record count made a 10k-pod
state's snapshots almost as large as the records between them). ``every`` (records) is an optional
upper bound on the records between snapshots, which bounds recovery time for a small state.

Size at steady state, with ``K = keep_snapshots`` and ``S`` the state's snapshot size: between
``(K-1)`` and ``K`` spacings of records (``max(ratio * S, min_bytes)`` bytes each) plus ``K``
snapshots; docs/config.md turns that into volume sizes.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from journal.chain import JournalCorrupt, JournalError, Row, check_rows
from journal.jsonl import ExportWriter, Start

ARCHIVE_PATTERN = "journal-{first:012d}-{last:012d}.jsonl"


class JournalCut(JournalError):
    """Records asked for were cut by retention; ``first_seq`` is where the history now begins."""

    def __init__(self, asked: int, first_seq: int):
        super().__init__(f"records before seq {first_seq} were cut by retention (asked for seq {asked}); "
                         f"history begins at seq {first_seq}: start from the snapshot at seq {first_seq - 1} "
                         f"(kfold replay does), or read the archived JSONL")
        self.first_seq = first_seq


@dataclass(frozen=True)
class Retention:
    keep_snapshots: int = 0            # 0: keep everything
    archive_dir: str | None = None     # write what is cut here first (JSONL), or drop it

    def oldest_kept(self, snapshot_seqs: list[int]) -> int | None:
        """The seq of the oldest snapshot to keep (ascending ``snapshot_seqs``), or None: no cut."""
        if self.keep_snapshots <= 0 or len(snapshot_seqs) <= self.keep_snapshots:
            return None
        return snapshot_seqs[-self.keep_snapshots]


@dataclass(frozen=True)
class SnapshotPolicy:
    ratio: float = 20.0                # record bytes between snapshots >= ratio * last snapshot's size
    min_bytes: int = 4 << 20           # ... and at least this many
    every: int | None = None           # and at most this many records apart (None: no bound)

    def due(self, records_since: int, bytes_since: int, last_snapshot_bytes: int) -> bool:
        if self.every is not None and records_since >= self.every:
            return True
        return bytes_since >= max(self.min_bytes, self.ratio * last_snapshot_bytes)


@dataclass(frozen=True)
class JournalStats:
    """What /metrics shows: file bytes on disk, records and snapshots held, where history begins."""
    bytes: int
    records: int
    snapshots: int
    first_seq: int
    last_seq: int


class Archive:
    """A JSONL archive being written, in the export format (``journal.jsonl``): sealed onto the
    chain before ``first``, carrying the snapshot at ``first - 1`` when ``first`` > 1, so an
    archive replays alone. ``close()`` writes the end line, fsyncs and renames, so a crash never
    leaves a partial archive under its final name; ``discard()`` removes the partial file (the cut
    did not happen)."""

    def __init__(self, archive_dir: str, first: int, last: int, anchor: int, snapshot: tuple[int, bytes] | None):
        os.makedirs(archive_dir, exist_ok=True)
        self.path = Path(archive_dir) / ARCHIVE_PATTERN.format(first=first, last=last)
        self._tmp = self.path.with_suffix(".jsonl.part")
        self._out = open(self._tmp, "wb")
        try:
            self._writer = ExportWriter(self._out, Start(first, snapshot, anchor))
        except BaseException:
            self.discard()
            raise

    def write(self, rows: Iterable[Row]) -> None:
        self._writer.rows(r[:4] for r in rows)

    def close(self) -> str:
        self._writer.end()
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        os.replace(self._tmp, self.path)
        return str(self.path)

    def discard(self) -> None:
        self._out.close()
        self._tmp.unlink(missing_ok=True)


class Retaining:
    """The retention half of ``journal.store.Journal`` (a mixin: it uses the journal's writer
    queue, ``_fetch``/``_chk_before``, and the store primitives ``_cut``/``_shrink``/``size_bytes``).

    State it keeps on the journal: ``retention``; ``_base`` (seq, chk) of the last record cut
    (the chain continues from that chk); ``_snapshots``, the stored snapshot seqs."""

    retention: Retention
    _base: tuple[int, int]
    _snapshots: list[int]
    READ_BATCH: int   # rows per fetch: the journal's own

    @property
    def first_seq(self) -> int:
        """Where the history begins: 1, or the seq after the last record cut by retention."""
        return self._base[0] + 1

    def stats(self) -> JournalStats:
        return JournalStats(bytes=self.size_bytes(), records=self.last_seq - self._base[0],
                            snapshots=len(self._snapshots), first_seq=self.first_seq, last_seq=self.last_seq)

    async def cut(self) -> dict[str, Any] | None:
        """Apply ``self.retention`` now (``put_snapshot`` does after each snapshot): archive (when
        asked) and delete the records up to the oldest kept snapshot and the snapshots before it,
        then give the freed space back to the file system. Runs in the writer task, between
        transactions. Returns what was cut, or None when nothing was due."""
        return await self._submit("cut", None)

    async def _cut_job(self, fut: asyncio.Future) -> None:
        try:
            fut.set_result(await self._cut_now())
        except Exception as exc:  # nothing was deleted unless the cut's transaction committed
            fut.set_exception(exc)

    async def _cut_now(self) -> dict[str, Any] | None:
        upto = self.retention.oldest_kept(self._snapshots)
        if upto is None or upto <= self._base[0]:
            return None
        first, before = self.first_seq, self.size_bytes()
        archive = await self._archive(first, upto) if self.retention.archive_dir else None
        try:
            chk = await self._copy_out(first, upto, archive)
            await self._cut(upto, chk)
        except BaseException:
            if archive is not None:
                archive.discard()
            raise
        archived = archive.close() if archive is not None else None
        self._base = (upto, chk)
        self._snapshots = [s for s in self._snapshots if s >= upto]
        await self._shrink()
        return {"first_seq": upto + 1, "records_cut": upto - first + 1, "archive": archived,
                "bytes_before": before, "bytes_after": self.size_bytes()}

    async def _archive(self, first: int, upto: int) -> Archive:
        """The archive of ``first..upto``, with the snapshot at ``first - 1`` (the oldest kept)."""
        snapshot = await self.latest_snapshot(first - 1) if first > 1 else None
        if first > 1 and (snapshot is None or snapshot[0] != first - 1):
            raise JournalCorrupt(first - 1, "the snapshot the kept history starts from is missing")
        return Archive(self.retention.archive_dir, first, upto, self._base[1], snapshot)

    async def _copy_out(self, first: int, upto: int, archive: Archive | None) -> int:
        """The chk of record ``upto``; with an archive, every record ``first..upto`` verified and
        written to it (``JournalCorrupt`` at a broken link: nothing is cut)."""
        if archive is None:
            return await self._chk_before(upto + 1)
        expect, prev = first, self._base[1]
        while expect <= upto:
            rows = await self._fetch(expect, min(upto, expect + self.READ_BATCH - 1))
            good, prev, error = check_rows(rows, expect, prev)
            if error is None and good == 0:
                error = JournalCorrupt(expect, f"record {expect} is missing")
            if error is not None:
                raise error
            archive.write(rows[:good])
            expect += good
        return prev

    async def chain_before(self, seq: int) -> int:
        """The chk the chain continues from at ``seq`` (the stored chk of record ``seq - 1``, 0
        before seq 1): what an export starting at ``seq`` is sealed onto. ``JournalCut`` when
        ``seq`` was cut."""
        return await self._anchor(seq)

    async def _anchor(self, seq: int) -> int:
        """The chk the chain continues from at ``seq``; ``JournalCut`` when ``seq`` was cut."""
        base_seq, base_chk = self._base
        if seq <= base_seq:
            raise JournalCut(seq, base_seq + 1)
        return base_chk if seq == base_seq + 1 else await self._chk_before(seq)
