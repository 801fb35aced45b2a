"""Orphan-pod sweep (command ``pod.sweep_orphans``), at key ``<cluster>/<namespace>/#orphans``.

Why: a pod that runs away from its Session (another cluster, or another namespace) cannot be
owner-referenced to it, so the apiserver's garbage collector never takes it; a create in flight
when the journal is lost, answered after the Session was deleted, leaves such a pod behind. Its
Service and Ingress are owner-referenced to the pod (same cluster and namespace), so they go with
it; its Secret is the orphan Secret sweep's (``pod.sweep``: no pod, no Secret).

Expected flow: quorum list of Pods labelled managed-by kfold in ``namespace`` of ``cluster`` ->
candidates: pods with a ``kfold.dev/session`` label, not terminating, whose Session the fold does
not track there (the session machine's target index, read only: on the normal path every pod
belongs to a tracked Session, so the sweep costs one list and nothing per Session) -> one quorum
GET per candidate Session on ``home`` -> its 404 is the proof: each of its pods is deleted with the
uid + resourceVersion preconditions the list showed (a 409, the pod changed or replaced since, is
left to the next sweep: its fresh list decides again). The effects are the sweep key's, so with
``leader.shards`` the replica that sweeps a namespace also deletes there (``kfold.daemon.shards``).

Guarantees:
- Only a 404 of a quorum GET of the Session, issued after the list, deletes; a list alone never
  does (it may be stale), nor a 200, a 403, a transport error or a GET in doubt.
- The Session is read in the namespace the pod names (``kfold.dev/session-namespace``); a pod
  without that label is read as its own namespace's only on the home cluster (where kfold places
  a Session's pods in the Session's namespace); elsewhere it is kept (a single-namespace bound may
  hold pods of Sessions from several namespaces, so the name alone does not say whose it is).
- A pod is deleted only while it still carries kfold's labels for that Session (as listed), no
  operation runs on its name, and no Session the fold tracks (a new one of the same name, seen
  meanwhile) claims it; the delete is fenced by the listed uid.
- One sweep per key at a time; a failed or in-doubt list or read ends that part with a log, and
  the next sweep decides afresh.
"""
from __future__ import annotations

from typing import Any

from engine.effects.models import DeleteObject, GetObject, ListObjects
from engine.labels import MANAGED_BY, MANAGER, MANAGED_SELECTOR, SESSION_API_VERSION, SESSION_NAMESPACE_LABEL
from engine.machines.base import Answered, Ctx, InDoubt, Ordered, Reported, describe, object_key, split_key
from engine.machines.pod.records import ORPHANS_NAME, SESSION, OrphanPod, OrphanSweep, PodOp, labels_of
from engine.seams import SweepOrphans
from journal.records import Outcome

MAX_READS = 32          # Sessions read per sweep: the next sweep takes the rest


def key_of(cmd: SweepOrphans) -> str:
    return object_key(cmd.cluster, cmd.namespace, ORPHANS_NAME)


def start(ctx: Ctx, key: str, e: None, ev: Ordered) -> None:
    """No orphan-pod sweep runs here: the pod list is sent."""
    cmd = ev.cmd
    cluster, namespace, home = cmd.cluster, cmd.namespace, cmd.home
    eff = ctx.emit(ListObjects, key, cluster=cluster, api_version="v1", kind="Pod", namespace=namespace,
                   label_selector=MANAGED_SELECTOR)
    ctx.put(key, OrphanSweep(home=home, awaiting=eff.id))


def running(ctx: Ctx, key: str, e: OrphanSweep, ev: Ordered) -> None:
    ctx.log(key, "orphan-pod sweep skipped: the previous sweep is still running", level="debug")


def pod_deleted(ctx: Ctx, key: str, e: OrphanSweep | None, ev: Reported) -> None:
    """An orphan pod delete's answer, only reported (nothing waits for it; in doubt, ``rec`` None:
    never re-sent, the next sweep decides again)."""
    rec, effect = ev
    if rec is not None and rec.result not in ("ok", "not_found"):
        ctx.log(key, f"orphan pod {effect.namespace}/{effect.name} was not deleted ({describe(rec)}); the next "
                     "sweep decides again", level="warning")


