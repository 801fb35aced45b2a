"""The UI's index of a journal: one refold (``kfold.offline.timeline.walk``) written to a SQLite file, so
the page can ask for one page of one object's records without the journal ever being loaded whole.

Layout (all rows inserted once, by ``build``; the server only reads):
- ``records(seq, at, kind, line, error, fired, answers, detail, pos, clock, delta, problem, expected)``: one
  row per journal record; ``detail`` is JSON: the decision changes with their field-level diff, the
  effects emitted, the timers moved, a divergence; ``pos`` is the byte offset of a JSONL line (NULL
  for SQLite, whose rows are read back by seq); ``clock`` the cluster whose clock stamped it,
  ``delta`` the signed time since the previous record on that clock, ``problem`` what went wrong
  (NULL: nothing), ``expected`` why a non-ok outcome is an answer the machine moves on from (NULL:
  it is not one), all as ``kfold.offline.explain`` defines them.
- ``objects(id, kind, key, machine, parent, state, n, first, last)``: every object a record
  concerned: a machine's decision key (Session, Pod, Repo, or a machine's bookkeeping row), an
  observed object, an effect's target (Service, Ingress, Secret, Namespace...). ``parent`` ties a
  Service/Ingress/Secret to the Session whose effects made it, and a pod to its Session; ``nkey``
  is ``key`` in natural order (``kfold.offline.explain.natural_key``: s2 before s10).
- ``touches(obj, seq)`` and ``mtouch(machine, seq)``: which records concern an object or a machine
  (primary keys, so a page of one object is an index range scan).
- ``effects(id, cause, issued, outcome, result, attempts, line, obj, owner, issued_at, outcome_at,
  latency_ms, retries, reason, message, code, expected, nid)``: each effect, the record that emitted it, the
  first that journaled it as issued, and its (last) outcome; ``latency_ms`` from that issue to that
  outcome, ``retries`` the transient outcomes it was retried after, ``owner`` the machine object
  that emitted it, ``nid`` the id in natural order.
- ``sessions(obj, summary, nkey, phase, problem)``: per Session, ``kfold.offline.explain.SessionSummary``
  as JSON, with its key in natural order, its phase and whether it has a problem (for the landing list).
- ``meta``: source path, record count, time span, the first divergence, the home cluster, what is
  pending when the journal ends (``kfold.offline.explain.pending_at_end``); ``first_seq`` and
  ``history`` (a line, or "") say where the indexed history begins: a journal whose head retention
  cut, or its export, is walked from the snapshot it continues, whose objects are listed too.

Guarantee: what the index says a record changed is what ``kfold trace`` prints for it (same walk).
"""
from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from journal.records import Record
from kfold.offline.replay import is_object_key
from kfold.offline.explain import (Clocks, SessionLog, clock_of, delta_text, expected_of, key_cluster, natural_key,
                                   pending_at_end, problem_of)
from kfold.offline.render import effect_line, effect_target, field_diff, record_line, state_of
from kfold.offline.timeline import MACHINE_KIND, Step, walk

SCHEMA = """
CREATE TABLE records (seq INTEGER PRIMARY KEY, at INTEGER, kind TEXT NOT NULL, line TEXT NOT NULL,
  error TEXT, fired INTEGER, answers TEXT, detail BLOB NOT NULL, pos INTEGER, clock TEXT, delta TEXT,
  problem TEXT, expected TEXT);
CREATE TABLE objects (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, machine TEXT,
  parent INTEGER, state TEXT, n INTEGER, first INTEGER, last INTEGER, nkey TEXT NOT NULL);
CREATE TABLE touches (obj INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (obj, seq)) WITHOUT ROWID;
CREATE TABLE mtouch (machine TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (machine, seq)) WITHOUT ROWID;
CREATE TABLE effects (id TEXT PRIMARY KEY, cause INTEGER, issued INTEGER, outcome INTEGER, result TEXT,
  attempts INTEGER, line TEXT, obj INTEGER, owner INTEGER, issued_at INTEGER, outcome_at INTEGER,
  latency_ms INTEGER, retries INTEGER, reason TEXT, message TEXT, code INTEGER, expected TEXT, nid TEXT) WITHOUT ROWID;
CREATE TABLE sessions (obj INTEGER PRIMARY KEY, summary BLOB NOT NULL, nkey TEXT NOT NULL, phase TEXT,
  problem INTEGER NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
"""
INDEXES = (
    "CREATE INDEX objects_by_parent ON objects (parent)",
    "CREATE INDEX objects_by_nkey ON objects (nkey)",
    "CREATE INDEX sessions_by_nkey ON sessions (nkey)",
    "CREATE INDEX records_by_problem ON records (seq) WHERE problem IS NOT NULL",
    "CREATE INDEX effects_by_owner ON effects (owner, nid)",
    "CREATE INDEX records_by_kind ON records (kind, seq)",
)
LAYOUT = 3            # the tables above; a kept index of another layout is rebuilt
FLUSH = 5000          # records per write batch
MAX_VALUE = 400       # characters of one diff value kept in the index


