"""The session machine ("session"): a Session custom resource brought up, served and torn down.

The Session ``spec`` is the command channel: ``suspended`` true/false suspends/resumes (a resume is
generation N+1), a change of the app set recreates as N+1, a ports-only change re-routes, and
``stopped`` true (or deleting the resource; finalizer ``kfold.dev/teardown``) tears down.

This module routes; ``session.flow.decide`` decides. Every handler reduces what arrived to facts on
the decision record (``session.model``), then calls ``decide``.

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
(``session.flow``, pods ahead: pods of a newer generation than a podless record knows).

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

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from engine import backoff
from engine.machines.session.model import same_json
from engine.effects.models import Effect, GetObject, ObjectEffect, RecordEvent
from engine.machines.base import (Ctx, Dispatch, Machine, RetryDue, UnknownEvent, ignore, missing_after_relist, object_key,
                                  remember, split_key)
from engine.machines.session import finalizer, flow, model, owned, retry, secret, seen, status, steps, tenancy
from engine.machines.session.manifests import GENERATION_LABEL, SESSION_LABEL, WORKSPACE
from engine.machines.session.model import (BRINGING_UP, CONFIG_KEY, INDEX_KEY, PHASES, FINALIZER, GONE_KEY, LIVE, MAX_GONE,
                                          DeletedSessions, Failure, Moved, PodFacts, Run, SessionConfig,
                                          SessionDecision, SessionEntry, fire, moved)
from engine.machines.session.spec import SpecError, ceilings
from engine.machines.session.status import API_VERSION
from engine.seams import (MESSAGES, NamespaceFailed, NamespaceReady, PodCreated, PodCreateFailed, PodDeleteFailed, PodGone,
                          RepoEnsured, RepoFailed, RepoStatusReply, SecretListed, SessionConfigure, SessionMessage)
from journal.records import Command, Observed, Outcome, Relist

__all__ = ["SessionMachine"]
MESSAGE_NAMES = {model: name for (machine, name), model in MESSAGES.items() if machine == "session"}
READ_GRACE_MS = 5_000   # a bring-up deadline met while its pod is being read is judged again this much later


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
            return model.owner(table, *args)
        slots = getattr(table.get(INDEX_KEY), "slots", None)
        if isinstance(slots, dict):
            return set(slots)
        return {f"{d.target}/{d.target_ns}/{d.name}" for _, d in table.items()
                if getattr(d, "kind", "") == "session" and d.target}

    def on_command(self, ctx: Ctx, rec: Command, cmd: SessionConfigure) -> None:
        """The configuration every decision reads; every Session is decided again under it (at
        boot too: the daemon's first configure is what re-decides each Session after a restart,
        on the clocks it knows now). One equal to the configuration in force is not stored again:
        the one in force is kept by identity, as ``flow.spec_of`` remembers validations by it."""
        text = cmd.model_dump_json()
        cfg = _CONFIGS.get(text) or remember(_CONFIGS, text, config_of(cmd), 8)
        if cfg != config(ctx):
            ctx.put(CONFIG_KEY, cfg)
        for key, d in list(sessions(ctx)):
            save(ctx, key, d)

    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        if rec.kind == "Pod":
            if model.none_tracked(ctx):  # no Session placed anywhere: every pod is no session's yet
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
        if _was_deleted(ctx, rec.obj):
            return ctx.log(key, "an observation of a Session deleted since (a stale list); ignored", level="debug")
        if _older(ctx.get(key), rec.obj):
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
        current = {flow.pod_key(d): k for k, d in sessions(ctx) if d.pod.created and not d.pod.gone}
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
            status.quarantined(ctx, key, d, flow.spec_of(d, config(ctx) or SessionConfig()), config(ctx) or SessionConfig(), error)

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
        if flow.resuming(d) and d.target == rec.cluster and (not rec.scope or rec.scope == d.target_ns):
            save(ctx, key, d)


def _bring_up_deadline(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    """``start`` or ``ready`` passed while Provisioning: fail the Session, or judge again later."""
    now = ctx.now_on(d.target)
    if now is not None and _judge_later(ctx, key, d, name):
        ctx.set_timer(key, name, now + READ_GRACE_MS, d.target)
    elif (name == "start" and not flow.running(d)) or (name == "ready" and flow.running(d)):
        if now is not None and d.pod.name and d.pod.checked != name:
            # What kfold last saw of the pod may be old (a paused process, a watch broken or
            # lagging): the Session fails only on a quorum read of its pod made once the deadline
            # passed, judged when it has answered (found by kfold sim, soak seed 741061: a daemon
            # resumed from two pauses, its pod watch relisting after a compaction, failed a
            # Session at its start deadline while the pod had been Running and Ready for a minute).
            # A read already in flight may predate the deadline: its answer is awaited, then
            # the next judgement reads again.
            if not d.pod.reading:
                d = read_pod(ctx, key, d)
                d = d.but(pod=d.pod.but(checked=name))
            ctx.set_timer(key, name, now + READ_GRACE_MS, d.target)
        elif name == "start":
            d = flow.fail(ctx, key, d, "StartDeadlineExceeded",
                          f"pod {d.pod.name} did not reach Running within the start deadline ({d.start_ms // 1000} s)")
        else:
            d = flow.fail(ctx, key, d, "ReadyDeadlineExceeded", _not_ready(d))
    save(ctx, key, d)


def _judge_later(ctx: Ctx, key: str, d: SessionDecision, name: str) -> str:
    """Why a bring-up deadline that fired is judged again ``READ_GRACE_MS`` later instead of failing
    the Session ("" = judge now): what kfold sees is known to be stale or incomplete, or what is
    missing is kfold's own doing, not the Session's. Each reason was found by kfold sim; each lasts
    only while something kfold waits for is outstanding, so the deadlines bound every bring-up."""
    running = flow.running(d)
    if _reported_ready(d) and not (name == "ready" and not running) and _requests_in_flight(ctx, key):
        # The Session's status (written only by kfold) already says this generation is Ready:
        # another replica brought it up while this record, a standby's, fell behind; judged once the
        # takeover's re-reads and requests have answered (soak seed 70039: a takeover failed a Ready
        # Session at its ready deadline while its in-doubt Service/Ingress creates were in flight).
        # Not beyond them: a status resumed from (a fresh journal or replica) over a pod that is
        # gone and never comes back up is judged as a fresh bring-up (issue 33, item 2).
        return "the status already reports this generation Ready"
    if d.pod.reading and (not running) == (name == "start"):   # start: not Running; ready: Running
        # Its pod's state is being read (an adopted pod, a relist without it, or the read an
        # earlier firing made, which a slow apiserver answers only after READ_GRACE_MS: the
        # request timeout is longer): judged after the answer, never on the picture from before
        # the deadline (soak seed 40120: a takeover failed a Session whose adopted pod had long
        # been Running).
        return "the pod is being read"
    if name == "ready" and running and d.pod.ready and not flow.unsynced(d):
        # The workspace is up; only kfold's own Service/Ingress requests are outstanding (the
        # apiserver slow, throttling, failing); the endpoints' bounded tries move it to Ready with
        # the EndpointsPublished condition saying why (soak seeds 70081-70247: Sessions Failed with
        # a healthy pod under a long run of 500s and resets).
        return "only kfold's own Service/Ingress requests are outstanding"
    return ""


def _requests_in_flight(ctx: Ctx, key: str) -> bool:
    """The Session's own requests still unanswered, besides reads of its pod (the judgement's own)
    and status writes (what the judgement decides, not what it waits for)."""
    return any(not (e.type == "get" and e.kind == "Pod") and getattr(e, "subresource", "") != "status"
               for e in ctx.pending_for(key))


def _reported_ready(d: SessionDecision) -> bool:
    return d.reported_phase == "Ready" and d.reported_generation == d.generation


def _not_ready(d: SessionDecision) -> str:
    why = [] if d.pod.ready else [f"the workspace container of pod {d.pod.name} did not become ready"]
    if d.pod.ready and flow.unsynced(d):
        why.append(f"repositories not synced on node {d.pod.node}: {', '.join(flow.unsynced(d))}")
    elif d.pod.ready:
        why.append(f"Service/Ingress {d.name} not published (a request still unanswered)")
    return f"{'; '.join(why)} within the ready deadline ({d.ready_ms // 1000} s)"


# -- the table ----------------------------------------------------------------------------------

def sessions(ctx: Ctx) -> list[tuple[str, SessionDecision]]:
    return [(k, d) for k, d in ctx.items() if isinstance(d, SessionDecision)]


def config(ctx: Ctx) -> SessionConfig | None:
    cfg = ctx.get(CONFIG_KEY)
    return cfg if isinstance(cfg, SessionConfig) else None


def save(ctx: Ctx, key: str, d: SessionDecision | Moved) -> None:
    """Fire what a handler's answer moves (``Moved``: the dispatcher's part), decide (once
    configured) and store; keep the target index in step."""
    if isinstance(d, Moved):
        d = fire(d)
    cfg = config(ctx)
    before = ctx.get(key)
    after = d if cfg is None else _judge_ahead(ctx, key, flow.decide(ctx, key, d, cfg), cfg)
    ctx.put(key, after)
    model.update(ctx, key, before, after)


def _judge_ahead(ctx: Ctx, key: str, d: SessionDecision, cfg: SessionConfig) -> SessionDecision:
    """Pods newer than the record knew (``session.flow``, pods ahead), judged on what the decision now knows:
    after ``decide``, which may have begun their generation (its create adopts them)."""
    judged = flow.judge_ahead(ctx, key, d) if d.ahead else d
    d = d if judged is d else flow.decide(ctx, key, judged, cfg)
    flow.arm_ahead(ctx, key, d)
    return d


def _ahead_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> None:
    """The quorum read ``session.flow.read_ahead`` asked for: newer than the pods it was asked for, so
    each of them is judged on it. A failed read is made again after the grace."""
    if rec.result != "ok" or not isinstance(rec.obj, dict):
        ctx.log(key, f"session {d.name}: could not read the Session to judge pods newer than its record: "
                     f"{rec.result} {rec.message}".strip(), level="warning")
        return save(ctx, key, d)
    save(ctx, key, absorb(d, d.home, rec.obj))
    d = ctx.get(key)
    if isinstance(d, SessionDecision) and d.ahead:
        save(ctx, key, flow.judge_ahead(ctx, key, d, settled=True))


def absorb(d: SessionDecision | None, cluster: str, obj: dict[str, Any]) -> SessionDecision:
    """Fold a Session's latest state into its record (a new uid under the same name starts over)."""
    v = session_view(obj)
    renewed = d is None or bool(d.uid and v.uid and d.uid != v.uid)
    if renewed or _overtaken(d, v):
        # Rebuilt from the status. Pods noted as ahead of the record stay noted: the fresh record
        # judges them (session.flow, pods ahead). Overtaken, it is the same Session: the pods it is still
        # letting go stay its own too.
        kept = {} if renewed else {"releasing": d.releasing, "abandoned": d.abandoned}
        d = from_status(SessionDecision(name=v.name, namespace=v.namespace, home=cluster,
                                        ahead=d.ahead if d is not None else {}, **kept), v)
    # A deletionTimestamp is never taken back: an observation of the same uid without one is older
    # than what was folded (a stale list), and must not resume a Session being deleted.
    deleting = v.deleting or (d.deleting and d.uid == v.uid)
    step = finalizer.after(d.finalizer_step, "observed", carried=FINALIZER in v.finalizers or deleting)
    d = _overwritten(d, v)
    # The same spec keeps the same dict: ``session.flow.spec_of`` remembers its validation by it.
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