def in_doubt(ctx: Ctx, key: str, e: OrphanSweep, ev: InDoubt) -> None:
    """A list or read in doubt ends the sweep."""
    _end(ctx, key, "orphan-pod sweep abandoned: a request was in doubt after a restart; the next sweep "
                   "decides again", "warning")


def listed(ctx: Ctx, key: str, e: OrphanSweep, ev: Answered) -> None:
    """The pod list's answer: candidates, and one quorum GET of each one's Session."""
    rec = ev.rec
    if rec.result != "ok":
        _end(ctx, key, f"orphan-pod sweep skipped: listing pods failed: {describe(rec)}", "warning")
        return
    cluster, namespace, _ = split_key(key)
    tracked = _tracked(ctx)
    pods = []
    for obj in rec.items or ():
        pod = _candidate(obj, cluster, namespace, e.home)
        if pod is not None and f"{cluster}/{namespace}/{pod.session}" not in tracked:
            pods.append(pod)
    sessions = sorted({(p.session_namespace, p.session) for p in pods})[:MAX_READS]
    if not sessions:
        _end(ctx, key, "orphan-pod sweep: every pod of kfold's here belongs to a Session it tracks", "debug")
        return
    reads = tuple(ctx.emit(GetObject, key, cluster=e.home, api_version=SESSION_API_VERSION, kind="Session",
                           namespace=ns, name=name).id for ns, name in sessions)
    ctx.put(key, e.but(awaiting="", reads=reads, pods=tuple(p for p in pods if (p.session_namespace, p.session)
                                                            in set(sessions))))


def _candidate(obj: dict[str, Any], cluster: str, namespace: str, home: str) -> OrphanPod | None:
    md = obj.get("metadata") or {}
    labels = labels_of(obj)
    session = labels.get(SESSION, "")
    if labels.get(MANAGED_BY) != MANAGER or not session or md.get("deletionTimestamp") or not md.get("uid"):
        return None
    session_ns = labels.get(SESSION_NAMESPACE_LABEL) or (md.get("namespace", namespace) if cluster == home else "")
    if not session_ns:
        return None
    return OrphanPod(name=md.get("name", ""), uid=md["uid"], rv=md.get("resourceVersion", ""),
                     session=session, session_namespace=session_ns)


def _tracked(ctx: Ctx) -> set[str]:
    """``"<cluster>/<namespace>/<session>"`` of every Session the fold places pods for (the
    session machine's answer)."""
    return ctx.ask("session", "placed") or set()


def session_read(ctx: Ctx, key: str, e: OrphanSweep, ev: Answered) -> None:
    """One candidate Session's quorum read: its 404 releases the Session's pods."""
    rec, effect = ev
    mine = [p for p in e.pods if (p.session_namespace, p.session) == (effect.namespace, effect.name)]
    rest = e.but(reads=tuple(i for i in e.reads if i != effect.id), pods=tuple(p for p in e.pods if p not in mine))
    if rec.result == "not_found":
        _release(ctx, key, mine, f"{effect.namespace}/{effect.name}")
    elif rec.result != "ok":
        ctx.log(key, f"orphan-pod sweep: Session {effect.namespace}/{effect.name} could not be read "
                     f"({describe(rec)}); its pods are kept", level="warning")
    if rest.reads:
        ctx.put(key, rest)
    else:
        ctx.drop(key)


def _release(ctx: Ctx, key: str, pods: list[OrphanPod], session: str) -> None:
    cluster, namespace, _ = split_key(key)
    tracked = _tracked(ctx)
    deleted = []
    for p in pods:
        op = ctx.get(object_key(cluster, namespace, p.name))
        if f"{cluster}/{namespace}/{p.session}" in tracked or (isinstance(op, PodOp) and op.op):
            continue    # a Session of that name is tracked again, or kfold is already at work on the name
        if not p.rv:
            continue    # no complete fence: a pod delete always carries uid and resourceVersion
        ctx.emit(DeleteObject, key, cluster=cluster, api_version="v1", kind="Pod", namespace=namespace,
                 name=p.name, uid=p.uid, rv=p.rv)
        deleted.append(f"{namespace}/{p.name}")
    ctx.log(key, f"orphan-pod sweep: Session {session} is gone (404 on a quorum read); deleting its pods on "
                 f"{cluster}", level="info", deleted=deleted)


def _end(ctx: Ctx, key: str, message: str, level: str) -> None:
    ctx.log(key, message, level=level)
    ctx.drop(key)
