"""The session machine's inputs, reduced to the events its table routes (``session.machine.DISPATCH``).

Every input names its event class for what it is, and the key it is about: the Session's key
(its row key is the record's phase, ``UNTRACKED`` with none) or, for what is no Session's record,
a kind named for it (``SEEN``: what the lists and watches show for a record rebuilt from its
status, ``session.seen``; ``CONFIG``: the configuration). Routing is by the event class and the
row key only: no handler tests an object kind or an effect's type to find out what arrived.

- Observations: ``SessionSeen``/``SessionDeleted``; of a pod, ``PodSeen``/``PodDeleted`` when it
  is a tracked Session's current pod (``pods.pod_owner``), else ``OtherPod`` (kept, or released
  as spent: ``pods.release_stale``); a Service or Ingress, ``EndpointObserved``.
- Relists (``relisted``): a Session a list lacks, ``SessionMissing``; a list of a kept kind,
  ``Relisted`` (``SEEN``), then ``FirstList`` at each resumed record waiting for it, then, for a
  Pod list, ``PodMissing`` at each Session whose current pod it lacks.
- Outcomes (payload ``base.Answered``) and doubts (``base.InDoubt``), by the request they answer
  (``answered``, ``doubted``): a report's (an Event's) is ``Reported`` whatever its key.
- Timers (``TIMER_EVENTS``; payload: the timer's name) and the command ``session.configure``
  (``base.Ordered``, at ``CONFIG``); messages are their seam models (``engine.seams``).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.effects.models import (
    CreateObject, DeleteObject, Effect, GetObject, PatchObject, PostEvent, RecordEvent, ReplaceObject,
)
from engine.machines.base import Ctx, Reported, RetryDue, UnknownEvent, missing_after_relist, object_key
from engine.machines.session import objects, retry, targets
from engine.machines.session.ahead import AHEAD_TIMER
from engine.machines.session.model import SessionDecision, config, sessions
from engine.machines.session.pods import pod_owner
from engine.machines.session.release import pod_key
from engine.machines.session.resumed import resuming
from engine.machines.session.timers import LISTS_TIMER, POD_DELETE_RETRY
from journal.records import Observed, Outcome, Relist

UNTRACKED = "untracked"   # the row key of a Session key with no record (gone, or never seen)
SEEN = "seen"             # the row key of what is no Session's record: kept for one rebuilt from its status
CONFIG = "config"         # the row key of the configuration (``session.configure``)
KINDS = (UNTRACKED, SEEN, CONFIG)


# -- observations (payload: the ``Observed`` record) --------------------------------------------
class SessionSeen:
    """An ADDED or MODIFIED event (or a list item) of a Session."""


class SessionDeleted:
    """A DELETED event of a Session."""


class PodSeen:
    """An ADDED or MODIFIED event of a tracked Session's current pod."""


class PodDeleted:
    """A DELETED event of a tracked Session's current pod (by anyone: kfold, a user, the node)."""


class OtherPod:
    """An event of a pod that is no tracked Session's current pod (an earlier or newer generation's,
    or no Session's yet)."""


class EndpointObserved:
    """An event (DELETED included) of a Service or Ingress."""


# -- relists ------------------------------------------------------------------------------------
class Relisted:
    """A complete list of a kind ``session.seen`` keeps (payload: the ``Relist``)."""


class SessionMissing:
    """A Session list lacks a tracked Session: a suspect, re-read with a quorum GET."""


class FirstList:
    """A resumed record's target had a first list of a kind it waits for (``session.resumed``)."""


class PodMissing:
    """A Pod list lacks a tracked Session's current pod: a suspect, re-read with a quorum GET."""


# -- answers (payload ``Answered``) and doubts (payload ``InDoubt``), by request -----------------
class SessionRead:
    """The answer to a quorum read of the Session (``retry.reobserve``, a relist's suspect), not 404."""


class SessionNotFound:
    """A quorum read of the Session answered 404: proof it is deleted."""


class AheadRead:
    """The answer to the read of the Session that judges pods ahead of its record (``session.ahead``)."""


class StatusWrite:
    """The answer to a status write (a patch of the Session's ``status`` subresource)."""


class FinalizerPatch:
    """The answer to a patch of the Session's finalizers."""


class PodRead:
    """The answer to a quorum read of the current pod (``pods.read_pod``)."""


class OwnedRequest:
    """The answer to a request about an object the Session owns: its env Secret, its workspace claim."""


class EndpointRequest:
    """The answer to a request about the Session's Service or Ingress (``session.endpoints``)."""


class SessionReadInDoubt:
    """A quorum read of the Session, in doubt."""


class AheadReadInDoubt:
    """The read that judges pods ahead, in doubt."""


class StatusWriteInDoubt:
    """A status write, in doubt."""


class FinalizerPatchInDoubt:
    """A finalizer patch, in doubt."""


class PodReadInDoubt:
    """A quorum read of the current pod, in doubt."""


class OwnedInDoubt:
    """A request about the Secret or the workspace claim, in doubt."""


class EndpointInDoubt:
    """A request about the Service or Ingress, in doubt."""