def _older(d: Any, obj: dict[str, Any]) -> bool:
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
        return d.but(resumed=1) if FINALIZER in v.finalizers else d   # generation 1's pod may exist (``flow.reported``)
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
                     failed_spec="(an earlier spec)" if older else flow._spec_text(d.but(spec_raw=v.spec)))
    return d.but(generation=v.generation)


def session_gone(ctx: Ctx, key: str) -> None:
    """The Session is deleted: let go of its pod and repositories, forget it."""
    d = ctx.get(key)
    if not isinstance(d, SessionDecision):
        return
    d = flow.release_ahead(ctx, key, flow.release(ctx, key, d, "session deleted"), "session deleted")
    for r in d.repos:
        ctx.tell("repo", r.key, "release", reply_to="session", reply_key=key)
    for name in ("start", "ready", flow.AHEAD_TIMER, *retry.TIMERS):
        ctx.cancel_timer(key, name)
    model.update(ctx, key, ctx.get(key), None)
    ctx.drop(key)
    if d.uid:
        gone = ctx.get(GONE_KEY)
        uids = gone.uids if isinstance(gone, DeletedSessions) else ()
        ctx.put(GONE_KEY, DeletedSessions(uids=(uids + (d.uid,))[-MAX_GONE:]))


def _was_deleted(ctx: Ctx, obj: dict[str, Any]) -> bool:
    gone = ctx.get(GONE_KEY)
    uid = (obj.get("metadata") or {}).get("uid")
    return isinstance(gone, DeletedSessions) and bool(uid) and uid in gone.uids


