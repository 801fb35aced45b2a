"""Observed and read pods, reduced to facts on their Session's record.

Guarantees:
- Only the current generation's pod updates pod facts; a predecessor's events are ignored (the pod
  machine reports its deletion with ``pod_gone``). A pod counts only when observed on the
  Session's target cluster handle and namespace: the same labels seen elsewhere are not its pod.
- ``pod_owner`` decides from the record's name, cluster, namespace and ``kfold.dev/session`` label
  alone, through the target index (``session.model``): a pod of no tracked Session is dropped before
  anything is reduced.
- A live pod of an earlier generation, not already being let go, is released as spent
  (``release_stale``); one newer than a podless record knows waits (``session.ahead``).
- A provisioning message is recorded when it differs from the last one (each reported once: the
  status's ``provisioningMessage``, and, from ``status_rules`` 3 on (``session.configure``), the
  Ready condition's message and an Event about the Session whose reason is the waiting reason:
  Warning, Normal for ``ContainerCreating``); an ended ``app-<name>`` container is recorded once per
  generation, with a Kubernetes Event; from ``status_rules`` 3, how the workspace container ended
  (``PodFacts.ended``: the decision fails the Session on it, ``session.reduce.pod_verdict``), and a
  pod being deleted by someone else (a deletionTimestamp: evicted, ``kubectl delete``) is gone at
  once (``PodGone``), before its containers stop.
- ``read_pod``: one quorum GET of the current pod at a time; its answer (``pod_read``) is folded
  like a watch event, a 404 or another uid under the name proving the pod gone.
"""
from __future__ import annotations

from typing import Callable

from engine.effects.models import GetObject, RecordEvent
from engine.machines.base import Ctx, object_key
from engine.machines.session import targets
from engine.machines.session.ahead import defer_ahead, forget_ahead, is_ahead, podless, release_spent
from engine.machines.session.manifests import GENERATION_LABEL, SESSION_LABEL
from engine.machines.session.model import config, Run, SessionConfig, SessionDecision
from engine.machines.session.status import post_event
from engine.machines.session.views import pod_view, PodStatus
from journal.records import Observed, Outcome


MAX_RUNS = 50


def pod_owner(ctx: Ctx, rec: Observed) -> str | None:
    """The key of the Session whose current pod this observation is about, or None. Cheap: reads
    one label, one index entry and one record; reduces nothing."""
    md = rec.obj.get("metadata") if isinstance(rec.obj, dict) else None
    labels = md.get("labels") if isinstance(md, dict) else None
    session = labels.get(SESSION_LABEL) if isinstance(labels, dict) else None
    if not session or not isinstance(session, str):
        return None
    key = targets.lookup(ctx, rec.cluster, rec.namespace, session)
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
    generation newer than the record knows waits for the record to catch up (``session.ahead``)."""
    md = rec.obj.get("metadata") if isinstance(rec.obj, dict) else None
    if not isinstance(md, dict):
        return
    labels = md.get("labels") if isinstance(md.get("labels"), dict) else {}
    session, gen = labels.get(SESSION_LABEL), labels.get(GENERATION_LABEL)
    if not isinstance(session, str) or not isinstance(gen, str) or not gen.isdigit():
        return
    key = targets.lookup(ctx, rec.cluster, rec.namespace, session)
    d = ctx.get(key) if key is not None else None
    if not isinstance(d, SessionDecision):
        return
    pk = object_key(rec.cluster, rec.namespace, rec.name)
    if rec.event == "DELETED" or md.get("deletionTimestamp"):
        return save(ctx, key, forget_ahead(d, pk)) if pk in d.ahead else None
    bare = podless(d)
    if (int(gen) >= d.generation and not bare) or pk in d.releasing or pk in d.abandoned or pk in d.ahead:
        return None
    if is_ahead(d, int(gen)):   # the record may be stale, not the pod (soak seed 77898)
        return save(ctx, key, defer_ahead(ctx, key, d, pk, int(gen)))
    # Suspended, stopped or failed, a Session has no pod: one seen under its labels (created by a
    # life or replica whose record this one never saw: generation 1's status is first written at
    # Ready) is spent too, and a resume is a later generation (found by kfold sim, seed 240).
    save(ctx, key, release_spent(ctx, key, d, pk, int(gen)))
    return None


def pod_observed(ctx: Ctx, key: str, rec: Observed, save: Callable[..., None]) -> None:
    """Fold an observation of the pod of the Session at ``key`` (see ``pod_owner``)."""
    d = ctx.get(key)
    save(ctx, key, _pod_facts(ctx, key, d, pod_view(rec.obj), rec.event == "DELETED"))


def _pod_facts(ctx: Ctx, key: str, d: SessionDecision, v: PodStatus, deleted: bool) -> SessionDecision:
    if deleted and d.pod.uid and v.uid and v.uid != d.pod.uid:
        return d  # a different pod under the current name went away: not ours
    cfg = config(ctx) or SessionConfig()
    # Being deleted by someone else (kfold's own deletes are of pods it let go: never the current
    # one), e.g. evicted: gone now, not when its containers have stopped (a real kubelet reports
    # them ended and the pod Succeeded first); from ``status_rules`` 3 on.
    going = v.deleting and cfg.status_rules >= 3 and not (d.pod.uid and v.uid and v.uid != d.pod.uid)
    p = d.pod.but(uid=v.uid or d.pod.uid, rv=v.rv, phase=v.phase, ip=v.ip, node=v.node, ready=v.ready,
                  detail=v.detail, gone=deleted or going, ended=v.workspace_ended if cfg.status_rules >= 3 else "")
    if d.phase == "Provisioning" and v.phase == "Pending" and v.provisioning and v.provisioning != p.provisioning:
        ctx.log(key, f"session {d.name}: {v.provisioning}", pod=v.name)
        p = p.but(provisioning=v.provisioning)
        if cfg.status_rules >= 3:
            _waiting_event(ctx, key, d, cfg, v)
    return _runs_ended(ctx, key, d.but(pod=p), v)


NORMAL_WAITING = frozenset({"ContainerCreating"})   # the kubelet's own start-up step: no warning


def _waiting_event(ctx: Ctx, key: str, d: SessionDecision, cfg: SessionConfig, v: PodStatus) -> None:
    """The Event of a new provisioning message: reason the waiting reason (``ErrImagePull``,
    ``CreateContainerConfigError``, ``Unschedulable``...), Warning but for ``NORMAL_WAITING``
    (posted only at ``events.level: Normal``)."""
    kind = "Normal" if v.waiting in NORMAL_WAITING else "Warning"
    if kind == "Warning" or cfg.event_level == "Normal":
        post_event(ctx, key, d, kind, v.waiting or "Provisioning", "BringUp",
                   f"generation {d.generation}: pod {v.name}: {v.provisioning}")


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
