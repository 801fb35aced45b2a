"""The executor: applies journaled effects to apiservers and hands back ``Outcome`` drafts.

Expected flow: the daemon journals ``EffectIssued`` for an effect, then ``submit``s it; the
executor performs it (``ops``) through a ``Transport`` and awaits ``sink(outcome_draft)``;
the daemon journals that draft and folds it.

Guarantees:
- Concurrent across object keys, in order per key: one FIFO and one worker task per
  ``effect.key``; a key's next effect starts only after the previous one's outcome was handed to
  the sink.
- Every reply's ``Date`` updates the cluster's ``ServerClock``. An outcome's ``at`` is the server
  clock after that reply; a ``ListObjects`` outcome's ``at`` is exactly the Date of ITS response
  (``None`` if missing or garbage), so an age computed from it uses the clock that listed.
- ``Log`` effects are logged and produce no outcome.
- Retries (the decision is journaled, so it survives a restart): a ``transient`` result of a
  ``safe_to_retry`` effect below ``max_attempts`` comes back as ``Outcome(result="transient",
  retry_after_ms=N)`` with N = max(Retry-After, exponential backoff of the attempt, with jitter).
  The fold keeps such an effect pending-unissued with its attempt count and ``not_before`` server
  time (engine/core.py), and the daemon's ticker re-issues it when due (``None`` server time:
  after N ms on the monotonic clock), before and after a restart alike (``engine.effects.timers``,
  ``kfold.daemon.loop``). A safe effect out of attempts comes back ``transient`` to its machine,
  which says retry (``Ctx.retry``: the same effect as its loop's next attempt, the count going on
  from here: ``engine.backoff``) or terminal; every unsafe effect (create, delete) comes back
  ``transient`` at once and its machine re-observes; nothing unsafe is ever repeated here.

Order while a retry waits (the contract with the caller): an outcome carrying a retry ends that
effect's turn in its key's FIFO; the executor does not hold the key while the retry waits, because
the wait is journaled state the executor does not own (its queues are not journaled). The daemon
holds it instead: it submits at most one effect per key at a time — the oldest pending one in the
fold's pending map — so nothing is ever queued behind a retry here, and after a restart (empty
queues) the pending map still says what goes first. A caller that submits a key's next effect
before the previous one's final outcome gives up that order.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from engine.backoff import BASE_MS, CAP_MS, EXECUTOR_ATTEMPTS
from engine.effects.io.clock import ServerClock, parse_http_date
from engine.effects.io.event_series import EventSeries
from engine.effects.io.ops import Done, perform
from engine.effects.io.transport import Response, Request, Transport
from journal.records import Outcome

log = logging.getLogger("kfold.executor")
Sink = Callable[[Outcome], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: ``base * 2**attempt`` capped, times 0.8..1.2; the base and
    the cap are the one schedule's (``engine.backoff``) that the machines' own repeats follow."""

    base_ms: int = BASE_MS
    cap_ms: int = CAP_MS
    max_attempts: int = EXECUTOR_ATTEMPTS

    def delay_ms(self, attempt: int, hint_ms: int | None, jitter: float) -> int:
        raw = min(self.cap_ms, self.base_ms * (2 ** attempt)) * jitter
        return max(int(raw), hint_ms or 0)


