"""Fenced pod delete: the one operation here that can destroy someone's work.

Expected flow: ``delete`` arrives -> the target is the uid of the latest observation (a quorum
read first if there is none) -> ``DeleteObject`` with ``uid`` + ``resourceVersion`` preconditions
-> ``terminating`` until the target's DELETED is observed or a quorum read (also the one a relist
without the pod triggers) finds it absent or replaced -> ``pod_gone`` to every caller.

Guarantees:
- Every delete carries the fence of the uid it means (``send_delete``); no grace period is sent.
- A 409 ``Conflict`` (precondition failed) or a ``transient`` result (in doubt) is never retried
  blindly: a quorum read decides. Same uid, not terminating -> delete again with the new fence;
  another uid or absence -> the pod we meant is gone and the new one is left alone.
- A pod read without kfold's managed-by label is never deleted: the pod meant is not there.
- A delete that names a Session (``session``: a release by name, e.g. the pod a Session's status
  names) starts from a quorum read and deletes only a pod labelled for that Session; a pod under
  the name labelled for another one (or none) is left alone and the pod meant is reported gone.
- Watch events about another uid never move the fence. While terminating, such an event only
  triggers a quorum read (a lagging watch cannot fake a replacement).
- Exceeding the budget answers ``pod_delete_failed`` and sends nothing more.
"""
from __future__ import annotations

from typing import Any

from engine.machines.base import Answer, Ctx, Move, describe, move
from engine.machines.pod.records import PodOp, PodView, Reply
from engine.seams import PodDeleteFailed, PodGone
from journal.records import Outcome
from engine.machines.pod.acts import (
    name_of, retry_read, save, send_delete, send_read, settled, tell_all, view_of,
)


def start(ctx: Ctx, key: str, replies: tuple[Reply, ...], reason: str, budget_ms: int,
          session: str = "") -> Move:
    """Begin a delete from idle, deciding on the latest observation of the pod (on a quorum read
    when the delete names a Session: the fence kept from observations holds no labels)."""
    e = (ctx.get(key) or PodOp()).but(op="delete", replies=replies, reason=reason, attempts=0,
                                     budget_ms=budget_ms, deadline=None, target="", session=session,
                                     missing=False)
    if not e.uid or session:
        return move(key, e, "read", send_read)
    if e.terminating:
        return move(key, e, "wait", save, target=e.uid)
    return move(key, e, "delete", send_delete, target=e.uid)


def deleted(ctx: Ctx, key: str, e: PodOp, rec: Outcome) -> Answer:
    """The answer to the fenced DELETE (phase ``deleting``)."""
    match rec.result:
        case "ok" if e.missing:
            return move(key, e, "read", send_read)
        case "ok":
            return move(key, e, "accepted", save, terminating=True)
        case "not_found":
            return gone(ctx, key, e)
        case "conflict" | "transient":
            return move(key, e, "read", send_read)
        case _:
            return fail(ctx, key, e, f"could not delete pod {name_of(key)}: {describe(rec)}")


def read(ctx: Ctx, key: str, e: PodOp, rec: Outcome) -> Answer:
    """The answer to the quorum read that fences the delete (phase ``reading``)."""
    match rec.result:
        case "ok":
            return decide(ctx, key, e, view_of(rec.obj))
        case "not_found":
            return gone(ctx, key, e)
        case "transient":
            return retry_read(ctx, key, e, rec, fail)
        case _:
            return fail(ctx, key, e, f"could not read pod {name_of(key)} to fence its delete: {describe(rec)}")


def decide(ctx: Ctx, key: str, e: PodOp, view: PodView) -> Answer:
    """Decide again on a quorum read of the pod."""
    if e.target and view.uid != e.target:
        return gone(ctx, key, e)  # replaced: the pod we meant no longer exists
    if not view.managed:  # the name is held by a pod that is not kfold's: ours is not there
        ctx.log(key, f"pod {name_of(key)} is not kfold's (no managed-by label); left alone", level="warning")
        return gone(ctx, key, e)
    if e.session and view.session != e.session:
        ctx.log(key, f"pod {name_of(key)} is not session {e.session}'s (session={view.session or '-'}); "
                     "left alone", level="warning")
        return gone(ctx, key, e)
    e = e.but(target=view.uid, uid=view.uid, rv=view.rv, terminating=view.terminating)
    return move(key, e, "wait", save) if view.terminating else move(key, e, "fenced", send_delete)


def observed(ctx: Ctx, key: str, e: PodOp, ev: Any) -> None:
    """A watch event (not DELETED; ``ev.view``) while the delete's request is out (phases
    ``deleting``, ``reading``): only the target's own events move the fence."""
    view = ev.view
    if view.uid == e.target:
        save(ctx, key, e.but(uid=view.uid, rv=view.rv, terminating=view.terminating))


def observed_terminating(ctx: Ctx, key: str, e: PodOp, ev: Any) -> Answer:
    """A watch event while the target terminates (phase ``terminating``): the target's own moves the
    fence; another uid's (the name taken again, or a lagging watch) is checked by a quorum read."""
    if ev.view.uid == e.target or not e.target:
        return observed(ctx, key, e, ev)
    return move(key, e, "read", send_read)


def vanished(ctx: Ctx, key: str, e: PodOp, ev: Any) -> None:
    """A DELETED event of ``ev.uid`` (None: the caller holds proof of absence of any uid)."""
    uid = ev.uid
    if uid is None or (uid and uid == e.target):
        gone(ctx, key, e)


def in_doubt(ctx: Ctx, key: str, e: PodOp) -> Move:
    """Crash with the delete in flight (phase ``deleting``): re-observe, never re-send. (A read in
    doubt, phase ``reading``, is read again: ``acts.send_read``.)"""
    return move(key, e, "read", send_read)


def gone(ctx: Ctx, key: str, e: PodOp) -> None:
    tell_all(ctx, e.replies, PodGone(pod=key))
    ctx.cancel_timer(key, "budget")
    ctx.cancel_timer(key, "retry")
    ctx.drop(key)


def fail(ctx: Ctx, key: str, e: PodOp, reason: str) -> Move:
    tell_all(ctx, e.replies, PodDeleteFailed(pod=key, reason=reason))
    return settled(ctx, key, e, _put, session="")


def _put(ctx: Ctx, key: str, done: PodOp) -> None:
    ctx.put(key, done)
