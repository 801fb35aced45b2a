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

from engine.effects.models import GetObject, ObjectEffect
from engine.machines.base import Ctx
from engine.machines.session import finalizer, objects, owned, retry
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
        case ("Secret" | "PersistentVolumeClaim"), _:
            return objects.answer(ctx, key, d, rec, effect)
        case ("Service" | "Ingress"), _:
            cfg = config(ctx) or SessionConfig()
            spec = spec_of(d, cfg)
            if isinstance(spec, SpecError):
                return d
            if _foreign_endpoint(d, rec, effect, spec, cfg):
                field = ENDPOINT_KINDS[effect.kind][0]
                d = d.but(**{field: getattr(d, field).after("settle", have="", sending="")})
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
        case ("Secret" | "PersistentVolumeClaim"), _:
            return objects.in_doubt(ctx, key, d, effect)
        case ("Service" | "Ingress"), _:
            field = "service" if effect.kind == "Service" else "ingress"
            u = getattr(d, field)
            return d.but(**{field: u.after("settle", tries=u.tries + 1)})
    return d
