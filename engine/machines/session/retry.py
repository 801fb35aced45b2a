"""A Session's own requests repeated after a failed answer: the Session re-read, its Secret and
its workspace claim.

Why: a refusal that lasts (403 after an RBAC change, 401 after a token expired, a 400) answers
every repeat the same; repeated at once, one Session sent 70-90 requests a second and grew the
journal accordingly until the refusal cleared (issue 33).

Guarantees:
- A failed re-read of the Session (any answer but 200 and 404) is sent again on the one backoff
  (``engine.backoff``), on the home cluster's server time: a transient answer (the executor's
  attempts spent) as the same read's next attempt (``Ctx.retry``), a refusal as a new read on the
  ``reread`` timer (the executor does not repeat a refusal); a failed Secret or workspace claim
  create (a transient answer) or a failed read of it after AlreadyExists is created again on it,
  on the target cluster's server time. A 404 of that read is progress: created again at once.
- A watch or list that brings the Session meanwhile drops the waiting read: it is fresher.
- Each run of failures is reported once: on the first, one warning naming the answer in the log and
  one Warning Event on the Session (reason ``ReadFailed``, ``SecretRetrying``, ``ClaimRetrying``);
  for the re-read, one line when it succeeds again. The count starts over after a success only (a
  new generation whose Secret still fails goes on with the same backoff, unreported again).
- Without server time there is nothing to wait on: at most ``backoff.MAX_UNTIMED`` repeats at
  once, then the Session waits for its next observation (re-read) or fails (``SecretFailed``,
  ``WorkspaceFailed``).
"""
from __future__ import annotations

from typing import Any, Callable

from engine.effects.models import Effect, GetObject, RecordEvent
from engine import backoff
from engine.machines.session import finalizer
from engine.machines.base import Ctx
from engine.machines.base import describe
from engine.machines.session.model import SessionDecision
from engine.machines.session.manifests import API_VERSION
from journal.records import Outcome

REREAD = "reread"
SECRET = "secret-retry"
CLAIM = "claim-retry"
TIMERS = (REREAD, SECRET, CLAIM)


def reobserve(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """Quorum-read the Session; the finalizer steps wait for the answer."""
    ctx.emit(GetObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
             namespace=d.namespace, name=d.name)
    return d.but(finalizer_step=finalizer.after(d.finalizer_step, "reread"))


def reread(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome,
           absorb: Callable[[SessionDecision, str, dict[str, Any]], SessionDecision]) -> SessionDecision:
    """The answer to ``reobserve`` (a 404 lets go of the Session before this: ``session``)."""
    if rec.result != "ok" or not rec.obj:
        return _reread_later(ctx, key, d, rec)
    if d.reread_tries:
        ctx.log(key, f"session {d.name}: the Session is readable again after {d.reread_tries} failed read(s)")
        d = d.but(reread_tries=0)
    return absorb(d, d.home, rec.obj)


def _reread_later(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> SessionDecision:
    tries = d.reread_tries + 1
    if tries == 1:
        report(ctx, key, d, rec, "ReadFailed", f"could not read Session {d.namespace}/{d.name}: {describe(rec)}; "
                f"read again on a backoff (at most {backoff.CAP_MS // 1000} s apart) until it answers")
    d = d.but(reread_tries=tries)
    if rec.result == "transient":   # the executor's attempts spent: the same read goes on as its loop's next
        ctx.retry(backoff.SESSION_REREAD)   # terminal (no server time): the next observation decides
        return d
    when = backoff.next_try(backoff.SESSION_REREAD, tries, ctx.now_on(d.home), rec.retry_after_ms)
    if when == backoff.AT_ONCE:
        return reobserve(ctx, key, d)
    if isinstance(when, int):
        ctx.set_timer(key, REREAD, when, d.home)
    return d


def report(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, reason: str, message: str) -> None:
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
    ctx.drop_retries(key, _session_read)
    return d.but(reread_tries=0)


def _session_read(effect: Effect) -> bool:
    return effect.type == "get" and effect.kind == "Session"


def on_deadline(ctx: Ctx, key: str, d: SessionDecision, name: str) -> SessionDecision:
    """The ``reread`` timer: the Session is read again (the Secret's and claim's timers are
    ``session.objects.retry_due``)."""
    if finalizer.patch_in_flight(d.finalizer_step):   # a patch in flight answers first
        ctx.emit(GetObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
                 namespace=d.namespace, name=d.name)
        return d
    return reobserve(ctx, key, d)
