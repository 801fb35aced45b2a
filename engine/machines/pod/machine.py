"""The pod machine ("pod"): fenced deletes, create-race adoption, namespaces, orphan sweeps.

This is the safety core: a wrong delete of someone's running pod is the worst thing kfold can do.
The machine routes; the decisions live in ``pod_create``, ``pod_delete``, ``pod_namespace``,
``pod_sweep`` (orphan Secrets) and ``pod_orphans`` (orphan pods), over the table in ``pod_table`` and the records in ``pod_records``.

Messages (``ctx.tell("pod", key, ...)``), answered with ``ctx.tell(reply_to, reply_key, ...)``:
- ``create`` {manifest, reply_to, reply_key, session, generation[, budget_s]} at a pod key ->
  ``pod_created`` {pod, uid, adopted} | ``pod_create_failed`` {pod, reason}
- ``delete`` {reply_to, reply_key, reason[, budget_s]} at a pod key ->
  ``pod_gone`` {pod} | ``pod_delete_failed`` {pod, reason}
- ``ensure_namespace`` {reply_to, reply_key} at ``<cluster>/<namespace>/`` ->
  ``namespace_ready`` {namespace} | ``namespace_failed`` {namespace, reason}
Commands ``pod.sweep_secrets`` {cluster, namespace ("" = all), grace_seconds (default 600)} and
``pod.sweep_orphans`` {cluster, namespace, home}.

Guarantees:
- Only pods labelled managed-by kfold are tracked, unless an operation already tracks the name.
- An outcome is acted on only if it answers the effect the entry awaits; late, duplicate or
  superseded outcomes decide nothing.
- An effect in doubt after a crash is resolved by a quorum read (pods) or by repeating an
  idempotent request (namespaces); a delete is never re-sent blindly.
"""
from __future__ import annotations

from typing import Any

from engine.machines.base import Ctx
from engine.machines.pod import create as pod_create
from engine.machines.pod import delete as pod_delete
from engine.machines.pod import namespace as pod_namespace
from engine.machines.pod import orphans as pod_orphans
from engine.machines.pod import sweep as pod_sweep
from engine.machines.base import IllegalTransition, Machine, missing_after_relist, split_key
from engine.machines.pod.records import (DEFAULT_BUDGET_S, ORPHANS_NAME, SWEEP_NAME, Entries, PodOp, Reply, refenced,
                                        reply_list, view_of)
from engine.machines.pod.table import TABLE, save, send_read, step
from journal.records import Command, Observed, Outcome, Relist

__all__ = ["PodMachine", "TABLE"]


class PodMachine(Machine):
    name = "pod"
    decision = Entries  # type: ignore[assignment]  # a union of three entry kinds, see pod_records
    observes = frozenset({"Pod"})
    commands = frozenset({"pod.sweep_secrets", "pod.sweep_orphans"})
    typed_messages = True

    # -- observations -----------------------------------------------------------------------
    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        key = f"{rec.cluster}/{rec.namespace}/{rec.name}"  # object_key, inlined: runs on every Pod event
        e = ctx.get(key)
        view = view_of(rec.obj, rec.uid, rec.rv)
        if rec.event == "DELETED":
            _vanished(ctx, key, e, view.uid)
        elif isinstance(e, PodOp):
            _seen(ctx, key, e, view)
        elif view.managed:
            ctx.put(key, PodOp(uid=view.uid, rv=view.rv, terminating=view.terminating))

    def on_relist(self, ctx: Ctx, rec: Relist) -> None:
        pods = [k for k, e in ctx.items() if isinstance(e, PodOp)]
        for key in missing_after_relist(pods, rec):
            _missing(ctx, key, ctx.get(key))

    # -- requests -----------------------------------------------------------------------------
    def on_message(self, ctx: Ctx, key: str, message: str, args: dict[str, Any]) -> None:
        reply = Reply(to=args["reply_to"], key=args["reply_key"])
        if message == "ensure_namespace":
            pod_namespace.ensure(ctx, key, reply)
            return
        budget_ms = int(args.get("budget_s", DEFAULT_BUDGET_S)) * 1000
        if message == "create":
            _create(ctx, key, reply, args, budget_ms)
        elif message == "delete":
            _delete(ctx, key, reply, str(args.get("reason", "")), budget_ms, str(args.get("session") or ""))
        else:
            raise IllegalTransition(f"pod: unknown message {message!r}")

    def on_command(self, ctx: Ctx, rec: Command) -> None:
        if rec.name == "pod.sweep_orphans":
            pod_orphans.start(ctx, rec)
        else:
            pod_sweep.start(ctx, rec)

    # -- answers --------------------------------------------------------------------------------
    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Any) -> None:
        key, what = effect.key, _what(effect.key)
        if what == "sweep":
            pod_sweep.on_outcome(ctx, key, rec, effect)
        elif what == "orphans":
            pod_orphans.on_outcome(ctx, key, rec, effect)
        elif what == "namespace":
            pod_namespace.on_outcome(ctx, key, rec, effect)
        else:
            e = ctx.get(key)
            if isinstance(e, PodOp) and e.awaiting == effect.id:
                _operation(e).on_outcome(ctx, key, e.but(awaiting=""), rec, effect)

    def on_in_doubt(self, ctx: Ctx, effect: Any) -> None:
        key, what = effect.key, _what(effect.key)
        if what == "sweep":
            pod_sweep.in_doubt(ctx, key, effect)
        elif what == "orphans":
            pod_orphans.in_doubt(ctx, key, effect)
        elif what == "namespace":
            pod_namespace.in_doubt(ctx, key, effect)
        else:
            e = ctx.get(key)
            if isinstance(e, PodOp) and e.awaiting == effect.id:
                # The doubt is resolved from now on, with the operation's whole budget (re-armed by
                # ``save``): what came before was time this replica could not act, down or standing
                # by while another replica acted on the same decision. Found by kfold sim (soak seed
                # 731012): a standby held a pod create for 11 minutes while the leader made the pod;
                # at takeover the budget, spent on standing by, fired before the confirming read
                # answered, failed the Session and deleted its healthy pod.
                _operation(e).in_doubt(ctx, key, e.but(awaiting="", deadline=None))

    def on_deadline(self, ctx: Ctx, key: str, name: str) -> None:
        if _what(key) == "namespace":
            pod_namespace.on_deadline(ctx, key)
            return
        e = ctx.get(key)
        if not isinstance(e, PodOp) or not e.op:
            return
        if name == "budget":
            _over_budget(ctx, key, e)
        elif name == "retry" and not e.awaiting:
            send_read(ctx, key, e)


