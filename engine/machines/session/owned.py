"""Own before touching (DESIGN invariant 10): a Session's Service, Ingress and Secret are adopted,
replaced or deleted only when they carry this Session's labels, and deleted only fenced by uid.

Ownership is the pod machine's rule for pods, applied to every kind a Session makes: the object
carries ``app.kubernetes.io/managed-by: kfold`` and ``kfold.dev/session: <session>``. A same-name
object without them is someone else's: it is reported (kind/namespace/name and the labels found)
and never modified or deleted.

What goes with the pod: the Service and Ingress carry an ownerReference to the pod (by uid), so
the garbage collector deletes them once the pod is gone (fenced by uid there: it deletes what names
the pod uid that no longer exists). A stop sends no request for them: a read and a delete of each
would only race the collector (and meet its 404).

Teardown of the Secret (made only when the Session has env references; ``secret.made``, or a spec
with env after a lost journal): with the uid its create's answer (or the read that adopted it)
gave, straight to the ``DeleteObject`` fenced by that uid (a ``conflict`` reads, as below);
without one, quorum ``GetObject`` -> absent: done | not ours: left untouched (logged), done | ours:
``DeleteObject`` with a uid precondition -> ``ok``/``not_found``: done | ``conflict`` (the uid
precondition failed: it was replaced since the read) -> read again and decide again. Both requests
are safe to repeat (a read; a delete fenced by uid): a transient answer sends the same request
again as the next attempt of its own loop (``Ctx.retry``, ``engine.backoff.OWNED``), a crash in
flight sends it again.
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.effects.models import DeleteObject, GetObject, ObjectEffect
from engine.labels import MANAGED_BY, MANAGER, SESSION_LABEL
from engine.machines.session.manifests import claim_name, secret_name
from engine.machines.session.model import Moved, SessionDecision, moved
from engine.machines.base import Ctx
from journal.records import Outcome

# Service and Ingress go with the pod (ownerReference); the workspace claim outlives pods.
TEARDOWN_KINDS = (("Secret", "v1"), ("PersistentVolumeClaim", "v1"))
_API = {"Service": "v1", "Ingress": "networking.k8s.io/v1", "Secret": "v1", "PersistentVolumeClaim": "v1"}


def _labels(obj: Any) -> dict[str, Any]:
    md = obj.get("metadata") if isinstance(obj, dict) else None
    labels = md.get("labels") if isinstance(md, dict) else None
    return labels if isinstance(labels, dict) else {}


def uid_of(obj: Any) -> str:
    md = obj.get("metadata") if isinstance(obj, dict) else None
    return str(md.get("uid") or "") if isinstance(md, dict) else ""


def owned(obj: Any, session: str) -> bool:
    labels = _labels(obj)
    return labels.get(MANAGED_BY) == MANAGER and labels.get(SESSION_LABEL) == session


def conflict(kind: str, namespace: str, name: str, obj: Any, session: str) -> str:
    """The failure message for a same-name object that is not this Session's."""
    labels = _labels(obj)
    return (f"{kind} {namespace}/{name} already exists and is not Session {session}'s "
            f"(labels: managed-by={labels.get(MANAGED_BY) or '-'}, session={labels.get(SESSION_LABEL) or '-'}); "
            f"kfold leaves it untouched. Rename or remove that {kind}, or give the Session another name")


def object_name(d: SessionDecision, kind: str) -> str:
    if kind == "PersistentVolumeClaim":
        return claim_name(d.name)
    return secret_name(d.name) if kind == "Secret" else d.name


def _ref(d: SessionDecision, kind: str) -> dict[str, str]:
    return {"cluster": d.target or d.home, "tenant": d.target_tenant, "api_version": _API[kind], "kind": kind,
            "namespace": d.target_ns, "name": object_name(d, kind)}


# -- teardown ---------------------------------------------------------------------------------------

