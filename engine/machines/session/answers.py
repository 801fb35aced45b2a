"""Answers to the session's own requests (outcomes) and requests left in doubt by a crash.

Guarantees:
- Each answer moves only the sub-state that asked (the finalizer, a Secret or claim step, an
  endpoint upsert, the teardown), through its table; one for a step no longer waiting is ignored.
- A same-name object that is not this Session's is reported (``NameTaken``), never taken over.
- An effect in doubt is re-observed (Session patch: quorum read) or repeated only where repeating
  is harmless (Secret create, endpoint upsert, teardown reads and uid-fenced deletes, pod reads).
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.effects.models import GetObject, ObjectEffect
from engine.machines.base import Ctx
from engine.machines.session import finalizer, owned, retry, secret, steps
from engine.machines.session.decide import spec_of
from engine.machines.session.endpoints import desired_endpoints, ENDPOINT_KINDS, endpoint_outcome, EndpointEffect
from engine.machines.session.model import config, FINALIZER, Moved, SessionConfig, SessionDecision
from engine.machines.session.observed import absorb
from engine.machines.session.pods import pod_read
from engine.machines.session.release import fail
from engine.machines.session.spec import SpecError
from journal.records import Outcome


def outcome(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> SessionDecision | Moved:
    if owned.created_behind_teardown(d, rec, effect):
        return owned.tear_down_late(ctx, key, d, effect.kind)
    match effect.kind, effect.type:
        case "Pod", "get":
            return pod_read(ctx, key, d, rec, effect)
        case "Session", "get":
            return retry.reread(ctx, key, d, rec, absorb)
        case "Session", "patch":
            return _finalizer_answer(ctx, key, d, rec)
        case _, ("delete" | "get") if d.phase in ("Stopping", "Stopped") and effect.kind in d.teardown:
            return owned.teardown_answer(ctx, key, d, rec, effect)
        case "Secret", ("get" | "delete") if d.secret_step == "dropping":
            return secret.on_dropping(ctx, key, d, rec, effect)
        case "Secret", "create":
            return _secret_answer(ctx, key, d, rec)
        case "Secret", "get":
            return _secret_read(ctx, key, d, rec, effect)
        case "PersistentVolumeClaim", "create":
            return _claim_answer(ctx, key, d, rec)
        case "PersistentVolumeClaim", "get":
            return _claim_read(ctx, key, d, rec, effect)
        case "Secret", "replace" if d.secret_step == "replacing" and rec.result not in secret.REREAD:
            return fail(ctx, key, d.but(secret_step=steps.object_after(d.secret_step, "again")), "SecretFailed",
                        f"cannot replace Secret {effect.name}: {rec.result} {rec.message}".strip())
        case "Secret", "replace":
            return secret.on_replaced(ctx, d, rec)
        case ("Service" | "Ingress"), _:
            cfg = config(ctx) or SessionConfig()
            spec = spec_of(d, cfg)
            if isinstance(spec, SpecError):
                return d
            if _foreign_endpoint(d, rec, effect, spec, cfg):
                field = ENDPOINT_KINDS[effect.kind][0]
                d = d.but(**{field: getattr(d, field).but(stage="idle", have="", sending="")})
                return fail(ctx, key, d, "NameTaken",
                            owned.conflict(effect.kind, effect.namespace, effect.name, rec.obj, d.name))
            return endpoint_outcome(ctx, key, d, rec, effect, spec, cfg)
    return d


def _finalizer_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> SessionDecision | Moved:
    if rec.result == "ok":
        d = absorb(d, d.home, rec.obj) if rec.obj else d
        return d.but(finalizer_step=finalizer.after(d.finalizer_step, "added"))
    if rec.result == "not_found":
        return d.but(gone=True)
    if rec.result in ("conflict", "transient") or (rec.result == "invalid" and finalizer.released(d.finalizer_step)):
        return retry.reobserve(ctx, key, d)   # "invalid": the removal's test op found the list changed
    if finalizer.released(d.finalizer_step):
        return d.but(blocked=f"cannot remove finalizer {FINALIZER}: {rec.result} {rec.message}".strip())
    return fail(ctx, key, d, "FinalizerFailed", f"cannot add finalizer {FINALIZER}: {rec.result} {rec.message}".strip())


def _foreign_endpoint(d: SessionDecision, rec: Outcome, effect: EndpointEffect, spec: Any, cfg: SessionConfig) -> bool:
    """A read of the Service/Ingress kfold wants to route found a same-name object not this
    Session's: it is reported, never replaced (``session.owned``)."""
    return (effect.type == "get" and rec.result == "ok" and not owned.owned(rec.obj, d.name)
            and desired_endpoints(d, spec, cfg)[effect.kind] is not None)


def _secret_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> SessionDecision | Moved:
    if d.secret_step != "sent":
        return d
    if rec.result == "ok":
        return d.but(secret_step=steps.object_after(d.secret_step, "made"), secret_uid=owned.uid_of(rec.obj), secret_tries=0)
    if rec.result == "already_exists":  # ours (an earlier attempt, a lost journal) or someone else's: read
        ctx.emit(GetObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1", kind="Secret",
                 namespace=d.target_ns, name=owned.object_name(d, "Secret"))
        return d.but(secret_step=steps.object_after(d.secret_step, "exists"))
    if rec.result == "transient":
        return retry.secret_later(ctx, key, d, rec)  # a create is safe to repeat: AlreadyExists is fine
    return fail(ctx, key, d, "SecretFailed", f"cannot create Secret {d.name}-env: {rec.result} {rec.message}".strip())


