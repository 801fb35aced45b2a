"""A Session's observations (watch, list, quorum read) folded into its record, and its deletion.

Guarantees:
- ``absorb``: a new uid under the same name starts a new record; a deletionTimestamp is never
  taken back; the same spec keeps the same dict (``decide.spec_of`` remembers by it).
- A Session kfold has no record of resumes from the status kfold wrote on it (``from_status``):
  a lost journal costs history, never a healthy object (DESIGN invariant 9).
- Once kfold's last status write has been seen, a later observation showing another phase or
  generation is another writer's: the status is written again (``_overwritten``).
- An observation older than the one folded (``older``) or of a Session deleted since
  (``was_deleted``) is ignored; ``session_gone`` lets go of the pod, the pods ahead and the
  repositories, cancels the timers and forgets the record.
"""
from __future__ import annotations

import json
from typing import Any

from engine.seams import ReleaseRepo
from engine.machines.base import Ctx
from engine.machines.session import finalizer, retry, status
from engine.machines.session import targets
from engine.machines.session.ahead import AHEAD_TIMER, release_ahead
from engine.machines.session.model import (
    DeletedSessions, Failure, FINALIZER, GONE_KEY, LIVE, MAX_GONE, same_json, SessionDecision,
)
from engine.machines.session.release import release, spec_text
from engine.machines.session.views import session_view


def absorb(d: SessionDecision | None, cluster: str, obj: dict[str, Any]) -> SessionDecision:
    """Fold a Session's latest state into its record (a new uid under the same name starts over)."""
    v = session_view(obj)
    renewed = d is None or bool(d.uid and v.uid and d.uid != v.uid)
    if renewed or _overtaken(d, v):
        # Rebuilt from the status. Pods noted as ahead of the record stay noted: the fresh record
        # judges them (``session.ahead``). Overtaken, it is the same Session: the pods it is still
        # letting go stay its own too.
        kept = {} if renewed else {"releasing": d.releasing, "abandoned": d.abandoned}
        d = from_status(SessionDecision(name=v.name, namespace=v.namespace, home=cluster,
                                        ahead=d.ahead if d is not None else {}, **kept), v)
    # A deletionTimestamp is never taken back: an observation of the same uid without one is older
    # than what was folded (a stale list), and must not resume a Session being deleted.
    deleting = v.deleting or (d.deleting and d.uid == v.uid)
    step = finalizer.after(d.finalizer_step, "observed", carried=FINALIZER in v.finalizers or deleting)
    d = _overwritten(d, v)
    # The same spec keeps the same dict: ``session.spec_of`` remembers its validation by it.
    spec = d.spec_raw if same_json(v.spec, d.spec_raw) else v.spec
    return d.but(uid=v.uid, rv=v.rv, spec_raw=spec, spec_generation=v.spec_generation, deleting=deleting, finalizers=v.finalizers,
                 finalizer_step=step, reported_phase=v.phase, reported_generation=v.generation,
                 since=d.since or {t: (st, at) for t, st, at in v.since})   # a fresh record keeps the times written


def _overwritten(d: SessionDecision, v: Any) -> SessionDecision:
    """Once kfold's last status write has been seen (its resourceVersion, or a later one:
    ``_later``), a later observation showing another phase or generation means another writer (a
    replica that led meanwhile) overwrote it: the status is written again on the next decision.
    Found by kfold sim (soak seeds 20111, 20132: two daemons, each trusting what it last wrote,
    left a Stopped Session showing Stopping)."""
    if d.status_rv and v.rv == d.status_rv:
        return d.but(status_echoed=True)
    echoed = d.status_echoed or _later(v.rv, d.status_rv)
    if not (echoed and d.status_written and v.phase):   # no status at all: a list older than any write
        return d
    written = json.loads(d.status_written)
    if (written.get("phase"), written.get("generation")) == (v.phase, v.generation):
        return d
    return d.but(status_written="", status_rv="", status_echoed=False)


def _later(rv: str, than: str) -> bool:
    """``rv`` is a later write than ``than``, our last status write's answer: a relist can skip
    that write's own event. resourceVersions are opaque by contract; kube-apiserver's are etcd
    revisions (integers), compared as such; anything else is compared for equality only."""
    return bool(than) and rv.isdigit() and than.isdigit() and int(rv) > int(than)


def older(d: Any, obj: dict[str, Any]) -> bool:
    """An observation of the Session kfold has folded with an earlier resourceVersion than the one
    it folded: a stale list, or a watch replaying from one (``_later`` says how resourceVersions
    are compared). Folding it would take back what the user asked since: a stale replay of a
    suspended Session's first version (not suspended) began a generation the Session never had, so
    this record counted the user's next resume one generation too far and released the pod another
    replica made for it as spent (found by kfold sim, soak seed 81862)."""
    meta = obj.get("metadata") or {}
    return (isinstance(d, SessionDecision) and bool(d.uid) and d.uid == meta.get("uid")
            and _later(d.rv, str(meta.get("resourceVersion") or "")))