# -- outcomes of the session's own effects ------------------------------------------------------

def outcome(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: ObjectEffect) -> SessionDecision | Moved:
    if owned.created_behind_teardown(d, rec, effect):
        return owned.tear_down_late(ctx, key, d, effect.kind)
    match effect.kind, effect.type:
        case "Pod", "get":
            return pod_read(ctx, key, d, rec, effect)
        case "Session", "get":
            return retry.reread(ctx, key, d, rec, absorb)
        case "Session", "patch":
            return _finalizer_answer(ctx, key, d, rec)
        case _, ("delete" | "get") if d.phase in ("Stopping", "Stopped") and effect.kind in d.teardown:
            return owned.teardown_answer(ctx, key, d, rec, effect)
        case "Secret", ("get" | "delete") if d.secret_step == "dropping":
            return secret.on_dropping(ctx, key, d, rec, effect)
        case "Secret", "create":
            return _secret_answer(ctx, key, d, rec)
        case "Secret", "get":
            return _secret_read(ctx, key, d, rec, effect)
        case "PersistentVolumeClaim", "create":
            return _claim_answer(ctx, key, d, rec)
        case "PersistentVolumeClaim", "get":
            return _claim_read(ctx, key, d, rec, effect)
        case "Secret", "replace" if d.secret_step == "replacing" and rec.result not in secret.REREAD:
            return flow.fail(ctx, key, d.but(secret_step=steps.object_after(d.secret_step, "again")), "SecretFailed",
                             f"cannot replace Secret {effect.name}: {rec.result} {rec.message}".strip())
        case "Secret", "replace":
            return secret.on_replaced(ctx, d, rec)
        case ("Service" | "Ingress"), _:
            cfg = config(ctx) or SessionConfig()
            spec = flow.spec_of(d, cfg)
            if isinstance(spec, SpecError):
                return d
            if _foreign_endpoint(d, rec, effect, spec, cfg):
                field = flow.ENDPOINT_KINDS[effect.kind][0]
                d = d.but(**{field: getattr(d, field).but(stage="idle", have="", sending="")})
                return flow.fail(ctx, key, d, "NameTaken",
                                 owned.conflict(effect.kind, effect.namespace, effect.name, rec.obj, d.name))
            return flow.endpoint_outcome(ctx, key, d, rec, effect, spec, cfg)
    return d


def _finalizer_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> SessionDecision | Moved:
    if rec.result == "ok":
        d = absorb(d, d.home, rec.obj) if rec.obj else d
        return d.but(finalizer_step=finalizer.after(d.finalizer_step, "added"))
    if rec.result == "not_found":
        return d.but(gone=True)
    if rec.result in ("conflict", "transient") or (rec.result == "invalid" and finalizer.released(d.finalizer_step)):
        return retry.reobserve(ctx, key, d)   # "invalid": the removal's test op found the list changed
    if finalizer.released(d.finalizer_step):
        return d.but(blocked=f"cannot remove finalizer {FINALIZER}: {rec.result} {rec.message}".strip())
    return flow.fail(ctx, key, d, "FinalizerFailed", f"cannot add finalizer {FINALIZER}: {rec.result} {rec.message}".strip())


def _foreign_endpoint(d: SessionDecision, rec: Outcome, effect: flow.EndpointEffect, spec: Any, cfg: SessionConfig) -> bool:
    """A read of the Service/Ingress kfold wants to route found a same-name object not this
    Session's: it is reported, never replaced (``session.owned``)."""
    return (effect.type == "get" and rec.result == "ok" and not owned.owned(rec.obj, d.name)
            and flow.desired_endpoints(d, spec, cfg)[effect.kind] is not None)


