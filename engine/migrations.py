"""Snapshot formats and the migrations between them: the one place a snapshot's shape is versioned.

A snapshot (``engine.snapshot``) is the fold's state as JSON: every machine's decision records,
the timers, the pending effects. Its ``format`` says which shape it has. This code writes
``FORMAT`` and reads every format from ``OLDEST`` to ``FORMAT``: an older one is migrated in
memory, step by step, by ``MIGRATIONS``; a newer one (written by a newer kfold) is refused.

Contract (docs/journal.md "Upgrades" states it for users):
- Any change to what a snapshot holds bumps ``FORMAT`` by one and adds ``MIGRATIONS[FORMAT]``:
  a decision record's field renamed, added, removed or given another type or domain; an effect's;
  a record kind added or removed; a table key's layout; the timers' or pending effects' layout.
  ``tests/unit/test_upgrade.py`` compares the persisted shape (``shapes``) with the one recorded
  for ``FORMAT`` (``tests/data/upgrade/format-N.json``, ``scripts/snapshot_shapes.py``) and boots
  the journals older kfolds wrote (``tests/data/upgrade/*.sqlite``) on this code.
- A migration is data: the format it produces, why, and steps (``Rename``, ``Add``, ``Drop``,
  ``EachEntry``, ``Whole``), each a pure function of the snapshot's decoded JSON (format N-1) that
  returns it in format N. It reads no clock and nothing outside the snapshot; a value a record
  never held (a new field) gets what the fold would have decided for it, stated in the step.
- Nothing stored is rewritten: ``upgrade`` returns a new dict; the snapshot's bytes in the journal
  stay as the older kfold wrote them (the next snapshot the daemon stores is in ``FORMAT``).
- Journal records are not migrated: they are read as written by every kfold (docs/journal.md).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

FORMAT = 5   # the format this code writes
OLDEST = 1   # the oldest format this code migrates from

Snapshot = dict[str, Any]


class SnapshotFormatError(ValueError):
    """A snapshot whose format this code cannot read: ``found``, and ``newer`` when a newer kfold wrote it."""

    def __init__(self, found: Any, message: str, newer: bool = False):
        super().__init__(message)
        self.found, self.newer = found, newer


def _matches(entry: Any, where: Mapping[str, Any]) -> bool:
    return isinstance(entry, dict) and all(entry.get(k) == v for k, v in where.items())


def _each(snap: Snapshot, machine: str, where: Mapping[str, Any], fn: Callable[[dict], dict]) -> Snapshot:
    table = snap.get("tables", {}).get(machine, {})
    for key, entry in table.items():
        if _matches(entry, where):
            table[key] = fn(entry)
    return snap


@dataclass(frozen=True)
class Rename:
    """Field ``old`` of ``machine``'s entries matching ``where`` (e.g. ``{"kind": "pod"}``) is now ``new``."""
    machine: str
    old: str
    new: str
    where: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, snap: Snapshot) -> Snapshot:
        def rename(e: dict) -> dict:
            return {(self.new if k == self.old else k): v for k, v in e.items()}
        return _each(snap, self.machine, self.where, rename)


@dataclass(frozen=True)
class Add:
    """Field ``name`` is new in ``machine``'s entries matching ``where``; older ones get ``value``."""
    machine: str
    name: str
    value: Any
    where: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, snap: Snapshot) -> Snapshot:
        return _each(snap, self.machine, self.where, lambda e: {**e, self.name: copy.deepcopy(self.value)})


@dataclass(frozen=True)
class Drop:
    """Field ``name`` is gone from ``machine``'s entries matching ``where``."""
    machine: str
    name: str
    where: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, snap: Snapshot) -> Snapshot:
        return _each(snap, self.machine, self.where, lambda e: {k: v for k, v in e.items() if k != self.name})


@dataclass(frozen=True)
class EachEntry:
    """``fn(entry) -> entry`` for ``machine``'s entries matching ``where``: fields merged, split or
    moved into a nested record (name ``fn`` for what it does)."""
    machine: str
    fn: Callable[[dict], dict]
    where: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, snap: Snapshot) -> Snapshot:
        return _each(snap, self.machine, self.where, self.fn)


@dataclass(frozen=True)
class Whole:
    """``fn(snapshot) -> snapshot``: what no per-entry step says (table keys, timers, pending effects)."""
    fn: Callable[[Snapshot], Snapshot]

    def __call__(self, snap: Snapshot) -> Snapshot:
        return self.fn(snap)


Step = Callable[[Snapshot], Snapshot]


@dataclass(frozen=True)
class Migration:
    why: str                 # one line: what changed in this format
    steps: tuple[Step, ...]


