"""The pod machine's phase table (``TABLE``), the acts every pod operation shares (``save``, ``send_*``, ``retry_read``, ``settled``) and the reductions of a Pod
(``view_of``, ``refenced``). The handler modules (``create``, ``delete``) and the machine
(``machine.py``) import these; nothing here imports them back.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import TypeAdapter

from engine import backoff
from engine.labels import GENERATION_LABEL as GENERATION, MANAGED_BY, MANAGER
from engine.labels import SESSION_LABEL as SESSION
from engine.machines.base import Answer, Ctx, Move, Table, move, split_key
from engine.machines.pod.records import PodOp, PodView, Reply
from engine.effects.models import CreateObject, DeleteObject, GetObject
from engine.seams import Message
from journal.records import Outcome


# -- the operation table and the acts every pod operation shares ------------------------------
PHASES = ("idle", "creating", "confirming", "deleting", "reading", "terminating")
BUSY = ["creating", "confirming", "deleting", "reading", "terminating"]
TABLE = Table("pod", PHASES, [
    ("create", "idle", "creating"),
    ("exists", ["creating", "confirming"], "confirming"),
    ("absent", "confirming", "creating"),
    ("delete", "idle", "deleting"),
    ("read", ["idle", "deleting", "reading", "terminating"], "reading"),
    ("fenced", "reading", "deleting"),
    ("accepted", "deleting", "terminating"),
    ("wait", ["idle", "reading"], "terminating"),
    ("settle", BUSY, "idle"),
], initial="idle")


def save(ctx: Ctx, key: str, e: PodOp) -> PodOp:
    """Store ``e``, arming the operation budget once the pod's cluster's time is known (a record
    that cluster's clock stamped: a Session's record is stamped on its home cluster's)."""
    now = ctx.now_on(split_key(key)[0])
    if e.op and e.deadline is None and now is not None:
        e = e.but(deadline=now + e.budget_ms)
        ctx.set_timer(key, "budget", e.deadline)
    ctx.put(key, e)
    return e


def _ref(key: str) -> dict[str, str]:
    cluster, namespace, name = split_key(key)
    return {"cluster": cluster, "api_version": "v1", "kind": "Pod", "namespace": namespace, "name": name}


def send_create(ctx: Ctx, key: str, e: PodOp) -> PodOp:
    eff = ctx.emit(CreateObject, key, manifest=e.manifest or {}, **_ref(key))
    return save(ctx, key, e.but(awaiting=eff.id))


def send_read(ctx: Ctx, key: str, e: PodOp) -> PodOp:
    """A quorum GET; its answer may be taken as proof of absence."""
    eff = ctx.emit(GetObject, key, **_ref(key))
    return save(ctx, key, e.but(awaiting=eff.id, missing=False))


def send_delete(ctx: Ctx, key: str, e: PodOp) -> PodOp | Move:
    """DELETE fenced by ``(target, rv)``; without a complete fence, a quorum read instead."""
    if not (e.target and e.uid == e.target and e.rv):
        return move(key, e, "read", send_read)
    eff = ctx.emit(DeleteObject, key, uid=e.target, rv=e.rv, **_ref(key))
    return save(ctx, key, e.but(awaiting=eff.id))


def retry_read(ctx: Ctx, key: str, e: PodOp, rec: Outcome, fail: Any) -> Answer:
    """A quorum read failed transiently (its executor's attempts spent): the same read goes again as
    the next attempt of its own loop when ``backoff.POD_READ`` says (``Ctx.retry``), or ``fail``."""
    e = e.but(attempts=e.attempts + 1)
    if ctx.retry(backoff.POD_READ):
        save(ctx, key, e.but(awaiting=rec.effect_id))
        return None
    return fail(ctx, key, e.but(awaiting=""), f"could not read pod {name_of(key)} after {e.attempts} "
                                              "failed answers and there is no server time to back off on")


def settled(ctx: Ctx, key: str, e: PodOp, then: Callable[[Ctx, str, PodOp], Any], **changes: Any) -> Move:
    """``e``'s operation finished (its timers cancelled here): the move to idle that forgets its
    callers (already told), then ``then``."""
    ctx.cancel_timer(key, "budget")
    ctx.cancel_timer(key, "retry")   # a read's retry set by an earlier version (a timer)
    ctx.drop_retries(key)
    return move(key, e, "settle", then, op="", replies=(), target="", reason="", manifest=None, awaiting="",
                attempts=0, deadline=None, **changes)


def tell_all(ctx: Ctx, replies: tuple[Reply, ...], message: Message) -> None:
    for r in replies:
        ctx.tell(r.key, message, to=r.to)


def name_of(key: str) -> str:
    cluster, namespace, name = split_key(key)
    return f"{namespace}/{name}"


# -- reductions of a Pod (every Pod event) ----------------------------------------------------
_VIEW: TypeAdapter[PodView] = TypeAdapter(PodView)


def view_of(obj: dict[str, Any] | None, uid: str = "", rv: str = "") -> PodView:
    """Reduce a Pod object; ``uid``/``rv`` fill in what the object lacks (e.g. a bare event).

    Hot path (every Pod event): when every field is already of its declared type the view is built
    directly; otherwise ``_VIEW`` validates, refusing (or coercing) what a pydantic ``PodView``
    did, with the same errors. Either way the result equals the plain form, a validated record
    (tests/unit/test_fastpath_pod_observe.py)."""
    md = (obj or {}).get("metadata") or {}
    labels = md.get("labels") or {}
    uid, rv = md.get("uid") or uid, md.get("resourceVersion") or rv
    managed, session = labels.get(MANAGED_BY) == MANAGER, labels.get(SESSION, "")
    generation, terminating = labels.get(GENERATION, ""), bool(md.get("deletionTimestamp"))
    if (type(uid) is str and type(rv) is str and type(session) is str and type(generation) is str
            and type(managed) is bool):
        return PodView(uid, rv, managed, session, generation, terminating)
    return _VIEW.validate_python({"uid": uid, "rv": rv, "managed": managed, "session": session,
                                  "generation": generation, "terminating": terminating})


def refenced(e: PodOp, uid: str, rv: str, terminating: bool) -> PodOp:
    """``e.but(uid=uid, rv=rv, terminating=terminating)``: the same record (fields, fields set,
    serialized form; no validation, as ``but``), built without pydantic's generic copy machinery,
    which costs more than the rest of the step: a fence moves on nearly every Pod event."""
    rec = _new(PodOp)
    fields = e.__dict__.copy()
    fields["uid"], fields["rv"], fields["terminating"] = uid, rv, terminating
    _set(rec, "__dict__", fields)
    _set(rec, "__pydantic_fields_set__", e.__pydantic_fields_set__ | _FENCE)
    _set(rec, "__pydantic_extra__", None)
    _set(rec, "__pydantic_private__", None)
    return rec


_FENCE = frozenset({"uid", "rv", "terminating"})
_new = object.__new__
_set = object.__setattr__
