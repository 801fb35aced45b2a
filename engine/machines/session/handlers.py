"""The session table's handlers (``session.machine.DISPATCH``): each folds what arrived into the
Session's record (a reduction: ``session.observed``, ``session.pods``, ``session.replies``,
``session.answers``, ``session.deadlines``, ...) and ``save``s it, which decides.

``save`` is where a level-based machine decides: whatever the input, the decision reads the
record alone (``session.decide``); the handlers only reduce.
"""
from __future__ import annotations

from typing import Any, Callable

from engine import backoff
from engine.effects.models import GetObject
from engine.machines.base import Answered, Ctx, Ordered, Reported, remember
from engine.machines.session import objects, retry, secret, seen, status, targets
from engine.machines.session.ahead import arm_ahead, judge_ahead, read_ahead
from engine.machines.session.deadlines import bring_up_deadline
from engine.machines.session.decide import decide, spec_of
from engine.machines.session.manifests import API_VERSION
from engine.machines.session.model import (
    config, CONFIG_KEY, fire, Moved, SessionConfig, SessionDecision, sessions,
)
from engine.machines.session.observed import absorb, older, session_gone, was_deleted
from engine.machines.session.pods import pod_observed, read_pod, release_stale
from engine.machines.session.replies import retry_pod_delete
from engine.machines.session.resumed import resuming
from engine.machines.session.spec import ceilings
from engine.machines.session import tenancy
from engine.seams import MESSAGES, DeletePod, PodCreated, SecretListed, SessionConfigure, SessionMessage
from journal.records import Observed, Relist

MESSAGE_NAMES = {model: name for (machine, name), model in MESSAGES.items() if machine == "session"}
_CONFIGS: dict[str, SessionConfig] = {}   # session.configure (as JSON) -> its configuration: a pure parse
Reduction = Callable[[Ctx, str, SessionDecision, Any], "SessionDecision | Moved"]


def save(ctx: Ctx, key: str, d: SessionDecision | Moved) -> None:
    """Fire what a handler's answer moves (``Moved``: the dispatcher's part), decide (once
    configured) and store; keep the target index in step."""
    if isinstance(d, Moved):
        d = fire(d)
    cfg = config(ctx)
    before = ctx.get(key)
    after = d if cfg is None else _judge_ahead(ctx, key, decide(ctx, key, d, cfg), cfg)
    ctx.put(key, after)
    targets.update(ctx, key, before, after)


def _judge_ahead(ctx: Ctx, key: str, d: SessionDecision, cfg: SessionConfig) -> SessionDecision:
    """Pods newer than the record knew (``session.ahead``), judged on what the decision now knows:
    after ``decide``, which may have begun their generation (its create adopts them)."""
    judged = judge_ahead(ctx, key, d) if d.ahead else d
    d = d if judged is d else decide(ctx, key, judged, cfg)
    arm_ahead(ctx, key, d)
    return d


def folds(reduction: Reduction) -> Callable[[Ctx, str, SessionDecision, Any], None]:
    """The handler that folds its input into the record with ``reduction``, then ``save``s it."""
    def fold(ctx: Ctx, key: str, d: SessionDecision, ev: Any) -> None:
        save(ctx, key, reduction(ctx, key, d, ev))
    fold.__qualname__ = reduction.__name__
    return fold


# -- the command ---------------------------------------------------------------------------------

def config_of(cmd: SessionConfigure) -> SessionConfig:
    """The configuration ``session.configure`` states: its limits as ceilings, its placement
    (``session.tenancy``). Pure: an equal command gives an equal configuration (``_CONFIGS``
    keeps the last few, so a repeated command is not parsed again)."""
    return SessionConfig(
        clusters=cmd.clusters, base_domain=cmd.base_domain, start_ms=cmd.start_seconds * 1000,
        ready_ms=cmd.ready_seconds * 1000, default_image=cmd.default_image.strip(),
        ceilings=ceilings(cmd.limits), workspace_class=cmd.workspace_class, workspace_size=cmd.workspace_size,
        workspace_access=cmd.workspace_access, workspace_seed=cmd.workspace_seed,
        listed=tuple(k for k in cmd.listed if k in seen.KINDS), event_level=cmd.event_level,
        container_identity=cmd.container_identity, status_rules=cmd.status_rules,
        **tenancy.configure(cmd))


def configure(ctx: Ctx, key: str, cfg: Any, ev: Ordered) -> None:
    """The configuration every decision reads; every Session is decided again under it (at
    boot too: the daemon's first configure is what re-decides each Session after a restart,
    on the clocks it knows now). One equal to the configuration in force is not stored again:
    the one in force is kept by identity, as ``spec_of`` remembers validations by it."""
    text = ev.cmd.model_dump_json()
    new = _CONFIGS.get(text) or remember(_CONFIGS, text, config_of(ev.cmd), 8)   # type: ignore[arg-type]
    if new != config(ctx):
        ctx.put(CONFIG_KEY, new)
    for k, d in list(sessions(ctx)):
        save(ctx, k, d)


# -- observations and relists --------------------------------------------------------------------

def session_seen(ctx: Ctx, key: str, d: SessionDecision | None, rec: Observed) -> None:
    if was_deleted(ctx, rec.obj):
        return ctx.log(key, "an observation of a Session deleted since (a stale list); ignored", level="debug")
    if older(d, rec.obj):
        return ctx.log(key, "an observation older than the one folded (a stale list, or a watch "
                            "replaying from one); ignored", level="debug")
    d = retry.observed(ctx, key, d)
    save(ctx, key, status.seen_at(absorb(d, rec.cluster, rec.obj), ctx.now_on(rec.cluster)))


