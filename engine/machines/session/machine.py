"""The session machine ("session"): a Session custom resource brought up, served and torn down.

The Session ``spec`` is the command channel: ``suspended`` true/false suspends/resumes (a resume is
generation N+1), a change of the app set recreates as N+1, a ports-only change re-routes, and
``stopped`` true (or deleting the resource; finalizer ``kfold.dev/teardown``) tears down.

This module holds the table (``DISPATCH``) and the routing: every input (observation, relist,
outcome, in-doubt effect, message, timer, command) is reduced to an event named for what it is
(``session.inputs``) and reaches its handler by one lookup, ``DISPATCH.run``. The handlers
(``session.handlers``) fold what arrived into facts on the decision record (``session.model``):
observed Sessions (``session.observed``) and pods (``session.pods``, reduced by
``session.views``), replies (``session.replies``), answers and doubts (``session.answers``),
deadlines (``session.deadlines``); then ``save`` decides (``session.decide``).

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

from engine.effects.models import Effect
from engine.machines.base import (
    Answered, Ctx, Dispatch, ignore, InDoubt, Machine, Ordered, Reported, RetryDue, UnknownEvent,
)
from engine.machines.session import status, targets
from engine.machines.session import answers as a
from engine.machines.session import handlers as h
from engine.machines.session.decide import spec_of
from engine.machines.session.handlers import config_of, folds, save
from engine.machines.session.inputs import (
    CONFIG, KINDS, SEEN, TIMER_EVENTS, UNTRACKED, AheadDue, AheadRead, AheadReadInDoubt, BringUpDeadline,
    CreateRetryDue, EndpointInDoubt, EndpointObserved, EndpointRequest, FinalizerPatch, FinalizerPatchInDoubt,
    FirstList, ListsDue, OtherPod, OwnedInDoubt, OwnedRequest, PodDeleted, PodDeleteRetryDue, PodMissing, PodRead,
    PodReadInDoubt, PodSeen, Relisted, SessionDeleted, SessionMissing, SessionNotFound, SessionRead,
    SessionReadInDoubt, SessionSeen, StatusWrite, StatusWriteInDoubt, answered, doubted, observed, relisted, row_key,
)
from engine.machines.session.model import (
    BRINGING_UP, config, CONFIG_KEY, INDEX_KEY, PHASES, TABLE, SessionConfig, SessionDecision, SessionEntry,
)
from engine.machines.session.replies import (
    keep, namespace_failed, namespace_ready, pod_create_failed, pod_create_failed_late, pod_created,
    pod_created_late, pod_delete_failed, pod_delete_failed_late, pod_gone, repo_ensured, repo_failed, repo_status,
)
from engine.seams import (
    NamespaceFailed, NamespaceReady, PodCreated, PodCreateFailed, PodDeleteFailed, PodGone, RepoEnsured,
    RepoFailed, RepoStatusReply, SecretListed, SessionConfigure, SessionMessage,
)
from journal.records import Command, Observed, Outcome, Relist


__all__ = ["SessionMachine", "DISPATCH", "UNTRACKED", "save", "config_of"]


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
        DISPATCH.run(ctx, CONFIG_KEY, CONFIG, type(cmd), ctx.get(CONFIG_KEY), Ordered(rec, cmd))

    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        key, phase, event = observed(ctx, rec)
        DISPATCH.run(ctx, key, phase, event, ctx.get(key) if phase != SEEN else None, rec)

    def on_relist(self, ctx: Ctx, rec: Relist) -> None:
        """A relist's absences are suspects (``base.missing_after_relist``): each is re-read with a
        quorum GET, and only that GET's 404 lets go of a Session or marks its pod gone."""
        for key, phase, event in relisted(ctx, rec):
            DISPATCH.run(ctx, key, phase, event, ctx.get(key) if phase != SEEN else None, rec)

    def on_receive(self, ctx: Ctx, key: str, msg: SessionMessage) -> None:
        d = ctx.get(key)
        DISPATCH.run(ctx, key, row_key(d), type(msg), d, msg)

    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Effect) -> None:
        d = ctx.get(effect.key)
        event = answered(d, effect, rec)
        ev = Reported(rec, effect) if event is Reported else Answered(rec, effect)
        DISPATCH.run(ctx, effect.key, row_key(d), event, d, ev)

    def on_in_doubt(self, ctx: Ctx, effect: Effect) -> None:
        d = ctx.get(effect.key)
        event = doubted(d, effect)
        ev = Reported(None, effect) if event is Reported else InDoubt(effect)
        DISPATCH.run(ctx, effect.key, row_key(d), event, d, ev)

    def on_quarantine(self, ctx: Ctx, key: str, error: str) -> None:
        d = ctx.get(key)
        if isinstance(d, SessionDecision):
            status.quarantined(ctx, key, d, spec_of(d, config(ctx) or SessionConfig()), config(ctx) or SessionConfig(), error)

    def on_deadline(self, ctx: Ctx, key: str, name: str) -> None:
        d = ctx.get(key)
        event = TIMER_EVENTS.get(name)
        if event is None:
            raise UnknownEvent(self.name, row_key(d), f"deadline {name!r}")
        DISPATCH.run(ctx, key, row_key(d), event, d, name)


