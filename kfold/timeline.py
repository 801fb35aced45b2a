"""Refold a journal step by step and say, per record, what it changed: the shared core of
``kfold trace`` and ``kfold ui``.

Guarantees:
- ``walk`` folds with the current code exactly as ``kfold replay`` does (the same machines, one
  record at a time) and yields one ``Step`` per record: the decision records it changed (machine,
  key, before, after; a write of an equal value is not a change), the effects it emitted, the
  timers it set or cancelled, whether a deadline fired or was stale, and the first divergence
  between a journaled effect and the one the current code recomputes (the ``--check`` rule of
  ``kfold.replay``).
- Which keys a record changed is learnt from the machines' own writes (a thin view over the fold
  context that notes ``put``/``drop``/timer calls), never by scanning whole tables, so one step
  costs the same with ten objects or ten thousand.
- A record the fold refuses (an illegal transition, a bad record) does not end the walk: its step
  carries ``error`` and the state is carried over unchanged past it, so a viewer can still show
  everything after it. ``kfold replay`` stays strict; this is for looking, not deciding.
- Times are the server clock carried by each record, shown as ISO 8601 UTC.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from engine.core import Machines, State, fold, initial_state
from engine.effects.models import effect_to_dict
from engine.machines import all_machines
from journal.records import EffectIssued, Record
from kfold.replay import Divergence, compare_issued

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


# -- words ------------------------------------------------------------------------------------
def iso(ms: int | None) -> str:
    """Server milliseconds as ISO 8601 UTC (``2026-11-29T20:05:17.022Z``)."""
    if ms is None:
        return "(no server time yet)"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def state_of(decision: Any) -> str:
    if decision is None:
        return "(absent)"
    for attr in ("phase", "state"):
        value = getattr(decision, attr, None)
        if isinstance(value, str):
            return value
    return type(decision).__name__


def record_line(rec: Record) -> str:
    """What a record says, in one line (no payloads: they may be long; never secrets, which the
    journal redacted before append)."""
    if rec.rec == "observed":
        return f"observed {rec.event} {rec.kind} {_where(rec.cluster, rec.namespace, rec.name)} rv={rec.rv}"
    if rec.rec == "relist":
        return f"relist {rec.kind} {_where(rec.cluster, rec.scope, '')}: {len(rec.keys)} present"
    if rec.rec == "command":
        target = _where(rec.cluster, rec.namespace, rec.target)
        return f"command {rec.name}" + (f" {target}" if target else "")
    if rec.rec == "deadline":
        return f"deadline {rec.machine} {rec.key} {rec.name} (due {iso(rec.due)})"
    if rec.rec == "outcome":
        reason = f" {rec.status_reason}" if rec.status_reason else ""
        why = f": {rec.message}" if rec.message and rec.result != "ok" else ""
        return f"outcome {rec.effect_id} {rec.result}{reason}" + (f" ({rec.code})" if rec.code else "") + why
    if rec.rec == "effect":
        term = f" [term {rec.term}]" if getattr(rec, "term", None) is not None else ""   # kfold.leader
        if term and getattr(rec, "shard", None) is not None:   # kfold.shards
            term = f" [shard {rec.shard} term {rec.term}]"
        return f"issued {rec.effect.get('id', '?')} {effect_line(rec.effect)}{term}"
    return rec.rec


def effect_line(effect: Any) -> str:
    """An effect in one line: ``create Service kfold-demo/demo`` (plus the cluster when it is not
    kfold's own, and a fence or subresource when there is one)."""
    e = effect if isinstance(effect, dict) else effect_to_dict(effect)
    t = e.get("type", "?")
    if t == "log":
        return f"log {e.get('level', 'info')}: {e.get('message', '')}"
    if t == "ensure_namespace":
        what = f"ensure_namespace {e.get('namespace', '')}"
    elif t == "apply_secret":
        what = f"apply_secret Secret {e.get('namespace', '')}/{e.get('name', '')}"
    elif t == "event":
        what = f"event {e.get('event_type', '')} {e.get('reason', '')} on {e.get('involved', {}).get('kind', '')} " \
               f"{e.get('namespace', '')}/{e.get('involved', {}).get('name', '')}"
    elif t == "post_event":
        what = f"post_event {e.get('event_type', '')} {e.get('reason', '')} on {e.get('regarding', {}).get('kind', '')} " \
               f"{e.get('namespace', '')}/{e.get('regarding', {}).get('name', '')}"
    elif t == "list":
        sel = f" -l {e['label_selector']}" if e.get("label_selector") else ""
        what = f"list {e.get('kind', '')} in {e.get('namespace') or '(all namespaces)'}{sel}"
    else:
        ns = e.get("namespace", "")
        what = f"{t} {e.get('kind', '')} {ns + '/' if ns else ''}{e.get('name', '')}"
        if e.get("subresource"):
            what += f" /{e['subresource']}"
        if t == "delete" and e.get("uid"):
            what += f" (fenced uid={e['uid'][:8]} rv={e.get('rv', '')})"
    cluster = e.get("cluster", "")
    return what + (f" on {cluster}" if cluster and cluster != "local" else "")


def effect_target(effect: Any) -> tuple[str, str] | None:
    """``(kind, <cluster>/<namespace>/<name>)`` of the object an effect acts on, if it names one."""
    e = effect if isinstance(effect, dict) else effect_to_dict(effect)
    kind = {"apply_secret": "Secret", "ensure_namespace": "Namespace"}.get(e.get("type"), e.get("kind"))
    name = e.get("name") or (e.get("namespace") if e.get("type") == "ensure_namespace" else "")
    if not kind or not name:
        return None
    ns = "" if e.get("type") == "ensure_namespace" else e.get("namespace", "")
    return kind, f"{e.get('cluster', '')}/{ns}/{name}"


def _where(cluster: str, namespace: str, name: str) -> str:
    return "/".join(x for x in (namespace, name) if x) + (f" on {cluster}" if cluster and cluster != "local" else "")


# -- field-level diff -------------------------------------------------------------------------
def decision_diff(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``field_diff`` of two decision records, comparing field by field first so only the fields
    that changed are turned into JSON (a Pod's manifest is not dumped when only its rv moved)."""
    if type(old) is type(new) and isinstance(old, BaseModel):
        out, after = [], new.__dict__  # a frozen model's fields, in declaration order
        for name, a in old.__dict__.items():
            b = after[name]
            if a is not b and a != b:
                out += decision_diff(a, b, f"{path}.{name}" if path else name)
        return out
    return field_diff(_jsonable(old), _jsonable(new), path)


def _jsonable(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else to_jsonable_python(value)


def field_diff(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``[(dotted.path, old, new)]`` for every leaf that differs; a list of a different length is
    one change; a missing side is ``None``."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in list(old) + [k for k in new if k not in old]:
            out += field_diff(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += field_diff(a, b, f"{path}[{i}]")
        return out
    if isinstance(old, str) and isinstance(new, str) and old[:1] in "{[" and new[:1] in "{[":
        inner = _json_or_none(old), _json_or_none(new)
        if None not in inner:  # a digest kept as JSON text (a manifest, a written status): diff inside
            return field_diff(*inner, path=f"{path}~" if path else "~")
    if old is None and isinstance(new, dict):
        return [d for k, v in new.items() for d in field_diff(None, v, f"{path}.{k}" if path else str(k))
                if not _empty(v)]
    return [(path or "(value)", old, new)]


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _empty(value: Any) -> bool:
    return value in (None, "", [], {}, False, 0)


def show(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
