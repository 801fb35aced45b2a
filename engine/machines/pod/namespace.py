"""Ensure a session namespace exists, at key ``<cluster>/<namespace>/``.

Expected flow: ``ensure_namespace`` -> ``EnsureNamespace`` (the executor GETs, creates when
absent, takes AlreadyExists as success) -> ``namespace_ready`` or ``namespace_failed``.

Guarantees:
- Forbidden on the create fails with a reason naming the exact command an administrator runs
  (``kubectl create namespace <ns>``). No other namespace is ever tried instead. A failed check
  (the GET, ``Outcome.step == "check"``; e.g. a 403 for a namespace that exists but may not be
  read) fails with "could not check whether namespace <ns> exists: <cause>", any other refusal of
  the create with "could not create namespace <ns>: <cause>" (seed 001's words).
- The effect is idempotent, so a transient failure repeats it as the next attempt of its own loop
  (``Ctx.retry``: on server time when there is one, within ``engine.backoff.NAMESPACE``, which counts
  the executor's attempts too), and a crash in flight sends it again.
- A second request while one runs only adds its reply target.
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.effects.models import EnsureNamespace
from engine.labels import MANAGED_LABELS
from engine.machines.base import Answered, Ctx, InDoubt, describe, split_key
from engine.machines.pod.records import NamespaceOp, Reply, reply_list
from engine.seams import EnsureNamespaceRequest, NamespaceFailed, NamespaceReady
from journal.records import Outcome



def ensure(ctx: Ctx, key: str, e: None, msg: EnsureNamespaceRequest) -> None:
    """Nothing is being ensured here: the ensure is sent."""
    _send(ctx, key, NamespaceOp(replies=(Reply(to=msg.reply_to, key=msg.reply_key),)))


def join(ctx: Ctx, key: str, e: NamespaceOp, msg: EnsureNamespaceRequest) -> None:
    """An ensure is running: the request only adds its reply target."""
    ctx.put(key, e.but(replies=reply_list(e.replies, msg.reply_to, msg.reply_key)))


def _send(ctx: Ctx, key: str, e: NamespaceOp) -> None:
    cluster, namespace, _ = split_key(key)
    eff = ctx.emit(EnsureNamespace, key, cluster=cluster, namespace=namespace, labels=dict(MANAGED_LABELS))
    ctx.put(key, e.but(awaiting=eff.id))


def on_outcome(ctx: Ctx, key: str, e: NamespaceOp, ev: Answered) -> None:
    """The answer of the ensure ``e`` awaits."""
    rec = ev.rec
    namespace = split_key(key)[1]
    match rec.result:
        case "ok" | "already_exists":
            _answer(ctx, key, e, NamespaceReady(namespace=namespace))
        case "transient":
            _retry(ctx, key, e, rec)
        case _ if rec.step == "check":  # the GET failed: kfold does not know whether it exists
            _answer(ctx, key, e, NamespaceFailed(
                namespace=namespace, reason=f"could not check whether namespace {namespace} exists: {describe(rec)}"))
        case "forbidden":
            _answer(ctx, key, e, NamespaceFailed(namespace=namespace, reason=forbidden_reason(namespace)))
        case _:
            _answer(ctx, key, e, NamespaceFailed(namespace=namespace,
                                                 reason=f"could not create namespace {namespace}: {describe(rec)}"))


def forbidden_reason(namespace: str) -> str:
    return (f"not authorized to create namespace {namespace}. Ask a cluster administrator to run "
            f"`kubectl create namespace {namespace}`, then try again.")


def _retry(ctx: Ctx, key: str, e: NamespaceOp, rec: Outcome) -> None:
    """The same ensure goes again as the next attempt of its own loop (``Ctx.retry``), within
    ``backoff.NAMESPACE``; once that says terminal the callers are told it failed."""
    e = e.but(attempts=e.attempts + 1)
    if ctx.retry(backoff.NAMESPACE):
        ctx.put(key, e.but(awaiting=rec.effect_id))
    else:
        namespace = split_key(key)[1]
        _answer(ctx, key, e.but(awaiting=""), NamespaceFailed(
            namespace=namespace, reason=f"could not create namespace {namespace} after {backoff.NAMESPACE.limit} "
                                        f"attempts: {describe(rec)}"))


def on_deadline(ctx: Ctx, key: str, e: NamespaceOp, ev: object) -> None:
    """A retry timer set by an earlier version: the ensure goes again unless one is out."""
    if not e.awaiting:
        _send(ctx, key, e)


def in_doubt(ctx: Ctx, key: str, e: NamespaceOp, ev: InDoubt) -> None:
    """The ensure ``e`` awaits is in doubt: it is idempotent, so it is sent again."""
    _send(ctx, key, e)


def _answer(ctx: Ctx, key: str, e: NamespaceOp, reply: NamespaceReady | NamespaceFailed) -> None:
    for r in e.replies:
        ctx.tell(r.key, reply, to=r.to)
    ctx.cancel_timer(key, "retry")   # set by an earlier version (a timer)
    ctx.drop_retries(key)
    ctx.drop(key)