_OTHER = {p: tuple(q for q in PHASES if q != p) for p in ("Pending", "Creating", "Stopping")}
_OTHER["bringing up"] = tuple(q for q in PHASES if q not in BRINGING_UP)
STOPPING = ("Stopping", "Stopped")
_NOT_STOPPING = tuple(q for q in PHASES if q not in STOPPING)
_NOT_PROVISIONING = tuple(p for p in PHASES if p != "Provisioning")
ALL = (*PHASES, UNTRACKED)
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
_ANSWERS = (SessionNotFound, AheadRead, StatusWrite, FinalizerPatch, SessionRead, PodRead, OwnedRequest,
            EndpointRequest, AheadReadInDoubt, StatusWriteInDoubt, FinalizerPatchInDoubt, SessionReadInDoubt,
            PodReadInDoubt, OwnedInDoubt, EndpointInDoubt)
_TIMERS = (AheadDue, RetryDue, CreateRetryDue, PodDeleteRetryDue, BringUpDeadline, ListsDue)


# The session machine: (phase or kind, event) -> handler. A Session key's row key is its record's
# phase (``SessionDecision.phase``, moved along ``model.TABLE``), ``untracked`` for no record; what
# is no Session's record is ``seen`` (kept for a record rebuilt from its status) or ``config``.
#
# The session is level-based: these rows route each input to its reduction, which folds the facts
# it brings into the record (``handlers.folds``), and ``save`` then decides on the record alone:
# the decision is one exhaustive match over a small reduced record (``decide.decision``), whatever
# the input was. A row says where an input's facts go; what the Session does next is decided there.
DISPATCH = Dispatch("session", [
    # the command
    (CONFIG, SessionConfigure, h.configure),
    # observations and relists
    (ALL, SessionSeen, h.session_seen),
    (UNTRACKED, SessionDeleted, ignore),
    (PHASES, SessionDeleted, h.session_deleted),
    (PHASES, PodSeen, h.pod_seen),
    (PHASES, PodDeleted, h.pod_deleted),
    (SEEN, OtherPod, h.other_pod),
    (SEEN, EndpointObserved, h.endpoint_observed),
    (SEEN, Relisted, h.relisted),
    (PHASES, SessionMissing, h.session_missing),
    (PHASES, FirstList, h.first_list),
    (PHASES, PodMissing, h.pod_missing),
    # answers and doubts: by the request they answer (``inputs.REQUESTS``)
    (ALL, Reported, h.reported),
    (UNTRACKED, _ANSWERS, ignore),   # about a Session kfold no longer tracks: nothing to decide
    (PHASES, SessionNotFound, h.session_not_found),
    (PHASES, AheadRead, h.ahead_read),
    (PHASES, StatusWrite, h.status_written),
    (PHASES, FinalizerPatch, folds(a.finalizer_patched)),
    (PHASES, SessionRead, folds(a.session_read)),
    (PHASES, PodRead, folds(a.pod_read_answer)),
    (_NOT_STOPPING, OwnedRequest, folds(a.owned_answer)),
    (STOPPING, OwnedRequest, folds(a.owned_answer_in_teardown)),
    (PHASES, EndpointRequest, folds(a.endpoint_answer)),
    (PHASES, AheadReadInDoubt, folds(a.ahead_read_in_doubt)),
    (PHASES, StatusWriteInDoubt, folds(a.status_write_in_doubt)),
    (PHASES, (SessionReadInDoubt, FinalizerPatchInDoubt), folds(a.session_in_doubt)),
    (PHASES, PodReadInDoubt, folds(a.pod_read_in_doubt)),
    (_NOT_STOPPING, OwnedInDoubt, folds(a.owned_in_doubt)),
    (STOPPING, OwnedInDoubt, folds(a.owned_in_doubt_in_teardown)),
    (PHASES, EndpointInDoubt, folds(a.endpoint_in_doubt)),
    # timers
    *((UNTRACKED, event, ignore) for event in _TIMERS),
    (PHASES, ListsDue, h.lists_due),
    (PHASES, AheadDue, h.ahead_due),
    (PHASES, RetryDue, h.retry_due),
    (PHASES, CreateRetryDue, h.create_retry_due),
    ("Stopping", PodDeleteRetryDue, h.pod_delete_due),
    (_OTHER["Stopping"], PodDeleteRetryDue, h.pod_delete_moot),
    ("Provisioning", BringUpDeadline, h.bring_up_due),
    (_NOT_PROVISIONING, BringUpDeadline, ignore),
    # messages: replies from the pod and repo machines
    (UNTRACKED, PodCreated, h.created_for_none),
    *((UNTRACKED, model, h.untracked) for model in _REPLIES if model is not PodCreated),
    (UNTRACKED, SecretListed, h.untracked),
    (PHASES, SecretListed, h.secret_listed),
    *((PHASES, model, folds(handler)) for model, handler in _REPLIES.items() if model not in _BY_PHASE),
    *((phases, model, folds(handler)) for model, rows in _BY_PHASE.items() for phases, handler in rows),
], phases=TABLE, kinds=KINDS)
