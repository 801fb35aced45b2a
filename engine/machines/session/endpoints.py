"""Endpoints: one Service and one Ingress per Session, upserted to match the declared ports.

Expected flow, per object: ``CreateObject`` (or straight to the read when kfold already routed
it); on ``already_exists`` a quorum ``GetObject``, then a ``ReplaceObject`` carrying the read
``resourceVersion`` (and, for the Service, ``clusterIP`` and ``clusterIPs``); a ``conflict`` on
replace reads again. When no port is left to route, the object is read, then deleted with a uid
precondition. Both objects name the pod as their owner (by uid): routing starts as soon as the
pod's create answered (its uid known), while it is scheduled and started, and when the pod goes
they go with it (the garbage collector); nothing is sent for them once the pod was let go (an
answer that arrives then is only recorded). One request per object is in flight at a time; a
change of the desired manifest while one is in flight is picked up when it completes
(``sync_endpoints`` compares digests).

Guarantees:
- Desired manifests come from ``session.manifests`` only; the digest of what the apiserver last
  accepted is kept (``Upsert.have``), so an unchanged port set sends nothing.
- A ports-only change re-routes here; nothing in this module touches the pod.
- Retries of one manifest are bounded (``engine.backoff.ENDPOINT``); the last error is kept for
  status. A safe request's (read, replace) transient answer comes once the executor's retries are
  spent: it is not repeated here (one retry loop per request).
- Own before touching (``session.owned``): a same-name object found by the read is replaced only
  when it carries this Session's labels (else the Session fails naming it, ``session.answers``),
  and an object no longer wanted is read, then deleted only if it is this Session's, by uid.

Caveats:
- The Ingress only exists with a base domain and at least one TCP port (UDP is Service-only).
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.effects.models import CreateObject, DeleteObject, GetObject, ReplaceObject
from engine.machines.base import Ctx, remember
from engine.machines.session import seen, steps
from engine.machines.session.model import canonical_json, SessionConfig, SessionDecision, Upsert
from engine.machines.session.owned import owned, uid_of
from engine.machines.session.resumed import looks_up, waiting
from engine.machines.session.spec import Spec
from journal.records import Outcome
from engine.machines.session import manifests as mf


SERVING = ("Provisioning", "Ready")   # phases with a pod to route to
ENDPOINT_KINDS = {"Service": ("service", "v1"), "Ingress": ("ingress", "networking.k8s.io/v1")}
EndpointEffect = CreateObject | GetObject | ReplaceObject | DeleteObject   # what ``_request_endpoint`` sends


def desired_endpoints(d: SessionDecision, spec: Spec, cfg: SessionConfig) -> dict[str, dict[str, Any] | None]:
    return {kind: manifest for kind, (manifest, _) in _wanted_endpoints(d, spec, cfg).items()}


def _wanted_endpoints(d: SessionDecision, spec: Spec, cfg: SessionConfig) -> dict[str, tuple[dict[str, Any] | None, str]]:
    """Each endpoint object's manifest and its digest. Remembered for the inputs they are made of
    (the spec by identity, as ``spec_of`` hands it out, held by the entry): a Session's
    decision asks for them on every step, and they change only with its pod or its spec."""
    key = (id(spec), d.name, d.target_ns, d.generation, d.pod.uid, cfg.base_domain)
    hit = _WANTED.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    routed = spec.routed
    if not routed or not d.pod.uid:
        svc = ing = None
    else:
        svc = mf.service(d.name, d.target_ns, d.generation, d.pod.uid, routed)
        tcp = any(p.protocol == "TCP" for _, p in routed)
        ing = mf.ingress(d.name, d.target_ns, d.generation, d.pod.uid, routed, cfg.base_domain) \
            if cfg.base_domain and tcp else None
    wanted = {"Service": (svc, _endpoint_digest(svc)), "Ingress": (ing, _endpoint_digest(ing))}
    return remember(_WANTED, key, (spec, wanted), _WANTED_MAX)[1]


_WANTED: dict[tuple[Any, ...], tuple[Spec, dict[str, tuple[dict[str, Any] | None, str]]]] = {}
_WANTED_MAX = 8192


def _endpoint_digest(manifest: dict[str, Any] | None) -> str:
    return "" if manifest is None else canonical_json(manifest)


def _upsert_of(d: SessionDecision, kind: str) -> Upsert:
    return getattr(d, ENDPOINT_KINDS[kind][0])


def _with_upsert(d: SessionDecision, kind: str, u: Upsert) -> SessionDecision:
    return d.but(**{ENDPOINT_KINDS[kind][0]: u})


def endpoints_settled(d: SessionDecision, spec: Spec, cfg: SessionConfig) -> bool:
    """Nothing more to send for either object: each is what the apiserver last accepted, or its
    tries are spent (the error is on the status). The Session says Ready only then, so Ready and
    its endpoints are one status write."""
    for kind, (_, want) in _wanted_endpoints(d, spec, cfg).items():
        u = _upsert_of(d, kind)
        if steps.busy(u.stage):
            return False
        if want != u.have and not (u.sending == want and backoff.exhausted(backoff.ENDPOINT, u.tries)):
            return False
    return True


def ports_routed(d: SessionDecision, spec: Spec, cfg: SessionConfig) -> bool:
    """Every port ``spec`` routes reaches the current pod now: the Service (and, with a base
    domain, the Ingress) the apiserver last accepted is the one wanted for this pod. Holds only
    while there is a pod to route to (``SERVING``, its uid known); nothing to route is routed."""
    if not spec.routed:
        return True
    if d.phase not in SERVING or not d.pod.uid:
        return False
    return all(want == _upsert_of(d, kind).have for kind, (_, want) in _wanted_endpoints(d, spec, cfg).items())


def sync_endpoints(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> SessionDecision:
    """Start whatever request brings each endpoint object to its desired manifest."""
    for kind, (manifest, want) in _wanted_endpoints(d, spec, cfg).items():
        d = _sync_endpoint(ctx, key, d, kind, manifest, want, cfg)
    return d


def _sync_endpoint(ctx: Ctx, key: str, d: SessionDecision, kind: str, manifest: dict[str, Any] | None,
              want: str, cfg: SessionConfig) -> SessionDecision:
    u = _upsert_of(d, kind)
    if steps.busy(u.stage) or want == u.have:
        return d
    tries = u.tries if want == u.sending else 0   # a new manifest starts its own tries
    if tries and backoff.exhausted(backoff.ENDPOINT, tries):
        return d
    if manifest is not None and not u.have and looks_up(d, cfg, kind):
        # A record rebuilt from its status: the object may be there, made by an earlier life.
        if waiting(ctx, d, cfg, kind):
            return d
        found = seen.endpoint_of(ctx, d.target, d.target_ns, d.name, kind)
        if found is not None and found.owned and seen.matches(found, manifest):
            return _with_upsert(d, kind, u.but(have=want, sending="", tries=0, error=""))   # nothing to write
        if found is not None and found.owned:   # this Session's, saying something else: read, then replace
            _request_endpoint(ctx, key, d, kind, GetObject)
            return _with_upsert(d, kind, u.after("read", sending=want, tries=tries))
    if manifest is None:  # read first: only this Session's object is deleted, fenced by its uid
        _request_endpoint(ctx, key, d, kind, GetObject)
        return _with_upsert(d, kind, u.after("read", sending="", tries=tries))
    if u.have:  # it exists: re-route by read-then-replace
        _request_endpoint(ctx, key, d, kind, GetObject)
        return _with_upsert(d, kind, u.after("read", sending=want, tries=tries))
    _request_endpoint(ctx, key, d, kind, CreateObject, manifest=manifest)
    return _with_upsert(d, kind, u.after("create", sending=want, tries=tries))


def _request_endpoint(ctx: Ctx, key: str, d: SessionDecision, kind: str, effect_type: type[EndpointEffect],
                      **fields: Any) -> None:
    ctx.emit(effect_type, key, cluster=d.target, tenant=d.target_tenant, api_version=ENDPOINT_KINDS[kind][1], kind=kind,
             namespace=d.target_ns, name=d.name, **fields)


def endpoint_outcome(ctx: Ctx, key: str, d: SessionDecision, rec: Outcome, effect: EndpointEffect, spec: Spec,
               cfg: SessionConfig) -> SessionDecision:
    """Advance one endpoint object after its request (``effect``) came back, then sync again."""
    kind = effect.kind
    u = _upsert_of(d, kind)
    if d.phase not in SERVING:  # the pod was let go: what names it as owner goes with it (garbage collector)
        done = rec.result == "ok" and steps.writing(u.stage)
        return _with_upsert(d, kind, u.after("settle", have=u.sending if done else u.have, tries=0))
    match (u.stage, rec.result):
        case ("create" | "replace", "ok"):
            u = u.after("settle", have=u.sending, tries=0, error="")
        case ("delete", "ok" | "not_found"):
            u = u.after("settle", have="", tries=0, error="")
        case ("replace", "conflict") if backoff.exhausted(backoff.ENDPOINT, u.tries + 1):   # changed under every replace
            u = u.after("settle", tries=u.tries + 1, error=f"{rec.result}: {rec.message or rec.status_reason}")
        case ("create", "already_exists") | ("replace", "conflict"):
            _request_endpoint(ctx, key, d, kind, GetObject)
            u = u.after("read", tries=u.tries + (rec.result == "conflict"))
        case ("read", "ok"):
            return _replace_endpoint(ctx, key, d, kind, rec.obj or {}, desired_endpoints(d, spec, cfg)[kind])
        case ("read" | "replace", "not_found"):
            u = u.after("settle", have="", tries=u.tries + 1)
        case (_, "transient") if effect.safe_to_retry:   # the executor's retries of it are spent: not repeated here
            u = u.after("settle", tries=backoff.ENDPOINT.limit, error=f"{rec.result}: {rec.message or rec.status_reason}")
        case _:
            u = u.after("settle", tries=u.tries + 1, error=f"{rec.result}: {rec.message or rec.status_reason}")
    return sync_endpoints(ctx, key, _with_upsert(d, kind, u), spec, cfg)


def _replace_endpoint(ctx: Ctx, key: str, d: SessionDecision, kind: str, existing: dict[str, Any],
             manifest: dict[str, Any] | None) -> SessionDecision:
    u = _upsert_of(d, kind)
    if manifest is None and owned(existing, d.name) and uid_of(existing):  # nothing to route: delete ours
        _request_endpoint(ctx, key, d, kind, DeleteObject, uid=uid_of(existing))
        return _with_upsert(d, kind, u.after("delete", sending=""))
    if manifest is None:  # not ours (or no uid to fence by): leave it, route nothing
        return _with_upsert(d, kind, u.after("settle", have="", sending=""))
    _request_endpoint(ctx, key, d, kind, ReplaceObject, manifest=mf.for_replace(manifest, existing))
    return _with_upsert(d, kind, u.after("replace", sending=_endpoint_digest(manifest)))