def _secret_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> SessionDecision | Moved:
    if d.secret_step != "sent":
        return d
    if rec.result == "ok":
        return d.but(secret_step=steps.object_after(d.secret_step, "made"), secret_uid=owned.uid_of(rec.obj), secret_tries=0)
    if rec.result == "already_exists":  # ours (an earlier attempt, a lost journal) or someone else's: read
        ctx.emit(GetObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1", kind="Secret",
                 namespace=d.target_ns, name=owned.object_name(d, "Secret"))
        return d.but(secret_step=steps.object_after(d.secret_step, "exists"))
    if rec.result == "transient":
        return retry.secret_later(ctx, key, d, rec)  # a create is safe to repeat: AlreadyExists is fine
    return flow.fail(ctx, key, d, "SecretFailed", f"cannot create Secret {d.name}-env: {rec.result} {rec.message}".strip())


def _secret_read(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: GetObject) -> SessionDecision | Moved:
    """The Secret's create met AlreadyExists: adopt it only when it is this Session's, mended to
    what the current spec implies (``session.secret.adopt``)."""
    if d.secret_step != "reading":
        return d
    spec = flow.spec_of(d, config(ctx) or SessionConfig())
    if rec.result == "ok" and owned.owned(rec.obj, d.name) and not isinstance(spec, SpecError):
        return secret.adopt(ctx, key, d.but(secret_tries=0), rec.obj, spec)
    if rec.result == "ok" and owned.owned(rec.obj, d.name):   # an invalid spec fails before its pod
        return d.but(secret_step=steps.object_after(d.secret_step, "kept"), secret_uid=owned.uid_of(rec.obj), secret_tries=0)
    if rec.result == "ok":
        return flow.fail(ctx, key, d.but(secret_step=steps.object_after(d.secret_step, "again")), "NameTaken",
                         owned.conflict("Secret", effect.namespace, effect.name, rec.obj, d.name))
    if rec.result == "not_found":
        return d.but(secret_step=steps.object_after(d.secret_step, "again"))  # absent since: create again (AlreadyExists reads again)
    if rec.result == "transient" and ctx.retry(backoff.SESSION_CREATE):
        return d   # the same read, as the next attempt of its own loop
    return retry.secret_later(ctx, key, d, rec)


def _claim_answer(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome) -> SessionDecision | Moved:
    """The workspace claim's create: made, or met AlreadyExists (an earlier generation's: read it)."""
    if d.claim_step != "sent":
        return d
    if rec.result == "ok":
        return d.but(claim_step=steps.object_after(d.claim_step, "made"), claim_tries=0)
    if rec.result == "already_exists":
        ctx.emit(GetObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1",
                 kind="PersistentVolumeClaim", namespace=d.target_ns, name=owned.object_name(d, "PersistentVolumeClaim"))
        return d.but(claim_step=steps.object_after(d.claim_step, "exists"))
    if rec.result == "transient":   # a create is safe to repeat
        return retry.claim_later(ctx, key, d, rec, owned.object_name(d, "PersistentVolumeClaim"))
    return flow.fail(ctx, key, d, "WorkspaceFailed",
                     f"cannot create PersistentVolumeClaim {owned.object_name(d, 'PersistentVolumeClaim')}: "
                     f"{rec.result} {rec.message}".strip())


def _claim_read(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: GetObject) -> SessionDecision | Moved:
    """Adopt the existing claim only when it is this Session's (the workspace of its earlier generations)."""
    if d.claim_step != "reading":
        return d
    if rec.result == "ok" and owned.owned(rec.obj, d.name):
        return d.but(claim_step=steps.object_after(d.claim_step, "kept"), claim_tries=0)
    if rec.result == "ok":
        return flow.fail(ctx, key, d.but(claim_step=steps.object_after(d.claim_step, "again")), "NameTaken",
                         owned.conflict("PersistentVolumeClaim", effect.namespace, effect.name, rec.obj, d.name))
    if rec.result == "not_found":
        return d.but(claim_step=steps.object_after(d.claim_step, "again"))   # absent since: create again (AlreadyExists reads again)
    if rec.result == "transient" and ctx.retry(backoff.SESSION_CREATE):
        return d   # the same read, as the next attempt of its own loop
    return retry.claim_later(ctx, key, d, rec, effect.name)


def in_doubt(ctx: Ctx, key: str, d: SessionDecision, effect: ObjectEffect) -> SessionDecision | Moved:
    if effect.id == d.ahead_read:
        return d.but(ahead_read="")   # read again after the grace (``session.flow.arm_ahead``)
    match effect.kind, effect.type:
        case "Session", "patch" if effect.subresource == "status":
            return d.but(status_written="")
        case "Pod", "get":
            ctx.emit(GetObject, key, **effect.model_dump(exclude={"id", "machine", "key", "type"}))
            return d
        case "Session", _:
            return retry.reobserve(ctx, key, d)
        case _, ("delete" | "get") if d.phase in ("Stopping", "Stopped") and effect.kind in d.teardown:
            owned.repeat(ctx, key, effect)
            return d
        case "Secret", ("get" | "delete") if d.secret_step == "dropping":
            owned.repeat(ctx, key, effect)   # a read, or a delete fenced by uid: harmless to repeat
            return d
        case "Secret", ("create" | "get" | "replace"):
            return d.but(secret_step=steps.object_after(d.secret_step, "again")) if d.secret_step in ("sent", "reading", "replacing") else d
        case "PersistentVolumeClaim", ("create" | "get"):
            return d.but(claim_step=steps.object_after(d.claim_step, "again")) if d.claim_step in ("sent", "reading") else d
        case ("Service" | "Ingress"), _:
            field = "service" if effect.kind == "Service" else "ingress"
            u = getattr(d, field)
            return d.but(**{field: u.but(stage="idle", tries=u.tries + 1)})
    return d


