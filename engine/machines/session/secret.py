"""The session Secret (``<session>-env``) of the current spec: what bring-up makes, mends or drops.

The Secret records the spec's env references (annotation ``kfold.dev/env-refs``) and holds no data
(``session.manifests.secret``). The pod never references it.

Guarantees (each generation's bring-up, before its pod is created):
- With env references: created; an existing one that is this Session's (``session.owned.owned``) is
  adopted when it says what the spec implies, else replaced with exactly that (a PUT carrying the
  uid and resourceVersion read: it never lands on another object); someone else's fails the
  Session ``NameTaken`` (``session.answers._secret_read``).
- Without env references: one this record made or adopted is deleted (fenced by uid; read first
  when the uid is unknown, and deleted only when it is this Session's): the Secret never outlives
  the env that made it.
- One an earlier spec made that this record does not know of (rebuilt from the status after a lost
  journal) is found by the orphan Secret sweep's quorum list (``pod.sweep``), at boot with a fresh
  journal and every sweep interval, and told here (``listed``): with a spec without env
  references, a bring-up whose Secret step is done and no teardown, a Secret carrying this
  Session's labels (the list's selector and name) and no ownerReference to another Session is
  deleted, fenced by the uid AND resourceVersion listed (a Secret changed since, e.g. adopted by a
  later spec with env, answers 409 and is kept; the next sweep's list decides again).
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.effects.models import CreateObject, DeleteObject, GetObject, ReplaceObject
from engine.machines.session import manifests as mf
from engine.machines.session import owned, steps
from engine.machines.base import Ctx
from engine.machines.session.model import SessionDecision
from engine.machines.session.spec import Spec
from engine.seams import SecretListed
from journal.records import Outcome

ENV_REFS = "kfold.dev/env-refs"


def step(ctx: Ctx, key: str, d: SessionDecision, spec: Spec) -> SessionDecision:
    """Advance the Secret step ("" -> sent/dropping -> ... -> done); the pod waits for "done"."""
    if not steps.unbegun(d.secret.step):
        return d
    if spec.env:
        ctx.emit(CreateObject, key, manifest=wanted(d, spec), **_ref(d))
        return d.but(secret=d.secret.after("create", made=True))
    if not d.secret.made:   # the Secret records env references only: with none there is nothing to keep
        return d.but(secret=d.secret.after("skip"))
    if d.secret.uid:
        ctx.emit(DeleteObject, key, uid=d.secret.uid, safe_to_retry=True, **_ref(d))
    else:
        ctx.emit(GetObject, key, **_ref(d))
    return d.but(secret=d.secret.after("drop"))


def wanted(d: SessionDecision, spec: Spec) -> dict[str, Any]:
    return mf.secret(d.name, d.target_ns, spec)


def adopt(ctx: Ctx, key: str, d: SessionDecision, obj: Any, spec: Spec) -> SessionDecision:
    """This Session's Secret, met by the create: kept when it says what the spec implies, else
    replaced (fenced by the uid and resourceVersion read)."""
    want = wanted(d, spec)
    if not _stale(obj, want):
        return d.but(secret=d.secret.after("kept", uid=owned.uid_of(obj)))
    md = obj.get("metadata") or {}
    body = {**want, "metadata": {**want["metadata"], "uid": md.get("uid"), "resourceVersion": md.get("resourceVersion")}}
    ctx.emit(ReplaceObject, key, manifest=body, **_ref(d))
    return d.but(secret=d.secret.after("mend", uid=owned.uid_of(obj)))


def _stale(obj: Any, want: dict[str, Any]) -> bool:
    """The Secret says something else than ``want``: other env references, or any data."""
    md = obj.get("metadata") if isinstance(obj, dict) else None
    annotations = (md or {}).get("annotations") or {}
    return (annotations.get(ENV_REFS) != want["metadata"]["annotations"][ENV_REFS]
            or bool(obj.get("data") or obj.get("stringData")) or obj.get("type", "Opaque") != want["type"])


REREAD = ("ok", "conflict", "not_found", "transient")   # other answers to a replace fail the Session


def on_replaced(ctx: Ctx, d: SessionDecision, rec: Outcome) -> SessionDecision:
    """The answer to the mending PUT (``adopt``; ``session.objects`` routes it while it is awaited)."""
    if rec.result == "transient" and ctx.retry(backoff.OWNED):
        return d   # the same replace, as the next attempt of its own loop
    if rec.result == "ok":
        return d.but(secret=d.secret.after("replaced", uid=owned.uid_of(rec.obj) or d.secret.uid))
    # changed or gone since the read, or in doubt: create again (AlreadyExists reads and decides again)
    return d.but(secret=d.secret.after("again"))


def on_dropping(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: GetObject | DeleteObject) -> SessionDecision:
    """The answer to the read or the fenced delete of a Secret the current spec no longer wants."""
    if rec.result == "transient" and ctx.retry(backoff.OWNED):
        return d   # the same read or fenced delete, as the next attempt of its own loop
    if effect.type == "get" and rec.result == "ok" and owned.owned(rec.obj, d.name) and owned.uid_of(rec.obj):
        ctx.emit(DeleteObject, key, uid=owned.uid_of(rec.obj), safe_to_retry=True, **_ref(d))
        return d
    if effect.type == "delete" and rec.result == "conflict":   # replaced since: read and decide again
        ctx.emit(GetObject, key, **_ref(d))
        return d
    if rec.result not in ("ok", "not_found"):
        ctx.log(key, f"session {d.name}: cannot drop Secret {effect.name}: {rec.result} {rec.message}".strip(),
                level="warning")
        return d.but(secret=d.secret.after("dropped"))   # kept known (``secret.made``): the next bring-up or the stop tries again
    if effect.type == "get" and rec.result == "ok":   # not this Session's: left untouched
        ctx.log(key, f"session {d.name}: {owned.conflict('Secret', effect.namespace, effect.name, rec.obj, d.name)}",
                level="warning")
    return d.but(secret=d.secret.after("dropped", made=False, uid=""))


def listed(ctx: Ctx, key: str, d: SessionDecision, msg: SecretListed, spec: Any) -> SessionDecision:
    """The sweep listed this Session's env Secret: delete it when the spec held has no env
    references (the answer decides nothing: a 409 or a delete in doubt waits for the next list)."""
    if (not isinstance(spec, Spec) or spec.env or not steps.done(d.secret.step) or d.deleting
            or d.phase in ("Stopping", "Stopped") or d.spec_raw.get("stopped") is True
            or (msg.namespace, msg.name) != (d.target_ns, mf.secret_name(d.name))
            or any(u != d.uid for u in msg.session_owners)):
        return d
    ctx.log(key, f"session {d.name}: Secret {msg.namespace}/{msg.name} was made for env references its "
                 "spec no longer has (found by the Secret sweep's list); deleting it", level="info")
    ctx.emit(DeleteObject, key, uid=msg.uid, rv=msg.rv, safe_to_retry=True, **_ref(d))
    return d.but(secret=d.secret.but(made=False, uid=""))


def _ref(d: SessionDecision) -> dict[str, str]:
    return {"cluster": d.target, "tenant": d.target_tenant, "api_version": "v1", "kind": "Secret",
            "namespace": d.target_ns, "name": mf.secret_name(d.name)}
