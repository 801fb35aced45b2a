"""Refold a journal step by step and say, per record, what it changed: the shared core of
``kfold trace`` and ``kfold ui``.

Guarantees:
- ``walk`` folds with the current code exactly as ``kfold replay`` does (the same machines, one
  record at a time) and yields one ``Step`` per record: the decision records it changed (machine,
  key, before, after; a write of an equal value is not a change), the effects it emitted, the
  timers it set or cancelled, whether a deadline fired or was stale, and the first divergence
  between a journaled effect and the one the current code recomputes (the ``--check`` rule of
  ``kfold.offline.replay``).
- Which keys a record changed is learnt from the machines' own writes (a thin view over the fold
  context that notes ``put``/``drop``/timer calls), never by scanning whole tables, so one step
  costs the same with ten objects or ten thousand.
- A record the fold refuses (an illegal transition, a bad record) does not end the walk: its step
  carries ``error`` and the state is carried over unchanged past it, so a viewer can still show
  everything after it. ``kfold replay`` stays strict; this is for looking, not deciding.
- How a step reads (one line per record and effect, field diffs, ISO times) is ``kfold.offline.render``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator

from engine.core import Machines, State, fold, initial_state
from engine.effects.models import effect_to_dict
from engine.machines import all_machines
from journal.records import EffectIssued, Record
from kfold.offline.render import decision_diff
from kfold.offline.replay import Divergence, compare_issued

MACHINE_KIND = {"session": "Session", "pod": "Pod", "repo": "Repo"}


@dataclass
class Change:
    machine: str
    key: str
    before: Any
    after: Any

    def diff(self) -> list[tuple[str, Any, Any]]:
        return decision_diff(self.before, self.after)


@dataclass
class TimerChange:
    machine: str
    key: str
    name: str
    due: int | None  # None: cancelled


@dataclass
class Step:
    record: Record
    changes: list[Change] = field(default_factory=list)
    effects: tuple[Any, ...] = ()
    timers: list[TimerChange] = field(default_factory=list)
    fired: bool | None = None          # a Deadline record: did its timer still stand?
    answered: Any = None               # an Outcome or EffectIssued record: the effect it concerns
    divergence: Divergence | None = None
    error: str = ""
    quarantined: dict[str, Any] = field(default_factory=dict)  # key -> core.Quarantined, new here
    timer_cluster: str = ""            # a Deadline record: the cluster whose clock its timer is on
    state: State | None = None         # the state after this record (before it, when refused)

    def keys(self) -> set[str]:
        """Every key this record concerns: decisions changed, effects emitted, timers moved, the
        key an outcome or deadline names, the object an observation is about."""
        out = {c.key for c in self.changes} | {e.key for e in self.effects} | {t.key for t in self.timers}
        out |= set(self.quarantined)
        if self.answered is not None:
            out.add(self.answered.key)
        rec = self.record
        if rec.rec in ("deadline", "outcome"):
            out.add(rec.key)
        elif rec.rec == "observed":
            out.add(f"{rec.cluster}/{rec.namespace}/{rec.name}")
        return out


# -- the walk ---------------------------------------------------------------------------------
def walk(records: Iterable[Record], state: State | None = None) -> Iterator[Step]:
    """One ``Step`` per record, in order; see the module docstring."""
    notes: list[tuple] = []
    reg = Machines(_Noted(m, notes) for m in all_machines())
    state = state or initial_state()
    expected: dict[str, tuple[Record, dict[str, Any]]] = {}
    diverged = False
    for rec in records:
        step = Step(rec)
        _before_fold(step, state)
        if isinstance(rec, EffectIssued):
            if diverged:  # only the first divergence is meaningful; keep memory flat after it
                expected.pop(rec.effect.get("id", ""), None)
            else:
                step.divergence = compare_issued(rec, expected, state)
                diverged = step.divergence is not None
        notes.clear()
        try:
            after, step.effects = fold(state, rec, reg)
        except Exception as exc:  # shown on the record, whatever it is (a viewer must not hide a bug)
            step.error = f"{type(exc).__name__}: {exc}"
            state = step.state = replace(state, seq=rec.seq)
            yield step
            continue
        _note_changes(step, notes, state, after)
        if after.quarantine is not state.quarantine:
            step.quarantined = {k: q for k, q in after.quarantine.items() if state.quarantine.get(k) is not q}
        for e in step.effects:
            if e.type != "log":
                expected[e.id] = (rec, effect_to_dict(e))
        state = step.state = after
        yield step


def _before_fold(step: Step, state: State) -> None:
    rec = step.record
    if rec.rec == "deadline":
        timer = state.timers.get(rec.timer)
        step.fired = timer is not None and timer.due == rec.due
        step.timer_cluster = timer.cluster if timer is not None else ""
    elif rec.rec == "outcome":
        p = state.pending.get(rec.effect_id)
        step.answered = p.effect if p is not None else None
    elif rec.rec == "effect":
        p = state.pending.get(rec.effect.get("id", ""))
        step.answered = p.effect if p is not None else None


def _note_changes(step: Step, notes: list[tuple], before: State, after: State) -> None:
    seen: set[tuple[str, str]] = set()
    for what, machine, key, *rest in notes:
        if what == "timer":
            step.timers.append(TimerChange(machine, key, rest[0], rest[1]))
            continue
        if (machine, key) in seen:
            continue
        seen.add((machine, key))
        old, new = before.table(machine).get(key), after.table(machine).get(key)
        if old is not new and old != new:
            step.changes.append(Change(machine, key, old, new))


class _Noted:
    """A machine whose handlers see the fold context through ``_NotingCtx``."""

    def __init__(self, inner: Any, notes: list[tuple]):
        self.inner = inner
        self.name, self.decision = inner.name, inner.decision
        self.observes, self.commands = inner.observes, inner.commands
        for name in dir(inner):
            if name.startswith("on_"):
                setattr(self, name, self._noting(getattr(inner, name), notes))

    @staticmethod
    def _noting(handler: Any, notes: list[tuple]) -> Any:
        return lambda ctx, *args: handler(_NotingCtx(ctx, notes), *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _NotingCtx:
    """The fold context, noting which keys a handler wrote and which timers it moved."""

    __slots__ = ("_ctx", "_notes")

    def __init__(self, ctx: Any, notes: list[tuple]):
        self._ctx, self._notes = ctx, notes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def put(self, key: str, decision: Any) -> None:
        self._notes.append(("put", self._ctx._machine, key))
        self._ctx.put(key, decision)

    def drop(self, key: str) -> None:
        self._notes.append(("put", self._ctx._machine, key))
        self._ctx.drop(key)

    def set_timer(self, key: str, name: str, due: int, cluster: str = "") -> None:
        self._notes.append(("timer", self._ctx._machine, key, name, due))
        self._ctx.set_timer(key, name, due, cluster)

    def cancel_timer(self, key: str, name: str) -> None:
        if self._ctx.timer_due(key, name) is not None:
            self._notes.append(("timer", self._ctx._machine, key, name, None))
        self._ctx.cancel_timer(key, name)
