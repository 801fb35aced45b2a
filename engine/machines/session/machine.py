"""The session machine ("session"): a Session custom resource brought up, served and torn down.

The Session ``spec`` is the command channel: ``suspended`` true/false suspends/resumes (a resume is
generation N+1), a change of the app set recreates as N+1, a ports-only change re-routes, and
``stopped`` true (or deleting the resource; finalizer ``kfold.dev/teardown``) tears down.

This module holds the table and the routing; ``session.decide.decide`` decides. Every handler
folds what arrived into facts on the decision record (``session.model``): observed Sessions
(``session.observed``) and pods (``session.pods``, reduced by ``session.views``), replies
(``session.replies``), answers and doubts (``session.answers``), deadlines (``session.deadlines``);
then ``save`` decides.

Inputs: observed ``Session`` and ``Pod`` (pods by their ``kfold.dev/session`` label, namespace and
cluster handle, which must be the Session's target; only the current generation's pod counts; the
others, and every ``Service`` and ``Ingress``, are kept for a record rebuilt from its status:
``session.seen``),
command ``session.configure`` (``engine.seams.SessionConfigure``: home, tenants, registered
clusters, clusters (old form: names every Session may use), base_domain, start_seconds,
ready_seconds; tenancy and placement: ``session.tenancy``), replies from the pod machine
(``pod_created``, ``pod_create_failed``, ``pod_gone``, ``pod_delete_failed``, ``namespace_ready``,
``namespace_failed``) and the repo machine (``repo_ensured``, ``repo_failed``, ``repo_status``),
outcomes of its own effects, the ``start``/``ready`` deadlines and the ``ahead`` grace
(``session.ahead``: pods of a newer generation than a podless record knows).

Guarantees:
- Nothing is decided before ``session.configure``: sessions are recorded and wait for it.
- Replies and outcomes for a Session that is gone, or for a pod that is no longer current, decide
  nothing beyond finishing the release of that pod.
- An effect in doubt is re-observed (Session patch: quorum read) or repeated only where repeating
  is harmless (Secret create, endpoint upsert, teardown reads and uid-fenced deletes, pod reads).
- A relist's absences are suspects: a missing Session or pod is re-read (quorum GET) and only a
  404 lets it go (``base.missing_after_relist``).
- A re-read of the Session, or its Secret's create, that fails is repeated on the one backoff
  (``engine.backoff``) and reported once (``session.retry``), never at once.
- A Session kfold has no record of resumes from the status it wrote on it (``from_status``): a
  lost journal costs history, never a healthy object, no status write moves a phase backwards
  (``session.status.regresses``), and a status that already says what kfold would write is not
  written again. Such a record waits for its target's first lists of the kinds the daemon lists
  (``session.configure`` ``listed``), then adopts what they show with no create, read or replace
  of what is already right (``session.seen``). Service, Ingress and Secret are adopted or deleted only when they
  carry this Session's labels (``session.owned``).
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.effects.models import Effect, GetObject
from engine.machines.base import (
    Ctx, Dispatch, ignore, Machine, missing_after_relist, object_key, remember, RetryDue, UnknownEvent,
)
from engine.machines.session import objects, retry, secret, seen, status, tenancy
from engine.machines.session import targets
from engine.machines.session.ahead import AHEAD_TIMER, arm_ahead, judge_ahead, read_ahead
from engine.machines.session.answers import in_doubt, outcome
from engine.machines.session.deadlines import bring_up_deadline
from engine.machines.session.decide import decide, spec_of
from engine.machines.session.manifests import API_VERSION
from engine.machines.session.model import (
    BRINGING_UP, config, CONFIG_KEY, fire, INDEX_KEY, Moved, PHASES, SessionConfig, SessionDecision, SessionEntry,
    sessions,
)
from engine.machines.session.observed import absorb, older, session_gone, was_deleted
from engine.machines.session.pods import pod_observed, pod_owner, read_pod, release_stale
from engine.machines.session.release import pod_key
from engine.machines.session.replies import (
    keep, namespace_failed, namespace_ready, pod_create_failed, pod_create_failed_late, pod_created,
    pod_created_late, pod_delete_failed, pod_delete_failed_late, pod_gone, repo_ensured, repo_failed, repo_status,
    retry_pod_delete,
)
from engine.machines.session.resumed import resuming
from engine.machines.session.spec import ceilings
from engine.machines.session.timers import LISTS_TIMER, POD_DELETE_RETRY
from engine.seams import (
    MESSAGES, DeletePod, NamespaceFailed, NamespaceReady, PodCreated, PodCreateFailed, PodDeleteFailed, PodGone, RepoEnsured,
    RepoFailed, RepoStatusReply, SecretListed, SessionConfigure, SessionMessage,
)
from journal.records import Command, Observed, Outcome, Relist


__all__ = ["SessionMachine"]
MESSAGE_NAMES = {model: name for (machine, name), model in MESSAGES.items() if machine == "session"}
_CONFIGS: dict[str, SessionConfig] = {}   # session.configure (as JSON) -> its configuration: a pure parse


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


class SessionMachine(Machine):
    name = "session"
    decision = SessionEntry  # type: ignore[assignment]  # a union of two record kinds
    observes = frozenset({"Session", "Pod", "Service", "Ingress"})
    commands = frozenset({"session.configure"})
    typed_messages = True
    questions = frozenset({"placed", "owner"})

    def answer(self, question: str, table: Any, *args: Any) -> Any:
        """``placed``: ``"<cluster>/<namespace>/<session>"`` of every Session the fold places pods for;
        ``owner`` (handle, namespace, session name): the key of the Session whose pods live there, or None."""
        if question == "owner":
            return targets.owner(table, *args)
        slots = getattr(table.get(INDEX_KEY), "slots", None)
        if isinstance(slots, dict):
            return set(slots)
        return {f"{d.target}/{d.target_ns}/{d.name}" for _, d in table.items()
                if getattr(d, "kind", "") == "session" and d.target}

    def on_command(self, ctx: Ctx, rec: Command, cmd: SessionConfigure) -> None:
        """The configuration every decision reads; every Session is decided again under it (at
        boot too: the daemon's first configure is what re-decides each Session after a restart,
        on the clocks it knows now). One equal to the configuration in force is not stored again:
        the one in force is kept by identity, as ``spec_of`` remembers validations by it."""
        text = cmd.model_dump_json()
        cfg = _CONFIGS.get(text) or remember(_CONFIGS, text, config_of(cmd), 8)
        if cfg != config(ctx):
            ctx.put(CONFIG_KEY, cfg)
        for key, d in list(sessions(ctx)):
            save(ctx, key, d)

    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        if rec.kind == "Pod":
            if targets.none_tracked(ctx):  # no Session placed anywhere: every pod is no session's yet
                return seen.pod(ctx, rec)
            owner = pod_owner(ctx, rec)  # before any reduction: most pods are no session's
            if owner is None:
                seen.pod(ctx, rec)   # kept for a record that may adopt it (``session.seen``)
                return release_stale(ctx, rec, save)
            if rec.event == "DELETED":
                seen.pod(ctx, rec)
            return pod_observed(ctx, owner, rec, save)
        if rec.kind in ("Service", "Ingress"):
            return seen.endpoint(ctx, rec)
        key = object_key(rec.cluster, rec.namespace, rec.name)
        if rec.event == "DELETED":
            return session_gone(ctx, key)
        if was_deleted(ctx, rec.obj):
            return ctx.log(key, "an observation of a Session deleted since (a stale list); ignored", level="debug")
        if older(ctx.get(key), rec.obj):
            return ctx.log(key, "an observation older than the one folded (a stale list, or a watch "
                                "replaying from one); ignored", level="debug")
        d = retry.observed(ctx, key, ctx.get(key))
        save(ctx, key, status.seen_at(absorb(d, rec.cluster, rec.obj), ctx.now_on(rec.cluster)))

    def on_relist(self, ctx: Ctx, rec: Relist) -> None:
        """A relist's absences are suspects (``missing_after_relist``): each is re-read with a
        quorum GET, and only that GET's 404 lets go of a Session or marks its pod gone."""
        if rec.kind == "Session":
            for key in missing_after_relist([k for k, _ in sessions(ctx)], rec):
                d = ctx.get(key)
                ctx.emit(GetObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
                         namespace=d.namespace, name=d.name)
            return
        seen.relisted(ctx, rec)
        _decide_waiting(ctx, rec)
        if rec.kind != "Pod":
            return
        current = {pod_key(d): k for k, d in sessions(ctx) if d.pod.created and not d.pod.gone}
        for pk in missing_after_relist(current, rec):
            save(ctx, current[pk], read_pod(ctx, current[pk], ctx.get(current[pk])))

    def on_receive(self, ctx: Ctx, key: str, msg: SessionMessage) -> None:
        d = ctx.get(key)
        DISPATCH.handler(d.phase if isinstance(d, SessionDecision) else UNTRACKED, type(msg))(ctx, key, d, msg)

    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Effect) -> None:
        if effect.type in ("event", "post_event"):   # a report (it names no object kind): its answer decides nothing
            if rec.result not in ("ok", "already_exists"):
                what = getattr(effect, "event_name", "") or f"{effect.reason} on Session {effect.regarding.get('name', '')}"
                ctx.log(effect.key, f"event {what} not recorded: {rec.result} {rec.message}".strip(), level="debug")
            return None
        d = ctx.get(effect.key)
        if not isinstance(d, SessionDecision):
            return
        if (effect.kind, effect.type, rec.result) == ("Session", "get", "not_found"):
            return session_gone(ctx, effect.key)  # a quorum read proves the Session deleted
        if effect.id == d.ahead_read:
            return _ahead_answer(ctx, effect.key, d.but(ahead_read=""), rec)
        if effect.kind == "Session" and getattr(effect, "subresource", "") == "status":
            if rec.result == "transient" and ctx.retry(backoff.STATUS_WRITE):
                return   # the same write, as the next attempt of its own loop
            if rec.result == "conflict":  # written again now: no later event may come
                save(ctx, effect.key, d.but(status_written=""))
            elif rec.result == "transient":   # no server time to wait on: written again on the next decision
                ctx.put(effect.key, d.but(status_written=""))
            elif rec.result != "ok" and rec.result != "not_found":  # written again on the next decision
                ctx.put(effect.key, d.but(status_written=""))
            elif rec.result == "ok":   # its echo is awaited (``_overwritten``)
                rv = ((rec.obj or {}).get("metadata") or {}).get("resourceVersion") or ""
                ctx.put(effect.key, d.but(status_rv=str(rv), status_echoed=False))
            return
        save(ctx, effect.key, outcome(ctx, effect.key, d, rec, effect))

    def on_in_doubt(self, ctx: Ctx, effect: Effect) -> None:
        d = ctx.get(effect.key)
        if isinstance(d, SessionDecision) and effect.type not in ("event", "post_event"):   # a report: never repeated
            save(ctx, effect.key, in_doubt(ctx, effect.key, d, effect))

    def on_quarantine(self, ctx: Ctx, key: str, error: str) -> None:
        d = ctx.get(key)
        if isinstance(d, SessionDecision):
            status.quarantined(ctx, key, d, spec_of(d, config(ctx) or SessionConfig()), config(ctx) or SessionConfig(), error)

    def on_deadline(self, ctx: Ctx, key: str, name: str) -> None:
        d = ctx.get(key)
        phase = d.phase if isinstance(d, SessionDecision) else UNTRACKED
        event = TIMER_EVENTS.get(name)
        if event is None:
            raise UnknownEvent(self.name, phase, f"deadline {name!r}")
        DISPATCH.handler(phase, event)(ctx, key, d, name)


