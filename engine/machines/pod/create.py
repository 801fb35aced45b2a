"""Create a session pod under its deterministic name, adopting only what is provably ours.

Expected flow: ``create`` -> ``CreateObject`` -> ``ok``: ``pod_created`` (adopted False).
``already_exists`` (an earlier attempt or a concurrent one won the name) or ``transient`` (in
doubt) -> quorum read -> the pod carries this session's managed-by, session and generation labels
and is not terminating: ``pod_created`` (adopted True); absent: create again (same name, so
repeating is safe) unless a delete was asked for meanwhile (then ``pod_create_failed`` and the
delete runs, finding nothing); anything else: ``pod_create_failed`` naming the pod and what holds it
(``taken`` when a pod kfold refused to adopt holds the name).

Guarantees:
- The manifest sent always carries the key's name and namespace and the three kfold labels; a
  manifest naming another pod is refused before anything is sent.
- A ``delete`` that arrives while a create runs waits for the create to answer, then starts.
- Exceeding the budget answers ``pod_create_failed`` and sends nothing more.
"""
from __future__ import annotations

from typing import Any

from engine.labels import MANAGER
from engine.machines.base import Act, Answer, Ctx, Move, describe, move, split_key
from engine.machines.pod import delete as pod_delete
from engine.machines.pod.records import GENERATION, MANAGED_BY, SESSION, PodOp, PodView, Reply
from engine.seams import CreatePod, PodCreated, PodCreateFailed
from journal.records import Outcome
from engine.machines.pod.acts import (
    name_of, retry_read, send_create, send_read, settled, tell_all, view_of,
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
        case _:
            return fail(ctx, key, e, f"could not create pod {name_of(key)}: {describe(rec)}")


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
