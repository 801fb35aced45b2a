"""What the cluster's lists show of the objects kfold made for a Session, before its record knows them.

Why: a record rebuilt from a Session's status (``session.observed.from_status``: a fresh or lost
journal, or a record another replica overtook) knows nothing of the pod, Service and Ingress an
earlier life made for it. Deciding before the first lists have been folded, it created each one
again, was told AlreadyExists, read it and replaced it with the same content: 18,000 writes and
12,000 reads in the first minute over 3,000 Ready Sessions (issue 38, item 3; docs/performance.md).
A controller waits for its caches to sync before it reconciles (controller-runtime
``WaitForCacheSync``, kube-rs ``Store::wait_until_ready``); here the fold does, on records.

Expected flow: the daemon says which kinds it lists on every cluster it places pods on
(``session.configure`` ``listed``: Pod, Service, Ingress) -> every observation of those kinds that
is no tracked Session's current pod is kept here (``SlotObjects``, one entry per target slot
``<cluster>/<namespace>/<session>``: its pods by name, its Service, its Ingress), and every
``Relist`` of them is noted (``Listed``) -> a resumed record (``SessionDecision.resumed``) waits
(``waiting``) until its target's first list of a kind has been folded before it would create what
that list shows -> then it adopts the pod the list showed (``pod_of``: this Session's labels and
generation, not terminating) with no create and no read, and takes a Service or Ingress that
already says what its spec implies (``matches``) for published, with no write.

Guarantees:
- Facts only: uid, resourceVersion, the labels' verdicts, the pod's state fields and the endpoint
  objects' labels, ownerReferences and spec (what kfold writes there), never whole objects.
- A cache of observations: an entry goes when its object's DELETED is folded or a list of its kind
  and scope lacks it. Presence is taken from an observation; absence never is: a missing entry
  only means the create-then-read path, which AlreadyExists keeps correct on its own.
- Pure: reads the table and the records folded, never a clock.
- A kind the daemon does not say it lists is never waited for nor looked up: a journal written
  before ``listed`` existed replays deciding exactly as it did.

Caveat: a list that never comes (the observer refused, say) holds a resumed record for at most
``LIST_WAIT_MS`` on its target's clock (``session.timers``, timer ``lists``); it then decides as
before this module existed.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from engine.labels import GENERATION_LABEL, MANAGED_BY, MANAGER, SESSION_LABEL
from engine.machines.base import Ctx, Decision
from journal.records import Observed, Relist

LISTED_KEY = "#listed"
SEEN_PREFIX = "#seen/"
KINDS = ("Pod", "Service", "Ingress")
LIST_WAIT_MS = 60_000   # the longest a resumed record waits for a first list before deciding without it
_FIELD = {"Service": "service", "Ingress": "ingress"}
WORKSPACE = "workspace"   # ``manifests.WORKSPACE``, the workspace container (not imported: manifests -> spec -> model -> here)


class SeenPod(Decision):
    """A pod under a Session's label, as last observed."""

    uid: str = ""
    rv: str = ""
    generation: str = ""          # its kfold.dev/generation label
    terminating: bool = False
    phase: str = ""
    ip: str = ""
    node: str = ""
    ready: bool = False           # the workspace container's readiness
    detail: str = ""


class SeenEndpoint(Decision):
    """A Service or Ingress named like a Session, as last observed."""

    uid: str = ""
    rv: str = ""
    owned: bool = False           # it carries that Session's labels (``session.owned``)
    shape: dict[str, Any] = Field(default_factory=dict)   # {"metadata": {labels, ownerReferences}, "spec"}


class SlotObjects(Decision):
    """What the lists and watches showed at one target slot."""

    kind: Literal["seen"] = "seen"
    pods: dict[str, SeenPod] = Field(default_factory=dict)
    service: SeenEndpoint | None = None
    ingress: SeenEndpoint | None = None


class Listed(Decision):
    """``"<cluster>/<kind>/<scope>"`` of every list of a kept kind folded ("" scope: all namespaces)."""

    kind: Literal["listed"] = "listed"
    lists: tuple[str, ...] = ()


def _key(cluster: str, namespace: str, session: str) -> str:
    return f"{SEEN_PREFIX}{cluster}/{namespace}/{session}"


def _entry(ctx: Ctx, key: str) -> SlotObjects:
    got = ctx.get(key)
    return got if isinstance(got, SlotObjects) else SlotObjects()


def _store(ctx: Ctx, key: str, e: SlotObjects) -> None:
    if e.pods or e.service is not None or e.ingress is not None:
        ctx.put(key, e)
    elif ctx.get(key) is not None:
        ctx.drop(key)


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# -- folding observations ---------------------------------------------------------------------