def _decide_waiting(ctx: Ctx, rec: Relist) -> None:
    """A first list of a kind resumed records wait for (``session.seen``): each one placed on its
    cluster is decided again, on what the list showed."""
    cfg = config(ctx)
    if cfg is None or rec.kind not in cfg.listed:
        return
    for key, d in sessions(ctx):
        if resuming(d) and d.target == rec.cluster and (not rec.scope or rec.scope == d.target_ns):
            save(ctx, key, d)




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


def _ahead_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> None:
    """The quorum read ``session.read_ahead`` asked for: newer than the pods it was asked for, so
    each of them is judged on it. A failed read is made again after the grace."""
    if rec.result != "ok" or not isinstance(rec.obj, dict):
        ctx.log(key, f"session {d.name}: could not read the Session to judge pods newer than its record: "
                     f"{rec.result} {rec.message}".strip(), level="warning")
        return save(ctx, key, d)
    save(ctx, key, absorb(d, d.home, rec.obj))
    d = ctx.get(key)
    if isinstance(d, SessionDecision) and d.ahead:
        save(ctx, key, judge_ahead(ctx, key, d, settled=True))


UNTRACKED = "untracked"   # the phase of a key with no Session record (gone, or never seen)


class AheadDue:
    """The ``ahead`` grace passed (``AHEAD_TIMER``)."""


