"""Create a session pod under its deterministic name, adopting only what is provably ours.

Expected flow: ``create`` -> ``CreateObject`` -> ``ok``: ``pod_created`` (adopted False).
``already_exists`` (an earlier attempt or a concurrent one won the name) or ``transient`` (in
doubt) -> quorum read -> the pod carries this session's managed-by, session and generation labels
and is not terminating: ``pod_created`` (adopted True); absent: create again (same name, so
repeating is safe) unless a delete was asked for meanwhile (then ``pod_create_failed`` and the
delete runs, finding nothing); anything else: ``pod_create_failed`` naming the pod and what holds it
(``taken`` when a pod kfold refused to adopt holds the name).

A create refused because the pod's ServiceAccount does not exist yet (``no_service_account``: a new
namespace before the controller manager made its ``default`` one; ServiceAccount admission's 403)
is sent again, same name and manifest, on ``engine.backoff.POD_CREATE`` (the ``retry`` timer, on
the pod's cluster's server time) until it is accepted or the budget is spent; the first refusal of
the operation is logged once. Without server time, at most ``backoff.MAX_UNTIMED`` repeats at once,
then ``pod_create_failed`` with the refusal. Any other 403 (RBAC, another admission) fails at once.

Guarantees:
- The manifest sent always carries the key's name and namespace and the three kfold labels; a
  manifest naming another pod is refused before anything is sent.
- A ``delete`` that arrives while a create runs waits for the create to answer, then starts; one
  that arrives while a refused create waits for its backoff ends the create at once, unsent.
- Exceeding the budget answers ``pod_create_failed`` and sends nothing more.
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.labels import MANAGER
from engine.machines.base import Act, Answer, Ctx, Move, describe, move, split_key
from engine.machines.pod import delete as pod_delete
from engine.machines.pod.records import GENERATION, MANAGED_BY, SESSION, PodOp, PodView, Reply
from engine.seams import CreatePod, PodCreated, PodCreateFailed
from journal.records import Outcome
from engine.machines.pod.acts import (
    name_of, retry_read, save, send_create, send_read, settled, tell_all, view_of,
)


def start(ctx: Ctx, key: str, reply: Reply, msg: CreatePod, budget_ms: int) -> Answer:
    session, generation = msg.session, msg.generation
    manifest, problem = prepared(key, msg.manifest, session, generation)
    if problem:
        ctx.tell(reply.key, PodCreateFailed(pod=key, reason=problem), to=reply.to)
        return None
    e = (ctx.get(key) or PodOp()).but(
        op="create", replies=(reply,), session=session, generation=generation, manifest=manifest,
        attempts=0, budget_ms=budget_ms, deadline=None)
    return move(key, e, "create", send_create)


def prepared(key: str, manifest: dict[str, Any], session: str, generation: int) -> tuple[dict[str, Any], str]:
    """The manifest to send, or a reason to refuse it."""
    _, namespace, name = split_key(key)
    md = dict(manifest.get("metadata") or {})
    if md.get("name", name) != name or md.get("namespace", namespace) != namespace:
        return {}, (f"manifest names pod {md.get('namespace', namespace)}/{md.get('name', name)} "
                    f"but the create is for {namespace}/{name}")
    labels = {**(md.get("labels") or {}), MANAGED_BY: MANAGER, SESSION: session, GENERATION: str(generation)}
    md.update(name=name, namespace=namespace, labels=labels)
    return {**manifest, "apiVersion": "v1", "kind": "Pod", "metadata": md}, ""


def created(ctx: Ctx, key: str, e: PodOp, rec: Outcome) -> Move:
    """The answer to the create (phase ``creating``)."""
    match rec.result:
        case "ok":
            view = view_of(rec.obj)
            return finish(ctx, key, e, PodCreated(pod=key, uid=view.uid, adopted=False), view)
        case "already_exists" | "transient":
            return move(key, e, "exists", send_read)
        case "forbidden" if no_service_account(rec):
            return _later(ctx, key, e, rec)
        case _:
            return fail(ctx, key, e, f"could not create pod {name_of(key)}: {describe(rec)}")


# ServiceAccount admission's refusal (kube-apiserver plugin/pkg/admission/serviceaccount: "error
# looking up service account <ns>/<name>: serviceaccount "<name>" not found"), a 403 Forbidden like
# RBAC's; only its message tells it apart.
_SA_LOOKUP = "error looking up service account "


def no_service_account(rec: Outcome) -> bool:
    """The create was refused only because the pod's ServiceAccount does not exist (yet)."""
    message = rec.message
    return rec.status_reason == "Forbidden" and _SA_LOOKUP in message and message.endswith("not found")


