"""Letting go: a Session failed, suspended or stopped releases its pod (through the pod machine)
and, stopped, tears down what it owns, then removes its finalizer.

Guarantees:
- ``fail`` records the reason and message (for status) and releases the pod; the spec that failed
  is kept (``spec_text``): only a different one retries.
- A pod is released once (``releasing``); one whose create is still in flight is released when
  the create answers (``abandoned``). A pod this record never created nor adopted, known only by
  the generation its status names, is deleted by name only if it carries this Session's label.
- A teardown deletes the Secret and the workspace claim only when they are this Session's, fenced
  by uid (``session.owned``); the finalizer is removed once nothing is outstanding, preconditioned
  on the very list entry it removes.
"""
from __future__ import annotations

from typing import Any

from engine.effects.models import Log, PatchObject
from engine.seams import DeletePod
from engine.machines.base import Ctx, object_key
from engine.machines.session import finalizer
from engine.machines.session.manifests import API_VERSION
from engine.machines.session.model import (
    canonical_json, Failure, FINALIZER, LIVE, Moved, moved, PodFacts, SessionDecision,
)
from engine.machines.session.owned import start_teardown
from engine.machines.session.spec import SpecError
from engine.machines.session import manifests as mf


def spec_text(d: SessionDecision) -> str:
    return canonical_json(d.spec_raw)


def fail(ctx: Ctx, key: str, d: SessionDecision, reason: str, message: str) -> Moved:
    ctx.emit(Log, key, level="warning", message=f"session {d.name} failed: {message}", fields={"reason": reason})
    d = release(ctx, key, d, f"session failed: {reason}")
    return moved(d.but(failure=Failure(reason=reason, message=message), failed_spec=spec_text(d)), "fail")


def invalid(ctx: Ctx, key: str, d: SessionDecision, spec: SpecError) -> SessionDecision | Moved:
    if d.phase == "Failed" and d.failure and d.failure.message == spec.message:
        return d
    return fail(ctx, key, d, "InvalidSpec", spec.message)


def pod_key(d: SessionDecision, pod: str | None = None) -> str:
    return object_key(d.target, d.target_ns, pod or d.pod.name)


def release(ctx: Ctx, key: str, d: SessionDecision, reason: str) -> SessionDecision:
    """Let go of the current pod: delete it through the pod machine (or once its create answers)."""
    if not d.pod.name or d.pod.gone:
        return d.but(pod=PodFacts())
    pk = pod_key(d)
    if not d.pod.created:
        return d.but(pod=PodFacts(), abandoned=d.abandoned + (pk,))
    return delete_pod(ctx, key, d, pk, reason).but(pod=PodFacts())


def delete_pod(ctx: Ctx, key: str, d: SessionDecision, pk: str, reason: str,
               by_name: bool = False) -> SessionDecision:
    """``by_name``: a pod this record never created nor adopted, known only by its name (the
    generation the status names): the pod machine deletes it only if it carries this Session's
    label, so a pod kfold refused to adopt (another Session's) is never deleted by name."""
    msg = (DeletePod(reply_to="session", reply_key=key, reason=reason, session=d.name) if by_name
           else DeletePod(reply_to="session", reply_key=key, reason=reason))
    ctx.tell(pk, msg)
    return d.but(releasing=tuple(dict.fromkeys(d.releasing + (pk,))))