class CreateRetryDue:
    """The backoff of a failed Secret or claim create is over (``session.objects.later``)."""


class PodDeleteRetryDue:
    """A teardown blocked by a failed pod delete asks again (``POD_DELETE_RETRY``)."""


class BringUpDeadline:
    """The ``start`` or ``ready`` deadline passed."""


class ListsDue:
    """A resumed record waited ``seen.LIST_WAIT_MS`` for a first list (``LISTS_TIMER``)."""


TIMER_EVENTS: dict[str, type] = {AHEAD_TIMER: AheadDue, retry.REREAD: RetryDue,
                                 **{t: CreateRetryDue for t in objects.TIMERS},
                                 POD_DELETE_RETRY: PodDeleteRetryDue, "start": BringUpDeadline,
                                 "ready": BringUpDeadline, LISTS_TIMER: ListsDue}


def _lists_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    """The first lists did not come in time: decided without them, as a record with its own history."""
    if resuming(d):
        ctx.log(key, f"session {d.name}: no first list of its target's pods, Services or Ingresses within "
                     f"{seen.LIST_WAIT_MS // 1000} s; deciding without it (creates meet AlreadyExists and read)",
                level="warning")
    save(ctx, key, d.but(resumed=0))


def _bring_up_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, bring_up_deadline(ctx, key, d, name))