def _what(key: str) -> str:
    name = split_key(key)[2]
    return {SWEEP_NAME: "sweep", ORPHANS_NAME: "orphans", "": "namespace"}.get(name, "pod")


def _operation(e: PodOp) -> Any:
    return pod_create if e.op == "create" else pod_delete


def _create(ctx: Ctx, key: str, reply: Reply, args: dict[str, Any], budget_ms: int) -> None:
    e = ctx.get(key)
    op = e.op if isinstance(e, PodOp) else ""
    same = op == "create" and (e.session, e.generation) == (str(args["session"]), int(args["generation"]))
    if op == "":
        pod_create.start(ctx, key, reply, args, budget_ms)
    elif same:
        save(ctx, key, e.but(replies=reply_list(e.replies, reply.to, reply.key)))
    else:
        busy = "being deleted" if op == "delete" else f"being created for session {e.session} generation {e.generation}"
        ctx.tell(reply.to, reply.key, "pod_create_failed", pod=key,
                 reason=f"pod {split_key(key)[1]}/{split_key(key)[2]} is {busy}; refusing a second create")


def _delete(ctx: Ctx, key: str, reply: Reply, reason: str, budget_ms: int, session: str) -> None:
    e = ctx.get(key)
    op = e.op if isinstance(e, PodOp) else ""
    if op == "":
        pod_delete.start(ctx, key, (reply,), reason, budget_ms, session)
    elif op == "delete":
        save(ctx, key, e.but(replies=reply_list(e.replies, reply.to, reply.key)))
    else:
        save(ctx, key, e.but(then_delete=reply_list(e.then_delete, reply.to, reply.key)))


def _seen(ctx: Ctx, key: str, e: PodOp, view: Any) -> None:
    if e.op == "delete":
        pod_delete.observed(ctx, key, e, view)
    elif e.uid == view.uid and e.rv == view.rv and e.terminating == view.terminating:
        save(ctx, key, e)  # re-observed unchanged (a relist, a resync): the fence stands as it is
    else:  # the common case: a new resourceVersion moves the fence
        save(ctx, key, refenced(e, view.uid, view.rv, view.terminating))


def _missing(ctx: Ctx, key: str, e: PodOp) -> None:
    """A relist lacks the pod at ``key``: a suspect, not proof (``missing_after_relist``).

    A delete waiting for the pod to go re-reads it (quorum GET; its 404 answers ``pod_gone``);
    one with a request in flight lets that request's outcome decide. A create in flight only
    forgets its fence. An idle fence is a cache of the last observation and is forgotten: a later
    delete starts from a quorum read when it has no fence, so forgetting it never deletes."""
    if e.op == "delete":
        if not e.awaiting:
            send_read(ctx, key, step(e, "read"))
    elif e.op == "create":
        save(ctx, key, e.but(uid="", rv="", terminating=False))
    else:
        ctx.drop(key)


def _vanished(ctx: Ctx, key: str, e: Any, uid: str | None) -> None:
    """The pod at ``key`` was deleted (``uid``; a DELETED event)."""
    if not isinstance(e, PodOp):
        return
    if e.op == "delete":
        pod_delete.vanished(ctx, key, e, uid)
    elif e.op == "create":
        if uid is None or uid == e.uid:
            save(ctx, key, e.but(uid="", rv="", terminating=False))
    elif uid is None or not uid or uid == e.uid:
        ctx.drop(key)


def _over_budget(ctx: Ctx, key: str, e: PodOp) -> None:
    seconds = e.budget_ms // 1000
    what = "create" if e.op == "create" else "delete"
    reason = (f"{what} of pod {split_key(key)[1]}/{split_key(key)[2]} exceeded its budget of {seconds} s "
              f"(still {e.phase}); nothing more is sent for it")
    ctx.log(key, reason, level="warning")
    _operation(e).fail(ctx, key, e.but(awaiting=""), reason)
