"""The fold of an observed Pod event gives exactly what its plain form gave.

Three fast paths: ``view_of`` (a ``PodView`` tuple instead of a validated pydantic record),
``refenced`` (a moved fence without pydantic's copy machinery) and the session machine's early exit
``session.targets.none_tracked`` (no Session placed: the pod is not read). The plain forms below are
the code as first written; on generated inputs, malformed ones included (non-dict metadata and
labels, labels of other types, missing uid, DELETED events), the fast forms must give the same
result: equal views, or the same exception with the same errors; equal records with the same
fields set; byte-identical snapshots and identical effects after a whole fold step."""
from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from immutables import Map
from pydantic import ValidationError

from engine import fold, initial_state, snapshot
from engine.core import Machines
from engine.effects.models import effect_to_dict
from engine.machines.pod import machine as pod_machine
from engine.machines.pod import delete as pod_delete
from engine.machines.session import pods as session_pods
from engine.machines.session import targets as session_targets
from engine.machines.session import seen as session_seen
from engine.machines.base import Decision, fire, move, object_key
from engine.machines.pod.machine import PodMachine
from engine.machines.pod.records import PodOp, Reply
from engine.machines.pod.machine import PHASES, TABLE, refenced, save, send_read, view_of
from engine.machines.repo.machine import RepoMachine
from engine.machines.session.machine import SessionMachine
from engine.machines.session.machine import save as session_save
from engine.machines.session.model import (CONFIG_KEY, INDEX_KEY, PHASES as SESSION_PHASES, PodFacts, SessionConfig,
                                           SessionDecision, TargetIndex)
from journal.records import Observed


# -- the plain forms, as first written ------------------------------------------------------------

class PlainView(Decision):
    """``PodView`` as it was: a validated pydantic record (its fields repeated on purpose: the
    reference must not follow a change to ``PodView``)."""

    uid: str
    rv: str
    managed: bool = False
    session: str = ""
    generation: str = ""
    terminating: bool = False


def plain_view_of(obj, uid="", rv=""):
    md = (obj or {}).get("metadata") or {}
    labels = md.get("labels") or {}
    return PlainView(uid=md.get("uid") or uid, rv=md.get("resourceVersion") or rv,
                     managed=labels.get("app.kubernetes.io/managed-by") == "kfold",
                     session=labels.get("kfold.dev/session", ""), generation=labels.get("kfold.dev/generation", ""),
                     terminating=bool(md.get("deletionTimestamp")))


class PlainPodMachine(PodMachine):
    def on_observed(self, ctx: Any, rec: Observed) -> None:
        key = object_key(rec.cluster, rec.namespace, rec.name)
        e = ctx.get(key)
        view = plain_view_of(rec.obj, rec.uid, rec.rv)
        if rec.event == "DELETED":
            _vanished(ctx, key, e, view.uid)
        elif isinstance(e, PodOp):
            if e.op == "delete":
                if view.uid == e.target:
                    save(ctx, key, e.but(uid=view.uid, rv=view.rv, terminating=view.terminating))
                elif e.target and e.phase == "terminating":
                    fire(ctx, TABLE, move(key, e, "read", send_read))
            elif e.uid == view.uid and e.rv == view.rv and e.terminating == view.terminating:
                save(ctx, key, e)
            else:
                save(ctx, key, e.but(uid=view.uid, rv=view.rv, terminating=view.terminating))
        elif view.managed:
            ctx.put(key, PodOp(uid=view.uid, rv=view.rv, terminating=view.terminating))


def _vanished(ctx: Any, key: str, e: Any, uid: Any) -> None:
    if not isinstance(e, PodOp):
        return
    if e.op == "delete":
        pod_delete.vanished(ctx, key, e, pod_machine.Vanished(uid))
    elif e.op == "create":
        if uid is None or uid == e.uid:
            save(ctx, key, e.but(uid="", rv="", terminating=False))
    elif uid is None or not uid or uid == e.uid:
        ctx.drop(key)


class PlainSessionMachine(SessionMachine):
    def on_observed(self, ctx: Any, rec: Observed) -> None:
        if rec.kind == "Pod":
            owner = session_pods.pod_owner(ctx, rec)
            if owner is None or rec.event == "DELETED":   # kept for a record that may adopt it (session.seen)
                session_seen.pod(ctx, rec)
            return None if owner is None else session_pods.pod_observed(ctx, owner, rec, session_save)
        return super().on_observed(ctx, rec)