# -- timers (payload: the timer's name) ---------------------------------------------------------
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

# The request an effect is, by (effect class, kind, subresource): (its answer's event, its doubt's).
_OBJECT_REQUESTS = (CreateObject, GetObject, ReplaceObject, DeleteObject)
REQUESTS: dict[tuple[type, str, str], tuple[type, type]] = {
    (GetObject, "Session", ""): (SessionRead, SessionReadInDoubt),
    (PatchObject, "Session", ""): (FinalizerPatch, FinalizerPatchInDoubt),
    (PatchObject, "Session", "status"): (StatusWrite, StatusWriteInDoubt),
    (GetObject, "Pod", ""): (PodRead, PodReadInDoubt),
    **{(t, k, ""): (OwnedRequest, OwnedInDoubt) for t in _OBJECT_REQUESTS for k in objects.KINDS},
    **{(t, k, ""): (EndpointRequest, EndpointInDoubt) for t in _OBJECT_REQUESTS for k in ("Service", "Ingress")},
    (RecordEvent, "", ""): (Reported, Reported),
    (PostEvent, "", ""): (Reported, Reported),
}


def row_key(d: Any) -> str:
    """The row key of a Session key holding ``d``: its phase, ``UNTRACKED`` for no Session record."""
    return d.phase if isinstance(d, SessionDecision) else UNTRACKED


def _request(effect: Effect) -> tuple[type, type]:
    got = REQUESTS.get((type(effect), getattr(effect, "kind", ""), getattr(effect, "subresource", "") or ""))
    if got is None:
        raise UnknownEvent("session", "any", f"answer to {type(effect).__name__} {getattr(effect, 'kind', '')}")
    return got


def answered(d: Any, effect: Effect, rec: Outcome) -> type:
    """The event of ``rec``, the outcome of ``effect`` (about the record ``d``)."""
    event = _request(effect)[0]
    if event is SessionRead and rec.result == "not_found":
        return SessionNotFound
    if event is SessionRead and isinstance(d, SessionDecision) and effect.id == d.ahead_read:
        return AheadRead
    return event


def doubted(d: Any, effect: Effect) -> type:
    """The event of ``effect`` in doubt (about the record ``d``)."""
    if isinstance(d, SessionDecision) and effect.id == d.ahead_read:
        return AheadReadInDoubt
    return _request(effect)[1]


def observed(ctx: Ctx, rec: Observed) -> tuple[str, str, type]:
    """(key, row key, event) of an observation."""
    return _OBSERVED[rec.kind](ctx, rec)


def _session(ctx: Ctx, rec: Observed) -> tuple[str, str, type]:
    key = object_key(rec.cluster, rec.namespace, rec.name)
    return key, row_key(ctx.get(key)), SessionDeleted if rec.event == "DELETED" else SessionSeen


def _pod(ctx: Ctx, rec: Observed) -> tuple[str, str, type]:
    # no Session placed anywhere: every pod is no Session's yet, and its labels are not read
    owner = None if targets.none_tracked(ctx) else pod_owner(ctx, rec)
    if owner is None:
        return object_key(rec.cluster, rec.namespace, rec.name), SEEN, OtherPod
    return owner, row_key(ctx.get(owner)), PodDeleted if rec.event == "DELETED" else PodSeen


def _endpoint(ctx: Ctx, rec: Observed) -> tuple[str, str, type]:
    return object_key(rec.cluster, rec.namespace, rec.name), SEEN, EndpointObserved


_OBSERVED = {"Session": _session, "Pod": _pod, "Service": _endpoint, "Ingress": _endpoint}


def relisted(ctx: Ctx, rec: Relist) -> Iterator[tuple[str, str, type]]:
    """(key, row key, event) of each thing a relist says, each drawn after the one before is folded."""
    yield from _RELISTED[rec.kind](ctx, rec)


def _sessions_relisted(ctx: Ctx, rec: Relist) -> Iterator[tuple[str, str, type]]:
    for key in missing_after_relist([k for k, _ in sessions(ctx)], rec):
        yield key, row_key(ctx.get(key)), SessionMissing


def _kept_relisted(ctx: Ctx, rec: Relist) -> Iterator[tuple[str, str, type]]:
    yield "", SEEN, Relisted
    cfg = config(ctx)
    if cfg is None or rec.kind not in cfg.listed:
        return
    for key, d in sessions(ctx):
        if resuming(d) and d.target == rec.cluster and (not rec.scope or rec.scope == d.target_ns):
            yield key, row_key(ctx.get(key)), FirstList


def _pods_relisted(ctx: Ctx, rec: Relist) -> Iterator[tuple[str, str, type]]:
    yield from _kept_relisted(ctx, rec)
    current = {pod_key(d): k for k, d in sessions(ctx) if d.pod.created and not d.pod.gone}
    for pk in missing_after_relist(current, rec):
        yield current[pk], row_key(ctx.get(current[pk])), PodMissing


_RELISTED = {"Session": _sessions_relisted, "Pod": _pods_relisted, "Service": _kept_relisted,
             "Ingress": _kept_relisted}
