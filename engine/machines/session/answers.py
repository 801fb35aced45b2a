"""Answers to the session's own requests (outcomes) and requests left in doubt by a crash, one
reduction per request (the table's rows name which: ``session.inputs``).

Guarantees:
- Each answer moves only the sub-state that asked (the finalizer, a Secret or claim step, an
  endpoint upsert, the teardown), through its table; one for a step no longer waiting is ignored.
- A same-name object that is not this Session's is reported (``NameTaken``), never taken over.
- An effect in doubt is re-observed (Session patch: quorum read) or repeated only where repeating
  is harmless (Secret create, endpoint upsert, teardown reads and uid-fenced deletes, pod reads).
"""
from __future__ import annotations

from typing import Any

from engine.effects.models import DeleteObject, Effect, GetObject
from engine.machines.base import Answered, Ctx, InDoubt
from engine.machines.session import finalizer, objects, owned, retry
from engine.machines.session.decide import spec_of
from engine.machines.session.endpoints import desired_endpoints, ENDPOINT_KINDS, endpoint_outcome, EndpointEffect
from engine.machines.session.model import config, FINALIZER, Moved, SessionConfig, SessionDecision
from engine.machines.session.observed import absorb
from engine.machines.session.pods import pod_read
from engine.machines.session.release import fail
from engine.machines.session.spec import SpecError
from journal.records import Outcome

Folded = SessionDecision | Moved


def session_read(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> Folded:
    return retry.reread(ctx, key, d, ev.rec, absorb)


def pod_read_answer(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> Folded:
    return pod_read(ctx, key, d, ev.rec, ev.effect)   # type: ignore[arg-type]  # a PodRead answers a GetObject


def finalizer_patched(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> Folded:
    rec = ev.rec
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


def owned_answer(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> Folded:
    return objects.answer(ctx, key, d, ev.rec, ev.effect)   # type: ignore[arg-type]


def owned_answer_in_teardown(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> Folded:
    """Stopping or Stopped: a create sent before the stop reopens the teardown of its object; the
    answer to the teardown's own read or fenced delete advances it (``session.owned``)."""
    rec, effect = ev
    if owned.created_behind_teardown(d, rec, effect):   # type: ignore[arg-type]
        return owned.tear_down_late(ctx, key, d, effect.kind)   # type: ignore[attr-defined]
    if _torn_down(d, effect):
        return owned.teardown_answer(ctx, key, d, rec, effect)   # type: ignore[arg-type]
    return owned_answer(ctx, key, d, ev)


def _torn_down(d: SessionDecision, effect: Effect) -> bool:
    """``effect`` is the teardown's read or fenced delete of an object it still deletes."""
    return isinstance(effect, (GetObject, DeleteObject)) and effect.kind in d.teardown


def endpoint_answer(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> Folded:
    rec, effect = ev
    cfg = config(ctx) or SessionConfig()
    spec = spec_of(d, cfg)
    if isinstance(spec, SpecError):
        return d
    if _foreign_endpoint(d, rec, effect, spec, cfg):   # type: ignore[arg-type]
        field = ENDPOINT_KINDS[effect.kind][0]   # type: ignore[attr-defined]
        d = d.but(**{field: getattr(d, field).after("settle", have="", sending="")})
        return fail(ctx, key, d, "NameTaken",
                    owned.conflict(effect.kind, effect.namespace, effect.name, rec.obj, d.name))   # type: ignore[attr-defined]
    return endpoint_outcome(ctx, key, d, rec, effect, spec, cfg)   # type: ignore[arg-type]


def _foreign_endpoint(d: SessionDecision, rec: Outcome, effect: EndpointEffect, spec: Any, cfg: SessionConfig) -> bool:
    """A read of the Service/Ingress kfold wants to route found a same-name object not this
    Session's: it is reported, never replaced (``session.owned``)."""
    return (isinstance(effect, GetObject) and rec.result == "ok" and not owned.owned(rec.obj, d.name)
            and desired_endpoints(d, spec, cfg)[effect.kind] is not None)


# -- in doubt --------------------------------------------------------------------------------------

def ahead_read_in_doubt(ctx: Ctx, key: str, d: SessionDecision, ev: InDoubt) -> Folded:
    return d.but(ahead_read="")   # read again after the grace (``session.arm_ahead``)


def status_write_in_doubt(ctx: Ctx, key: str, d: SessionDecision, ev: InDoubt) -> Folded:
    return d.but(status_written="")   # written again by the decision


def pod_read_in_doubt(ctx: Ctx, key: str, d: SessionDecision, ev: InDoubt) -> Folded:
    ctx.emit(GetObject, key, **ev.effect.model_dump(exclude={"id", "machine", "key", "type"}))
    return d


def session_in_doubt(ctx: Ctx, key: str, d: SessionDecision, ev: InDoubt) -> Folded:
    return retry.reobserve(ctx, key, d)


def owned_in_doubt(ctx: Ctx, key: str, d: SessionDecision, ev: InDoubt) -> Folded:
    return objects.in_doubt(ctx, key, d, ev.effect)   # type: ignore[arg-type]


def owned_in_doubt_in_teardown(ctx: Ctx, key: str, d: SessionDecision, ev: InDoubt) -> Folded:
    """Stopping or Stopped: the teardown's read or fenced delete is sent again (both harmless)."""
    if _torn_down(d, ev.effect):
        owned.repeat(ctx, key, ev.effect)   # type: ignore[arg-type]
        return d
    return owned_in_doubt(ctx, key, d, ev)


def endpoint_in_doubt(ctx: Ctx, key: str, d: SessionDecision, ev: InDoubt) -> Folded:
    field = ENDPOINT_KINDS[ev.effect.kind][0]   # type: ignore[attr-defined]
    u = getattr(d, field)
    return d.but(**{field: u.after("settle", tries=u.tries + 1)})
