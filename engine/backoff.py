"""The one backoff of every request kfold repeats after a failed answer: the executor's retries
of a safe effect (``engine.effects.io.executor.Backoff``, with jitter) and a machine's own repeats.

Guarantees:
- Repeat ``n`` (0 for the first) waits ``min(BASE_MS * 2**n, CAP_MS)`` ms of server time, or the
  server's own ``Retry-After`` (``hint_ms``) when it gave one. Pure: the caller arms a timer at
  ``now + delay_ms(n)`` on the clock of the cluster the request goes to (``Ctx.set_timer``); the
  fold never reads a clock.
- Without server time there is nothing to wait on: callers repeat at most ``MAX_UNTIMED`` times
  at once, then wait for the next record about the object.
"""
from __future__ import annotations

BASE_MS = 1_000
CAP_MS = 30_000
MAX_UNTIMED = 5


def delay_ms(n: int, hint_ms: int | None = None) -> int:
    """How long repeat ``n`` (0-based) of a request waits."""
    return hint_ms or min(BASE_MS * 2 ** max(n, 0), CAP_MS)