def _overtaken(d: SessionDecision, v: Any) -> bool:
    """Bringing up generation N while the Session's status (written only by kfold) reports a later
    one: another replica led meanwhile and moved it on (a standby's record, decided but never
    issued, is behind). The record resumes from the status, as from a lost journal, rather than
    create generation N's pod again under a name already used and released (found by kfold sim,
    soak seed 20035: two daemons, the standby took over and re-created ``<session>-g2``).

    Failed at generation N likewise: only a changed spec moves a Failed Session on, and a record
    resumed from a Failed status (``from_status``) takes the spec it meets for the one that failed,
    so it never sees that change; the other replica's later generation is the evidence. Kept
    Failed, it released that generation's pod as spent and, leading, wrote Failed over it (kfold
    sim, soak seed 82541)."""
    behind = d.phase in LIVE or d.phase == "Failed"
    return behind and v.generation > d.generation and bool(d.uid) and d.uid == v.uid


def from_status(d: SessionDecision, v: Any) -> SessionDecision:
    """A Session kfold has no record of (a fresh or lost journal) resumes from the status kfold
    wrote on it, so the cluster, not the journal, is the source of truth (DESIGN invariant 9).

    Bringing up (Pending..Ready) generation N: the record starts at N-1, so ``begin`` makes N again,
    and ``resumed`` N: once the first lists are folded, the pod they show under ``<session>-gN``
    with this Session's labels is adopted (``session.seen``); one they do not show is created, and
    AlreadyExists is adopted by the pod machine when its labels are this Session's; nothing is
    deleted, no new generation is started. The status it shows is taken as the last one written. Failed: it stays
    Failed for the spec it failed on (a changed spec retries, as ever). Otherwise (Suspended,
    Stopped) the generation carries on, so a resume is N+1, never a reused name.
    Caveat: a spec changed while kfold ran without its journal is adopted as generation N's pod;
    the pod's own shape is not compared."""
    if v.generation <= 0:
        return d.but(resumed=1) if FINALIZER in v.finalizers else d   # generation 1's pod may exist (``reported``)
    # what the status shows was evented when it was written: not posted again
    d = d.but(evented=status.event_mark(v.phase, v.generation, v.failure[0] or "Failed" if v.phase == "Failed" else ""))
    # What it shows is what was written: the same status is not written again (its echo is this observation).
    d = d.but(status_written=status.written(v.status), status_rv=v.rv, status_echoed=True) if v.phase else d
    if v.phase in LIVE:   # what the first lists show of generation N is adopted (``session.seen``)
        return d.but(generation=v.generation - 1, resumed=v.generation)
    if v.phase == "Failed":
        reason, message = v.failure
        # The Failed condition names the spec (metadata.generation) that failed; one older than the
        # Session's spec failed before a change the fresh record never saw: the current spec is not
        # the failed one, and it retries (soak seed 770254: a second daemon with a journal of its
        # own took a changed spec for the failed one and wrote Failed over its Running pod). A
        # status without it (written before kfold named it) is taken as the current spec's.
        older = 0 < v.failed_generation < v.spec_generation
        return d.but(generation=v.generation, phase="Failed", failure=Failure(reason=reason or "Failed", message=message),
                     failed_spec="(an earlier spec)" if older else spec_text(d.but(spec_raw=v.spec)))
    return d.but(generation=v.generation)


def session_gone(ctx: Ctx, key: str) -> None:
    """The Session is deleted: let go of its pod and repositories, forget it."""
    d = ctx.get(key)
    if not isinstance(d, SessionDecision):
        return
    d = release_ahead(ctx, key, release(ctx, key, d, "session deleted"), "session deleted")
    for r in d.repos:
        ctx.tell(r.key, ReleaseRepo(reply_to="session", reply_key=key))
    for name in ("start", "ready", AHEAD_TIMER, *retry.TIMERS):
        ctx.cancel_timer(key, name)
    targets.update(ctx, key, ctx.get(key), None)
    ctx.drop(key)
    if d.uid:
        gone = ctx.get(GONE_KEY)
        uids = gone.uids if isinstance(gone, DeletedSessions) else ()
        ctx.put(GONE_KEY, DeletedSessions(uids=(uids + (d.uid,))[-MAX_GONE:]))


def was_deleted(ctx: Ctx, obj: dict[str, Any]) -> bool:
    gone = ctx.get(GONE_KEY)
    uid = (obj.get("metadata") or {}).get("uid")
    return isinstance(gone, DeletedSessions) and bool(uid) and uid in gone.uids
