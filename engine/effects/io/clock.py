"""The server clock: the apiserver's HTTP ``Date`` advanced by the local monotonic clock.

Expected flow: the observer and the executor call ``observe(resp.headers.get("Date"))`` on every
apiserver response (any status); anything that stamps a record calls ``now_ms()``.

Guarantees:
- ``now_ms()`` is ``None`` until a valid Date has been seen: time-gated decisions then wait.
- The reading is the last accepted Date plus the monotonic time elapsed since it was received.
  The local wall clock is never read (a wall-clock jump, e.g. under freezegun or NTP, moves
  nothing); ``skew_ms(wall_ms)`` takes the wall time as an argument, for metrics only.
- A missing or unparseable Date leaves the clock exactly as it was.
- A Date has one-second resolution (it is truncated). A new Date that is consistent with the
  current reading (``reading - 1000 < date <= reading``) keeps the finer-grained anchor, so
  readings do not jitter backwards by up to a second on every response. A Date outside that
  window (server clock stepped, or long monotonic drift) re-anchors the clock to it.

- ``ServerClocks`` keeps one ``ServerClock`` per cluster handle: each apiserver's Date anchors only
  its own clock, so two clusters whose clocks disagree by seconds never drag each other's readings
  back and forth. Whatever concerns a cluster (its observations, its effects' outcomes, deadlines
  and retries about it) is stamped and judged on that cluster's clock; commands on kfold's own
  (home) cluster's.

Caveats:
- The Date is stamped when the response is *received*, so a reading lags the server by up to the
  response latency plus the one-second truncation. Deadlines therefore fire late, never early.
- ``parse_http_date`` is kfold's one Date parser (``kube_errors`` re-exports it). It accepts
  the RFC 7231 IMF-fixdate and the obsolete forms ``email.utils`` understands, and refuses dates
  outside 1990..2200 as garbage.
"""
from __future__ import annotations

import calendar
import functools
import threading
import time
from email.utils import parsedate_tz
from typing import Callable

# Dates outside this range are garbage, not a server clock (1990 .. 2200).
_MIN_MS = 631_152_000_000
_MAX_MS = 7_258_118_400_000


def parse_http_date(value: str | None) -> int | None:
    """An HTTP ``Date`` header value -> epoch milliseconds, or ``None`` if missing or garbage."""
    if not value or not isinstance(value, str):
        return None
    return _parse_http_date(value)


@functools.lru_cache(maxsize=64)
def _parse_http_date(value: str) -> int | None:
    """Every reply carries a Date and it changes once a second: parsed once per distinct value."""
    try:
        parts = parsedate_tz(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if parts is None or not _in_range(parts):
        return None
    try:
        seconds = calendar.timegm(parts[:6] + (0, 1, -1)) - (parts[9] or 0)
    except (TypeError, ValueError, OverflowError):
        return None
    ms = seconds * 1000
    return ms if _MIN_MS <= ms <= _MAX_MS else None


def _in_range(parts: tuple) -> bool:
    _, month, day, hour, minute, second = parts[:6]
    return 1 <= month <= 12 and 1 <= day <= 31 and 0 <= hour < 24 and 0 <= minute < 60 and 0 <= second <= 60


class ServerClock:
    """Apiserver time as ``Date`` + monotonic elapsed. Thread-safe (the observer's reader threads
    and the event loop share one instance per cluster)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic):
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._anchor_ms: int | None = None   # server ms at _anchor_mono
        self._anchor_mono = 0.0
        self.observed = 0                    # Dates accepted (for metrics)
        self.rejected = 0                    # Dates missing or garbage (for metrics)

    def observe(self, date_header: str | None, monotonic: float | None = None) -> bool:
        """Take a response's Date, received at ``monotonic`` (default: now). True if accepted."""
        date_ms = parse_http_date(date_header)
        if date_ms is None:
            self.rejected += 1
            return False
        mono = self._monotonic() if monotonic is None else monotonic
        with self._lock:
            current = self._reading(mono)
            if current is None or not (current - 1000 < date_ms <= current):
                self._anchor_ms, self._anchor_mono = date_ms, mono
            self.observed += 1
        return True

    def now_ms(self, monotonic: float | None = None) -> int | None:
        """Server time in epoch milliseconds at ``monotonic`` (default: now); None before any Date."""
        mono = self._monotonic() if monotonic is None else monotonic
        with self._lock:
            return self._reading(mono)

    def skew_ms(self, wall_ms: int, monotonic: float | None = None) -> int | None:
        """Server reading minus the given local wall time (metrics only; decides nothing)."""
        now = self.now_ms(monotonic)
        return None if now is None else now - wall_ms

    def _reading(self, mono: float) -> int | None:
        if self._anchor_ms is None:
            return None
        return self._anchor_ms + int((mono - self._anchor_mono) * 1000)


class ServerClocks:
    """One ``ServerClock`` per cluster handle, made on first use. ``""`` and ``home`` name the home
    cluster's clock. ``ServerClocks.single(clock)`` answers every cluster with one clock (one
    apiserver, as in most tests)."""

    def __init__(self, home: str = "", monotonic: Callable[[], float] = time.monotonic):
        self.home = home
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._clocks: dict[str, ServerClock] = {}
        self._only: ServerClock | None = None

    @classmethod
    def single(cls, clock: ServerClock) -> "ServerClocks":
        clocks = cls()
        clocks._only = clock
        return clocks

    def for_cluster(self, cluster: str = "") -> ServerClock:
        if self._only is not None:
            return self._only
        name = cluster or self.home
        with self._lock:
            clock = self._clocks.get(name)
            if clock is None:
                clock = self._clocks[name] = ServerClock(self._monotonic)
            return clock

    def now_ms(self, cluster: str = "") -> int | None:
        """``cluster``'s server time (the home cluster's by default); None before its first Date."""
        return self.for_cluster(cluster).now_ms()

    def skew_ms(self, wall_ms: int) -> int | None:
        """The home clock's skew (metrics only)."""
        return self.for_cluster().skew_ms(wall_ms)
