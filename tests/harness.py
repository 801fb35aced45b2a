"""Scenario harness: feed records with server times, collect effects, answer them with outcomes.

Time is explicit: every record carries ``at`` (server milliseconds). ``advance_to(t)`` plays the
executor's part for timers: it appends a ``Deadline`` record for each timer due at or before ``t``,
and the ticker's for retries (``EffectIssued`` again for each retry due by ``t``).
Run a scenario under ``frozen_worlds`` (see conftest) to prove the wall clock decides nothing.
"""
from __future__ import annotations

from typing import Any

from engine import fold, fold_many, initial_state
from engine.core import State
from engine import snapshot
from engine.rfc3339 import to_ms
from engine.effects.models import effect_to_dict
from engine.effects.timers import seq_key
from journal.records import Command, Deadline, EffectIssued, Observed, Outcome, Relist


def ms(iso: str) -> int:
    """'2030-01-01T00:00:00Z' -> epoch milliseconds (UTC)."""
    value = to_ms(iso)
    assert value is not None, f"not an RFC 3339 time: {iso!r}"
    return value


T0 = ms("2030-01-01T00:00:00Z")


LIVE: list["Scenario"] = []  # scenarios of the running test; tests/conftest.py re-folds them in batches


class Scenario:
    def __init__(self, machines: Any = None, issue_effects: bool = True):
        LIVE.append(self)
        self.machines = machines
        self.state = initial_state()
        self.records: list[Any] = []
        self.folded_by: list[Any] = []   # the machines each record was folded with (a test may swap them)
        self.effects: list[Any] = []     # every effect, in order
        self.issue_effects = issue_effects

    # -- feeding ------------------------------------------------------------------------------
    def feed(self, record: Any) -> tuple[Any, ...]:
        rec = record.stamped(self.state.seq + 1)
        self.state, effects = fold(self.state, rec, self.machines)
        self.records.append(rec)  # only once folded: a record a test expects to be refused is not kept
        self.folded_by.append(self.machines)
        self.effects.extend(effects)
        if self.issue_effects:
            for e in effects:
                if e.type != "log":
                    self._append(EffectIssued(at=rec.at, effect=effect_to_dict(e)))
        return effects

    def _append(self, record: Any) -> None:
        rec = record.stamped(self.state.seq + 1)
        self.state, more = fold(self.state, rec, self.machines)
        self.records.append(rec)
        self.folded_by.append(self.machines)
        self.effects.extend(more)
        assert not more, "EffectIssued must not emit effects"

    def observe(self, obj: dict[str, Any], at: int | None, event: str = "MODIFIED", cluster: str = "local") -> tuple[Any, ...]:
        md = obj.get("metadata", {})
        return self.feed(Observed(
            at=at, cluster=cluster, api_version=obj.get("apiVersion", "v1"), kind=obj["kind"],
            namespace=md.get("namespace", ""), name=md["name"], uid=md.get("uid", ""),
            rv=md.get("resourceVersion", ""), event=event, obj=obj))

    def relist(self, kind: str, objs: list[dict[str, Any]], at: int | None, api_version: str = "v1",
               cluster: str = "local", scope: str = "") -> tuple[Any, ...]:
        keys = [{"namespace": o["metadata"].get("namespace", ""), "name": o["metadata"]["name"],
                 "uid": o["metadata"].get("uid", ""), "rv": o["metadata"].get("resourceVersion", "")} for o in objs]
        return self.feed(Relist(at=at, cluster=cluster, api_version=api_version, kind=kind, scope=scope, keys=keys))

    def command(self, name: str, at: int | None, **args: Any) -> tuple[Any, ...]:
        return self.feed(Command(at=at, name=name, args=args))

    def outcome(self, effect: Any, result: str, at: int | None, **fields: Any) -> tuple[Any, ...]:
        return self.feed(Outcome(at=at, effect_id=effect.id, machine=effect.machine, key=effect.key,
                                 result=result, **fields))

    def advance_to(self, at: int) -> list[Any]:
        """Fire every timer due at or before ``at`` (as the executor would), in due order, then
        re-issue every retry due by then (as the daemon's ticker does: the same effect, its
        ``EffectIssued`` journaled again); returns the effects emitted and the retries sent."""
        out: list[Any] = []
        for t in self.state.due_timers(at):
            out.extend(self.feed(Deadline(at=at, timer=t.id, machine=t.machine, key=t.key, name=t.name, due=t.due)))
        for p in self.waiting_retries():
            if p.not_before is None or p.not_before <= at:
                self._append(EffectIssued(at=at, effect=effect_to_dict(p.effect)))
                out.append(p.effect)
        return out

    def waiting_retries(self) -> list[Any]:
        """Pending effects waiting for a retry (unissued, attempt > 0), in effect id order."""
        return sorted((p for p in self.state.pending.values() if not p.issued and p.attempt),
                      key=lambda p: seq_key(p.effect.id))

    def next_retry(self) -> int | None:
        """When the first waiting retry is due (server ms; None: none waits, or it waits on no clock)."""
        return min((p.not_before for p in self.waiting_retries() if p.not_before is not None), default=None)

    # -- looking ------------------------------------------------------------------------------
    def pending(self, type_: str | None = None) -> list[Any]:
        """Pending effects in the order they were decided (effect id), not the pending map's
        string-hash order: a scenario driven by answering them is the same in every process."""
        found = [e for e in (p.effect for p in self.state.pending.values()) if type_ in (None, e.type)]
        return sorted(found, key=lambda e: seq_key(e.id))

    def decision(self, machine: str, key: str) -> Any:
        return self.state.table(machine).get(key)

    def transcript(self) -> list[dict[str, Any]]:
        """Every effect as plain data: compare two runs for equality."""
        return [effect_to_dict(e) for e in self.effects]


