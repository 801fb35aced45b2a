"""Progress of long offline work (replay, export, ``--check``, trace, the UI's index) on stderr.

Guarantees:
- Shown only when stderr is a terminal (``KFOLD_PROGRESS=1`` forces it, ``0`` silences it): a
  pipe, a file or CI gets nothing extra, so scripts reading stderr see exactly what they did.
- One line, rewritten in place at most ``EVERY_S`` times a second: records done / total, percent,
  rate, time left. The total is the journal's head (SQLite) or its line count (JSONL, counted only
  when progress is shown), capped by ``--until``. The line is erased when the work ends.
- Never changes what is iterated: ``counted`` yields exactly the records it is given.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import IO, Iterable, Iterator, TypeVar

T = TypeVar("T")
EVERY_S = 0.25


def enabled(stream: IO[str] | None = None) -> bool:
    forced = os.environ.get("KFOLD_PROGRESS", "")
    if forced in ("0", "1"):
        return forced == "1"
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def journal_size(path: str, until: int | None = None) -> int | None:
    """How many records ``path`` holds (up to ``until``), or None if that cannot be told cheaply."""
    from journal.chain import JournalError
    from kfold.offline.sources import is_sqlite
    try:
        if is_sqlite(path):
            uri = f"file:{Path(path).absolute()}?mode=ro"
            with sqlite3.connect(uri, uri=True) as db:
                head = db.execute("SELECT value FROM meta WHERE key='head'").fetchone()
            total = int((head[0].decode() if isinstance(head[0], bytes) else head[0]).split()[0])
        else:  # an export's lines from its first seq (its few header and chain lines counted too)
            from journal.jsonl import read_start
            total = _count_lines(path) + read_start(path).first_seq - 1
    except (OSError, sqlite3.Error, ValueError, TypeError, IndexError, JournalError):
        return None
    return min(total, until) if until is not None else total


def _count_lines(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
    return n


class Progress:
    def __init__(self, label: str, total: int | None, stream: IO[str] | None = None):
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.done = 0
        self.started = self.last = time.monotonic()
        self.shown = False

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= EVERY_S:
            self.last = now
            self._show(now)

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        rate = self.done / elapsed
        text = f"{self.label}: {self.done:,}"
        if self.total:
            text += f"/{self.total:,} records ({100 * self.done / self.total:.0f}%)"
        else:
            text += " records"
        text += f", {_si(rate)}/s"
        if self.total and rate > 0 and self.done <= self.total:
            text += f", {_duration((self.total - self.done) / rate)} left"
        return text

    def _show(self, now: float) -> None:
        self.stream.write("\r\x1b[K" + self.line(now))
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def status(label: str, text: str, stream: IO[str] | None = None) -> None:
    """A one-off status line (``kfold replay: verifying the checksum chain``) for a phase with no
    count; the next progress line or ``clear`` replaces it. Only on a terminal, like the rest."""
    if enabled(stream):
        stream = stream or sys.stderr
        stream.write(f"\r\x1b[K{label}: {text}")
        stream.flush()


def clear(stream: IO[str] | None = None) -> None:
    if enabled(stream):
        stream = stream or sys.stderr
        stream.write("\r\x1b[K")
        stream.flush()


def counted(items: Iterable[T], journal: str, label: str, until: int | None = None,
            stream: IO[str] | None = None, from_seq: int = 1) -> Iterator[T]:
    """``items`` unchanged, with a progress line while they are consumed (see the module doc)."""
    if not enabled(stream):
        yield from items
        return
    total = journal_size(journal, until)
    progress = Progress(f"kfold {label}", None if total is None else max(total - from_seq + 1, 0), stream)
    try:
        for item in items:
            yield item
            progress.advance()
    finally:
        progress.close()


def _si(rate: float) -> str:
    return f"{rate / 1e3:.1f}k" if rate >= 1e3 else f"{rate:.0f}"


def _duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