def _later(ctx: Ctx, key: str, e: PodOp, rec: Outcome) -> Answer:
    """The create goes again when ``backoff.POD_CREATE`` says (phase ``creating``, nothing awaited)."""
    e = e.but(attempts=e.attempts + 1)
    when = backoff.next_try(backoff.POD_CREATE, e.attempts, ctx.now_on(split_key(key)[0]), rec.retry_after_ms)
    if e.attempts == 1:
        ctx.log(key, f"pod {name_of(key)}: its ServiceAccount does not exist yet ({rec.message}); "
                     f"created again on a backoff (at most {backoff.CAP_MS // 1000} s apart) within its "
                     f"budget of {e.budget_ms // 1000} s", level="warning")
    if isinstance(when, int):
        ctx.set_timer(key, "retry", when)
        return save(ctx, key, e)
    if when == backoff.AT_ONCE:
        return send_create(ctx, key, e)
    return fail(ctx, key, e, f"could not create pod {name_of(key)} after {e.attempts} refusals and there is "
                             f"no server time to back off on: {describe(rec)}")


def retry_due(ctx: Ctx, key: str, e: PodOp, ev: Any) -> Answer:
    """The backoff of a refused create is over (phase ``creating``, nothing awaited): the same
    create is sent, unless its delete was asked for meanwhile."""
    if e.awaiting:
        return None
    if e.then_delete:
        return fail(ctx, key, e, f"pod {name_of(key)} was not created, and its delete was asked for "
                                 "meanwhile: not created again")
    return send_create(ctx, key, e)


def confirmed(ctx: Ctx, key: str, e: PodOp, rec: Outcome) -> Answer:
    """The answer to the quorum read after AlreadyExists or a create in doubt (phase ``confirming``)."""
    match rec.result:
        case "ok":
            return _adopt_or_refuse(ctx, key, e, view_of(rec.obj))
        case "not_found" if e.then_delete:   # its delete was asked for meanwhile: never made just to be deleted
            return fail(ctx, key, e, f"pod {name_of(key)} was not created, and its delete was asked for "
                                     "meanwhile: not created again")
        case "not_found":
            return move(key, e, "absent", send_create)
        case "transient":
            return retry_read(ctx, key, e, rec, fail)
        case _:
            return fail(ctx, key, e, f"could not read pod {name_of(key)} after its create: {describe(rec)}")


def _adopt_or_refuse(ctx: Ctx, key: str, e: PodOp, view: PodView) -> Move:
    ours = view.managed and view.session == e.session and view.generation == str(e.generation)
    if ours and not view.terminating:
        return finish(ctx, key, e, PodCreated(pod=key, uid=view.uid, adopted=True), view)
    if ours:
        return fail(ctx, key, e, f"pod {name_of(key)} exists for session {e.session} generation "
                                 f"{e.generation} but is terminating; it cannot be adopted", view)
    # no fence is kept on what holds the name: it is not ours to delete later
    return fail(ctx, key, e, f"pod {name_of(key)} already exists and is not session {e.session} "
                             f"generation {e.generation}'s (labels: managed-by={'kfold' if view.managed else 'other'}, "
                             f"session={view.session or '-'}, generation={view.generation or '-'}); "
                             "refusing to adopt it", taken=True)


def in_doubt(ctx: Ctx, key: str, e: PodOp) -> Move:
    """Crash with the create in flight (phase ``creating``): a quorum read decides whether it
    landed. (A read in doubt, phase ``confirming``, is read again: ``acts.send_read``.)"""
    return move(key, e, "exists", send_read)


def finish(ctx: Ctx, key: str, e: PodOp, reply: PodCreated | PodCreateFailed, view: PodView | None = None) -> Move:
    """Answer every caller, keep the fence, then run a delete that queued behind the create: after
    a refusal (``taken``) that delete means this session's pod, so it deletes only a pod labelled
    for it (``pod.delete``: a quorum read first), never the one that holds the name."""
    tell_all(ctx, e.replies, reply)
    fence = {"uid": view.uid, "rv": view.rv, "terminating": view.terminating} if view else {}
    taken = isinstance(reply, PodCreateFailed) and reply.taken
    then = _queued_delete(e, e.session if taken else "") if e.then_delete else _keep_fence
    return settled(ctx, key, e, then, session="", generation=0, then_delete=(), **fence)


def _keep_fence(ctx: Ctx, key: str, done: PodOp) -> None:
    """An idle entry is kept only while it holds a fence."""
    if done.uid:
        ctx.put(key, done)
    else:
        ctx.drop(key)


def _queued_delete(e: PodOp, guard: str) -> Act:
    """The act after the create settled: the delete asked for meanwhile (``e.then_delete``) starts."""
    def start_delete(ctx: Ctx, key: str, done: PodOp) -> Move:
        ctx.put(key, done)
        return pod_delete.start(ctx, key, e.then_delete, "requested during create", e.budget_ms, guard)
    return start_delete


def fail(ctx: Ctx, key: str, e: PodOp, reason: str, view: PodView | None = None, taken: bool = False) -> Move:
    failed = PodCreateFailed(pod=key, reason=reason, taken=True) if taken else PodCreateFailed(pod=key, reason=reason)
    return finish(ctx, key, e, failed, view)