class _Obj:
    __slots__ = ("id", "kind", "key", "machine", "parent", "state", "n", "first", "last")

    def __init__(self, oid: int, kind: str, key: str, machine: str | None):
        self.id, self.kind, self.key, self.machine = oid, kind, key, machine
        self.parent: int | None = None
        self.state, self.n, self.first, self.last = "", 0, 0, 0

    def row(self) -> tuple:
        return (self.id, self.kind, self.key, self.machine, self.parent, self.state, self.n, self.first, self.last,
                natural_key(self.key))


class Builder:
    """Writes the index while walking; ``objects`` stay in memory (one small row per object)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db
        self.objects: dict[tuple[str, str], _Obj] = {}
        self.by_id: dict[int, _Obj] = {}
        self.rows: list[tuple] = []
        self.touch: list[tuple[int, int]] = []
        self.mtouch: list[tuple[str, int]] = []
        # id -> [cause, issued, outcome, result, attempts, line, obj, owner, issued_at, outcome_at,
        #        latency_ms, retries, reason, message, code, expected]
        self.effects: dict[str, list] = {}
        self.clocks = Clocks()
        self.sessions = SessionLog()
        self.state: Any = None
        self.divergence: dict[str, Any] | None = None
        self.count, self.first_at, self.last_at = 0, None, None
        self.kinds: set[str] = set()
        self.machines: set[str] = set()
        self.dirty: set[str] = set()            # effect ids changed since the last ``publish``
        self.published: int | None = None       # records written by the last ``publish`` (None: none yet)

    def obj(self, kind: str, key: str, machine: str | None = None) -> _Obj:
        o = self.objects.get((kind, key))
        if o is None:
            oid = len(self.objects) + 1
            o = self.objects[(kind, key)] = self.by_id[oid] = _Obj(oid, kind, key, machine)
        elif machine and o.machine is None:  # observed before its machine decided anything about it
            o.machine = machine
        return o

    def known(self, state: Any) -> None:
        """The objects of the snapshot a walk starts from (a journal whose head was cut), with
        their state there: listed even when no kept record touches them."""
        for machine, table in sorted(state.tables.items()):
            for key, decision in sorted(table.items()):
                self.machine_obj(machine, key).state = state_of(decision)

    def machine_obj(self, machine: str, key: str) -> _Obj:
        kind = MACHINE_KIND.get(machine, machine) if is_object_key(key) else f"{machine} bookkeeping"
        return self.obj(kind, key, machine)

    def add(self, step: Step, pos: int | None) -> None:
        rec = step.record
        seq = rec.seq
        self.count += 1
        if rec.at is not None:
            self.first_at = rec.at if self.first_at is None else self.first_at
            self.last_at = rec.at
        touched: set[int] = set()
        machines: set[str] = set()
        detail: dict[str, Any] = {}
        if step.changes:
            detail["changes"] = [self._change(c, seq, touched, machines) for c in step.changes]
        if step.effects:
            detail["effects"] = [self._effect(e, seq, touched, machines) for e in step.effects]
        if step.timers:
            detail["timers"] = [{"m": t.machine, "key": t.key, "name": t.name, "due": t.due} for t in step.timers]
            for t in step.timers:
                touched.add(self.machine_obj(t.machine, t.key).id)
        answers = self._answers(step, seq, touched, machines)
        self._observed(rec, touched)
        if step.divergence is not None:
            detail["divergence"] = self._divergence(step)
        self.clocks.note_home(rec)
        clock = clock_of(step, self.clocks.home)
        delta = delta_text(self.clocks.delta(clock, rec.at), clock, self.clocks.home)
        problem, expected = problem_of(step), expected_of(step)
        self.sessions.add(step, problem)
        self.state = step.state
        for oid in touched:
            self.touch.append((oid, seq))
            o = self.by_id[oid]
            o.n += 1
            o.first = o.first or seq
            o.last = seq
        self.mtouch += [(m, seq) for m in machines]
        self.machines |= machines
        self.kinds.add(rec.rec)
        self.rows.append((seq, rec.at, rec.rec, record_line(rec), step.error or None,
                          None if step.fired is None else int(step.fired), answers, orjson.dumps(detail), pos,
                          clock, delta, problem or None, expected or None))
        if len(self.rows) >= FLUSH:
            self.flush()

    def _change(self, c: Any, seq: int, touched: set[int], machines: set[str]) -> dict[str, Any]:
        o = self.machine_obj(c.machine, c.key)
        touched.add(o.id)
        machines.add(c.machine)
        o.state = state_of(c.after) if c.after is not None else f"{state_of(c.before)} (removed)"
        for child in _children(c):
            kid = self.machine_obj("pod", child)
            kid.parent = kid.parent or o.id
        diff = [[p, _clip(a), _clip(b)] for p, a, b in c.diff()] if c.after is not None else []
        return {"m": c.machine, "key": c.key, "obj": o.id, "from": state_of(c.before), "to": o.state,
                "new": c.before is None, "gone": c.after is None, "diff": diff}

    def _effect(self, e: Any, seq: int, touched: set[int], machines: set[str]) -> dict[str, Any]:
        owner = self.machine_obj(e.machine, e.key)
        touched.add(owner.id)
        machines.add(e.machine)
        target = effect_target(e)
        obj = owner
        if target is not None:
            obj = self.obj(*target) if (target[0], target[1]) != (owner.kind, owner.key) else owner
            if obj is not owner and obj.parent is None and is_object_key(owner.key):
                obj.parent = owner.id
            touched.add(obj.id)
        line = effect_line(e)
        if e.type != "log":
            self.dirty.add(e.id)
            self.effects[e.id] = [seq, None, None, None, 0, line, obj.id, owner.id, None, None, None, 0, "", "", None,
                                  None]
        return {"id": e.id, "type": e.type, "line": line, "obj": obj.id, "owner": owner.id}

    def _answers(self, step: Step, seq: int, touched: set[int], machines: set[str]) -> str | None:
        rec = step.record
        if rec.rec == "deadline":
            touched.add(self.machine_obj(rec.machine, rec.key).id)
            machines.add(rec.machine)
            return None
        if rec.rec not in ("outcome", "effect"):
            return None
        eid = rec.effect_id if rec.rec == "outcome" else rec.effect.get("id", "")
        row = self.effects.get(eid)
        if row is not None:
            self.dirty.add(eid)
            touched.add(row[6])
            if rec.rec == "effect":
                row[1] = row[1] or seq
                row[8] = row[8] if row[8] is not None else rec.at
            else:
                row[2], row[3], row[4] = seq, rec.result, row[4] + 1
                row[9], row[12], row[13], row[14] = rec.at, rec.status_reason, rec.message, rec.code or None
                row[10] = rec.at - row[8] if rec.at is not None and row[8] is not None else None
                row[11] += int(rec.result == "transient" and rec.retry_after_ms is not None)
                row[15] = expected_of(step) or None
                target = self.by_id[row[6]]
                if target.machine is None:
                    target.state = f"{row[5].split(' ', 1)[0]} {rec.result}"
        if step.answered is not None:
            touched.add(self.machine_obj(step.answered.machine, step.answered.key).id)
            machines.add(step.answered.machine)
        return eid

    def _observed(self, rec: Record, touched: set[int]) -> None:
        if rec.rec != "observed":
            return
        o = self.obj(rec.kind, f"{rec.cluster}/{rec.namespace}/{rec.name}")
        touched.add(o.id)
        if o.machine is None:
            o.state = "deleted" if rec.event == "DELETED" else "present"

    def _divergence(self, step: Step) -> dict[str, Any]:
        d = step.divergence
        out = {"seq": step.record.seq, "effect_id": d.effect_id, "cause": d.cause.seq if d.cause else None,
               "journaled": d.journaled, "recomputed": d.recomputed, "text": d.describe(),
               "diff": [[p, _clip(a), _clip(b)] for p, a, b in field_diff(d.journaled, d.recomputed)]}
        self.divergence = self.divergence or out
        return out

    def flush(self) -> None:
        db = self.db
        db.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", self.rows)
        db.executemany("INSERT OR IGNORE INTO touches VALUES (?,?)", self.touch)
        db.executemany("INSERT OR IGNORE INTO mtouch VALUES (?,?)", self.mtouch)
        self.rows, self.touch, self.mtouch = [], [], []

    def finish(self, source: dict[str, Any], seconds: float) -> None:
        self.publish(source, seconds)

    def publish(self, source: dict[str, Any], seconds: float) -> None:
        """Write what the walk knows so far: the records in memory, every object, the effects that
        changed, the Sessions, the meta; committed at once, so a reader (the server, while
        ``kfold ui --follow`` keeps walking) sees one consistent index."""
        self.flush()
        db = self.db
        db.executemany("INSERT OR REPLACE INTO objects VALUES (?,?,?,?,?,?,?,?,?,?)", [o.row() for o in self.objects.values()])
        changed = self.effects if self.published is None else {k: self.effects[k] for k in self.dirty if k in self.effects}
        db.executemany("INSERT OR REPLACE INTO effects VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       [(k, *v, natural_key(k)) for k, v in changed.items()])
        self.dirty.clear()
        db.executemany("INSERT OR REPLACE INTO sessions VALUES (?,?,?,?,?)", self._session_rows())
        pending = pending_at_end(self.state, self.clocks) if self.state is not None else None
        if pending is not None:
            for item in (*pending["effects"], *pending["timers"]):
                o = self.objects.get((MACHINE_KIND.get(item["machine"], item["machine"]), item["key"]))
                item["obj"] = o.id if o is not None else None
                owner = o if o is None or o.parent is None else self.by_id[o.parent]   # a pod's: its Session
                item["session"] = owner.id if owner is not None and owner.kind == "Session" else None
        meta = {"home": self.clocks.home, "pending": pending, **source, "records": self.count, "first_at": self.first_at, "last_at": self.last_at,
                "divergence": self.divergence, "seconds": round(seconds, 2), "kinds": sorted(self.kinds),
                "machines": sorted(self.machines), "object_kinds": sorted({o.kind for o in self.objects.values()}),
                "objects": len(self.objects)}
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", [(k, orjson.dumps(v).decode()) for k, v in meta.items()])
        if self.published is None:   # after the first bulk insert: cheaper than keeping them up meanwhile
            for ddl in INDEXES:
                db.execute(ddl)
        self.published = self.count
        db.commit()

    def _session_rows(self) -> Iterator[tuple[int, bytes, str, str, int]]:
        for key, summary in self.sessions.sessions.items():
            o = self.objects.get(("Session", key))
            if o is not None:
                s = summary.as_dict(self.clocks.last.get(key_cluster(key)) or self.last_at)
                yield o.id, orjson.dumps(s), natural_key(key), s["phase"], int(s["problem"] is not None)


def _children(change: Any) -> Iterator[str]:
    """Pod keys a Session decision names: its current pod and the ones it let go or is releasing."""
    d = change.after
    if change.machine != "session" or d is None or not hasattr(d, "pod"):
        return
    if d.pod.name and d.target:
        yield f"{d.target}/{d.target_ns}/{d.pod.name}"
    yield from (*d.releasing, *d.abandoned)


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_VALUE:
        return value[:MAX_VALUE] + f"… ({len(value)} characters)"
    if isinstance(value, (dict, list)):
        text = orjson.dumps(value)
        if len(text) > MAX_VALUE:
            return text[:MAX_VALUE].decode(errors="ignore") + f"… ({len(text)} characters)"
    return value


def positioned(path: str, until: int | None = None, from_seq: int = 1) -> Iterator[tuple[Record, int | None]]:
    """``(record, byte offset)`` of a JSONL export (validated, and verified when sealed, as ``kfold
    replay`` does), or ``(record, None)`` from a SQLite journal (chain verified as it is read)."""
    from journal import jsonl
    from kfold.offline.sources import is_sqlite, iter_records
    if is_sqlite(path):
        for rec in iter_records(path, until, from_seq):
            yield rec, None
        return
    for rec, pos in jsonl.positioned(path):
        if until is not None and rec.seq > until:
            return
        if rec.seq >= from_seq:
            yield rec, pos


class Follow:
    """``kfold ui --follow``: after the journal's last record, poll it every ``every`` seconds for
    more and walk on (the same walk: states, effects and divergences as if it had been read in
    one go), publishing the index after each round that brought records; ``ready`` is called
    once, after the first publish; ``stop`` ends the walk."""

    def __init__(self, every: float = 1.0, ready: Callable[[], None] | None = None):
        self.every, self.ready = every, ready
        self.stop = threading.Event()


def build(source: str, index: str | Path, until: int | None = None,
          watch: Callable[[Builder], None] | None = None, follow: Follow | None = None) -> dict[str, Any]:
    """Walk ``source`` and write its index to ``index`` (a new file); returns the meta. ``watch``
    is handed the builder first (its ``count`` is the progress ``kfold ui`` shows while indexing).
    With ``follow`` (a SQLite journal), the walk goes on as records are appended, until
    ``follow.stop`` is set; the index is in WAL mode then, so the server reads while it grows."""
    from kfold.offline.progress import counted
    from kfold.offline.sources import start_point
    started = time.monotonic()
    state, first, note = start_point(source, until)   # a cut journal or its export: from its snapshot
    db = sqlite3.connect(str(index), check_same_thread=False)
    identity = {**source_identity(source), "until": until, "first_seq": first, "history": note,
                "following": follow is not None}
    try:
        db.executescript(f"PRAGMA journal_mode={'WAL' if follow else 'OFF'}; PRAGMA synchronous=OFF;" + SCHEMA)
        builder = Builder(db)
        if state is not None:
            builder.known(state)
        if watch is not None:
            watch(builder)
        items = counted(positioned(source, until, first), source, "ui: indexing", until, from_seq=first)
        offsets: dict[int, int | None] = {}

        def records() -> Iterator[Record]:
            last = first - 1
            for rec, pos in items:
                offsets[rec.seq] = pos
                last = rec.seq
                yield rec
            if follow is None:
                return
            yield from _tail(source, last, follow, lambda: builder.publish(identity, time.monotonic() - started))
        for step in walk(records(), state):
            builder.add(step, offsets.pop(step.record.seq, None))
        builder.finish({**identity, "following": False}, time.monotonic() - started)
    finally:
        db.close()
    return read_meta(index)


def _tail(source: str, last: int, follow: Follow, publish: Callable[[], None]) -> Iterator[Record]:
    """The records appended to a SQLite journal after ``last``, as they come (see ``Follow``)."""
    from kfold.offline.sources import iter_records
    publish()
    if follow.ready is not None:
        follow.ready()
    while not follow.stop.wait(follow.every):
        fresh = False
        for rec in iter_records(source, from_seq=last + 1):
            last, fresh = rec.seq, True
            yield rec
        if fresh:
            publish()


def source_identity(source: str) -> dict[str, Any]:
    """What an index was built from: a kept index (``kfold ui --index``) is reused only for the
    same file, unchanged (path, size, modification time), written in this ``LAYOUT``."""
    st = Path(source).stat()
    return {"source": str(Path(source).absolute()), "source_size": st.st_size, "source_mtime_ns": st.st_mtime_ns,
            "layout": LAYOUT}


def read_meta(index: str | Path) -> dict[str, Any]:
    db = sqlite3.connect(f"file:{Path(index).absolute()}?mode=ro", uri=True)
    try:
        return {k: orjson.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    finally:
        db.close()
