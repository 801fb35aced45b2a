"""The bring-up deadlines judged when they fire (``start``, ``ready``: armed by ``session.timers``).

A deadline met while Provisioning fails the Session (``StartDeadlineExceeded``, naming what the
pod waits for when kfold reports containers' states: ``session.status.waiting_for``;
``ReadyDeadlineExceeded``), judged only on a quorum read of its pod made once the deadline passed
(what kfold last saw of the pod may be old), and judged again ``READ_GRACE_MS`` later while
something kfold itself waits for is outstanding (``_judge_later``): each such wait lasts only while
that request is, so the deadlines bound every bring-up.
"""
from __future__ import annotations

from engine.machines.base import Ctx
from engine.machines.session.model import config, Moved, SessionConfig, SessionDecision
from engine.machines.session.pods import read_pod
from engine.machines.session.reduce import running, unsynced
from engine.machines.session.release import fail
from engine.machines.session.status import waiting_for


READ_GRACE_MS = 5_000   # a bring-up deadline met while its pod is being read is judged again this much later


def bring_up_deadline(ctx: Ctx, key: str, d: SessionDecision, name: str) -> SessionDecision | Moved:
    """``start`` or ``ready`` passed while Provisioning: fail the Session, or judge again later."""
    now = ctx.now_on(d.target)
    if now is not None and _judge_later(ctx, key, d, name):
        ctx.set_timer(key, name, now + READ_GRACE_MS, d.target)
    elif (name == "start" and not running(d)) or (name == "ready" and running(d)):
        if now is not None and d.pod.name and d.pod.checked != name:
            # What kfold last saw of the pod may be old (a paused process, a watch broken or
            # lagging): the Session fails only on a quorum read of its pod made once the deadline
            # passed, judged when it has answered. A read already in flight may predate the
            # deadline: its answer is awaited, then the next judgement reads again.
            if not d.pod.reading:
                d = read_pod(ctx, key, d)
                d = d.but(pod=d.pod.but(checked=name))
            ctx.set_timer(key, name, now + READ_GRACE_MS, d.target)
        elif name == "start":
            waiting = waiting_for(d, config(ctx) or SessionConfig())   # what it waits for, when kfold reports it
            d = fail(ctx, key, d, "StartDeadlineExceeded",
                     f"pod {d.pod.name} did not reach Running within the start deadline ({d.start_ms // 1000} s)"
                     + (f": {waiting}" if waiting else ""))
        else:
            d = fail(ctx, key, d, "ReadyDeadlineExceeded", _not_ready(d))
    return d


def _judge_later(ctx: Ctx, key: str, d: SessionDecision, name: str) -> str:
    """Why a bring-up deadline that fired is judged again ``READ_GRACE_MS`` later instead of failing
    the Session ("" = judge now): what kfold sees is known to be stale or incomplete, or what is
    missing is kfold's own doing, not the Session's. Each reason lasts only while something kfold
    waits for is outstanding, so the deadlines bound every bring-up (the findings that named them:
    docs/simulation.md)."""
    runs = running(d)
    if _reported_ready(d) and not (name == "ready" and not runs) and _requests_in_flight(ctx, key):
        # The Session's status (written only by kfold) already says this generation is Ready:
        # another replica brought it up while this record, a standby's, fell behind; judged once the
        # takeover's re-reads and requests have answered. Not beyond them: a status resumed from (a fresh journal or replica) over a pod that is
        # gone and never comes back up is judged as a fresh bring-up (issue 33, item 2).
        return "the status already reports this generation Ready"
    if d.pod.reading and (not runs) == (name == "start"):   # start: not Running; ready: Running
        # Its pod's state is being read (an adopted pod, a relist without it, or the read an
        # earlier firing made, which a slow apiserver answers only after READ_GRACE_MS: the
        # request timeout is longer): judged after the answer, never on the picture from before
        # the deadline.
        return "the pod is being read"
    if name == "ready" and runs and d.pod.ready and not unsynced(d):
        # The workspace is up; only kfold's own Service/Ingress requests are outstanding (the
        # apiserver slow, throttling, failing); the endpoints' bounded tries move it to Ready with
        # the EndpointsPublished condition saying why.
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
    if d.pod.ready and unsynced(d):
        why.append(f"repositories not synced on node {d.pod.node}: {', '.join(unsynced(d))}")
    elif d.pod.ready:
        why.append(f"Service/Ingress {d.name} not published (a request still unanswered)")
    return f"{'; '.join(why)} within the ready deadline ({d.ready_ms // 1000} s)"