# -- replies and observed pods, reduced to facts -------------------------------------------------
#
# Facts from other machines and from observed pods, folded into a session's decision record.
#
# Guarantees:
# - Pure bookkeeping: these functions record what a reply or a pod says and decide nothing beyond
#   what the fact itself settles (a failed create/namespace/repository fails the bring-up; a pod
#   created for a generation that was let go is deleted). ``session.flow.decide`` runs afterwards.
# - Only the current generation's pod updates pod facts; a predecessor's events are ignored (the pod
#   machine reports its deletion with ``pod_gone``). A pod counts only when observed on the
#   Session's target cluster handle and namespace: the same labels seen elsewhere are not its pod.
# - ``pod_owner`` decides from the record's name, cluster, namespace and ``kfold.dev/session`` label
#   alone, through the target index (``session.model``): a pod of no tracked Session is dropped before
#   anything is reduced.
# - A provisioning message is recorded when it differs from the last one (each reported once);
#   an ended ``app-<name>`` container is recorded once per generation, with a Kubernetes Event.
#
# Reduce raw Session and Pod objects to the few facts the session machine decides on.
#
# Guarantees:
# - Total on malformed input: missing or wrongly typed fields read as absent, never raise.
# - ``provisioning_message`` is the pod's own words (scheduler message, container waiting reason
#   and message), so a reader is sent to the real cause; ``None`` when nothing is pending.
# - ``ended_apps`` reports only ``app-<name>`` containers that have terminated, in the pod's order.

MAX_RUNS = 50


def pod_owner(ctx: Ctx, rec: Observed) -> str | None:
    """The key of the Session whose current pod this observation is about, or None. Cheap: reads
    one label, one index entry and one record; reduces nothing."""
    md = rec.obj.get("metadata") if isinstance(rec.obj, dict) else None
    labels = md.get("labels") if isinstance(md, dict) else None
    session = labels.get(SESSION_LABEL) if isinstance(labels, dict) else None
    if not session or not isinstance(session, str):
        return None
    key = model.lookup(ctx, rec.cluster, rec.namespace, session)
    if key is None:
        return None
    d = ctx.get(key)
    if not isinstance(d, SessionDecision) or d.pod.name != rec.name:
        return None
    return key


def release_stale(ctx: Ctx, rec: Observed, save: Callable[..., None]) -> None:
    """A live pod of an earlier generation than its Session's, which kfold is not already letting
    go: left by another replica (or a life that lost its journal) that created it while this
    record had moved on. It is released like any spent generation (the pod machine reads, then
    deletes it fenced by uid). Found by kfold sim, soak seed 30281. A podless Session's pod of a
    generation newer than the record knows waits for the record to catch up (``session.flow``, pods ahead)."""
    md = rec.obj.get("metadata") if isinstance(rec.obj, dict) else None
    if not isinstance(md, dict):
        return
    labels = md.get("labels") if isinstance(md.get("labels"), dict) else {}
    session, gen = labels.get(SESSION_LABEL), labels.get(GENERATION_LABEL)
    if not isinstance(session, str) or not isinstance(gen, str) or not gen.isdigit():
        return
    key = model.lookup(ctx, rec.cluster, rec.namespace, session)
    d = ctx.get(key) if key is not None else None
    if not isinstance(d, SessionDecision):
        return
    pk = object_key(rec.cluster, rec.namespace, rec.name)
    if rec.event == "DELETED" or md.get("deletionTimestamp"):
        return save(ctx, key, flow.forget_ahead(d, pk)) if pk in d.ahead else None
    podless = flow.podless(d)
    if (int(gen) >= d.generation and not podless) or pk in d.releasing or pk in d.abandoned or pk in d.ahead:
        return None
    if flow.is_ahead(d, int(gen)):   # the record may be stale, not the pod (soak seed 77898)
        return save(ctx, key, flow.defer_ahead(ctx, key, d, pk, int(gen)))
    # Suspended, stopped or failed, a Session has no pod: one seen under its labels (created by a
    # life or replica whose record this one never saw: generation 1's status is first written at
    # Ready) is spent too, and a resume is a later generation (found by kfold sim, seed 240).
    save(ctx, key, flow.release_spent(ctx, key, d, pk, int(gen)))
    return None


def pod_observed(ctx: Ctx, key: str, rec: Observed, save: Callable[..., None]) -> None:
    """Fold an observation of the pod of the Session at ``key`` (see ``pod_owner``)."""
    d = ctx.get(key)
    save(ctx, key, _pod_facts(ctx, key, d, pod_view(rec.obj), rec.event == "DELETED"))


def _pod_facts(ctx: Ctx, key: str, d: SessionDecision, v: PodStatus, deleted: bool) -> SessionDecision:
    if deleted and d.pod.uid and v.uid and v.uid != d.pod.uid:
        return d  # a different pod under the current name went away: not ours
    p = d.pod.but(uid=v.uid or d.pod.uid, rv=v.rv, phase=v.phase, ip=v.ip, node=v.node, ready=v.ready,
                  detail=v.detail, gone=deleted)
    if d.phase == "Provisioning" and v.phase == "Pending" and v.provisioning and v.provisioning != p.provisioning:
        ctx.log(key, f"session {d.name}: {v.provisioning}", pod=v.name)
        p = p.but(provisioning=v.provisioning)
    return _runs_ended(ctx, key, d.but(pod=p), v)


def _runs_ended(ctx: Ctx, key: str, d: SessionDecision, v: PodStatus) -> SessionDecision:
    if d.phase not in ("Provisioning", "Ready"):
        return d
    seen = {r.app for r in d.runs if r.generation == d.generation}
    new = [e for e in v.ended if e.app not in seen]
    for e in new:
        ctx.emit(RecordEvent, key, cluster=d.target, tenant=d.target_tenant, namespace=d.target_ns,
                 involved={"apiVersion": "v1", "kind": "Pod", "name": v.name, "uid": v.uid, "namespace": d.target_ns},
                 reason="RunEnded", message=f"app {e.app}: {e.reason}", event_type="Warning" if e.exit_code else "Normal",
                 event_name=f"{v.name}.run-ended.{e.app}")
    runs = d.runs + tuple(Run(app=e.app, generation=d.generation, reason=e.reason, exitCode=e.exit_code) for e in new)
    return d.but(runs=runs[-MAX_RUNS:]) if new else d