class Executor:
    def __init__(self, transport: Transport, clock: ServerClock | Callable[[str], ServerClock], sink: Sink, *,
                 env: Mapping[str, str] | None = None, backoff: Backoff = Backoff(),
                 metrics: Any = None, rng: random.Random | None = None):
        self._transport = transport
        self._clock_for = clock if callable(clock) and not isinstance(clock, ServerClock) else (lambda _c: clock)
        self._sink = sink
        self._env = os.environ if env is None else env
        self._backoff = backoff
        self._metrics = metrics
        self._rng = rng or random.Random()
        self._queues: dict[str, deque[tuple[Any, int]]] = {}
        self._workers: dict[str, asyncio.Task] = {}
        self._series = EventSeries()   # events.k8s.io series dedup: this process's, best effort

    # -- API ----------------------------------------------------------------------------------
    def submit(self, effect: Any, attempt: int = 0) -> None:
        """Queue ``effect`` (already journaled as issued) behind earlier effects on its key."""
        if effect.type == "log":
            _log_effect(effect)
            return
        self._queues.setdefault(effect.key, deque()).append((effect, attempt))
        if effect.key not in self._workers:
            self._workers[effect.key] = asyncio.create_task(self._work(effect.key), name=f"exec:{effect.key}")

    @property
    def busy(self) -> int:
        return sum(len(q) for q in self._queues.values())

    @property
    def event_series(self) -> int:
        """Event series remembered for dedup (bounded: ``event_series.MAX_SERIES``)."""
        return len(self._series)

    def sizes(self) -> dict[str, int]:
        """Keys with effects queued and keys with a worker: both empty once every key is idle."""
        return {"executor_queues": len(self._queues), "executor_workers": len(self._workers)}

    async def join(self) -> None:
        """Wait until every submitted effect has an outcome handed to the sink."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._workers.values()):
            task.cancel()
        await asyncio.gather(*list(self._workers.values()), return_exceptions=True)
        await self._transport.close()

    # -- per key ------------------------------------------------------------------------------
    async def _work(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                effect, attempt = queue[0]
                outcome = await self.run(effect, attempt)
                queue.popleft()
                await self._sink(outcome)
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)

    async def run(self, effect: Any, attempt: int = 0) -> Outcome:
        """Perform one effect and draft its outcome (no queueing; used by the contract tests)."""
        clock = self._clock_for(effect.cluster)
        d = await perform(effect, self._calling(clock), self._env, self._series, clock.now_ms())
        out = self._draft(effect, d, attempt, clock)
        if self._metrics is not None:
            self._metrics.effect_done(effect.type, out.result)
        kind = {"apply_secret": "Secret", "ensure_namespace": "Namespace"}.get(effect.type, getattr(effect, "kind", ""))
        why = f": {out.message}" if out.result != "ok" and out.message else ""
        log.info("effect %s %s %s -> %s%s", effect.type, kind or "-", effect.key, out.result, why,
                 extra={"key": effect.key, "kind": kind, "effect_id": effect.id, "result": out.result})
        return out

    def _calling(self, clock: ServerClock) -> Callable[[Request], Awaitable[Response]]:
        async def call(req: Request) -> Response:
            reply = await self._transport.call(req)
            clock.observe(reply.header("Date"))
            return reply
        return call

    def _draft(self, effect: Any, d: Done, attempt: int, clock: ServerClock) -> Outcome:
        at = parse_http_date(d.date) if effect.type == "list" else clock.now_ms()
        return Outcome(at=at, effect_id=effect.id, machine=effect.machine, key=effect.key,
                       result=d.result, status_reason=d.status_reason, message=d.message, code=d.code,
                       obj=d.obj, items=d.items, retry_after_ms=self._retry_after(effect, d, attempt), step=d.step)

    def _retry_after(self, effect: Any, d: Done, attempt: int) -> int | None:
        if d.result != "transient":
            return None
        if not effect.safe_to_retry:
            return d.retry_after_ms  # informational: the machine decides
        if attempt + 1 >= self._backoff.max_attempts:
            return None              # out of attempts: the machine decides
        return self._backoff.delay_ms(attempt, d.retry_after_ms, self._rng.uniform(0.8, 1.2))


def _log_effect(effect: Any) -> None:
    level = getattr(logging, effect.level.upper(), logging.INFO)
    log.log(level, effect.message, extra={"key": effect.key, "machine": effect.machine, **_safe(effect.fields)})


def _safe(fields: dict[str, Any]) -> dict[str, Any]:
    reserved = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
    return {k if k not in reserved else f"f_{k}": v for k, v in fields.items()}
