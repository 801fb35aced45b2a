"""A Session's own requests repeated after a failed answer: the Session re-read and the Secret.

Why: a refusal that lasts (403 after an RBAC change, 401 after a token expired, a 400) answers
every repeat the same; repeated at once, one Session sent 70-90 requests a second and grew the
journal accordingly until the refusal cleared (issue 33).

Guarantees:
- A failed re-read of the Session (any answer but 200 and 404) is sent again on the one backoff
  (``engine.backoff``), on the home cluster's server time; a failed Secret create (a
  transient answer) or a failed read of the Secret after AlreadyExists is created again on it,
  on the target cluster's server time. A 404 of the Secret's read is progress: created again at once.
- A watch or list that brings the Session meanwhile drops the waiting read: it is fresher.
- Each run of failures is reported once: on the first, one warning naming the answer in the log and
  one Warning Event on the Session (reason ``ReadFailed`` or ``SecretRetrying``); for the re-read,
  one line when it succeeds again. The count starts over after a success only (a new generation
  whose Secret still fails goes on with the same backoff, unreported again).
- Without server time there is nothing to wait on: at most ``backoff.MAX_UNTIMED`` repeats at
  once, then the Session waits for its next observation (re-read) or fails ``SecretFailed``.
"""
from __future__ import annotations

from typing import Any, Callable

from engine.effects.models import GetObject, RecordEvent
from engine import backoff
from engine.machines import session_flow as flow
from engine.machines.base import Ctx
from engine.machines.base import describe
from engine.machines.session_model import SessionDecision
from engine.machines.session_status import API_VERSION

REREAD = "reread"
SECRET = "secret-retry"
TIMERS = (REREAD, SECRET)


def reobserve(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """Quorum-read the Session; the finalizer steps wait for the answer."""
    ctx.emit(GetObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
             namespace=d.namespace, name=d.name)
    return d.but(finalizer_step="reading")


def reread(ctx: Ctx, key: str, d: SessionDecision, rec: Any,
           absorb: Callable[[SessionDecision, str, dict[str, Any]], SessionDecision]) -> SessionDecision:
    """The answer to ``reobserve`` (a 404 lets go of the Session before this: ``session``)."""
    if rec.result != "ok" or not rec.obj:
        return _reread_later(ctx, key, d, rec)
    if d.reread_tries:
        ctx.log(key, f"session {d.name}: the Session is readable again after {d.reread_tries} failed read(s)")
        d = d.but(reread_tries=0)
    return absorb(d, d.home, rec.obj)


def _reread_later(ctx: Ctx, key: str, d: SessionDecision, rec: Any) -> SessionDecision:
    tries = d.reread_tries + 1
    if tries == 1:
        _report(ctx, key, d, rec, "ReadFailed", f"could not read Session {d.namespace}/{d.name}: {describe(rec)}; "
                f"read again on a backoff (at most {backoff.CAP_MS // 1000} s apart) until it answers")
    d = d.but(reread_tries=tries)
    now = ctx.now_on(d.home)
    if now is not None:
        ctx.set_timer(key, REREAD, now + backoff.delay_ms(tries - 1, rec.retry_after_ms), d.home)
    elif tries <= backoff.MAX_UNTIMED:
        return reobserve(ctx, key, d)
    return d


def secret_later(ctx: Ctx, key: str, d: SessionDecision, rec: Any) -> SessionDecision:
    """The Secret's create, or its read after AlreadyExists, failed: create it again after the backoff."""
    tries = d.secret_tries + 1
    what = f"Secret {d.target_ns}/{d.name}-env"
    if tries == 1:
        _report(ctx, key, d, rec, "SecretRetrying", f"could not create {what}: {describe(rec)}; tried again on a "
                f"backoff (at most {backoff.CAP_MS // 1000} s apart)")
    d = d.but(secret_step="waiting", secret_tries=tries)
    now = ctx.now_on(d.target)
    if now is not None:
        ctx.set_timer(key, SECRET, now + backoff.delay_ms(tries - 1, rec.retry_after_ms), d.target)
        return d
    if tries <= backoff.MAX_UNTIMED:
        return d.but(secret_step="")
    return flow.fail(ctx, key, d.but(secret_step=""), "SecretFailed",
                     f"cannot create {what} after {tries} attempts and there is no server time to back off on: "
                     f"{describe(rec)}")


def _report(ctx: Ctx, key: str, d: SessionDecision, rec: Any, reason: str, message: str) -> None:
    """The first failure of a run: one warning in the log and one Warning Event on the Session
    (``kubectl describe session``), named by the failure's server time."""
    ctx.log(key, f"session {d.name}: {message}", level="warning", result=rec.result)
    ctx.emit(RecordEvent, key, cluster=d.home, namespace=d.namespace, reason=reason, message=message,
             involved={"apiVersion": API_VERSION, "kind": "Session", "name": d.name, "uid": d.uid,
                       "namespace": d.namespace},
             event_type="Warning", event_name=f"{d.name}.{reason.lower()}.{rec.at or 0}")


def observed(ctx: Ctx, key: str, d: Any) -> Any:
    """A watch or list brought the Session: fresher than the read that waits, which is dropped
    (the finalizer steps start again from what it shows); the run of failed reads is over."""
    if not isinstance(d, SessionDecision) or not d.reread_tries:
        return d
    ctx.cancel_timer(key, REREAD)
    return d.but(reread_tries=0)


def on_deadline(ctx: Ctx, key: str, d: SessionDecision, name: str) -> SessionDecision:
    if name == REREAD and d.finalizer_step in ("sent", "removing"):   # a patch in flight answers first
        ctx.emit(GetObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
                 namespace=d.namespace, name=d.name)
        return d
    if name == REREAD:
        return reobserve(ctx, key, d)
    return d.but(secret_step="") if d.secret_step == "waiting" else d
