"""State <-> bytes, for snapshots stored in the journal.

Guarantee: ``load(dump(s)) == s`` for every state the fold can produce, and ``dump`` is
deterministic (keys sorted), so two replays that agree produce byte-identical snapshots — which is
also how tests compare states.

Versions (``engine.migrations``): ``dump`` writes ``FORMAT``; ``load`` reads every format from
``OLDEST`` on, migrating an older one in memory, and raises ``SnapshotFormatError`` for a newer one
(a newer kfold wrote it) or one it cannot migrate. A snapshot that names a format it reads but does
not validate as it (a shape changed without its migration) raises pydantic's error.
"""
from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError
from immutables import Map

from engine.core import Machines, Pending, Quarantined, State, Timer, default_machines
from engine.effects.models import effect_from_dict, effect_to_dict
from engine.migrations import FORMAT, OLDEST, SnapshotFormatError, upgrade

__all__ = ["FORMAT", "OLDEST", "SnapshotFormatError", "dump", "load", "load_stored", "to_data"]


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
    try:
        raw = upgrade(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        raise SnapshotFormatError(None, f"not a kfold snapshot ({exc})") from None
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


def load_stored(seq: int, data: bytes, where: str, reader: str, machines: Machines | None = None) -> State:
    """``load`` of the snapshot stored at ``seq`` in ``where`` (a journal or an export; "": the
    caller names it), read by
    kfold ``reader``: a snapshot it cannot read raises ``SnapshotFormatError`` with one line naming
    both versions and what to do. The caller refuses to go on (it writes nothing)."""
    at = f"{where}: " if where else ""
    try:
        return load(data, machines)
    except SnapshotFormatError as exc:
        if exc.newer:
            raise SnapshotFormatError(exc.found, (
                f"{at}the snapshot at seq {seq} has format {exc.found}, written by a newer kfold; this kfold "
                f"({reader}) reads snapshot formats {OLDEST} to {FORMAT}: run a kfold that reads format {exc.found} "
                f"(docs/journal.md, Upgrades); nothing was written"), newer=True) from None
        raise SnapshotFormatError(exc.found, f"{at}the snapshot at seq {seq}: {exc}; nothing was written") from None
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise SnapshotFormatError(FORMAT, (
            f"{at}the snapshot at seq {seq} (format {FORMAT}) does not load with this kfold ({reader}): "
            f"{exc.error_count()} error(s), the first {first.get('msg', '')} at {loc or '(root)'}: a decision "
            f"record's shape changed without a snapshot migration (engine.migrations); nothing was written: "
            f"run the kfold that wrote it")) from None