FAST = Machines([PodMachine(), RepoMachine(), SessionMachine()])
PLAIN = Machines([PlainPodMachine(), RepoMachine(), PlainSessionMachine()])


# -- generated inputs -----------------------------------------------------------------------------

class Text(str):
    """A str subclass: validation turns it into a str; the fast path must not let it through."""


ODD = [None, 0, 7, "", "x", True, [], {}, ["a"], {"k": "v"}, 2.5, Text("t")]


def random_obj(rng: random.Random) -> Any:
    def pick(*good):
        return rng.choice(list(good) + ODD) if rng.random() < 0.25 else rng.choice(good)

    def some(fields: dict[str, Any]) -> dict[str, Any]:  # any key may be missing
        return {k: v for k, v in fields.items() if rng.random() < 0.85}
    labels = some({"app.kubernetes.io/managed-by": pick("kfold", "other"), "kfold.dev/session": pick("demo", "other"),
                   "kfold.dev/generation": pick("1", "2")})
    md = some({"name": "demo-g1", "uid": pick("u1", "u2", ""), "resourceVersion": pick("1", "2", ""),
               "labels": pick(labels), "deletionTimestamp": pick(None, "2030-01-01T00:00:00Z")})
    obj = some({"metadata": pick(md), "status": {"phase": pick("Pending", "Running")}})
    return rng.choice([obj] * 8 + [None, {}, [], "x", 7])


OPERATION = {"idle": "", "creating": "create", "confirming": "create", "deleting": "delete", "reading": "delete",
             "terminating": "delete"}


def random_op(rng: random.Random) -> PodOp:
    """A record the fold can hold: its operation is its phase's (``OPERATION``)."""
    phase = rng.choice(PHASES + ("idle",))
    fields = {"phase": phase, "uid": rng.choice(["", "u1", "u2"]), "rv": rng.choice(["", "1", "2"]),
              "terminating": rng.random() < 0.3, "op": OPERATION[phase],
              "target": rng.choice(["", "u1", "u2"]), "replies": rng.choice([(), (Reply(to="session", key="c/ns/s"),)]),
              "session": "demo", "generation": 1, "deadline": rng.choice([None, 5])}
    return PodOp(**{k: v for k, v in fields.items() if k in ("phase", "op") or rng.random() < 0.7})


def session_pod(rng: random.Random) -> dict[str, Any]:
    """A well-formed pod of session "demo" or "other": most random objects are no session's."""
    session = rng.choice(["demo", "other"])
    return {"metadata": {"name": f"{session}-g1", "uid": "u1", "resourceVersion": rng.choice(["1", "2"]),
                         "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": session,
                                    "kfold.dev/generation": "1"}},
            "status": {"phase": rng.choice(["Pending", "Running"])}}


def random_record(rng: random.Random, names: list[str], obj: Any = None) -> Observed:
    obj = random_obj(rng) if obj is None else obj
    return Observed(seq=1, at=rng.choice([None, 1_000]), cluster="c", api_version="v1", kind="Pod",
                    namespace="ns", name=rng.choice(names), uid=rng.choice(["", "u1", "u2"]),
                    rv=rng.choice(["", "1", "2", "3"]), event=rng.choice(["ADDED", "MODIFIED", "DELETED"]),
                    obj=obj if isinstance(obj, dict) else {})


class _Refused(Exception):
    def __eq__(self, other):
        return type(other) is _Refused and other.args == self.args

    def __hash__(self):
        return hash(self.args)


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except ValidationError as exc:
        return ("raised", ValidationError, exc.errors(include_url=False))
    except _Refused as exc:
        return ("quarantined", exc)
    except Exception as exc:  # the same failure counts as the same result
        return ("raised", type(exc))


def step(machines: Machines, tables: dict[str, dict[str, Any]], rec: Observed):
    state = dataclasses.replace(initial_state(), tables=Map({m: Map(t) for m, t in tables.items()}))
    state, effects = fold(state, rec, machines)
    if state.quarantine:  # the same failure counts as the same result (the fold quarantines it)
        (q,) = state.quarantine.values()
        raise _Refused(q.error.partition(":")[0])
    fields_set = {k: v.__pydantic_fields_set__ for t in state.tables.values() for k, v in t.items()}
    return snapshot.dump(state), [effect_to_dict(e) for e in effects], fields_set


