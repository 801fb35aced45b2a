"""Pods of a generation newer than a podless Session's record knows: judged once it catches up.

Why: a podless Session (Suspended, Stopping, Stopped, Failed) releases a live pod seen under its
labels (``session.pods.release_stale``: made by a life or replica whose record this one never
saw). But a record can be behind the Session: a replica paused while the user resumed it comes
back still Suspended, and its pod watch may deliver the pod the other replica made for that resume
before its Session watch delivers the resume. A pod of a generation the record cannot account for
is evidence that the record, not the pod, is stale.

Expected flow: ``defer_ahead`` notes such a pod (``SessionDecision.ahead``) instead of releasing it ->
every decision afterwards re-judges the noted pods (``judge_ahead``, from ``session.handlers.save``,
after ``decide``): once the record knows the pod's generation (a Session observation brought it:
the resume begins that generation, whose create adopts the pod; or its status reports it) the pod
is the current one, or it is spent and released as any other -> a pod still ahead after
``AHEAD_GRACE_MS`` on the target's clock (the record may never hear of its generation: the replica
that made it may have died before writing any status for it) is settled by a quorum GET of the
Session (``read_ahead``), issued after the pod was seen, so its answer is at least as new as the
pod: after it the pod is judged on what the record then knows, and released unless it is the
Session's current generation's.

Guarantees:
- The generation a record knows is the latest of its own, the one the Session's status reports,
  and 1 (generation 1's status is first written at Ready: its pod may exist with no trace, and is
  released at once).
- No pod is held forever: each noted pod is released, becomes the current pod, or is dropped
  when it is deleted; a Session deleted releases every pod it noted.
- Nothing here reads a clock: the grace is a timer on the target cluster's server time.
"""
from __future__ import annotations

from engine.effects.models import GetObject
from engine.machines.base import Ctx, split_key
from engine.machines.session.manifests import API_VERSION
from engine.machines.session.model import SessionDecision
from engine.machines.session.release import delete_pod, pod_key, RELEASED
from engine.machines.session.timers import want_timer


AHEAD_TIMER = "ahead"
AHEAD_GRACE_MS = 30_000   # how long a record may take to catch up before the Session is read


def podless(d: SessionDecision) -> bool:
    return d.phase in RELEASED and not d.pod.name


def known_generation(d: SessionDecision) -> int:
    return max(d.generation, d.reported_generation, 1)


def is_ahead(d: SessionDecision, generation: int) -> bool:
    """A pod of ``generation`` seen by this record is one to wait for (see the module doc)."""
    return podless(d) and generation > known_generation(d)


def defer_ahead(ctx: Ctx, key: str, d: SessionDecision, pk: str, generation: int) -> SessionDecision:
    if pk in d.ahead:
        return d
    ctx.log(key, f"session {d.name}: pod {split_key(pk)[2]} is of generation {generation}, newer than this "
                 f"record knows ({known_generation(d)}); it is judged once the Session's newer state is seen", pod=pk)
    return d.but(ahead={**d.ahead, pk: generation})


def forget_ahead(d: SessionDecision, pk: str) -> SessionDecision:
    """The pod is deleted (or being deleted): nothing is left to judge."""
    return d.but(ahead={k: g for k, g in d.ahead.items() if k != pk}) if pk in d.ahead else d


def judge_ahead(ctx: Ctx, key: str, d: SessionDecision, settled: bool = False) -> SessionDecision:
    """Release or drop each noted pod the record can now account for; ``settled``: after the
    quorum read, every one of them is judged on what the record knows."""
    for pk, generation in sorted(d.ahead.items()):
        verdict = _ahead_verdict(d, pk, generation, settled)
        if verdict == "wait":
            continue
        d = forget_ahead(d, pk)
        if verdict == "release":
            d = release_spent(ctx, key, d, pk, generation)
    return d


def release_spent(ctx: Ctx, key: str, d: SessionDecision, pk: str, generation: int) -> SessionDecision:
    """Delete pod ``pk`` of a spent ``generation`` (through the pod machine, fenced). A podless
    Session moves its own generation up to it: a resume is a later one, never that name again."""
    d = d.but(generation=max(d.generation, generation)) if podless(d) else d
    return delete_pod(ctx, key, d, pk, f"generation {generation} is spent (the Session is at {d.generation})")


def _ahead_verdict(d: SessionDecision, pk: str, generation: int, settled: bool) -> str:
    if (d.pod.name and pk == pod_key(d)) or pk in d.releasing or pk in d.abandoned:
        return "drop"   # the current pod now (its create adopts it), or already being let go
    if podless(d):
        return "wait" if generation > known_generation(d) and not settled else "release"
    if generation < d.generation:
        return "release"
    # Running at an earlier generation than the pod's (its status may yet overtake the record:
    # ``session.observed._overtaken``), or at the pod's own, whose create adopts it.
    return "wait" if generation > d.generation and not settled else "drop"


def arm_ahead(ctx: Ctx, key: str, d: SessionDecision) -> None:
    want_timer(ctx, key, AHEAD_TIMER, bool(d.ahead) and not d.ahead_read, AHEAD_GRACE_MS, d.target)


def read_ahead(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """The grace is over and pods are still ahead: read the Session (quorum GET)."""
    if not d.ahead or d.ahead_read:
        return d
    eff = ctx.emit(GetObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
                   namespace=d.namespace, name=d.name)
    return d.but(ahead_read=eff.id)


def release_ahead(ctx: Ctx, key: str, d: SessionDecision, reason: str) -> SessionDecision:
    """The Session is gone: every pod it noted is spent."""
    for pk in sorted(d.ahead):
        d = delete_pod(ctx, key, forget_ahead(d, pk), pk, reason)
    return d
