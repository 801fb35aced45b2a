"""The pod operation table and the few acts every pod operation shares.

Phases of one pod name (``PodOp.phase``)::

    idle --create--> creating --exists--> confirming --absent--> creating
    idle --delete--> deleting --accepted--> terminating
    idle|deleting|reading|terminating --read--> reading --fenced--> deleting
    idle|reading --wait--> terminating            (the pod is already terminating)
    any but idle --settle--> idle                 (the operation answered its callers)

Guarantees:
- ``send_delete`` is the only place a pod operation's ``DeleteObject`` is built, and it refuses to
  build one without a complete fence for the target uid (it re-reads instead): no unfenced delete
  exists. (The orphan-pod sweep, ``pod.orphans``, builds its own, fenced by the uid and
  resourceVersion of a quorum list, and never retries one.)
- Every operation is armed with a budget timer on server time as soon as a record carries one;
  with no server time yet the budget waits rather than guesses. An operation in doubt (a restart,
  or a takeover of what a standby held) is armed again, with its whole budget, when the doubt's
  resolution begins (``PodMachine.on_in_doubt``).
- Quorum reads that fail transiently are retried after a backoff on server time (never a delete).
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.machines.base import Ctx
from engine.effects.models import CreateObject, DeleteObject, GetObject
from engine.machines.base import Table, split_key
from engine.machines.pod.records import PodOp, Reply

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


def step(e: PodOp, event: str, **changes: Any) -> PodOp:
    """``e`` moved along the table by ``event`` (``IllegalTransition`` if the table forbids it)."""
    return e.but(phase=TABLE.next(e.phase, event), **changes)


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
    return save(ctx, key, e.but(awaiting=eff.id))


def send_delete(ctx: Ctx, key: str, e: PodOp) -> PodOp:
    """DELETE fenced by ``(target, rv)``; without a complete fence, a quorum read instead."""
    if not (e.target and e.uid == e.target and e.rv):
        return send_read(ctx, key, step(e, "read"))
    eff = ctx.emit(DeleteObject, key, uid=e.target, rv=e.rv, **_ref(key))
    return save(ctx, key, e.but(awaiting=eff.id))


def retry_read(ctx: Ctx, key: str, e: PodOp, retry_after_ms: int | None, fail: Any) -> None:
    """A quorum read failed transiently: read again when ``backoff.POD_READ`` says (timer ``retry``),
    or ``fail``."""
    e = e.but(attempts=e.attempts + 1, awaiting="")
    when = backoff.next_try(backoff.POD_READ, e.attempts, ctx.now, retry_after_ms)
    if when == backoff.FAIL:
        return fail(ctx, key, e, f"could not read pod {name_of(key)} after {e.attempts - 1} "
                                 "attempts and there is no server time to back off on")
    if when == backoff.AT_ONCE:
        send_read(ctx, key, e)
        return None
    ctx.set_timer(key, "retry", when)
    save(ctx, key, e)
    return None


def settled(ctx: Ctx, key: str, e: PodOp, **changes: Any) -> PodOp:
    """``e`` with its operation finished: timers cancelled, callers forgotten (already told)."""
    ctx.cancel_timer(key, "budget")
    ctx.cancel_timer(key, "retry")
    return step(e, "settle", op="", replies=(), target="", reason="", manifest=None, awaiting="",
                attempts=0, deadline=None, **changes)


def tell_all(ctx: Ctx, replies: tuple[Reply, ...], message: str, **args: Any) -> None:
    for r in replies:
        ctx.tell(r.to, r.key, message, **args)


def name_of(key: str) -> str:
    cluster, namespace, name = split_key(key)
    return f"{namespace}/{name}"