def may_have_secret(d: SessionDecision) -> bool:
    """A Secret create was sent for this Session, or its spec has env references (a record resumed
    from a lost journal does not know whether one was)."""
    return d.secret.made or bool(d.spec_raw.get("env"))


def start_teardown(ctx: Ctx, key: str, d: SessionDecision, claimed: bool = False) -> SessionDecision:
    """``claimed``: the config gives Sessions a workspace claim, so one may exist."""
    wanted = {"Secret": may_have_secret(d), "PersistentVolumeClaim": claimed or d.claim.made}
    kinds = tuple(k for k, _ in TEARDOWN_KINDS if wanted[k])
    for kind in kinds:
        if kind == "Secret" and d.secret.uid:   # known from its create: fenced by it, no read first
            ctx.emit(DeleteObject, key, uid=d.secret.uid, safe_to_retry=True, **_ref(d, kind))
        else:
            ctx.emit(GetObject, key, **_ref(d, kind))
    return d.but(teardown=kinds)


def created_behind_teardown(d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> bool:
    """A Secret create sent before the stop answered after the teardown had read it (the read, a
    quorum GET, is not queued behind the create): the Secret may exist now, after its read said
    it did not. (A late Service or Ingress names the pod as its owner: it goes with the pod.)"""
    return (d.phase in ("Stopping", "Stopped") and effect.type == "create" and effect.kind == "Secret"
            and effect.kind not in d.teardown and rec.result in ("ok", "already_exists", "transient"))


def tear_down_late(ctx: Ctx, key: str, d: SessionDecision, kind: str) -> SessionDecision | Moved:
    """Read ``kind`` again and delete it (if ours, fenced by uid) as the teardown does."""
    ctx.emit(GetObject, key, **_ref(d, kind))
    d = d.but(teardown=d.teardown + (kind,))
    return moved(d, "stop") if d.phase == "Stopped" else d  # the finalizer waits for this one too


def teardown_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: GetObject | DeleteObject) -> SessionDecision:
    """Advance the teardown of ``effect.kind`` on the answer to its read or its fenced delete."""
    if effect.kind not in d.teardown:
        return d
    if rec.result == "transient" and ctx.retry(backoff.OWNED):
        return d   # the same read or fenced delete, as the next attempt of its own loop
    rest = tuple(k for k in d.teardown if k != effect.kind)
    if effect.type == "get" and rec.result == "ok":
        return _decide_delete(ctx, key, d, effect, rec.obj, rest)
    if effect.type == "delete" and rec.result == "conflict":
        ctx.emit(GetObject, key, **_ref(d, effect.kind))
        return d
    if rec.result in ("ok", "not_found"):
        if effect.kind == "Secret":
            return d.but(teardown=rest, secret=d.secret.but(made=False, uid=""))
        if effect.kind == "PersistentVolumeClaim":
            return d.but(teardown=rest, claim=d.claim.but(made=False, uid=""))
        return d.but(teardown=rest)
    verb = "read" if effect.type == "get" else "delete"
    return d.but(teardown=rest, blocked=f"cannot {verb} {effect.kind} {effect.name}: {rec.result} {rec.message}".strip())


def _decide_delete(ctx: Ctx, key: str, d: SessionDecision, effect: GetObject, obj: Any,
                   rest: tuple[str, ...]) -> SessionDecision:
    if not owned(obj, d.name) or not uid_of(obj):
        ctx.log(key, f"stop: {conflict(effect.kind, effect.namespace, effect.name, obj, d.name)}", level="warning")
        return d.but(teardown=rest)
    ctx.emit(DeleteObject, key, uid=uid_of(obj), safe_to_retry=True, **_ref(d, effect.kind))
    return d


def repeat(ctx: Ctx, key: str, effect: GetObject | DeleteObject) -> None:
    """Send the same read, or the same uid-fenced delete, again after a crash left it in doubt (both
    harmless to repeat)."""
    ctx.emit(type(effect), key, **effect.model_dump(exclude={"id", "machine", "key", "type"}))