# format -> the migration that makes it from the format before. Format 1: kfold up to and including
# ae4b05a (tests/data/upgrade/ae4b05a.sqlite); docs/journal.md lists which kfold writes which.
MIGRATIONS: dict[int, Migration] = {
    2: Migration("a Session's env Secret and workspace claim are one Owned record each (secret, claim)",
                 (EachEntry("session", lambda e: _owned_from_flat(e), {"kind": "session"}),)),
    3: Migration("the session configuration states whether containers are told their identity "
                 "(container_identity); older kfolds never told them",
                 (Add("session", "container_identity", False, {"kind": "config"}),)),
    4: Migration("the session configuration states the rules its status and Events follow (status_rules); "
                 "older kfolds followed the first",
                 (Add("session", "status_rules", 1, {"kind": "config"}),)),
    5: Migration("a Session's pod records how its workspace container ended (pod.ended; status_rules 3); "
                 "older kfolds never recorded it",
                 (EachEntry("session", lambda e: {**e, "pod": {**e.get("pod", {}), "ended": ""}}, {"kind": "session"}),)),
}


# format 2: the flat fields of a Session's Secret and claim -> their ``Owned`` (step, uid, tries, made)
_FLAT_OWNED = {"secret": {"secret_step": "step", "secret_uid": "uid", "secret_tries": "tries", "secret_made": "made"},
               "claim": {"claim_step": "step", "claim_tries": "tries", "claim_made": "made"}}
_OWNED_DEFAULT = {"step": "", "uid": "", "tries": 0, "made": False}


def _owned_from_flat(entry: dict) -> dict:
    """A Session record of format 1 with its Secret's and claim's facts in ``secret``/``claim``
    (the claim had no uid: "", as the fold of format 1 never recorded one)."""
    out = {k: v for k, v in entry.items() if not any(k in flat for flat in _FLAT_OWNED.values())}
    for name, flat in _FLAT_OWNED.items():
        out[name] = {**_OWNED_DEFAULT, **{f: entry[k] for k, f in flat.items() if k in entry}}
    return out


def check_chain(migrations: Mapping[int, Migration] = MIGRATIONS, oldest: int = OLDEST, current: int = FORMAT) -> None:
    """Every format after ``oldest`` up to ``current`` has its migration, and no other is listed."""
    want = set(range(oldest + 1, current + 1))
    if set(migrations) != want:
        raise ValueError(f"snapshot migrations listed for formats {sorted(migrations)}; formats "
                         f"{oldest + 1}..{current} need one each (engine.migrations)")


check_chain()


def upgrade(raw: Any, migrations: Mapping[int, Migration] = MIGRATIONS, oldest: int = OLDEST,
            current: int = FORMAT) -> Snapshot:
    """The snapshot ``raw`` (decoded JSON) in format ``current``: migrated from its format one
    step at a time, on a copy. ``SnapshotFormatError`` for a newer format or one before ``oldest``."""
    found = raw.get("format") if isinstance(raw, dict) else None
    if type(found) is not int:
        raise SnapshotFormatError(found, f"not a kfold snapshot (its format is {found!r})")
    if found > current:
        raise SnapshotFormatError(found, f"snapshot format {found} is newer than this kfold reads "
                                         f"(formats {oldest} to {current})", newer=True)
    if found < oldest:
        raise SnapshotFormatError(found, f"snapshot format {found} is older than this kfold migrates "
                                         f"(formats {oldest} to {current})")
    if found == current:
        return raw
    snap = copy.deepcopy(raw)
    for version in range(found + 1, current + 1):
        for step in migrations[version].steps:
            snap = step(snap)
        snap["format"] = version
    return snap


# -- the persisted shape ---------------------------------------------------------------------------
def shapes() -> list[dict[str, Any]]:
    """What a snapshot persists, as data: each decision record class of the machines and each effect
    class, by its fields (their JSON schema with nested records inlined; titles, descriptions and
    defaults left out: every field is written, so only names, types and domains decide whether an
    older snapshot reads). Sorted; compared by ``fields`` only (moving or renaming a class changes
    nothing persisted). ``tests/unit/test_upgrade.py`` holds it to the shape recorded for ``FORMAT``."""
    from engine.core import default_machines
    from engine.effects.models import _Effect
    from engine.machines.base import Decision
    default_machines()   # every machine's records imported
    out = []
    for base in (Decision, _Effect):
        for cls in _subclasses(base):
            if cls.__module__.startswith("engine."):
                out.append({"record": cls.__name__, "fields": _fields(cls)})
    return sorted(out, key=lambda s: (_canonical(s["fields"]), s["record"]))


def _subclasses(cls: type) -> list[type]:
    seen: list[type] = []
    for sub in cls.__subclasses__():
        seen += [sub] + _subclasses(sub)
    return seen


def _fields(cls: Any) -> dict[str, Any]:
    schema = cls.model_json_schema(mode="validation")
    defs = schema.get("$defs", {})
    return {name: _inline(prop, defs) for name, prop in schema.get("properties", {}).items()}


_DROPPED = frozenset({"title", "description", "default", "required", "discriminator"})


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if isinstance(node, list):
        return [_inline(n, defs, depth) for n in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
        target = defs[ref[len("#/$defs/"):]]
        return _inline({k: v for k, v in target.items() if k in ("properties", "type", "enum", "const", "anyOf",
                                                                  "items", "additionalProperties")}, defs, depth + 1)
    return {k: ({f: _inline(p, defs, depth) for f, p in v.items()} if k == "properties" else _inline(v, defs, depth))
            for k, v in node.items() if k not in _DROPPED}


def _canonical(value: Any) -> str:
    import json
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
