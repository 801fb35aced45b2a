"""Replay: refold a journal with the current code; ``check`` compares decisions with the journal.

Guarantees:
- The same journal gives the same states and effects on every run (the fold is pure).
- ``check`` compares every journaled ``EffectIssued`` with the effect recomputed from its cause
  record (same id ``<cause seq>.<n>``) and stops at the FIRST divergence, reporting the cause
  record, the object it concerns and both effects. A journaled effect that the current code no
  longer emits is a divergence too. Effects recomputed at the tail but never issued (the daemon
  stopped between fold and issue) are reported as in flight, not as divergences.
- ``Log`` effects are not journaled and not compared.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from engine.core import State, default_machines, fold_many, initial_state
from engine.effects.models import effect_to_dict
from journal.records import EffectIssued, Record
from kfold.offline.render import effect_line, field_diff, record_line, show


@dataclass
class Divergence:
    cause: Record | None
    effect_id: str
    journaled: dict[str, Any] | None
    recomputed: dict[str, Any] | None
    at_seq: int

    def describe(self) -> str:
        lines = [f"divergence at record {self.at_seq}: effect {self.effect_id}"]
        if self.cause is not None:
            lines.append(f"  cause:      seq {self.cause.seq} {record_line(self.cause)}")
        return "\n".join(lines + self.differences())

    def differences(self) -> list[str]:
        """The effects' differing fields, one line each (``spec.ports[0].port: expected 80, got 8080``:
        expected = journaled, got = recomputed by the current code), or what is missing on one side."""
        if self.recomputed is None:
            return [f"  journaled:  {effect_line(self.journaled or {})}",
                    "  the current code no longer emits this effect"]
        if self.journaled is None:
            return [f"  recomputed: {effect_line(self.recomputed)}",
                    "  the journal has no such effect: the current code emits one more"]
        diff = field_diff(self.journaled, self.recomputed)
        lines = [f"  effect:     {effect_line(self.journaled)}",
                 f"  {len(diff)} field(s) differ (expected = journaled, got = recomputed by the current code):"]
        return lines + [f"    {path}: expected {show(old)}, got {show(new)}" for path, old, new in diff[:20]] \
            + ([f"    (+{len(diff) - 20} more)"] if len(diff) > 20 else [])


@dataclass
class ReplayResult:
    state: State
    records: int = 0
    effects: Counter = field(default_factory=Counter)
    divergence: Divergence | None = None
    in_flight: list[str] = field(default_factory=list)
    terms: Counter = field(default_factory=Counter)   # leadership term -> effects journaled as issued under it
    shard_terms: Counter = field(default_factory=Counter)   # (shard, term) -> effects (kfold.daemon.shards)

    def summary(self) -> str:
        lines = [f"records folded: {self.records} (last seq {self.state.seq})"]
        for name, table in sorted(self.state.tables.items()):
            objects = [d for k, d in table.items() if is_object_key(k)]
            states = Counter(_state_of(d) for d in objects)
            shown = ", ".join(f"{s}={n}" for s, n in sorted(states.items()))
            kept = sorted({type(d).__name__ for k, d in table.items() if not is_object_key(k)})
            extra = f"; bookkeeping: {', '.join(kept)}" if kept else ""
            lines.append(f"machine {name}: {len(objects)} objects ({shown}){extra}")
        if self.effects:
            lines.append("effects: " + ", ".join(f"{t}={n}" for t, n in sorted(self.effects.items())))
        else:
            lines.append("effects: none")
        lines.append(f"pending effects: {len(self.state.pending)}; timers: {len(self.state.timers)}")
        if self.shard_terms:   # kfold.daemon.shards: which shard's term issued what
            lines.append("issued per shard and term: " + ", ".join(
                f"shard {s} term {t}={n}" for (s, t), n in sorted(self.shard_terms.items())))
        elif any(t is not None for t in self.terms):   # kfold.daemon.leader: which leadership term issued what
            lines.append("issued per leadership term: " + ", ".join(
                f"{'none' if t is None else f'term {t}'}={n}" for t, n in sorted(self.terms.items(), key=lambda i: (i[0] is not None, i[0] or 0))))
        for key, q in sorted(self.state.quarantine.items()):
            lines.append(f"quarantined {key} at seq {q.seq} ({q.rec}, machine {q.machine}): {q.error}")
        if self.in_flight:
            lines.append(f"in flight at the end (emitted, never issued): {', '.join(self.in_flight[:10])}")
        return "\n".join(lines)


FOLD_RUN = 64  # records folded together by ``fold_many`` (same result as one by one, fewer copies);
# no more than the reader parses at once (``journal.store.PARSE_BATCH``): records kept alive longer
# go cold in the cache before they are folded and freed


def replay(records: Iterable[Record], check: bool = False, state: State | None = None) -> ReplayResult:
    reg = default_machines()
    result = ReplayResult(state=state or initial_state())
    expected: dict[str, tuple[Record, dict[str, Any]]] = {}
    for run in _runs(records, check):
        if check and isinstance(run[0], EffectIssued) and run[0].seq == result.state.seq + 1:  # (a gap: fold refuses it)
            div = compare_issued(run[0], expected, result.state)
            if div is not None:
                result.divergence = div
                return result
        result.state, per_record = fold_many(result.state, run, reg)  # raises what the failing record raises
        result.records += len(run)
        for rec, effects in zip(run, per_record):
            if isinstance(rec, EffectIssued):
                result.terms[rec.term] += 1
                if rec.shard is not None and rec.term is not None:
                    result.shard_terms[(rec.shard, rec.term)] += 1
            for e in effects:
                result.effects[e.type] += 1
                if check and e.type != "log":
                    expected[e.id] = (rec, effect_to_dict(e))
    result.in_flight = sorted(eid for eid in expected if eid in result.state.pending and not result.state.pending[eid].issued)
    return result


def _runs(records: Iterable[Record], check: bool) -> Iterator[list[Record]]:
    """Consecutive records in lists of at most ``FOLD_RUN``; with ``check`` every ``EffectIssued``
    comes alone, so it is compared against the state just before it."""
    run: list[Record] = []
    for rec in records:
        if check and isinstance(rec, EffectIssued):
            if run:
                yield run
            yield [rec]
            run = []
            continue
        run.append(rec)
        if len(run) >= FOLD_RUN:
            yield run
            run = []
    if run:
        yield run


def compare_issued(rec: EffectIssued, expected: dict[str, tuple[Record, dict[str, Any]]], state: State) -> Divergence | None:
    """The divergence of a journaled effect from the one recomputed for its id (popped from
    ``expected``), or None when they match. ``state`` is the state just before ``rec``."""
    eid = rec.effect.get("id", "")
    if eid in expected:
        cause, mine = expected.pop(eid)
    elif eid in state.pending:  # emitted before the snapshot replay started from
        cause, mine = None, effect_to_dict(state.pending[eid].effect)
    else:
        return Divergence(None, eid, rec.effect, None, rec.seq)
    if mine != rec.effect:
        return Divergence(cause, eid, rec.effect, mine, rec.seq)
    return None


WIDE_FIELDS = ("generation", "target", "rv")


def objects(state: State, wide: bool = False) -> list[dict[str, Any]]:
    """Every object the machines track, sorted: ``{machine, key, state}`` (``wide``: plus the
    decision's ``generation``, ``target`` and ``rv`` where it has them)."""
    out = []
    for name, table in sorted(state.tables.items()):
        for key, d in sorted(table.items()):
            if not is_object_key(key):
                continue
            row = {"machine": name, "key": key, "state": _state_of(d)}
            if wide:
                row.update({f: str(getattr(d, f)) for f in WIDE_FIELDS if getattr(d, f, None) not in (None, "")})
            out.append(row)
    return out


def is_object_key(key: str) -> bool:
    """Object keys are ``<cluster>/<namespace>/<name>``; a machine's own bookkeeping rows use an
    empty name or a ``#`` name (config, indexes, sweeps)."""
    name = key.rpartition("/")[2]
    return bool(name) and not name.startswith("#") and not key.startswith("#")


def _state_of(decision: Any) -> str:
    if decision is None:
        return "(absent)"
    for attr in ("state", "phase"):
        value = getattr(decision, attr, None)
        if value is not None:
            return str(value)
    return type(decision).__name__

