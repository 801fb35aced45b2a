"""The objects the bring-up makes and the Session owns — the env Secret (``session.secret``) and
the workspace claim — each one ``Owned`` record on the decision (``secret``, ``claim``), moved
through ``session.steps`` by one set of answers to their create, read and replace.

Expected flow, per object: ``CreateObject`` -> ``ok``: done | ``already_exists``: a quorum
``GetObject`` -> this Session's (``session.owned``): adopted (``adopt``: a Secret is mended to what
the spec implies, ``session.secret.adopt``) | someone else's: the Session fails ``NameTaken`` |
absent since: created again. A transient create, or a read that failed, is created again on the
one backoff (``engine.backoff.SESSION_CREATE``, on the target's server time; ``later``), the first
failure of a run reported once (``session.retry``). Any other answer to the create fails the
Session (``SecretFailed``, ``WorkspaceFailed``).

Guarantees:
- An answer moves its object only when it is the answer its step waits for
  (``steps.OBJECT_ANSWERS``); any other is one the step no longer waits for, and changes nothing.
- A request left in doubt by a crash begins the step again (a create is safe to repeat: the next
  one meets AlreadyExists and reads); a Secret being dropped repeats its read or fenced delete.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from engine import backoff
from engine.effects.models import GetObject, ObjectEffect
from engine.machines.base import Ctx, describe
from engine.machines.session import owned, retry, secret, steps
from engine.machines.session.decide import spec_of
from engine.machines.session.model import Moved, Owned, SessionConfig, SessionDecision, config
from engine.machines.session.release import fail
from engine.machines.session.spec import SpecError
from journal.records import Outcome

Answer = SessionDecision | Moved


class Kind(NamedTuple):
    field: str       # the decision's field holding its ``Owned``
    timer: str       # the timer its create is repeated on (``session.retry``)
    retrying: str    # the Event's reason when a run of failures begins
    failed: str      # the failure's reason when it cannot be made
    fenced: bool     # its uid is kept: the teardown deletes it fenced by it, with no read first (``session.owned``)


KINDS = {"Secret": Kind("secret", retry.SECRET, "SecretRetrying", "SecretFailed", True),
         "PersistentVolumeClaim": Kind("claim", retry.CLAIM, "ClaimRetrying", "WorkspaceFailed", False)}
TIMERS = {k.timer: kind for kind, k in KINDS.items()}


def of(d: SessionDecision, kind: str) -> Owned:
    return getattr(d, KINDS[kind].field)


def put(d: SessionDecision, kind: str, o: Owned) -> SessionDecision:
    return d.but(**{KINDS[kind].field: o})


def after(d: SessionDecision, kind: str, event: str, **changes: object) -> SessionDecision:
    """``d`` with ``kind``'s object moved by ``event`` (``steps.object_after``)."""
    return put(d, kind, of(d, kind).after(event, **changes))


def answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> Answer:
    """The answer to a request of ``effect.kind``'s object, if its step waits for it."""
    o = of(d, effect.kind)
    handler = _ANSWERS.get(steps.OBJECT_ANSWERS.get((o.step, effect.type), ""))
    return d if handler is None else handler(ctx, key, d, rec, effect)


def in_doubt(ctx: Ctx, key: str, d: SessionDecision, effect: ObjectEffect) -> SessionDecision:
    o = of(d, effect.kind)
    if steps.OBJECT_ANSWERS.get((o.step, effect.type)) == "dropped":
        owned.repeat(ctx, key, effect)   # a read, or a delete fenced by uid: harmless to repeat
        return d
    if effect.type in ("create", "get", "replace") and o.step in steps.IN_FLIGHT:
        return after(d, effect.kind, "again")
    return d