def read_pod(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """Ask the apiserver (quorum GET) what the current pod is now; ``pod_read`` folds the answer.

    Used where kfold's own picture cannot be trusted to be current: a relist that lacks the pod
    (the list may predate the pod's create) and an adopted pod (no event may ever come on a
    quiet cluster). One read at a time."""
    if d.pod.reading or not d.pod.name:
        return d
    ctx.emit(GetObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1", kind="Pod",
             namespace=d.target_ns, name=d.pod.name)
    return d.but(pod=d.pod.but(reading=True))


def pod_read(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: GetObject) -> SessionDecision:
    """The answer to ``read_pod``: a 404 proves the pod gone; a pod of another uid under the name
    means ours is gone; otherwise its facts are folded like a watch event's."""
    if effect.name != d.pod.name or effect.namespace != d.target_ns:
        return d
    d = d.but(pod=d.pod.but(reading=False))
    if rec.result == "not_found":
        return d.but(pod=d.pod.but(gone=True))
    if rec.result != "ok" or not isinstance(rec.obj, dict):
        ctx.log(key, f"session {d.name}: could not read pod {d.pod.name}: {rec.result} {rec.message}".strip(),
                level="warning")
        return d.but(pod=d.pod.but(checked=""))   # a deadline that asked for it reads again before judging
    v = pod_view(rec.obj)
    if d.pod.uid and v.uid and v.uid != d.pod.uid:
        return d.but(pod=d.pod.but(gone=True))
    return _pod_facts(ctx, key, d, v, False)


# -- replies from the pod and repo machines -------------------------------------------------------

def namespace_ready(ctx: Ctx, key: str, d: SessionDecision, msg: NamespaceReady) -> SessionDecision:
    return d.but(namespace_step=steps.ask_after(d.namespace_step, "answered")) if d.namespace_step == "sent" else d


def keep(ctx: Ctx, key: str, d: SessionDecision, msg: SessionMessage) -> SessionDecision:
    """A reply that changes nothing in this phase (the record is decided on again as it is)."""
    return d


def namespace_failed(ctx: Ctx, key: str, d: SessionDecision, msg: NamespaceFailed) -> SessionDecision | Moved:
    """Pending: the namespace asked for could not be ensured."""
    if d.namespace_step != "sent":
        return d
    return flow.fail(ctx, key, d, "NamespaceFailed", msg.reason)


def _repo(d: SessionDecision, repo_key: str, **changes: Any) -> SessionDecision:
    return d.but(repos=tuple(r.but(**changes) if r.key == repo_key else r for r in d.repos))


def repo_ensured(ctx: Ctx, key: str, d: SessionDecision, msg: RepoEnsured) -> SessionDecision:
    return _repo(d, msg.repo, ensured=True)


def repo_failed(ctx: Ctx, key: str, d: SessionDecision, msg: RepoFailed) -> SessionDecision | Moved:
    """Bringing up: a repository the Session needs could not be ensured."""
    hit = next((r for r in d.repos if r.key == msg.repo), None)
    if hit is None:
        return d
    return flow.fail(ctx, key, d, "RepoFailed", f"repository {hit.url}: {msg.reason}")


def repo_status(ctx: Ctx, key: str, d: SessionDecision, msg: RepoStatusReply) -> SessionDecision:
    return _repo(d, msg.repo, nodes={n: s.model_dump(exclude_unset=True) for n, s in msg.nodes.items()})


def pod_created(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreated) -> SessionDecision | Moved:
    """Creating: the pod is made or adopted (``pod_created_late`` in the other phases)."""
    pk = msg.pod
    if pk in d.abandoned:
        return pod_created_late(ctx, key, d, msg)
    if pk != flow.pod_key(d):
        return d
    how = "adopted" if msg.adopted else "created"
    ctx.log(key, f"session {d.name}: pod {d.pod.name} {how}", uid=msg.uid)
    uid = msg.uid or d.pod.uid
    # What the record knew under this name may be another pod's: one a replica made while this
    # record's own create was held (standing by), since deleted. Its facts (Running, gone) say nothing
    # of the pod this create made (found by kfold sim, soak seed 830708: a takeover's held create made
    # the pod again, and the old pod's DELETED, still on the record, failed the Session as
    # "disappeared before serving" while it was being recreated under its next generation).
    facts = d.pod if not d.pod.uid or uid == d.pod.uid else PodFacts(name=d.pod.name)
    d = d.but(pod=facts.but(created=True, uid=uid))
    # An adopted pod may have run for a long time: on a quiet cluster no event will tell its state,
    # so read it now and fold the answer (never wait for a watch event that may not come).
    return moved(read_pod(ctx, key, d) if msg.adopted else d, "created")


def pod_created_late(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreated) -> SessionDecision:
    """A pod create answered for a generation the Session let go: the pod is released."""
    pk = msg.pod
    if pk not in d.abandoned:
        return d
    d = d.but(abandoned=tuple(k for k in d.abandoned if k != pk))
    return flow.delete_pod(ctx, key, d, pk, "created for a generation that was let go")


def pod_create_failed_late(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreateFailed) -> SessionDecision:
    """A pod create failed for a generation the Session let go: nothing is left to release."""
    return d.but(abandoned=tuple(k for k in d.abandoned if k != msg.pod)) if msg.pod in d.abandoned else d


def pod_create_failed(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreateFailed) -> SessionDecision | Moved:
    """Creating: the pod could not be made (``pod_create_failed_late`` in the other phases)."""
    pk = msg.pod
    if pk in d.abandoned:
        return pod_create_failed_late(ctx, key, d, msg)
    if pk != flow.pod_key(d):
        return d
    why = "NameTaken" if msg.taken else "PodCreateFailed"   # a pod kfold refused to adopt holds the name
    return flow.fail(ctx, key, d.but(pod=PodFacts()), why, msg.reason)


def pod_gone(ctx: Ctx, key: str, d: SessionDecision, msg: PodGone) -> SessionDecision:
    pk = msg.pod
    d = d.but(releasing=tuple(k for k in d.releasing if k != pk))
    return d.but(pod=d.pod.but(gone=True)) if d.pod.name and pk == flow.pod_key(d) else d


def pod_delete_failed(ctx: Ctx, key: str, d: SessionDecision, msg: PodDeleteFailed) -> SessionDecision:
    """A teardown whose pod delete failed (its budget spent, refused) is blocked, with the reason on
    the status, and asks again ``engine.backoff.BLOCKED_TEARDOWN_MS`` later (``retry_pod_delete``): an apiserver out
    for longer than the budget, or a permission fixed meanwhile, must not leave the Session in
    Stopping for good; a pod that went meanwhile is then found gone by the delete's read. Until
    then the pod is still being released (``releasing``): an event of it sends no delete of its own
    (the retry is the one policy that says when to ask again)."""
    pk = msg.pod
    reason = f"{_undeletable(pk)} {msg.reason}"
    ctx.log(key, reason, level="warning")
    return d.but(blocked=reason, blocked_pod=pk)


def pod_delete_failed_late(ctx: Ctx, key: str, d: SessionDecision, msg: PodDeleteFailed) -> SessionDecision:
    """A pod delete failed outside a teardown: logged, the pod is no longer being released."""
    ctx.log(key, f"{_undeletable(msg.pod)} {msg.reason}", level="warning")
    return d.but(releasing=tuple(k for k in d.releasing if k != msg.pod))


def _undeletable(pk: str) -> str:
    """How a teardown blocked by pod ``pk``'s failed delete begins its reason."""
    return f"pod {split_key(pk)[2]} could not be deleted:"


def retry_pod_delete(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """The retry timer fired: delete the pod again (a fresh operation, with its own budget and its
    own fenced read), clearing the block it caused (not one a Secret or the finalizer set since)."""
    pk = d.blocked_pod
    if not pk:
        return d.but(blocked_pod="")
    mine = d.blocked.startswith(_undeletable(pk))
    ctx.log(key, f"session {d.name}: deleting pod {split_key(pk)[2]} again (teardown was blocked)")
    d = d.but(blocked="" if mine else d.blocked, blocked_pod="")
    return flow.delete_pod(ctx, key, d, pk, "teardown retried after a failed delete")


# Waiting reasons that are part of normal start-up and say nothing a reader can act on.
_QUIET_WAITING = frozenset({"PodInitializing"})


@dataclass(frozen=True, slots=True)
class SessionView:
    name: str
    namespace: str
    uid: str
    rv: str
    spec: dict[str, Any]
    deleting: bool
    finalizers: tuple[str, ...]
    phase: str = ""                 # status.phase as last written (by kfold, possibly before a lost journal)
    generation: int = 0             # status.generation
    failure: tuple[str, str] = ("", "")   # the Ready condition's (reason, message) when phase is Failed
    spec_generation: int = 0        # metadata.generation: the apiserver's count of spec changes
    failed_generation: int = 0      # the Ready condition's observedGeneration: the spec that failed
    since: tuple[tuple[str, str, str], ...] = ()   # (type, status, lastTransitionTime) of each condition
    status: dict[str, Any] = field(default_factory=dict)   # the status as it stands (``from_status``)


@dataclass(frozen=True, slots=True)
class Ended:
    app: str
    reason: str
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class PodStatus:
    name: str
    uid: str
    rv: str
    session: str
    generation: int | None
    phase: str
    ip: str
    node: str
    ready: bool
    detail: str
    provisioning: str | None
    ended: tuple[Ended, ...]


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def session_view(obj: dict[str, Any]) -> SessionView:
    md, status = _d(obj.get("metadata")), _d(obj.get("status"))
    ready = next((c for c in map(_d, _l(status.get("conditions"))) if c.get("type") == "Ready"), {})
    return SessionView(
        name=str(md.get("name", "")), namespace=str(md.get("namespace", "")), uid=str(md.get("uid", "")),
        rv=str(md.get("resourceVersion", "")), spec=_d(obj.get("spec")),
        deleting=bool(md.get("deletionTimestamp")), finalizers=tuple(str(f) for f in _l(md.get("finalizers"))),
        phase=str(status.get("phase") or ""), generation=_int(status.get("generation")) or 0,
        failure=(str(ready.get("reason") or ""), str(ready.get("message") or "")),
        spec_generation=_int(md.get("generation")) or 0, failed_generation=_int(ready.get("observedGeneration")) or 0,
        since=_since(status), status=status)


def _since(status: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    out = []
    for c in map(_d, _l(status.get("conditions"))):
        kind, state, at = c.get("type"), c.get("status"), c.get("lastTransitionTime")
        if isinstance(kind, str) and isinstance(state, str) and isinstance(at, str):
            out.append((kind, state, at))
    return tuple(out)


def pod_view(obj: dict[str, Any]) -> PodStatus:
    # Hot path (every Pod event): written out with few calls; equal, field by field and for every
    # input (tests/unit/test_fastpath_observe.py), to the plain form of the same reduction.
    md, status = obj.get("metadata"), obj.get("status")
    md = md if isinstance(md, dict) else _EMPTY
    status = status if isinstance(status, dict) else _EMPTY
    lbl = md.get("labels")
    lbl = lbl if isinstance(lbl, dict) else _EMPTY
    spec = obj.get("spec")
    statuses = status.get("containerStatuses")
    containers = [c if isinstance(c, dict) else _EMPTY for c in statuses] if isinstance(statuses, list) else []
    ready = False
    for c in containers:
        if c.get("name") == WORKSPACE and c.get("ready") is True:
            ready = True
            break
    ip, node = status.get("podIP", ""), spec.get("nodeName", "") if isinstance(spec, dict) else ""
    return PodStatus(
        str(md.get("name", "")), str(md.get("uid", "")), str(md.get("resourceVersion", "")),
        str(lbl.get(SESSION_LABEL, "")), _int(lbl.get(GENERATION_LABEL)), str(status.get("phase", "")),
        str(ip or ""), str(node or ""), ready, _detail(status), provisioning_message(status),
        ended_apps(containers))


_EMPTY: dict[str, Any] = {}  # read-only stand-in for an absent or malformed mapping


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _detail(status: dict[str, Any]) -> str:
    reason, message = status.get("reason"), status.get("message")
    if not (reason or message):
        return ""
    return ": ".join(str(v) for v in (reason, message) if v)


def provisioning_message(status: dict[str, Any]) -> str | None:
    """Why a pod is not Running yet, in its own words: scheduling first, then containers."""
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k)) or "Unschedulable"
    for c in _l(status.get("initContainerStatuses")) + _l(status.get("containerStatuses")):
        state = c.get("state") if isinstance(c, dict) else None
        waiting = state.get("waiting") if isinstance(state, dict) else None
        if not isinstance(waiting, dict):
            continue
        reason = waiting.get("reason")
        if reason and reason not in _QUIET_WAITING:
            tail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"container {_d(c).get('name', '?')}: {reason}{tail}"
    return None


def ended_apps(containers: list[dict[str, Any]]) -> tuple[Ended, ...]:
    out = []
    for c in containers:
        name = str(c.get("name", ""))
        if not name.startswith("app-"):
            continue
        term = _d(_d(c.get("state")).get("terminated"))
        if term:
            out.append(_ended(name[len("app-"):], term))
    return tuple(out)


def _ended(app: str, term: dict[str, Any]) -> Ended:
    code = term.get("exitCode") if isinstance(term.get("exitCode"), int) else None
    shown = "unknown" if code is None else code
    reason = term.get("reason")
    if reason and reason != "Completed":
        return Ended(app, f"application container {reason} (exit code {shown})", code)
    return Ended(app, f"application container exited (code {shown})", code)


# -- the dispatch table -----------------------------------------------------------------------------

UNTRACKED = "untracked"   # the phase of a key with no Session record (gone, or never seen)


class AheadDue:
    """The ``ahead`` grace passed (``flow.AHEAD_TIMER``)."""


class PodDeleteRetryDue:
    """A teardown blocked by a failed pod delete asks again (``flow.POD_DELETE_RETRY``)."""


class BringUpDeadline:
    """The ``start`` or ``ready`` deadline passed."""


class ListsDue:
    """A resumed record waited ``seen.LIST_WAIT_MS`` for a first list (``flow.LISTS_TIMER``)."""


TIMER_EVENTS: dict[str, type] = {flow.AHEAD_TIMER: AheadDue, **{t: RetryDue for t in retry.TIMERS},
                                 flow.POD_DELETE_RETRY: PodDeleteRetryDue, "start": BringUpDeadline,
                                 "ready": BringUpDeadline, flow.LISTS_TIMER: ListsDue}


def _lists_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    """The first lists did not come in time: decided without them, as a record with its own history."""
    if flow.resuming(d):
        ctx.log(key, f"session {d.name}: no first list of its target's pods, Services or Ingresses within "
                     f"{seen.LIST_WAIT_MS // 1000} s; deciding without it (creates meet AlreadyExists and read)",
                level="warning")
    save(ctx, key, d.but(resumed=0))


def _ahead_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, flow.read_ahead(ctx, key, d))


