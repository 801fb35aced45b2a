"""Facts from other machines and from observed pods, folded into a session's decision record.

Guarantees:
- Pure bookkeeping: these functions record what a reply or a pod says and decide nothing beyond
  what the fact itself settles (a failed create/namespace/repository fails the bring-up; a pod
  created for a generation that was let go is deleted). ``session.flow.decide`` runs afterwards.
- Only the current generation's pod updates pod facts; a predecessor's events are ignored (the pod
  machine reports its deletion with ``pod_gone``). A pod counts only when observed on the
  Session's target cluster handle and namespace: the same labels seen elsewhere are not its pod.
- ``pod_owner`` decides from the record's name, cluster, namespace and ``kfold.dev/session`` label
  alone, through the target index (``session.model``): a pod of no tracked Session is dropped before
  anything is reduced.
- A provisioning message is recorded when it differs from the last one (each reported once);
  an ended ``app-<name>`` container is recorded once per generation, with a Kubernetes Event.

Reduce raw Session and Pod objects to the few facts the session machine decides on.

Guarantees:
- Total on malformed input: missing or wrongly typed fields read as absent, never raise.
- ``provisioning_message`` is the pod's own words (scheduler message, container waiting reason
  and message), so a reader is sent to the real cause; ``None`` when nothing is pending.
- ``ended_apps`` reports only ``app-<name>`` containers that have terminated, in the pod's order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.seams import (NamespaceFailed, NamespaceReady, PodCreated, PodCreateFailed, PodDeleteFailed, PodGone,
                          RepoEnsured, RepoFailed, RepoStatusReply)
from engine.machines.base import Ctx
from engine.effects.models import GetObject, RecordEvent
from engine.machines.session import model
from engine.machines.session import flow
from engine.machines.base import object_key, split_key
from engine.machines.session.manifests import GENERATION_LABEL, SESSION_LABEL, WORKSPACE
from engine.machines.session.model import PodFacts, Run, SessionDecision

MAX_RUNS = 50


def pod_owner(ctx: Ctx, rec: Any) -> str | None:
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


def release_stale(ctx: Ctx, rec: Any, save: Callable[..., None]) -> None:
    """A live pod of an earlier generation than its Session's, which kfold is not already letting
    go: left by another replica (or a life that lost its journal) that created it while this
    record had moved on. It is released like any spent generation (the pod machine reads, then
    deletes it fenced by uid). Found by kfold sim, soak seed 30281. A podless Session's pod of a
    generation newer than the record knows waits for the record to catch up (``session.ahead``)."""
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


def pod_observed(ctx: Ctx, key: str, rec: Any, save: Callable[..., None]) -> None:
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


def pod_read(ctx: Ctx, key: str, d: SessionDecision, rec: Any, effect: Any) -> SessionDecision:
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
    return d.but(namespace_step="done") if d.namespace_step == "sent" else d


def keep(ctx: Ctx, key: str, d: SessionDecision, msg: Any) -> SessionDecision:
    """A reply that changes nothing in this phase (the record is decided on again as it is)."""
    return d


def namespace_failed(ctx: Ctx, key: str, d: SessionDecision, msg: NamespaceFailed) -> SessionDecision:
    """Pending: the namespace asked for could not be ensured."""
    if d.namespace_step != "sent":
        return d
    return flow.fail(ctx, key, d, "NamespaceFailed", msg.reason)


def _repo(d: SessionDecision, repo_key: str, **changes: Any) -> SessionDecision:
    return d.but(repos=tuple(r.but(**changes) if r.key == repo_key else r for r in d.repos))


def repo_ensured(ctx: Ctx, key: str, d: SessionDecision, msg: RepoEnsured) -> SessionDecision:
    return _repo(d, msg.repo, ensured=True)


def repo_failed(ctx: Ctx, key: str, d: SessionDecision, msg: RepoFailed) -> SessionDecision:
    """Bringing up: a repository the Session needs could not be ensured."""
    hit = next((r for r in d.repos if r.key == msg.repo), None)
    if hit is None:
        return d
    return flow.fail(ctx, key, d, "RepoFailed", f"repository {hit.url}: {msg.reason}")


def repo_status(ctx: Ctx, key: str, d: SessionDecision, msg: RepoStatusReply) -> SessionDecision:
    return _repo(d, msg.repo, nodes={n: s.model_dump(exclude_unset=True) for n, s in msg.nodes.items()})


def pod_created(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreated) -> SessionDecision:
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
    d = d.move("created").but(pod=facts.but(created=True, uid=uid))
    # An adopted pod may have run for a long time: on a quiet cluster no event will tell its state,
    # so read it now and fold the answer (never wait for a watch event that may not come).
    return read_pod(ctx, key, d) if msg.adopted else d


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


def pod_create_failed(ctx: Ctx, key: str, d: SessionDecision, msg: PodCreateFailed) -> SessionDecision:
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
    Stopping for good; a pod that went meanwhile is then found gone by the delete's read."""
    pk = msg.pod
    reason = f"{_undeletable(pk)} {msg.reason}"
    ctx.log(key, reason, level="warning")
    return d.but(releasing=tuple(k for k in d.releasing if k != pk), blocked=reason, blocked_pod=pk)


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
        since=_since(status))


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
