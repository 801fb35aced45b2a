"""State <-> bytes, for snapshots stored in the journal.

Guarantee: ``load(dump(s)) == s`` for every state the fold can produce, and ``dump`` is
deterministic (keys sorted), so two replays that agree produce byte-identical snapshots — which is
also how tests compare states.
"""
from __future__ import annotations

from typing import Any

import orjson
from immutables import Map

from engine.core import Machines, Pending, Quarantined, State, Timer, default_machines
from engine.effects.models import effect_from_dict, effect_to_dict

FORMAT = 1


def to_data(state: State) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "seq": state.seq,
        "at": state.at,
        "tables": {m: {k: d.model_dump(mode="json") for k, d in t.items()} for m, t in state.tables.items()},
        "timers": {t.id: [t.due, t.machine, t.key, t.name] + ([t.cluster] if t.cluster else [])
                   for t in state.timers.values()},
        "pending": {eid: _pending_data(p) for eid, p in state.pending.items()},
        # only when something is quarantined: snapshots without one keep their bytes
        **({"quarantine": {k: [q.seq, q.rec, q.machine, q.error] for k, q in state.quarantine.items()}}
           if state.quarantine else {}),
    }


def dump(state: State) -> bytes:
    return orjson.dumps(to_data(state), option=orjson.OPT_SORT_KEYS)


def load(data: bytes, machines: Machines | None = None) -> State:
    reg = machines or default_machines()
    raw = orjson.loads(data)
    if raw.get("format") != FORMAT:
        raise ValueError(f"snapshot format {raw.get('format')!r} is not {FORMAT}; replay from the start")
    tables = Map({
        m: Map({k: reg.by_name[m].decision.model_validate(d) for k, d in t.items()})
        for m, t in raw["tables"].items()
    })
    timers = Map({tid: Timer(tid, *v) for tid, v in raw["timers"].items()})
    pending = Map({eid: _pending(v) for eid, v in raw["pending"].items()})
    quarantine = Map({k: Quarantined(*v) for k, v in raw.get("quarantine", {}).items()})
    return State(seq=raw["seq"], at=raw["at"], tables=tables, timers=timers, pending=pending, quarantine=quarantine)


def _pending_data(p: Pending) -> list[Any]:
    """``[effect, issued]``, plus ``attempt, not_before`` only for a retry (older snapshots stay valid)."""
    out = [effect_to_dict(p.effect), p.issued]
    return out + [p.attempt, p.not_before] if p.attempt or p.not_before is not None else out


def _pending(v: list[Any]) -> Pending:
    effect, issued, *retry = v
    return Pending(effect_from_dict(effect), issued, *retry)