def of_type(effects: Any, type_: str) -> list[Any]:
    return [e for e in effects if e.type == type_]


def timers_rebuilt(timers: Any) -> dict[str, list[tuple[int, str, Any]]]:
    """What ``engine.effects.timers._TimerIndex.get`` must hold for ``timers``: built from scratch."""
    by: dict[str, list[tuple[int, str, Any]]] = {}
    for t in timers.values():
        by.setdefault(t.clock, []).append((t.due, t.id, t))
    return {c: sorted(rows, key=lambda r: (r[0], r[1])) for c, rows in by.items()}


def assert_batches_agree(scenario: Scenario, seed: int) -> None:
    """``fold_many`` over the scenario's records, cut into random batches, must end in the state the
    scenario reached one ``fold`` at a time and emit the same effects, record by record."""
    import random
    from engine.effects.timers import _TimerIndex
    rng = random.Random(seed)
    records, state, effects, i = scenario.records, initial_state(), [], 0
    index = _TimerIndex()
    while i < len(records):
        n, machines = rng.choice((1, 2, 3, 7, 50, len(records))), scenario.folded_by[i]
        n = next((j for j in range(1, n) if scenario.folded_by[i + j:i + j + 1] != [machines]), n)
        before, touched = state, set()
        state, more = fold_many(state, records[i:i + n], machines, touched)
        changed = {t for t in {*before.timers.keys(), *state.timers.keys()} if before.timers.get(t) != state.timers.get(t)}
        assert changed <= touched, f"timers changed and not reported as touched: {sorted(changed - touched)}"
        index.note(before.timers, state.timers, touched)   # the daemon's ticker, fed as the daemon feeds it
        if rng.random() < 0.5:
            assert index.get(state.timers) == timers_rebuilt(state.timers), "the noted timer index went wrong"
        effects.extend(e for per_record in more for e in per_record)
        i += n
    assert state.seq == scenario.state.seq and state.at == scenario.state.at
    assert snapshot.dump(state) == snapshot.dump(scenario.state), "fold_many ended in another state"
    derived = State(pending=state.pending).retrying   # derived from scratch; the fold keeps it
    assert state.retrying == derived == scenario.state.retrying, "the fold's retrying map went wrong"
    assert effects == scenario.effects, "fold_many emitted other effects"