def _created(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> Answer:
    kind = effect.kind
    if rec.result == "ok":
        return after(d, kind, "made", uid=_uid(kind, rec.obj), tries=0)
    if rec.result == "already_exists":  # ours (an earlier attempt, a lost journal) or someone else's: read
        ctx.emit(GetObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1", kind=kind,
                 namespace=d.target_ns, name=owned.object_name(d, kind))
        return after(d, kind, "exists")
    if rec.result == "transient":   # a create is safe to repeat: AlreadyExists is fine
        return later(ctx, key, d, rec, kind)
    return fail(ctx, key, d, KINDS[kind].failed,
                f"cannot create {kind} {owned.object_name(d, kind)}: {rec.result} {rec.message}".strip())


def _read(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> Answer:
    """The create met AlreadyExists: adopt the object only when it is this Session's."""
    kind = effect.kind
    if rec.result == "ok" and owned.owned(rec.obj, d.name):
        return _ADOPT[kind](ctx, key, put(d, kind, of(d, kind).but(tries=0)), rec)
    if rec.result == "ok":
        return fail(ctx, key, after(d, kind, "again"), "NameTaken",
                    owned.conflict(kind, effect.namespace, effect.name, rec.obj, d.name))
    if rec.result == "not_found":
        return after(d, kind, "again")  # absent since: create again (AlreadyExists reads again)
    if rec.result == "transient" and ctx.retry(backoff.SESSION_CREATE):
        return d   # the same read, as the next attempt of its own loop
    return later(ctx, key, d, rec, kind)


def _adopt_secret(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> Answer:
    """Mended to what the current spec implies (``session.secret.adopt``); an invalid spec fails
    before its pod, so the Secret is kept as it is."""
    spec = spec_of(d, config(ctx) or SessionConfig())
    if isinstance(spec, SpecError):
        return after(d, "Secret", "kept", uid=owned.uid_of(rec.obj))
    return secret.adopt(ctx, key, d, rec.obj, spec)


def _adopt_claim(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> Answer:
    """The workspace of this Session's earlier generations: kept as it is."""
    return after(d, "PersistentVolumeClaim", "kept")


def _uid(kind: str, obj: object) -> str:
    return owned.uid_of(obj) if KINDS[kind].fenced else ""


def _replaced(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> Answer:
    """The fenced PUT that mends this Session's Secret (``session.secret.adopt``)."""
    if rec.result not in secret.REREAD:
        return fail(ctx, key, after(d, effect.kind, "again"), "SecretFailed",
                    f"cannot replace Secret {effect.name}: {rec.result} {rec.message}".strip())
    return secret.on_replaced(ctx, d, rec)


def _dropped(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> Answer:
    return secret.on_dropping(ctx, key, d, rec, effect)


def later(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, kind: str) -> Answer:
    """The create, or its read after AlreadyExists, failed: create it again after the backoff."""
    k = KINDS[kind]
    what = f"{kind} {d.target_ns}/{owned.object_name(d, kind)}"
    tries = of(d, kind).tries + 1
    if tries == 1:
        retry.report(ctx, key, d, rec, k.retrying, f"could not create {what}: {describe(rec)}; tried again on a "
                     f"backoff (at most {backoff.CAP_MS // 1000} s apart)")
    d = after(d, kind, "wait", tries=tries)
    when = backoff.next_try(backoff.SESSION_CREATE, tries, ctx.now_on(d.target), rec.retry_after_ms)
    if isinstance(when, int):
        ctx.set_timer(key, k.timer, when, d.target)
        return d
    if when == backoff.AT_ONCE:
        return after(d, kind, "again")
    return fail(ctx, key, after(d, kind, "again"), k.failed,
                f"cannot create {what} after {tries} attempts and there is no server time to back off on: "
                f"{describe(rec)}")


def retry_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> SessionDecision:
    """The backoff of a failed create (``later``) is over: the step begins again."""
    kind = TIMERS[name]
    return after(d, kind, "again") if steps.backing_off(of(d, kind).step) else d


_ANSWERS: dict[str, Callable[[Ctx, str, SessionDecision, Outcome, ObjectEffect], Answer]] = {
    "created": _created, "read": _read, "replaced": _replaced, "dropped": _dropped}
_ADOPT: dict[str, Callable[[Ctx, str, SessionDecision, Outcome], Answer]] = {
    "Secret": _adopt_secret, "PersistentVolumeClaim": _adopt_claim}