def _retry_due(ctx: Ctx, key: str, d: SessionDecision, name: str) -> None:
    save(ctx, key, retry.on_deadline(ctx, key, d, name))


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
    ctx.tell("pod", msg.pod, "delete", reply_to="session", reply_key=key, reason="created for a session that is gone")


def _secret_listed(ctx: Ctx, key: str, d: SessionDecision, msg: SecretListed) -> None:
    save(ctx, key, secret.listed(ctx, key, d, msg, flow.spec_of(d, config(ctx) or SessionConfig())))


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
# what it decides on each record is ``flow.act``, one match over (wish, phase).
DISPATCH = Dispatch("session", [
    (UNTRACKED, AheadDue, ignore), (UNTRACKED, RetryDue, ignore), (UNTRACKED, PodDeleteRetryDue, ignore),
    (UNTRACKED, BringUpDeadline, ignore), (UNTRACKED, ListsDue, ignore),
    (PHASES, ListsDue, _lists_due),
    (PHASES, AheadDue, _ahead_due),
    (PHASES, RetryDue, _retry_due),
    ("Stopping", PodDeleteRetryDue, _pod_delete_due),
    (_OTHER["Stopping"], PodDeleteRetryDue, _pod_delete_moot),
    ("Provisioning", BringUpDeadline, _bring_up_deadline),
    (_NOT_PROVISIONING, BringUpDeadline, ignore),
    (UNTRACKED, PodCreated, _created_for_none),
    *((UNTRACKED, model, _untracked) for model in _REPLIES if model is not PodCreated),
    (UNTRACKED, SecretListed, _untracked),
    (PHASES, SecretListed, _secret_listed),
    *((PHASES, model, _reply(handler)) for model, handler in _REPLIES.items() if model not in _BY_PHASE),
    *((phases, model, _reply(handler)) for model, rows in _BY_PHASE.items() for phases, handler in rows),
])
