"""What may be issued now: timer deadlines, journaled retries, and each object key's next effect.

Expected flow: the daemon calls ``ready_to_issue(state, keys)`` after every commit and journals
``EffectIssued`` for what it returns; its ticker calls ``Ticker.due(state, now_ms, mono_ms)``
whenever the state changes or the next due time passes, appends the returned ``Deadline`` drafts
and re-issues the returned retries (``EffectIssued`` drafts), and sleeps ``sleep_s(...)``.

Order per object key (the contract; the truth is the fold's journaled pending map, nothing else):
- A key's pending effects are ordered by effect id (``<seq>.<n>``, emission order). Only the
  oldest one, the key's *head*, may be issued; a later effect stays pending and unissued (never
  sent) until every earlier effect of its key has its final outcome folded. So at most one effect
  per key is ever in the executor.
- A head waiting for its retry (pending, unissued, ``attempt > 0``) therefore holds its key: the
  effects behind it wait until it is re-issued and answered. Its ``not_before`` and the effects
  behind it are all in the pending map, so this survives a restart unchanged.
- ``ready_to_issue`` returns only fresh heads (``attempt == 0``); retries are issued only by the
  ``Ticker``, when due.

Guarantees of ``Ticker``:
- Deadlines and clocked retries (``not_before`` set) are due only by the server clock of the
  cluster they concern (``Timer.cluster``, the effect's cluster); nothing is due by a clock that
  has no reading yet (``None``): time-gated work waits.
- A retry whose outcome had no server time (``not_before is None``) waits its ``retry_after_ms``
  on the monotonic clock: the daemon registers it with ``wait_locally`` when it folds that
  outcome. One found without a registration (after a restart) is due at once: the restart
  served the wait, and its last attempt's outcome is journaled, so it is not in doubt.
- Only a key's head is re-issued; a retry behind an older effect (journals written before this
  rule) waits for its turn.
- Each (timer id, due) and each (effect id, attempt) is handed out once per ``Ticker``; the fold
  drops a stale Deadline anyway (core.py), and the daemon submits an effect only on the
  EffectIssued that flipped it to issued, so a repeat is harmless but avoided.
- ``sleep_s`` counts only what has not been handed out yet and may still become due, so a loop of
  ``due``/``sleep_s`` never spins: without a server clock reading it sleeps up to ``MAX_SLEEP_S``
  (or until a monotonic retry wait ends).
"""
from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any, Callable, Iterable, Optional, Union

from engine.effects.models import effect_to_dict
from journal.records import Deadline, EffectIssued

MAX_SLEEP_S = 1.0
Now = Union[int, None, Callable[[str], Optional[int]]]


def _per_cluster(now: Any) -> Callable[[str], int | None]:
    return now if callable(now) else (lambda _cluster: now)


def seq_key(effect_id: str) -> tuple[int, int]:
    """``"<seq>.<n>"`` -> ``(seq, n)``: the emission order of effect ids."""
    a, _, b = effect_id.partition(".")
    return int(a), int(b or 0)


class PendingIndex:
    """Effect ids per object key over a state's pending map, so the daemon's per-commit questions
    (``ready_to_issue`` for the touched keys, the ticker's waiting retries) read the few effects of
    those keys instead of scanning every pending effect after every commit (O(pending) per commit
    made a burst of N Sessions cost O(N^2)).

    A cache, never a source of truth: an effect enters the pending map only by being emitted by a
    fold, so the daemon ``add``s every fold's effects (and ``rebuild``s from a whole state after
    loading one); ids whose effect has left the pending map are dropped when met. (The retries
    waiting are the state's own ``retrying`` map, kept by the fold.)"""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[str, set[str]] = {}

    def __len__(self) -> int:
        """Keys with a pending effect indexed."""
        return len(self._ids)

    def rebuild(self, state: Any) -> "PendingIndex":
        self._ids = {}
        for p in state.pending.values():
            self._ids.setdefault(p.effect.key, set()).add(p.effect.id)
        return self

    def add(self, effects: Iterable[Any]) -> None:
        for e in effects:
            if e.type != "log":
                self._ids.setdefault(e.key, set()).add(e.id)

    def of(self, state: Any, key: str) -> list[Any]:
        """The pending effects (``Pending``) of ``key``, in no particular order."""
        ids = self._ids.get(key)
        if not ids:
            return []
        pending = state.pending
        out = [p for i in ids if (p := pending.get(i)) is not None]
        if len(out) != len(ids):
            live = {p.effect.id for p in out}
            if live:
                self._ids[key] = live
            else:
                del self._ids[key]
        return out


def _pending_of(state: Any, keys: Iterable[str] | None, index: PendingIndex | None) -> Iterable[Any]:
    """The pending effects of ``keys`` (every pending effect if None), through ``index`` if given."""
    if keys is None:
        return state.pending.values()
    if index is None:
        want = set(keys)
        return [p for p in state.pending.values() if p.effect.key in want]
    return [p for k in set(keys) for p in index.of(state, k)]


