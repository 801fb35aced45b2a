"""Orphan Secret sweep (command ``pod.sweep_secrets``), at key ``<cluster>/<namespace>/#sweep``.

Expected flow: quorum list of Secrets labelled managed-by kfold -> its outcome's ``at`` (the
executor sets it from THAT response's Date header) is the clock -> candidates = Secrets with a
session label older than the grace -> quorum list of kfold Pods, taken after the Secret list ->
a candidate whose session has no pod in its namespace is deleted with a uid precondition.

Guarantees:
- The local clock is never used. ``at`` None (missing or malformed Date) skips the sweep with a
  logged reason; a Secret whose creationTimestamp cannot be read is kept.
- A Secret is deleted only when its age is strictly greater than the grace.
- Secrets without a ``kfold.dev/session`` label (e.g. repository credentials) are never swept.
- A pod that still exists, even terminating, keeps its session's Secrets.
- A failed or in-doubt list ends the sweep with a log; the next sweep starts afresh. One sweep
  per key at a time.
- Each listed ``<session>-env`` Secret of a Session the fold tracks there is told to that Session
  (``secret_listed``, with the uid and resourceVersion listed): a record rebuilt after a lost
  journal does not know a Secret an earlier spec made, and its spec decides (``session.secret.listed``).
  The list is the only request: nothing is read per Session.
"""
from __future__ import annotations

from typing import Any

from engine.effects.models import DeleteObject, ListObjects
from engine.labels import MANAGED_SELECTOR, SESSION_API_VERSION
from engine.machines.base import Answered, Ctx, InDoubt, Ordered, Reported, describe, object_key
from engine.machines.pod.records import SESSION, SWEEP_NAME, SecretRef, SweepOp, labels_of, secret_ref
from engine.seams import SecretListed, SweepSecrets
from journal.records import Command, Outcome


def where(rec: Command, cmd: SweepSecrets) -> tuple[str, str]:
    """The cluster and namespace swept: the command's own, else the record's."""
    given = cmd.model_fields_set
    return (cmd.cluster if "cluster" in given else rec.cluster,
            cmd.namespace if "namespace" in given else rec.namespace)


def key_of(rec: Command, cmd: SweepSecrets) -> str:
    return object_key(*where(rec, cmd), SWEEP_NAME)


def start(ctx: Ctx, key: str, e: None, ev: Ordered) -> None:
    """No sweep runs here: the Secret list is sent."""
    rec, cmd = ev
    cluster, namespace = where(rec, cmd)
    grace_ms = cmd.grace_seconds * 1000
    eff = _list(ctx, key, cluster, namespace, "Secret")
    ctx.put(key, SweepOp(awaiting=eff.id, grace_ms=grace_ms))


def running(ctx: Ctx, key: str, e: SweepOp, ev: Ordered) -> None:
    ctx.log(key, "orphan Secret sweep skipped: the previous sweep is still running", cluster=where(*ev)[0])


def _list(ctx: Ctx, key: str, cluster: str, namespace: str, kind: str) -> ListObjects:
    return ctx.emit(ListObjects, key, cluster=cluster, api_version="v1", kind=kind,
                    namespace=namespace, label_selector=MANAGED_SELECTOR)


def _failed(ctx: Ctx, key: str, rec: Outcome, effect: ListObjects) -> bool:
    """A failed list ends the sweep (True); a listed one is the caller's to decide on (False)."""
    if rec.result == "ok":
        return False
    _end(ctx, key, f"orphan Secret sweep skipped: listing {effect.kind}s failed: {describe(rec)}", "warning")
    return True


def secrets_listed(ctx: Ctx, key: str, e: SweepOp, ev: Answered) -> None:
    """The Secret list's answer (sweep phase ``secrets``)."""
    rec, effect = ev
    if _failed(ctx, key, rec, effect):
        return
    _tell_sessions(ctx, effect.cluster, rec.items or ())
    if rec.at is None:
        _end(ctx, key, "orphan Secret sweep skipped: the Secret list response carried no valid Date "
                       "header, so Secret ages cannot be measured on the server clock", "warning")
        return
    old = tuple(s for s in map(secret_ref, rec.items or ()) if _older_than_grace(s, rec.at, e.grace_ms))
    if not old:
        _end(ctx, key, "orphan Secret sweep: no session Secret is older than the grace", "debug")
        return
    eff = _list(ctx, key, effect.cluster, effect.namespace, "Pod")
    ctx.put(key, e.but(phase="pods", awaiting=eff.id, at=rec.at, secrets=old))


def _tell_sessions(ctx: Ctx, cluster: str, items: Any) -> None:
    """Each tracked Session's env Secret, as listed, to its Session (the session machine's answer)."""
    for obj in items:
        s = secret_ref(obj)
        if not s.session or s.name != f"{s.session}-env" or not s.uid:
            continue
        owner = ctx.ask("session", "owner", cluster, s.namespace, s.session)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if owner is None or not rv:
            continue
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        sessions = tuple(str(r.get("uid") or "") for r in refs if isinstance(r, dict)
                         and r.get("kind") == "Session" and r.get("apiVersion") == SESSION_API_VERSION)
        ctx.tell(owner, SecretListed(namespace=s.namespace, name=s.name, uid=s.uid, rv=rv, session_owners=sessions))


def _older_than_grace(s: SecretRef, now: int, grace_ms: int) -> bool:
    return bool(s.session) and s.created_ms is not None and now - s.created_ms > grace_ms


def pods_listed(ctx: Ctx, key: str, e: SweepOp, ev: Answered) -> None:
    """The Pod list's answer (sweep phase ``pods``): a candidate whose session has no pod goes."""
    rec = ev.rec
    if _failed(ctx, key, rec, ev.effect):
        return
    live = {(_namespace_of(p), labels_of(p).get(SESSION, "")) for p in rec.items or ()}
    orphans = [s for s in e.secrets if (s.namespace, s.session) not in live]
    cluster = key.split("/", 1)[0]
    for s in orphans:
        ctx.emit(DeleteObject, key, cluster=cluster, api_version="v1", kind="Secret",
                 namespace=s.namespace, name=s.name, uid=s.uid)
    _end(ctx, key, f"orphan Secret sweep: {len(orphans)} of {len(e.secrets)} old session Secrets "
                   "have no pod and are deleted", "info", deleted=[f"{s.namespace}/{s.name}" for s in orphans])


def _namespace_of(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("namespace", "")


def secret_deleted(ctx: Ctx, key: str, e: SweepOp | None, ev: Reported) -> None:
    """A Secret delete's answer (``rec``; None: in doubt), only reported: nothing waits for it."""
    rec, effect = ev
    if rec is None:
        ctx.log(key, f"orphan Secret delete {effect.namespace}/{effect.name} in doubt; "
                     "the next sweep decides again", level="warning")
    elif rec.result not in ("ok", "not_found"):
        ctx.log(key, f"orphan Secret {effect.namespace}/{effect.name} was not deleted: {describe(rec)}",
                level="warning")


def in_doubt(ctx: Ctx, key: str, e: SweepOp, ev: InDoubt) -> None:
    """A list in doubt ends the sweep (a Secret delete in doubt is left to the next sweep:
    ``secret_deleted``)."""
    _end(ctx, key, "orphan Secret sweep abandoned: a list was in doubt after a restart", "warning")


def _end(ctx: Ctx, key: str, message: str, level: str, **fields: Any) -> None:
    ctx.log(key, message, level=level, **fields)
    ctx.drop(key)
