"""What the server clock has made due: timer deadlines and journaled retries.

Expected flow: the daemon's ticker calls ``due(state, now_ms)`` whenever the state changes or the
next due time passes, appends the returned ``Deadline`` drafts and re-issues the returned retries
(``EffectIssued`` drafts), and sleeps ``sleep_s(state, now_ms)``.

Guarantees:
- Nothing is due while the server clock has no reading (``now_ms is None``): time-gated work
  waits rather than guesses.
- Each (timer id, due) and each (effect id, attempt) is handed out once per ``Ticker``; the fold
  drops a stale Deadline anyway (core.py), and the daemon submits an effect only on the
  EffectIssued that flipped it to issued, so a repeat is harmless but avoided.
- A retry whose outcome had no server time (``not_before is None``) is not handled here: the
  daemon waits its ``retry_after_ms`` on the monotonic clock (or, after a restart, issues it).
"""
from __future__ import annotations

from typing import Any

from engine.effects.models import effect_to_dict
from journal.records import Deadline, EffectIssued

MAX_SLEEP_S = 1.0


class Ticker:
    def __init__(self) -> None:
        self._sent_timers: set[tuple[str, int]] = set()
        self._sent_retries: set[tuple[str, int]] = set()

    def due(self, state: Any, now_ms: int | None) -> list[Any]:
        if now_ms is None:
            return []
        out: list[Any] = [self._deadline(t, now_ms) for t in state.due_timers(now_ms)
                          if (t.id, t.due) not in self._sent_timers]
        self._sent_timers.update((d.timer, d.due) for d in out)
        retries = [EffectIssued(at=now_ms, effect=effect_to_dict(p.effect)) for p in _retries(state, now_ms)
                   if (p.effect.id, p.attempt) not in self._sent_retries]
        self._sent_retries.update((r.effect["id"], state.pending[r.effect["id"]].attempt) for r in retries)
        self._forget(state)
        return out + retries

    def sleep_s(self, state: Any, now_ms: int | None) -> float:
        nxt = next_due(state)
        if now_ms is None or nxt is None:
            return MAX_SLEEP_S
        return max(0.0, min(MAX_SLEEP_S, (nxt - now_ms) / 1000))

    @staticmethod
    def _deadline(t: Any, now_ms: int) -> Deadline:
        return Deadline(at=now_ms, timer=t.id, machine=t.machine, key=t.key, name=t.name, due=t.due)

    def _forget(self, state: Any) -> None:
        self._sent_timers = {(i, d) for i, d in self._sent_timers if i in state.timers}
        self._sent_retries = {(i, a) for i, a in self._sent_retries if i in state.pending}


def _retries(state: Any, now_ms: int) -> list[Any]:
    return [p for p in state.pending.values()
            if not p.issued and p.attempt and p.not_before is not None and p.not_before <= now_ms]


def next_due(state: Any) -> int | None:
    """The earliest timer due or retry ``not_before``, or ``None``."""
    dues = [t.due for t in state.timers.values()]
    dues += [p.not_before for p in state.pending.values() if not p.issued and p.attempt and p.not_before is not None]
    return min(dues, default=None)
