"""Client-side rate limit: the equivalent of client-go's QPS 50 / burst 100 for the Python client.

The Python client has no client-side limiter; a per-node fan-out against a large cluster would
otherwise hit the apiserver's priority-and-fairness with no local back-pressure.

Guarantees:
- A bucket of ``burst`` tokens refilled at ``qps`` per second, starting full; each request takes
  one token. A request that finds none RESERVES the next one (the bucket goes negative) and sleeps
  until it is due, so waiting callers are served in arrival order and the long-run rate is ``qps``.
- Thread-safe: the reservation happens under a lock, the sleep outside it.
- ``clock`` and ``sleep`` are injectable (monotonic seconds); the registry uses the monotonic clock.
  This is I/O-side pacing, never a decision of the fold.
- ``Limits`` is the setting (``cluster.qps``/``burst``, ``registry.qps``/``burst`` in the config):
  ``Limits(None)`` (or qps 0) is no client-side limit at all, ``bucket()`` then returns None.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100


@dataclass(frozen=True, slots=True)
class Limits:
    """A client's pacing: ``qps`` None (or 0) means unlimited; ``burst`` also sizes the pool."""

    qps: float | None = DEFAULT_QPS
    burst: int = DEFAULT_BURST

    @property
    def unlimited(self) -> bool:
        return not self.qps

    def bucket(self) -> "TokenBucket | None":
        return None if self.unlimited else TokenBucket(float(self.qps or 0), self.burst)

    def __str__(self) -> str:
        return "unlimited" if self.unlimited else f"{self.qps:g} QPS, burst {self.burst}"


UNLIMITED = Limits(None)


class TokenBucket:
    """Token bucket limiter (see module docstring)."""

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("a token bucket needs qps > 0 and burst >= 1")
        self.qps, self.burst = float(qps), int(burst)
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()
        self.waited_s = 0.0   # total time callers were told to wait (shown on /metrics)

    def __repr__(self) -> str:
        return f"TokenBucket(qps={self.qps:g}, burst={self.burst})"

    def reserve(self) -> float:
        """Take one token; return how many seconds the caller must wait before sending."""
        with self._lock:
            now = self._clock()
            elapsed = max(0.0, now - self._last)
            self._last = now
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
            wait = max(0.0, -self._tokens / self.qps)
            self.waited_s += wait
            return wait

    def acquire(self) -> float:
        """Take one token, sleeping until it is due; returns the time slept."""
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)
        return wait