def _secret_read(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: GetObject) -> SessionDecision | Moved:
    """The Secret's create met AlreadyExists: adopt it only when it is this Session's, mended to
    what the current spec implies (``session.secret.adopt``)."""
    if d.secret_step != "reading":
        return d
    spec = spec_of(d, config(ctx) or SessionConfig())
    if rec.result == "ok" and owned.owned(rec.obj, d.name) and not isinstance(spec, SpecError):
        return secret.adopt(ctx, key, d.but(secret_tries=0), rec.obj, spec)
    if rec.result == "ok" and owned.owned(rec.obj, d.name):   # an invalid spec fails before its pod
        return d.but(secret_step=steps.object_after(d.secret_step, "kept"), secret_uid=owned.uid_of(rec.obj), secret_tries=0)
    if rec.result == "ok":
        return fail(ctx, key, d.but(secret_step=steps.object_after(d.secret_step, "again")), "NameTaken",
                    owned.conflict("Secret", effect.namespace, effect.name, rec.obj, d.name))
    if rec.result == "not_found":
        return d.but(secret_step=steps.object_after(d.secret_step, "again"))  # absent since: create again (AlreadyExists reads again)
    if rec.result == "transient" and ctx.retry(backoff.SESSION_CREATE):
        return d   # the same read, as the next attempt of its own loop
    return retry.secret_later(ctx, key, d, rec)


def _claim_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> SessionDecision | Moved:
    """The workspace claim's create: made, or met AlreadyExists (an earlier generation's: read it)."""
    if d.claim_step != "sent":
        return d
    if rec.result == "ok":
        return d.but(claim_step=steps.object_after(d.claim_step, "made"), claim_tries=0)
    if rec.result == "already_exists":
        ctx.emit(GetObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1",
                 kind="PersistentVolumeClaim", namespace=d.target_ns, name=owned.object_name(d, "PersistentVolumeClaim"))
        return d.but(claim_step=steps.object_after(d.claim_step, "exists"))
    if rec.result == "transient":   # a create is safe to repeat
        return retry.claim_later(ctx, key, d, rec, owned.object_name(d, "PersistentVolumeClaim"))
    return fail(ctx, key, d, "WorkspaceFailed",
                f"cannot create PersistentVolumeClaim {owned.object_name(d, 'PersistentVolumeClaim')}: "
                f"{rec.result} {rec.message}".strip())


def _claim_read(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: GetObject) -> SessionDecision | Moved:
    """Adopt the existing claim only when it is this Session's (the workspace of its earlier generations)."""
    if d.claim_step != "reading":
        return d
    if rec.result == "ok" and owned.owned(rec.obj, d.name):
        return d.but(claim_step=steps.object_after(d.claim_step, "kept"), claim_tries=0)
    if rec.result == "ok":
        return fail(ctx, key, d.but(claim_step=steps.object_after(d.claim_step, "again")), "NameTaken",
                    owned.conflict("PersistentVolumeClaim", effect.namespace, effect.name, rec.obj, d.name))
    if rec.result == "not_found":
        return d.but(claim_step=steps.object_after(d.claim_step, "again"))   # absent since: create again (AlreadyExists reads again)
    if rec.result == "transient" and ctx.retry(backoff.SESSION_CREATE):
        return d   # the same read, as the next attempt of its own loop
    return retry.claim_later(ctx, key, d, rec, effect.name)


def in_doubt(ctx: Ctx, key: str, d: SessionDecision, effect: ObjectEffect) -> SessionDecision | Moved:
    if effect.id == d.ahead_read:
        return d.but(ahead_read="")   # read again after the grace (``session.arm_ahead``)
    match effect.kind, effect.type:
        case "Session", "patch" if effect.subresource == "status":
            return d.but(status_written="")
        case "Pod", "get":
            ctx.emit(GetObject, key, **effect.model_dump(exclude={"id", "machine", "key", "type"}))
            return d
        case "Session", _:
            return retry.reobserve(ctx, key, d)
        case _, ("delete" | "get") if d.phase in ("Stopping", "Stopped") and effect.kind in d.teardown:
            owned.repeat(ctx, key, effect)
            return d
        case "Secret", ("get" | "delete") if d.secret_step == "dropping":
            owned.repeat(ctx, key, effect)   # a read, or a delete fenced by uid: harmless to repeat
            return d
        case "Secret", ("create" | "get" | "replace"):
            return d.but(secret_step=steps.object_after(d.secret_step, "again")) if d.secret_step in ("sent", "reading", "replacing") else d
        case "PersistentVolumeClaim", ("create" | "get"):
            return d.but(claim_step=steps.object_after(d.claim_step, "again")) if d.claim_step in ("sent", "reading") else d
        case ("Service" | "Ingress"), _:
            field = "service" if effect.kind == "Service" else "ingress"
            u = getattr(d, field)
            return d.but(**{field: u.but(stage="idle", tries=u.tries + 1)})
    return d
