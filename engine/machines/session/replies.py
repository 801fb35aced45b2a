"""Replies from the pod machine and the repo machine, folded into the Session's record.

Guarantees: pure bookkeeping: a reply records what it says and decides nothing beyond what the
fact itself settles (a failed create, namespace or repository fails the bring-up; a pod created
for a generation that was let go is deleted; a failed pod delete blocks the teardown and is asked
again later). ``session.decide`` runs afterwards.
"""
from __future__ import annotations

from typing import Any

from engine.machines.base import Ctx, split_key
from engine.machines.session import steps
from engine.machines.session.model import Moved, moved, PodFacts, SessionDecision
from engine.machines.session.pods import read_pod
from engine.machines.session.release import delete_pod, fail, pod_key
from engine.seams import (
    NamespaceFailed, NamespaceReady, PodCreated, PodCreateFailed, PodDeleteFailed, PodGone, RepoEnsured,
    RepoFailed, RepoStatusReply, SessionMessage,
)


def namespace_ready(ctx: Ctx, key: str, d: SessionDecision, msg: NamespaceReady) -> SessionDecision:
    return d.but(namespace_step=steps.ask_after(d.namespace_step, "answered")) if steps.asked(d.namespace_step) else d


def keep(ctx: Ctx, key: str, d: SessionDecision, msg: SessionMessage) -> SessionDecision:
    """A reply that changes nothing in this phase (the record is decided on again as it is)."""
    return d


def namespace_failed(ctx: Ctx, key: str, d: SessionDecision, msg: NamespaceFailed) -> SessionDecision | Moved:
    """Pending: the namespace asked for could not be ensured."""
    if not steps.asked(d.namespace_step):
        return d
    return fail(ctx, key, d, "NamespaceFailed", msg.reason)


def _repo(d: SessionDecision, repo_key: str, **changes: Any) -> SessionDecision:
    return d.but(repos=tuple(r.but(**changes) if r.key == repo_key else r for r in d.repos))


def repo_ensured(ctx: Ctx, key: str, d: SessionDecision, msg: RepoEnsured) -> SessionDecision:
    return _repo(d, msg.repo, ensured=True)


def repo_failed(ctx: Ctx, key: str, d: SessionDecision, msg: RepoFailed) -> SessionDecision | Moved:
    """Bringing up: a repository the Session needs could not be ensured."""
    hit = next((r for r in d.repos if r.key == msg.repo), None)
    if hit is None:
        return d
    return fail(ctx, key, d, "RepoFailed", f"repository {hit.url}: {msg.reason}")


def repo_status(ctx: Ctx, key: str, d: SessionDecision, msg: RepoStatusReply) -> SessionDecision:
    return _repo(d, msg.repo, nodes={n: s.model_dump(exclude_unset=True) for n, s in msg.nodes.items()})


def pod_created(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreated) -> SessionDecision | Moved:
    """Creating: the pod is made or adopted (``pod_created_late`` in the other phases)."""
    pk = msg.pod
    if pk in d.abandoned:
        return pod_created_late(ctx, key, d, msg)
    if pk != pod_key(d):
        return d
    how = "adopted" if msg.adopted else "created"
    ctx.log(key, f"session {d.name}: pod {d.pod.name} {how}", uid=msg.uid)
    uid = msg.uid or d.pod.uid
    # What the record knew under this name may be another pod's: one a replica made while this
    # record's own create was held (standing by), since deleted. Its facts (Running, gone) say nothing
    # of the pod this create made (found by kfold sim, soak seed 830708: a takeover's held create made
    # the pod again, and the old pod's DELETED, still on the record, failed the Session as
    # "disappeared before serving" while it was being recreated under its next generation).
    facts = d.pod if not d.pod.uid or uid == d.pod.uid else PodFacts(name=d.pod.name)
    d = d.but(pod=facts.but(created=True, uid=uid))
    # An adopted pod may have run for a long time: on a quiet cluster no event will tell its state,
    # so read it now and fold the answer (never wait for a watch event that may not come).
    return moved(read_pod(ctx, key, d) if msg.adopted else d, "created")


def pod_created_late(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreated) -> SessionDecision:
    """A pod create answered for a generation the Session let go: the pod is released."""
    pk = msg.pod
    if pk not in d.abandoned:
        return d
    d = d.but(abandoned=tuple(k for k in d.abandoned if k != pk))
    return delete_pod(ctx, key, d, pk, "created for a generation that was let go")


def pod_create_failed_late(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreateFailed) -> SessionDecision:
    """A pod create failed for a generation the Session let go: nothing is left to release."""
    return d.but(abandoned=tuple(k for k in d.abandoned if k != msg.pod)) if msg.pod in d.abandoned else d


def pod_create_failed(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreateFailed) -> SessionDecision | Moved:
    """Creating: the pod could not be made (``pod_create_failed_late`` in the other phases)."""
    pk = msg.pod
    if pk in d.abandoned:
        return pod_create_failed_late(ctx, key, d, msg)
    if pk != pod_key(d):
        return d
    why = "NameTaken" if msg.taken else "PodCreateFailed"   # a pod kfold refused to adopt holds the name
    return fail(ctx, key, d.but(pod=PodFacts()), why, msg.reason)


def pod_gone(ctx: Ctx, key: str, d: SessionDecision, msg: PodGone) -> SessionDecision:
    pk = msg.pod
    d = d.but(releasing=tuple(k for k in d.releasing if k != pk))
    return d.but(pod=d.pod.but(gone=True)) if d.pod.name and pk == pod_key(d) else d


def pod_delete_failed(ctx: Ctx, key: str, d: SessionDecision, msg: PodDeleteFailed) -> SessionDecision:
    """A teardown whose pod delete failed (its budget spent, refused) is blocked, with the reason on
    the status, and asks again ``engine.backoff.BLOCKED_TEARDOWN_MS`` later (``retry_pod_delete``): an apiserver out
    for longer than the budget, or a permission fixed meanwhile, must not leave the Session in
    Stopping for good; a pod that went meanwhile is then found gone by the delete's read. Until
    then the pod is still being released (``releasing``): an event of it sends no delete of its own
    (the retry is the one policy that says when to ask again)."""
    pk = msg.pod
    reason = f"{_undeletable(pk)} {msg.reason}"
    ctx.log(key, reason, level="warning")
    return d.but(blocked=reason, blocked_pod=pk)


def pod_delete_failed_late(ctx: Ctx, key: str, d: SessionDecision, msg: PodDeleteFailed) -> SessionDecision:
    """A pod delete failed outside a teardown: logged, the pod is no longer being released."""
    ctx.log(key, f"{_undeletable(msg.pod)} {msg.reason}", level="warning")
    return d.but(releasing=tuple(k for k in d.releasing if k != msg.pod))


def _undeletable(pk: str) -> str:
    """How a teardown blocked by pod ``pk``'s failed delete begins its reason."""
    return f"pod {split_key(pk)[2]} could not be deleted:"


def retry_pod_delete(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """The retry timer fired: delete the pod again (a fresh operation, with its own budget and its
    own fenced read), clearing the block it caused (not one a Secret or the finalizer set since)."""
    pk = d.blocked_pod
    if not pk:
        return d.but(blocked_pod="")
    mine = d.blocked.startswith(_undeletable(pk))
    ctx.log(key, f"session {d.name}: deleting pod {split_key(pk)[2]} again (teardown was blocked)")
    d = d.but(blocked="" if mine else d.blocked, blocked_pod="")
    return delete_pod(ctx, key, d, pk, "teardown retried after a failed delete")