def heads(state: Any, keys: Iterable[str] | None = None, index: PendingIndex | None = None) -> dict[str, Any]:
    """The oldest pending effect (``Pending``) of each key (of ``keys`` only, if given)."""
    return _heads(_pending_of(state, keys, index))


def _heads(pending: Iterable[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pending:
        k = p.effect.key
        cur = out.get(k)
        if cur is None or seq_key(p.effect.id) < seq_key(cur.effect.id):
            out[k] = p
    return out


READS = frozenset({"get", "list"})


def ready_to_issue(state: Any, keys: Iterable[str] | None = None, index: PendingIndex | None = None) -> list[Any]:
    """Fresh effects (never sent, not retries) that head their key, plus every fresh read.

    A quorum read changes nothing, so it never waits behind a queued write of its key, and it is
    issued first: a machine that asks to re-observe (an in-doubt effect after a restart, a 409)
    gets its observation before anything else of that key is sent. An issued read still heads its
    key, so writes emitted after it wait for its answer. Otherwise in emission order. ``index``
    (the daemon's ``PendingIndex``) only makes it cheaper: the answer is the same."""
    pending = list(_pending_of(state, keys, index))
    ready = {p.effect.id: p.effect for p in _heads(pending).values() if not p.issued and not p.attempt}
    for p in pending:
        e = p.effect
        if e.type in READS and not p.issued and not p.attempt:
            ready[e.id] = e
    return sorted(ready.values(), key=lambda e: (e.type not in READS, seq_key(e.id)))


def waiting_retries(state: Any, index: PendingIndex | None = None) -> list[Any]:
    """Heads waiting for a retry: pending, unissued, ``attempt > 0``; in effect id order (the
    pending map's own order follows string hashes, which differ between processes, and the ticker
    journals these in this order). Only the keys that have such an effect (``state.retrying``,
    usually none) are searched for their head."""
    keys = set(state.retrying.values())
    if not keys:
        return []
    return sorted((p for p in heads(state, keys, index).values() if not p.issued and p.attempt),
                  key=lambda p: seq_key(p.effect.id))


class _TimerIndex:
    """The timers of one ``state.timers`` map, per cluster and sorted by (due time, id), so the
    ticker walks only what is due or next instead of every timer after every commit.

    Kept up to date, not rebuilt. A fold that sets or cancels no timer leaves the map the same
    object (nothing to do). Otherwise, when every fold since the map last indexed was ``note``d
    (the ids it set or cancelled, ``fold_many(timers_touched=...)``), only those ids are looked up;
    a map reached any other way (a state loaded, a fold not noted) is compared with what is indexed
    by identity, every timer (a timer that did not change is the same object). Either way only the
    timers set, changed or cancelled move in the sorted lists. The comparison of every timer after
    every commit was 13.6% of kfold's CPU at 3,000 Sessions (docs/benchmarks/2026-12-07-profile-3000.json)."""

    def __init__(self) -> None:
        self._of: Any = None
        self._next: Any = None             # the map the noted folds lead to from ``_of`` (None: unknown)
        self._touched: set[str] = set()    # the timer ids those folds set or cancelled
        self._seen: dict[str, Any] = {}   # timer id -> the Timer indexed
        self._by_cluster: dict[str, list[tuple[int, str, Any]]] = {}

    def note(self, before: Any, after: Any, touched: Iterable[str]) -> None:
        """A fold took the timers from ``before`` to ``after``, setting or cancelling no timer
        outside ``touched``."""
        if after is before:
            return
        if self._next is not None and self._next is before:
            self._next = after
            self._touched.update(touched)
        else:
            self._next = None

    def get(self, timers: Any) -> dict[str, list[tuple[int, str, Any]]]:
        if timers is self._of:
            return self._by_cluster
        seen = self._seen
        if self._next is not None and timers is self._next:
            for tid in self._touched:
                self._move(tid, seen.get(tid), timers.get(tid))
        else:
            for tid, t in timers.items():
                old = seen.get(tid)
                if old is not t:
                    self._move(tid, old, t)
            if len(seen) > len(timers):   # some were cancelled (or fired and removed)
                for tid in [tid for tid in seen if tid not in timers]:
                    self._move(tid, seen[tid], None)
        self._of = self._next = timers
        self._touched = set()
        return self._by_cluster

    def _move(self, tid: str, old: Any, new: Any) -> None:
        if old is new:
            return
        if old is not None:
            cluster = old.clock
            rows = self._by_cluster[cluster]
            del rows[bisect_left(rows, (old.due, tid), key=_due_id)]
            if not rows:
                del self._by_cluster[cluster]
            del self._seen[tid]
        if new is not None:
            self._seen[tid] = new
            insort(self._by_cluster.setdefault(new.clock, []), (new.due, tid, new), key=_due_id)


def _due_id(row: tuple[int, str, Any]) -> tuple[int, str]:
    return row[0], row[1]


class Ticker:
    """``index``: the daemon's ``PendingIndex`` (else the pending map is scanned for retries)."""

    def __init__(self, index: PendingIndex | None = None) -> None:
        self._pending_index = index
        self._sent_timers: set[tuple[str, int]] = set()
        self._sent_retries: set[tuple[str, int]] = set()
        self._local: dict[tuple[str, int], int] = {}   # (effect id, attempt) -> monotonic ms due
        self._index = _TimerIndex()

    def sizes(self) -> dict[str, int]:
        """Its memory of what it told the daemon, and its index of the timers (metrics)."""
        return {"ticker_timers_told": len(self._sent_timers), "ticker_retries_told": len(self._sent_retries),
                "ticker_retries_local": len(self._local), "ticker_timers_indexed": len(self._index._seen)}

    def note_timers(self, before: Any, after: Any, touched: Iterable[str]) -> None:
        """A fold took ``state.timers`` from ``before`` to ``after`` and set or cancelled only the
        timers ``touched`` (``fold_many(timers_touched=...)``): the next ``due`` looks up only those.
        Optional: a state whose folds were not noted is compared timer by timer."""
        self._index.note(before, after, touched)

    def wait_locally(self, effect_id: str, attempt: int, due_mono_ms: int) -> None:
        """An unclocked retry (``not_before is None``) is due at ``due_mono_ms`` (monotonic)."""
        self._local[(effect_id, attempt)] = due_mono_ms

    def due(self, state: Any, now_ms: Now, mono_ms: int | None = None) -> list[Any]:
        """``now_ms``: one server reading, or a reading per cluster (``ServerClocks.now_ms``): a
        deadline is judged, and its record stamped, on the clock of the cluster it concerns; a
        retry on its effect's cluster's."""
        clock = _per_cluster(now_ms)
        due: list[tuple[int, str, Any, int]] = []
        for cluster, rows in self._index.get(state.timers).items():
            now = clock(cluster)
            if now is None:
                continue
            for t_due, tid, t in rows:
                if t_due > now:
                    break
                if (tid, t_due) not in self._sent_timers:
                    due.append((t_due, tid, t, now))
        out: list[Any] = [self._deadline(t, now) for _d, _i, t, now in sorted(due, key=lambda r: (r[0], r[1]))]
        self._sent_timers.update((d.timer, d.due) for d in out)
        for p in self._unsent_retries(state):
            now = clock(p.effect.cluster)
            wait = self._wait_ms(p, now, mono_ms)
            if wait is not None and wait <= 0:
                out.append(EffectIssued(at=now, effect=effect_to_dict(p.effect)))
                self._sent_retries.add((p.effect.id, p.attempt))
        self._forget(state)
        return out

    def forget_retry(self, effect_id: str, attempt: int) -> None:
        """A retry ``due`` returned was not issued (no leadership term): it is due again."""
        self._sent_retries.discard((effect_id, attempt))

    def forget_timer(self, timer_id: str, due: int) -> None:
        """A deadline ``due`` returned was not journaled (no leadership term): it is due again."""
        self._sent_timers.discard((timer_id, due))

    def sleep_s(self, state: Any, now_ms: Now, mono_ms: int | None = None) -> float:
        clock = _per_cluster(now_ms)
        waits: list[int] = []
        for cluster, rows in self._index.get(state.timers).items():
            now = clock(cluster)
            if now is not None:
                nxt = next((t_due for t_due, tid, _t in rows if (tid, t_due) not in self._sent_timers), None)
                if nxt is not None:
                    waits.append(nxt - now)
        for p in self._unsent_retries(state):
            wait = self._wait_ms(p, clock(p.effect.cluster), mono_ms)
            if wait is not None:
                waits.append(wait)
        if not waits:
            return MAX_SLEEP_S
        return max(0.0, min(MAX_SLEEP_S, min(waits) / 1000))

    def _unsent_retries(self, state: Any) -> list[Any]:
        return [p for p in waiting_retries(state, self._pending_index) if (p.effect.id, p.attempt) not in self._sent_retries]

    def _wait_ms(self, p: Any, now_ms: int | None, mono_ms: int | None) -> int | None:
        """How long until retry ``p`` is due; ``None``: unknown (its clock has no reading)."""
        if p.not_before is not None:
            return None if now_ms is None else p.not_before - now_ms
        local = self._local.get((p.effect.id, p.attempt))
        if local is None:
            return 0       # found after a restart: due at once
        return None if mono_ms is None else local - mono_ms

    @staticmethod
    def _deadline(t: Any, now_ms: int) -> Deadline:
        return Deadline(at=now_ms, timer=t.id, machine=t.machine, key=t.key, name=t.name, due=t.due)

    def _forget(self, state: Any) -> None:
        if self._sent_timers:
            self._sent_timers = {(i, d) for i, d in self._sent_timers if i in state.timers}
        if self._sent_retries:
            self._sent_retries = {(i, a) for i, a in self._sent_retries if i in state.pending}
        if self._local:
            self._local = {(i, a): d for (i, a), d in self._local.items()
                           if (p := state.pending.get(i)) is not None and not p.issued and p.attempt == a}