def session_deleted(ctx: Ctx, key: str, d: SessionDecision, rec: Observed) -> None:
    session_gone(ctx, key)


def pod_seen(ctx: Ctx, key: str, d: SessionDecision, rec: Observed) -> None:
    pod_observed(ctx, key, rec, save)


def pod_deleted(ctx: Ctx, key: str, d: SessionDecision, rec: Observed) -> None:
    """The current pod is gone, whoever deleted it: the record says so (``pod.gone``) and the
    decision judges it (``decide.decision``: ``PodGone``)."""
    seen.pod(ctx, rec)
    pod_observed(ctx, key, rec, save)


def other_pod(ctx: Ctx, key: str, d: None, rec: Observed) -> None:
    seen.pod(ctx, rec)   # kept for a record that may adopt it (``session.seen``)
    release_stale(ctx, rec, save)


def endpoint_observed(ctx: Ctx, key: str, d: None, rec: Observed) -> None:
    seen.endpoint(ctx, rec)


def relisted(ctx: Ctx, key: str, d: None, rec: Relist) -> None:
    seen.relisted(ctx, rec)


def session_missing(ctx: Ctx, key: str, d: SessionDecision, rec: Relist) -> None:
    """Re-read with a quorum GET: only its 404 lets go of the Session (``SessionNotFound``)."""
    ctx.emit(GetObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
             namespace=d.namespace, name=d.name)


def first_list(ctx: Ctx, key: str, d: SessionDecision, rec: Relist) -> None:
    """Decided again, on what the list showed."""
    save(ctx, key, d)


def pod_missing(ctx: Ctx, key: str, d: SessionDecision, rec: Relist) -> None:
    save(ctx, key, read_pod(ctx, key, d))


# -- answers ---------------------------------------------------------------------------------------

def reported(ctx: Ctx, key: str, d: Any, ev: Reported) -> None:
    """A report's (an Event's) answer decides nothing; one not recorded is logged. In doubt, it is
    never repeated."""
    rec, effect = ev
    if rec is not None and rec.result not in ("ok", "already_exists"):
        what = (getattr(effect, "event_name", "")
                or f"{effect.reason} on Session {effect.regarding.get('name', '')}")   # type: ignore[attr-defined]
        ctx.log(effect.key, f"event {what} not recorded: {rec.result} {rec.message}".strip(), level="debug")


def session_not_found(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> None:
    session_gone(ctx, key)   # a quorum read proves the Session deleted


def status_written(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> None:
    """A failed status write is written again: a transient one as the same write's next attempt,
    a conflict at once (no later event may come), anything else on the next decision; a written
    one's echo is awaited (``observed._overwritten``)."""
    rec = ev.rec
    if rec.result == "transient" and ctx.retry(backoff.STATUS_WRITE):
        return
    if rec.result == "conflict":
        save(ctx, key, d.but(status_written=""))
    elif rec.result == "ok":
        rv = ((rec.obj or {}).get("metadata") or {}).get("resourceVersion") or ""
        ctx.put(key, d.but(status_rv=str(rv), status_echoed=False))
    elif rec.result != "not_found":
        ctx.put(key, d.but(status_written=""))


def ahead_read(ctx: Ctx, key: str, d: SessionDecision, ev: Answered) -> None:
    """The quorum read ``session.read_ahead`` asked for: newer than the pods it was asked for, so
    each of them is judged on it. A failed read is made again after the grace."""
    d, rec = d.but(ahead_read=""), ev.rec
    if rec.result != "ok" or not isinstance(rec.obj, dict):
        ctx.log(key, f"session {d.name}: could not read the Session to judge pods newer than its record: "
                     f"{rec.result} {rec.message}".strip(), level="warning")
        return save(ctx, key, d)
    save(ctx, key, absorb(d, d.home, rec.obj))
    d = ctx.get(key)
    if isinstance(d, SessionDecision) and d.ahead:
        save(ctx, key, judge_ahead(ctx, key, d, settled=True))


# -- timers ----------------------------------------------------------------------------------------

def lists_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    """The first lists did not come in time: decided without them, as a record with its own history."""
    if resuming(d):
        ctx.log(key, f"session {d.name}: no first list of its target's pods, Services or Ingresses within "
                     f"{seen.LIST_WAIT_MS // 1000} s; deciding without it (creates meet AlreadyExists and read)",
                level="warning")
    save(ctx, key, d.but(resumed=0))


def bring_up_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, bring_up_deadline(ctx, key, d, name))


def ahead_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, read_ahead(ctx, key, d))


def retry_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, retry.on_deadline(ctx, key, d, name))


def create_retry_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, objects.retry_due(ctx, key, d, name))


def pod_delete_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, retry_pod_delete(ctx, key, d))


def pod_delete_moot(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    """No longer Stopping: the blocked pod delete is not asked again."""
    save(ctx, key, d.but(blocked_pod=""))


# -- messages --------------------------------------------------------------------------------------

def created_for_none(ctx: Ctx, key: str, d: None, msg: PodCreated) -> None:
    """A create that answered after its Session was gone: the pod is released."""
    if not msg.pod:
        return untracked(ctx, key, d, msg)
    ctx.tell(msg.pod, DeletePod(reply_to="session", reply_key=key, reason="created for a session that is gone"))


def secret_listed(ctx: Ctx, key: str, d: SessionDecision, msg: SecretListed) -> None:
    save(ctx, key, secret.listed(ctx, key, d, msg, spec_of(d, config(ctx) or SessionConfig())))


def untracked(ctx: Ctx, key: str, d: None, msg: SessionMessage) -> None:
    ctx.log(key, f"{MESSAGE_NAMES[type(msg)]} for a session kfold no longer tracks; ignored", level="debug")