def suspend(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision | Moved:
    if d.phase == "Suspended":
        return d
    d = _release_unmade(ctx, key, d, "session suspended")
    return moved(_release_resumed(ctx, key, release(ctx, key, d.but(failure=None), "session suspended")), "suspend")


def teardown(ctx: Ctx, key: str, d: SessionDecision, claimed: bool = False) -> SessionDecision | Moved:
    """Stop: release the pod, delete Service, Ingress, Secret and the workspace claim (each read first and
    deleted only when it is this Session's, fenced by its uid: ``session.owned``); then, if the
    Session is being deleted, remove the finalizer. Repeated requests change nothing. ``claimed``:
    the config gives Sessions a workspace claim (one may exist even if this record never made it)."""
    if d.phase not in ("Stopping", "Stopped"):
        d = _release_unmade(ctx, key, d, "session stopped")
        d = _release_resumed(ctx, key, release(ctx, key, d, "session stopped"))
        d = start_teardown(ctx, key, d, claimed=claimed).but(secret=d.secret.after("again"),
                                                             claim=d.claim.after("again"))
        return moved(d, "stop")
    if d.phase == "Stopping" and not (d.teardown or d.releasing or d.abandoned or d.blocked):
        return moved(d, "stopped")
    if d.phase == "Stopped" and d.deleting and not any(e.type == "create" for e in ctx.pending_for(key)):
        # A create still unanswered may land after the teardown's read found nothing; its answer
        # reopens the teardown, so the finalizer waits for it (found by kfold sim, seed 199).
        d = _remove_finalizer(ctx, key, d)
    return d


RELEASED = ("Suspended", "Stopping", "Stopped", "Failed")  # phases whose pod kfold had begun to release


def _release_unmade(ctx: Ctx, key: str, d: SessionDecision, reason: str) -> SessionDecision:
    """Stopped (or suspended) while Pending: this record has not sent generation N's pod create,
    but another replica (leading while this one, standby, decided the same bring-up) or an earlier
    life may have, and its pod may already run and have been seen. ``<session>-gN`` is released
    through the pod machine (deleted fenced by uid and resourceVersion), so a stop never leaks it (found by
    kfold sim, soak seed 73426: a standby's record resumed a Session to generation 3, the leader
    created its pod on east, the standby took over and stopped the Session as Pending, the pod lived on)."""
    if d.phase != "Pending" or d.pod.name or d.generation <= 0 or not d.target:
        return d
    pk = object_key(d.target, d.target_ns, mf.pod_name(d.name, d.generation))
    if pk in d.releasing or pk in d.abandoned or not ctx.ask("pod", "uid", pk):
        # Only a pod kfold has seen (the pod machine's answer): one that shows up later is
        # released when it is observed (``session.pods.release_stale``: a stopped Session has no
        # pod), so a stop costs no read on the normal path.
        return d
    return delete_pod(ctx, key, d, pk, reason, by_name=True)


def _release_resumed(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """Stopped (or suspended) before a resumed record (``session.from_status``: a lost journal) re-adopted its
    pod — before its ``begin`` (generation N-1) or after it, while the bring-up had not reached
    the pod yet (generation N, no pod name): the pod the Session's status names is released
    through the pod machine all the same (it reads first and deletes fenced by uid; a 404 is
    fine), so a stop never leaks it. A status already Suspended/Stopping/Stopped/Failed names no pod but
    may have been written before its pod was gone: generation N's pod is released the same way."""
    phase, generation = reported(d)
    live = phase in LIVE and generation in (d.generation, d.generation + 1)
    released = phase in RELEASED and generation == d.generation
    if d.pod.name or generation <= 0 or not (live or released):
        return d
    pk = object_key(d.target or d.home, d.target_ns, mf.pod_name(d.name, generation))
    # That generation is spent: a resume is the next one, never its name again (the pod released
    # may still be terminating; found by kfold sim, soak seed 20337).
    return delete_pod(ctx, key, d.but(generation=max(d.generation, generation)), pk, "session stopped", by_name=True)


def reported(d: SessionDecision) -> tuple[str, int]:
    """The phase and generation the Session's status reports. A Session that carries kfold's
    finalizer but no status at all, seen by a record that has begun nothing (a fresh or lost
    journal), was being brought up as generation 1, whose status is first written at Ready: its
    pod ``<session>-g1`` may exist (found by kfold sim, seeds 153 and 240: a standby that took over
    a Session suspended, then stopped, before any status left generation 1's pod running)."""
    if d.reported_generation <= 0 and d.generation == 0 and FINALIZER in d.finalizers:
        return "Creating", 1
    return d.reported_phase, d.reported_generation


def _remove_finalizer(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    if FINALIZER not in d.finalizers or not finalizer.may_remove(d.finalizer_step):
        return d
    # Preconditioned on exactly the field it changes (a JSON patch ``test`` of the list entry),
    # not on the resourceVersion, which kfold's own status writes move: a list another writer
    # changed meanwhile fails the test (422), and the Session is read again before a retry.
    at = f"/metadata/finalizers/{d.finalizers.index(FINALIZER)}"
    patch_session(ctx, key, d, [{"op": "test", "path": at, "value": FINALIZER}, {"op": "remove", "path": at}])
    return d.but(finalizer_step=finalizer.after(d.finalizer_step, "remove"))


def patch_session(ctx: Ctx, key: str, d: SessionDecision, patch: dict[str, Any] | list[dict[str, Any]]) -> None:
    ctx.emit(PatchObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
             namespace=d.namespace, name=d.name, patch=patch, safe_to_retry=False)