def pod(ctx: Ctx, rec: Observed) -> None:
    """Keep (or forget, on DELETED) a pod observed under a Session's label."""
    md = _d(_d(rec.obj).get("metadata"))
    labels = _d(md.get("labels"))
    session = labels.get(SESSION_LABEL)
    if not isinstance(session, str) or not session or labels.get(MANAGED_BY) != MANAGER:
        return
    key = _key(rec.cluster, rec.namespace, session)
    e = _entry(ctx, key)
    if rec.event == "DELETED":
        if rec.name in e.pods:
            _store(ctx, key, e.but(pods={n: p for n, p in e.pods.items() if n != rec.name}))
        return
    status, spec = _d(rec.obj.get("status")), _d(rec.obj.get("spec"))
    statuses = status.get("containerStatuses")
    ready = any(_d(c).get("name") == WORKSPACE and _d(c).get("ready") is True
                for c in (statuses if isinstance(statuses, list) else ()))
    reason, message = status.get("reason"), status.get("message")
    p = SeenPod(uid=str(md.get("uid") or rec.uid or ""), rv=str(md.get("resourceVersion") or rec.rv or ""),
                generation=str(labels.get(GENERATION_LABEL) or ""), terminating=bool(md.get("deletionTimestamp")),
                phase=str(status.get("phase") or ""), ip=str(status.get("podIP") or ""),
                node=str(spec.get("nodeName") or ""), ready=ready,
                detail=": ".join(str(v) for v in (reason, message) if v))
    if e.pods.get(rec.name) != p:
        _store(ctx, key, e.but(pods={**e.pods, rec.name: p}))


def forget_pod(ctx: Ctx, cluster: str, namespace: str, session: str, name: str) -> None:
    """The pod is a tracked Session's own now (adopted): its record follows it from here."""
    key = _key(cluster, namespace, session)
    e = ctx.get(key)
    if isinstance(e, SlotObjects) and name in e.pods:
        _store(ctx, key, e.but(pods={n: p for n, p in e.pods.items() if n != name}))


def endpoint(ctx: Ctx, rec: Observed) -> None:
    """Keep (or forget, on DELETED) a Service or Ingress (the session's, by its name)."""
    key = _key(rec.cluster, rec.namespace, rec.name)
    e, field = _entry(ctx, key), _FIELD[rec.kind]
    if rec.event == "DELETED":
        if getattr(e, field) is not None:
            _store(ctx, key, e.but(**{field: None}))
        return
    obj = _d(rec.obj)
    md = _d(obj.get("metadata"))
    labels = _d(md.get("labels"))
    shape = {"metadata": {"labels": labels, "ownerReferences": md.get("ownerReferences") or []},
             "spec": _d(obj.get("spec"))}
    owned = labels.get(MANAGED_BY) == MANAGER and labels.get(SESSION_LABEL) == rec.name
    seen = SeenEndpoint(uid=str(md.get("uid") or rec.uid or ""), rv=str(md.get("resourceVersion") or rec.rv or ""),
                        owned=owned, shape=shape)
    if getattr(e, field) != seen:
        _store(ctx, key, e.but(**{field: seen}))


def relisted(ctx: Ctx, rec: Relist) -> None:
    """A complete list of a kept kind: noted, and every entry of its cluster and scope that it
    lacks is forgotten (a cache entry, not a fact anything is decided from alone)."""
    mark = f"{rec.cluster}/{rec.kind}/{rec.scope}"
    listed = ctx.get(LISTED_KEY)
    lists = listed.lists if isinstance(listed, Listed) else ()
    if mark not in lists:
        ctx.put(LISTED_KEY, Listed(lists=lists + (mark,)))
    present = {(k.namespace, k.name) for k in rec.keys}
    prefix = f"{SEEN_PREFIX}{rec.cluster}/{rec.scope + '/' if rec.scope else ''}"
    for key, e in list(ctx.items()):
        if not (isinstance(e, SlotObjects) and key.startswith(prefix)):
            continue
        namespace = key[len(SEEN_PREFIX) + len(rec.cluster) + 1:].partition("/")[0]
        if rec.kind == "Pod":
            kept = {n: p for n, p in e.pods.items() if (namespace, n) in present}
            if kept != e.pods:
                _store(ctx, key, e.but(pods=kept))
        else:
            field, name = _FIELD[rec.kind], key.rpartition("/")[2]
            if getattr(e, field) is not None and (namespace, name) not in present:
                _store(ctx, key, e.but(**{field: None}))


# -- what a resumed record asks -----------------------------------------------------------------

def listed(ctx: Ctx, cluster: str, namespace: str, kind: str) -> bool:
    """A list of ``kind`` covering ``namespace`` of ``cluster`` has been folded."""
    got = ctx.get(LISTED_KEY)
    lists = got.lists if isinstance(got, Listed) else ()
    return f"{cluster}/{kind}/" in lists or f"{cluster}/{kind}/{namespace}" in lists


def pod_of(ctx: Ctx, cluster: str, namespace: str, session: str, name: str) -> SeenPod | None:
    e = ctx.get(_key(cluster, namespace, session))
    return e.pods.get(name) if isinstance(e, SlotObjects) else None


def endpoint_of(ctx: Ctx, cluster: str, namespace: str, name: str, kind: str) -> SeenEndpoint | None:
    e = ctx.get(_key(cluster, namespace, name))
    return getattr(e, _FIELD[kind]) if isinstance(e, SlotObjects) else None


def matches(seen: SeenEndpoint, manifest: dict[str, Any]) -> bool:
    """The observed object already says everything ``manifest`` sets (its labels, owner and spec;
    fields the apiserver filled in, such as a Service's ``clusterIP``, and labels others added are
    not kfold's to compare): a replace would change nothing."""
    md = _d(manifest.get("metadata"))
    want = {"metadata": {"labels": md.get("labels") or {}, "ownerReferences": md.get("ownerReferences") or []},
            "spec": _d(manifest.get("spec"))}
    return covers(seen.shape, want)


def covers(have: Any, want: Any) -> bool:
    """Every field of ``want`` is in ``have`` with the same value (dicts: a subset, recursively;
    lists: the same length, item by item; anything else: equal)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and covers(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(covers, have, want))
    return bool(have == want and type(have) is type(want))