# -- the reductions -------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(20))
def test_view_of_equals_its_validated_form(seed):
    rng = random.Random(seed)
    for _ in range(300):
        obj, uid, rv = random_obj(rng), rng.choice(["", "u0"]), rng.choice(["", "r0"])
        fast, slow = outcome(view_of, obj, uid, rv), outcome(plain_view_of, obj, uid, rv)
        if fast[0] == "ok" and slow[0] == "ok":
            assert fast[1]._asdict() == slow[1].model_dump(), obj
            assert [type(v) for v in fast[1]] == [type(v) for v in slow[1].model_dump().values()], obj
        else:
            assert fast == slow, obj


def test_view_of_validates_like_the_pydantic_view():
    labels = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": 7}
    with pytest.raises(ValidationError, match="1 validation error for PodView\nsession"):
        view_of({"metadata": {"uid": "u", "resourceVersion": "1", "labels": labels}})
    assert type(view_of({"metadata": {"uid": Text("u")}}).uid) is str
    with pytest.raises(AttributeError):
        view_of({"metadata": ["not", "a", "mapping"]})


@pytest.mark.parametrize("seed", range(10))
def test_refenced_equals_but(seed):
    rng = random.Random(seed)
    for _ in range(300):
        e = random_op(rng)
        before = e.model_dump()
        uid, rv, term = rng.choice(["", "u1", "u9"]), rng.choice(["1", "7"]), rng.random() < 0.5
        fast, slow = refenced(e, uid, rv, term), e.but(uid=uid, rv=rv, terminating=term)
        assert type(fast) is PodOp and fast == slow
        assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
        assert fast.__pydantic_fields_set__ is not e.__pydantic_fields_set__  # a fresh set, as pydantic's
        assert list(fast.__dict__) == list(slow.__dict__)
        assert fast.model_dump_json() == slow.model_dump_json()
        assert e.model_dump() == before


# -- whole fold steps -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(20))
def test_a_pod_event_folds_as_the_plain_pod_machine_folds_it(seed):
    rng = random.Random(seed)
    names = ["p0", "p1", "p2", ""]
    for _ in range(150):
        table = {f"c/ns/{n}": random_op(rng) for n in names[:3] if rng.random() < 0.6}
        rec = random_record(rng, names)
        assert outcome(step, FAST, {"pod": table}, rec) == outcome(step, PLAIN, {"pod": table}, rec), (table, rec)


def random_session_table(rng: random.Random) -> dict[str, Any]:
    table: dict[str, Any] = {}
    if rng.random() < 0.6:
        table[CONFIG_KEY] = SessionConfig(clusters=("c",))
    for name in rng.sample(["demo", "other"], rng.choice([0, 1, 2, 2])):
        table[f"c/ns/{name}"] = SessionDecision(
            name=name, namespace="ns", home="c", phase=rng.choice(SESSION_PHASES), generation=1,
            target=rng.choice(["c", "c", ""]), pod=PodFacts(name=rng.choice([f"{name}-g1"] * 3 + ["x"])))
    shape = rng.choice(["no index", "index", "index", "empty index"])
    if shape != "no index":
        slots = {} if shape == "empty index" else {
            session_targets.slot_of(d): k for k, d in table.items() if session_targets.slot_of(d) is not None}
        table[INDEX_KEY] = TargetIndex(slots=slots)
    return table


@pytest.mark.parametrize("seed", range(20))
def test_a_pod_event_folds_as_the_plain_session_machine_folds_it(seed):
    rng = random.Random(seed)
    exits = owned = 0
    for _ in range(150):
        tables = {"session": random_session_table(rng)}
        obj = session_pod(rng) if rng.random() < 0.5 else None
        rec = random_record(rng, [obj["metadata"]["name"]] * 3 + ["x"] if obj else ["demo-g1", "x"], obj)
        fast = outcome(step, FAST, tables, rec)
        assert fast == outcome(step, PLAIN, tables, rec), (tables, rec)
        exits += session_targets.none_tracked(_Reader(tables["session"]))
        owned += session_pods.pod_owner(_Reader(tables["session"]), rec) is not None
    assert 0 < exits < 150 and owned > 5  # the early exit, the full lookup and a session's pod all seen


class _Reader:
    """The ``Ctx`` reads ``none_tracked`` and ``pod_owner`` make, over a copy of a plain table."""

    def __init__(self, table: dict[str, Any]):
        self.table = dict(table)

    def put(self, key: str, value: Any) -> None:
        self.table[key] = value

    def get(self, key: str) -> Any:
        return self.table.get(key)

    def items(self):
        return self.table.items()
