"""Replay: refold a journal with the current code; ``check`` compares decisions with the journal.

Guarantees:
- The same journal gives the same states and effects on every run (the fold is pure).
- ``check`` compares every journaled ``EffectIssued`` with the effect recomputed from its cause
  record (same id ``<cause seq>.<n>``) and stops at the FIRST divergence, reporting the cause
  record, the object it concerns and both effects. A journaled effect that the current code no
  longer emits is a divergence too.
- ``check`` also finds an effect the current code emits that the journal never issued, by the
  daemon's issuing rule (``kfold.daemon.loop``): a commit journals its records, then the
  ``EffectIssued`` of every touched or held key's fresh head, in one transaction; a key's fresh head
  (``engine.effects.timers.ready_to_issue``: never sent, not a retry, oldest pending of its key, or
  any fresh read) not issued by a commit that had a term is issued by the next commit that has one
  (held keys are released with it; after a stop, recovery issues every key's head). So at the end of
  every run of ``EffectIssued`` records that holds a *fresh* one (first issue, attempt 0: only a
  commit's release journals those, so the daemon was issuing then) and is followed by a later
  record, no recomputed effect may still be a fresh head, unissued. One that is is a divergence:
  "the current code emits effect X.n ... for record #S; the journal never issued it". So is an
  ``Outcome`` of a recomputed effect never journaled as issued (the executor answers only what an
  ``EffectIssued`` let out). The first rule is narrowed
  where the journal cannot show that the daemon was issuing for that key:
  - a run right after a restart's in-doubt commands (``effect.in_doubt`` of an issued effect) is
    recovery's first commit, which releases only the keys those commands and the records after
    them touched (the second, all keys, may not have committed before a crash): only those keys;
  - with shards (``EffectIssued.shard``), only effects whose key was journaled issued under one
    shard, and only by a run holding a fresh effect of that shard.
  Still in flight, not divergences: an effect held behind an earlier pending effect of its key
  (not its head), one decided in the journal's last commit (the trailing run is never judged),
  and anything while the journal shows no issuing at all (a standby journals observations but no
  ``EffectIssued``; a term lost: nothing fresh is issued until a takeover, whose in-doubt commands
  drop the held effects). They are listed as in flight at the end.
- ``Log`` effects are not journaled and not compared.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from engine.core import State, default_machines, fold_many, initial_state
from engine.effects.models import effect_to_dict
from engine.effects.timers import ready_to_issue, seq_key
from journal.records import Command, EffectIssued, Outcome, Record
from kfold.offline.render import effect_line, field_diff, record_line, show


@dataclass
class Divergence:
    cause: Record | None
    effect_id: str
    journaled: dict[str, Any] | None
    recomputed: dict[str, Any] | None
    at_seq: int
    why: str = ""   # with ``journaled`` None: how the journal shows the effect was owed

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
            cause = f" for record #{self.cause.seq}" if self.cause is not None else ""
            why = self.why or f"its key's head when record {self.at_seq} issued effects"
            return [f"  recomputed: {effect_line(self.recomputed)}",
                    f"  the current code emits effect {self.effect_id} {effect_line(self.recomputed)}{cause}; "
                    f"the journal never issued it ({why})"]
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
    owed = Owed(expected) if check else None
    for run in _runs(records, check):
        if owed is not None:
            div = owed.before(run, result.state)
            if div is not None:
                result.divergence = div
                return result
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
                    owed.emitted(e, rec.seq)
        if owed is not None:
            div = owed.answered(run)
            if div is not None:
                result.divergence = div
                return result
    result.in_flight = sorted(eid for eid in expected if eid in result.state.pending and not result.state.pending[eid].issued)
    return result


class Owed:
    """The daemon's issuing rule, checked at the end of each run of ``EffectIssued`` records (see
    the module doc): recomputed effects that were their key's fresh head when a commit issued."""

    def __init__(self, expected: dict[str, tuple[Record, dict[str, Any]]]) -> None:
        self.expected = expected
        self.unissued: set[str] = set()     # recomputed, not yet journaled as issued (may be dropped)
        self.in_run = False                 # the last record folded was an EffectIssued
        self.fresh_shards: set[int | None] = set()   # shards of the run's fresh EffectIssued (None: unsharded)
        self.last_issued = 0
        self.recovery: set[str] | None = None   # keys touched since a restart's in-doubt commands
        self.recovery_seq = 0                    # the first of those commands
        self.key_shard: dict[str, int | None] = {}   # key -> its one shard (None: seen under two)
        self.sharded = False

    def emitted(self, effect: Any, cause_seq: int) -> None:
        self.unissued.add(effect.id)
        if self.recovery is not None and cause_seq >= self.recovery_seq:
            self.recovery.add(effect.key)

    def before(self, run: list[Record], state: State) -> Divergence | None:
        """Called before ``run`` is folded on ``state``; a divergence when a run of issues ended."""
        first = run[0]
        if isinstance(first, EffectIssued):   # ``_runs``: with ``check`` it comes alone
            eid = first.effect.get("id", "")
            p = state.pending.get(eid)
            if not self.in_run:
                self.in_run, self.fresh_shards = True, set()
            if p is not None and not p.issued and not p.attempt:
                self.fresh_shards.add(first.shard)
            if first.shard is not None:
                self.sharded = True
                key = first.effect.get("key") or (p.effect.key if p is not None else None)
                if key is not None:
                    self.key_shard[key] = first.shard if self.key_shard.get(key, first.shard) == first.shard else None
            self.unissued.discard(eid)
            self.last_issued = first.seq
            return None
        div = self._judge(state) if self.in_run and self.fresh_shards else None
        if self.in_run:
            self.in_run, self.recovery = False, None
        for rec in run:   # a restart's in-doubt commands (of issued effects): recovery's first commit
            if isinstance(rec, Command) and rec.name == "effect.in_doubt":
                p = state.pending.get(rec.args.get("effect_id", ""))
                if p is not None and p.issued and self.recovery is None:
                    self.recovery, self.recovery_seq = set(), rec.seq
                if p is not None and self.recovery is not None:
                    self.recovery.add(p.effect.key)
            elif isinstance(rec, Outcome) and self.recovery is not None:
                p = state.pending.get(rec.effect_id)
                if p is not None:
                    self.recovery.add(p.effect.key)
        return div

    def answered(self, run: list[Record]) -> Divergence | None:
        """After ``run`` is folded: an outcome of a recomputed effect never journaled as issued
        (the executor answers only what an ``EffectIssued`` let out)."""
        for rec in run:
            if isinstance(rec, Outcome) and rec.effect_id in self.unissued:
                cause, mine = self.expected[rec.effect_id]
                return Divergence(cause, rec.effect_id, None, mine, rec.seq, why=f"record {rec.seq} is its outcome")
        return None

    def _judge(self, state: State) -> Divergence | None:
        live = {eid for eid in self.unissued if eid in state.pending}
        self.unissued = live    # dropped without being issued (in doubt on takeover): never again
        fresh = [state.pending[eid].effect for eid in live
                 if not state.pending[eid].issued and not state.pending[eid].attempt]
        if self.recovery is not None:
            fresh = [e for e in fresh if e.key in self.recovery]
        if self.sharded:
            fresh = [e for e in fresh if e.key in self.key_shard and self.key_shard[e.key] is not None
                     and self.key_shard[e.key] in self.fresh_shards]
        if not fresh:
            return None
        heads = {e.id for e in ready_to_issue(state, {e.key for e in fresh})}
        owed = sorted((e for e in fresh if e.id in heads), key=lambda e: seq_key(e.id))
        if not owed:
            return None
        cause, mine = self.expected[owed[0].id]
        return Divergence(cause, owed[0].id, None, mine, self.last_issued)


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
    empty name or a name with a ``#`` (config, indexes, sweeps, a Session's ``<name>#events`` queue)."""
    name = key.rpartition("/")[2]
    return bool(name) and "#" not in name and not key.startswith("#")


def _state_of(decision: Any) -> str:
    if decision is None:
        return "(absent)"
    for attr in ("state", "phase"):
        value = getattr(decision, attr, None)
        if value is not None:
            return str(value)
    return type(decision).__name__