def _ahead_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, read_ahead(ctx, key, d))


def _retry_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, retry.on_deadline(ctx, key, d, name))


def _create_retry_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, objects.retry_due(ctx, key, d, name))


def _pod_delete_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, retry_pod_delete(ctx, key, d))


def _pod_delete_moot(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    """No longer Stopping: the blocked pod delete is not asked again."""
    save(ctx, key, d.but(blocked_pod=""))


def _reply(handler: Any) -> Any:
    """A reply from the pod or repo machine, folded into the Session's record, then decided on."""
    def fold_reply(ctx: Ctx, key: str, d: SessionDecision, msg: SessionMessage) -> None:
        save(ctx, key, handler(ctx, key, d, msg))
    fold_reply.__qualname__ = handler.__name__
    return fold_reply


def _created_for_none(ctx: Ctx, key: str, d: None, msg: PodCreated) -> None:
    """A create that answered after its Session was gone: the pod is released."""
    if not msg.pod:
        return _untracked(ctx, key, d, msg)
    ctx.tell(msg.pod, DeletePod(reply_to="session", reply_key=key, reason="created for a session that is gone"))


def _secret_listed(ctx: Ctx, key: str, d: SessionDecision, msg: SecretListed) -> None:
    save(ctx, key, secret.listed(ctx, key, d, msg, spec_of(d, config(ctx) or SessionConfig())))


def _untracked(ctx: Ctx, key: str, d: None, msg: SessionMessage) -> None:
    ctx.log(key, f"{MESSAGE_NAMES[type(msg)]} for a session kfold no longer tracks; ignored", level="debug")


_OTHER = {p: tuple(q for q in PHASES if q != p) for p in ("Pending", "Creating", "Stopping")}
_OTHER["bringing up"] = tuple(q for q in PHASES if q not in BRINGING_UP)
# replies whose handler depends on the phase: (phases, handler) rows
_BY_PHASE = {
    NamespaceFailed: (("Pending", namespace_failed), (_OTHER["Pending"], keep)),
    RepoFailed: ((BRINGING_UP, repo_failed), (_OTHER["bringing up"], keep)),
    PodCreated: (("Creating", pod_created), (_OTHER["Creating"], pod_created_late)),
    PodCreateFailed: (("Creating", pod_create_failed), (_OTHER["Creating"], pod_create_failed_late)),
    PodDeleteFailed: (("Stopping", pod_delete_failed), (_OTHER["Stopping"], pod_delete_failed_late)),
}
_REPLIES = {NamespaceReady: namespace_ready, NamespaceFailed: namespace_failed,
            RepoEnsured: repo_ensured, RepoFailed: repo_failed, RepoStatusReply: repo_status,
            PodCreated: pod_created, PodCreateFailed: pod_create_failed,
            PodGone: pod_gone, PodDeleteFailed: pod_delete_failed}
_NOT_PROVISIONING = tuple(p for p in PHASES if p != "Provisioning")


# The session machine: (phase, event) -> handler. A Session's phase is ``SessionDecision.phase``;
# what it decides on each record is ``act``, one match over (wish, phase).
DISPATCH = Dispatch("session", [
    (UNTRACKED, AheadDue, ignore), (UNTRACKED, RetryDue, ignore), (UNTRACKED, CreateRetryDue, ignore),
    (UNTRACKED, PodDeleteRetryDue, ignore),
    (UNTRACKED, BringUpDeadline, ignore), (UNTRACKED, ListsDue, ignore),
    (PHASES, ListsDue, _lists_due),
    (PHASES, AheadDue, _ahead_due),
    (PHASES, RetryDue, _retry_due),
    (PHASES, CreateRetryDue, _create_retry_due),
    ("Stopping", PodDeleteRetryDue, _pod_delete_due),
    (_OTHER["Stopping"], PodDeleteRetryDue, _pod_delete_moot),
    ("Provisioning", BringUpDeadline, _bring_up_due),
    (_NOT_PROVISIONING, BringUpDeadline, ignore),
    (UNTRACKED, PodCreated, _created_for_none),
    *((UNTRACKED, model, _untracked) for model in _REPLIES if model is not PodCreated),
    (UNTRACKED, SecretListed, _untracked),
    (PHASES, SecretListed, _secret_listed),
    *((PHASES, model, _reply(handler)) for model, handler in _REPLIES.items() if model not in _BY_PHASE),
    *((phases, model, _reply(handler)) for model, rows in _BY_PHASE.items() for phases, handler in rows),
])
