"""The session's one decision: from its record alone, what it does next (bring-up, serve, suspend, stop).

Every handler of the session machine folds what arrived into facts on the decision record, then
``session.handlers.save`` calls ``decide``: the spec is reduced to one wish (stop / invalid /
suspend / run, ``wish_of``), ``act`` matches (wish, phase) once (``_decide``), fires the triggers a
step answers (``Moved``) through ``model.TABLE`` and decides again while the last one continues the
step; then deadlines are armed or cancelled (``session.timers``) and the status is written if it
changed (``session.status``).

Bring-up of generation N, one step at a time (each step waits for its answer), beside the
finalizer patch (sent first, not waited for: the pod names the Session as its owner where it can,
and a Session deleted before the finalizer landed is seen going and its pod released):
namespace (pod machine; skipped on a namespace-bounded registration, where namespaces are
cluster-scoped and refused, and where the pod runs beside its Session: that namespace exists)
-> repositories (repo machine) -> session Secret (made or mended with env references, dropped
without: ``session.secret``) -> the workspace claim (with ``workspace_class``) -> pod
``<session>-g<N>`` (pod machine ``create``) -> Running with a pod IP within the start deadline ->
the workspace container ready (and every repository synced on the pod's node) within the ready
deadline, and its Service and Ingress published (``session.endpoints``) -> Ready.

Guarantees:
- Idempotent: calling ``decide`` again with the same record emits nothing new (steps are marked
  "sent" before their answer, deadlines are armed once, status is written only when it changes).
- Every pod create and delete goes through the pod machine; a delete wanted while a create is in
  flight waits for the create's answer (``abandoned``), so no pod is leaked or raced.
- A new generation always gets a new pod name; the predecessor is released, never reused.
- A failure records a reason and a message for status and releases the pod (``session.release``).
- Everything on the target side (pod, Secret, Service, Ingress, Events, repositories) goes to the
  Session's target cluster handle, tenant and namespace (``session.tenancy``); the Session's own
  finalizer and status patches go to its home cluster.

Caveats:
- A Session whose target slot (cluster handle, namespace, name) is held by another Session fails
  with ``TargetTaken`` and stays failed until its spec changes.
- With no server time on the record that should arm a deadline (``ctx.now is None``), the deadline
  is armed by the next record that has one: time-gated decisions wait rather than guess.
"""
from __future__ import annotations

from typing import Any

from engine.effects.models import CreateObject
from engine.seams import CreatePod, EnsureNamespaceRequest, EnsureRepo
from engine.machines.base import Ctx, object_key, remember
from engine.machines.session import finalizer, secret, seen, status, steps, tenancy
from engine.machines.session import targets
from engine.machines.session.endpoints import endpoints_settled, sync_endpoints
from engine.machines.session.model import (
    BRINGING_UP, FINALIZER, fire, LIVE, Moved, moved, PodFacts, RepoFacts, SessionConfig, SessionDecision,
)
from engine.machines.session.reduce import pod_verdict, repos_synced, running
from engine.machines.session.release import fail, invalid, patch_session, pod_key, release, spec_text, suspend, teardown
from engine.machines.session.resumed import looks_up, waiting
from engine.machines.session.spec import Spec, SpecError, validate
from engine.machines.session.timers import arm_deadlines
from engine.repo_names import cache_key
from engine.machines.session import manifests as mf


def spec_of(d: SessionDecision, cfg: SessionConfig) -> Spec | SpecError:
    """The validated spec, placed for this Session's tenant (session.tenancy).

    Remembered per spec object: a Session's ``spec_raw`` is the dict of its last observation,
    replaced (never changed in place) when a new one is folded, while ``decide`` asks for its spec
    on every record that touches the Session (pod events, answers, timers). The answer depends only
    on that dict, the Session's home, name and namespace and the configuration, all part of the
    key (the dict and the configuration by identity, held by the entry so that neither id is
    reused while remembered): the same value ``validate`` returns, without walking the spec again."""
    key = id(d.spec_raw)
    hit = _SPECS.get(key)
    if (hit is not None and hit[0] is d.spec_raw and hit[1] is cfg
            and hit[2] == (d.home, d.name, d.namespace)):
        return hit[3]
    spec = validate(d.spec_raw, d.home, cfg.clusters, d.name,
                    place=lambda wanted: tenancy.place(cfg, d.home, d.namespace, wanted),
                    default_image=cfg.default_image, ceilings=cfg.ceilings)
    return remember(_SPECS, key, (d.spec_raw, cfg, (d.home, d.name, d.namespace), spec), _SPECS_MAX)[3]


_SPECS: dict[int, tuple[dict[str, Any], SessionConfig, tuple[str, str, str], Spec | SpecError]] = {}
_SPECS_MAX = 8192


def decide(ctx: Ctx, key: str, d: SessionDecision, cfg: SessionConfig) -> SessionDecision:
    spec = spec_of(d, cfg)
    if not d.target and not isinstance(spec, SpecError):
        # Resumed from its status (a fresh or lost journal), or never begun: its pod and the rest
        # run where its spec places them, which may be another cluster than its own (found by
        # kfold sim, seed 76); a pod seen there under its labels is this Session's to release
        # (``session.pods.release_stale``).
        d = d.but(target=spec.cluster, target_tenant=spec.tenant, target_namespace=spec.namespace)
    d = act(ctx, key, d, wish_of(d, spec), spec, cfg)
    if d.resumed and d.phase not in BRINGING_UP:   # brought back to where its status was, or moved on
        d = d.but(resumed=0)
    d = arm_deadlines(ctx, key, d, cfg)
    return status.write(ctx, key, d, spec, cfg)


WISHES = ("stop", "invalid", "suspend", "run")


def wish_of(d: SessionDecision, spec: Spec | SpecError) -> str:
    """What the Session asks for: ``stop`` (``spec.stopped``, or deleted), ``invalid`` (a spec
    kfold refuses), ``suspend`` or ``run``."""
    if d.deleting or d.spec_raw.get("stopped") is True:
        return "stop"
    if isinstance(spec, SpecError):
        return "invalid"
    return "suspend" if spec.suspended else "run"


# Triggers after which the Session is decided again, in its new phase and the same fold step
# (completion transitions): a new generation is brought up, an adopted pod is served, a teardown
# begun finishes when nothing is outstanding, a stopped Session lets go of its finalizer or starts
# again. After ``create`` (the pod's answer moves it on), ``serve``, ``fail`` and ``suspend`` the
# step is over.
CONTINUES = frozenset({"begin", "created", "stop", "stopped"})


_MAX_MOVES = 8   # more moves than this in one step is a loop in the rules, not a decision


def act(ctx: Ctx, key: str, d: SessionDecision, wish: str, spec: Any, cfg: SessionConfig) -> SessionDecision:
    """The session decision and its dispatcher: ``_decide`` matches (wish, phase) once; a step that
    changes the phase returns its triggers (``Moved``), which act alone fires on ``model.TABLE``,
    then decides again while the last trigger ``CONTINUES``."""
    fired: list[str] = []
    while True:
        out = _decide(ctx, key, d, wish, spec, cfg)
        if not isinstance(out, Moved):
            return out
        d = fire(out)
        fired.extend(out.triggers)
        if out.triggers[-1] not in CONTINUES:
            return d
        if len(fired) > _MAX_MOVES:
            raise AssertionError(f"session {key}: no end to its moves in one step: {fired}")


def _decide(ctx: Ctx, key: str, d: SessionDecision, wish: str, spec: Any,
            cfg: SessionConfig) -> SessionDecision | Moved:
    """One match over (wish, phase). A teardown under way finishes even when the spec stops asking
    for it (un-stopped while Stopping): only from Stopped does the Session start, suspend or fail
    again, in the same step."""
    match wish, d.phase:
        case "stop", _:
            return teardown(ctx, key, d, claimed=bool(cfg.workspace_class))
        case _, "Stopping":
            return teardown(ctx, key, d, claimed=bool(cfg.workspace_class))
        case "invalid", _:
            return invalid(ctx, key, d, spec)
        case "suspend", _:
            return suspend(ctx, key, d)
        case "run", _:
            return run(ctx, key, d, spec, cfg)
        case other:
            raise AssertionError(f"session {key}: no decision for {other!r}")


def run(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> SessionDecision | Moved:
    if d.gone:   # the finalizer patch met a 404: the Session's DELETED event lets go of it
        return d
    if _needs_generation(d, spec):
        taken = _taken(ctx, key, d, spec)
        if taken:
            return fail(ctx, key, d, "TargetTaken", taken)
        return begin(ctx, key, d, spec, cfg)
    if d.phase in LIVE:
        d = _ensure_finalizer(ctx, key, d)
    match d.phase:
        case "Pending":
            return bring_up(ctx, key, d, spec, cfg)
        case "Creating" | "Failed":
            return d
        case "Provisioning" | "Ready":
            return serve(ctx, key, d, spec, cfg)
        case other:
            raise AssertionError(f"session {key}: run() reached phase {other!r}")


def _needs_generation(d: SessionDecision, spec: Spec) -> bool:
    if d.generation == 0 or d.phase in ("Suspended", "Stopped", "Stopping"):
        return True
    if d.phase == "Failed":
        return d.failed_spec != spec_text(d)
    return d.shape != spec.digest   # set-apps (or image, env...): recreate as N+1


def _taken(ctx: Ctx, key: str, d: SessionDecision, spec: Spec) -> str:
    """Why this Session cannot run its pods where its spec places them ("" = it can)."""
    namespace = spec.namespace or d.namespace
    holder = targets.lookup(ctx, spec.cluster, namespace, d.name)
    if holder is None or holder == key:
        return ""
    return (f"another Session named {d.name!r} already runs in namespace {namespace} of cluster "
            f"{d.spec_raw.get('cluster')!r}; rename this Session or create it in that namespace")


def begin(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> Moved:
    """Start generation N+1 from scratch: fresh pod name, repositories re-ensured at attach."""
    d = release(ctx, key, d, "replaced by a new generation")
    namespace = spec.namespace or d.namespace
    repos = tuple(RepoFacts(url=u, key=object_key(spec.cluster, namespace, cache_key(u))) for u in spec.repositories)
    return moved(d.but(
        generation=d.generation + 1, target=spec.cluster, target_tenant=spec.tenant,
        target_namespace=spec.namespace, shape=spec.digest, failure=None, failed_spec="",
        **steps.begun_again(d), repos=repos, pod=PodFacts(),
        start_ms=cfg.start_ms, ready_ms=cfg.ready_ms, teardown=(), blocked=""), "begin")


def _ensure_finalizer(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """Add the finalizer (again after a conflict's re-read), without holding the bring-up back."""
    if FINALIZER in d.finalizers or not finalizer.may_add(d.finalizer_step):
        return d
    patch_session(ctx, key, d, {"metadata": {"finalizers": [*d.finalizers, FINALIZER], "resourceVersion": d.rv}})
    return d.but(finalizer_step=finalizer.after(d.finalizer_step, "add"))


def bring_up(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> SessionDecision | Moved:
    if not steps.done(d.namespace_step) and spec.bounded:   # namespaces are cluster-scoped: refused on a bounded registration
        d = d.but(namespace_step=steps.ask_after(d.namespace_step, "skip"))
    if not steps.done(d.namespace_step) and (d.target, d.target_ns) == (d.home, d.namespace):
        d = d.but(namespace_step=steps.ask_after(d.namespace_step, "skip"))  # the Session lives in it: nothing to do
    if not steps.done(d.namespace_step):
        if steps.unbegun(d.namespace_step):
            ctx.tell(object_key(d.target, d.target_ns, ""), EnsureNamespaceRequest(reply_to="session", reply_key=key))
            d = d.but(namespace_step=steps.ask_after(d.namespace_step, "ask"))
        return d
    if not all(r.ensured for r in d.repos):
        if steps.unbegun(d.repos_step):
            for r in d.repos:
                ctx.tell(r.key, EnsureRepo(url=r.url, reply_to="session", reply_key=key))
            d = d.but(repos_step=steps.ask_after(d.repos_step, "ask"))
        return d
    if not steps.done(d.secret.step):
        d = secret.step(ctx, key, d, spec)   # made, mended or dropped as the spec's env implies
        if not steps.done(d.secret.step):
            return d
    if not steps.done(d.claim.step):
        if not cfg.workspace_class:   # each pod's workspace is an emptyDir: no claim to make
            d = d.but(claim=d.claim.after("skip"))
        elif steps.unbegun(d.claim.step):
            owner = d.uid if _ownable(d) else ""
            ctx.emit(CreateObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1",
                     kind="PersistentVolumeClaim", namespace=d.target_ns, name=mf.claim_name(d.name),
                     manifest=mf.workspace_claim(d.name, d.target_ns, cfg.workspace_class, cfg.workspace_size,
                                                 cfg.workspace_access, owner))
            return d.but(claim=d.claim.after("create", made=True))
        else:
            return d
    if FINALIZER not in d.finalizers and not _ownable(d):
        # Nothing would take a pod elsewhere with the Session if it were deleted before its
        # finalizer landed and this record were lost meanwhile (a takeover, a lost journal): that
        # pod waits for the finalizer (found by kfold sim, seed 296: a pod on cluster east, its
        # Service and Ingress outlived their Session).
        return d
    if d.releasing or d.abandoned:
        # One live pod per Session: generation N's pod is created once every earlier pod being let
        # go is gone (``pod_gone``) or its delete failed (``pod_delete_failed``, after the pod
        # machine's budget): a workspace that outlives generations is never mounted by two pods.
        return d
    if waiting(ctx, d, cfg, "Pod"):
        return d
    name = mf.pod_name(d.name, d.generation)
    found = seen.pod_of(ctx, d.target, d.target_ns, d.name, name) if looks_up(d, cfg, "Pod") else None
    if found is not None and found.generation == str(d.generation) and not found.terminating:
        return _adopt_seen(ctx, key, d, name, found)
    return _create_pod(ctx, key, d, spec, cfg)


def _adopt_seen(ctx: Ctx, key: str, d: SessionDecision, name: str, p: seen.SeenPod) -> Moved:
    """Generation N's pod is in the list kfold folded, with this Session's labels and generation
    and not terminating: it is this Session's (DESIGN invariant 10), adopted with no create and no
    read; its state is the list's, and its watch events follow. The pod machine fences it from the
    same observations (a later delete is fenced by its uid and resourceVersion)."""
    ctx.log(key, f"session {d.name}: pod {name} adopted (listed)", uid=p.uid)
    seen.forget_pod(ctx, d.target, d.target_ns, d.name, name)
    facts = PodFacts(name=name, uid=p.uid, rv=p.rv, created=True, phase=p.phase, ip=p.ip, node=p.node,
                     ready=p.ready, detail=p.detail)
    return moved(d.but(pod=facts), "create", "created")   # served in the same step


def _ownable(d: SessionDecision) -> bool:
    """The pod can name the Session its owner (same cluster and namespace)."""
    return (d.target, d.target_ns) == (d.home, d.namespace)


def _create_pod(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> Moved:
    name = mf.pod_name(d.name, d.generation)
    d = d.but(pod=PodFacts(name=name))
    # Owned by the Session where an ownerReference can reach it (same cluster and namespace): a
    # Session deleted before its finalizer landed still takes its pod with it, journal or not.
    # Elsewhere the pod names the Session's namespace, for the orphan-pod sweep (``pod.orphans``).
    owner, away = (d.uid, "") if _ownable(d) else ("", d.namespace)
    claim = mf.claim_name(d.name) if cfg.workspace_class else ""
    manifest = mf.pod(d.name, d.target_ns, d.generation, spec, owner, away, claim=claim, seed=spec.seed or cfg.workspace_seed,
                      identity=cfg.container_identity)
    ctx.tell(pod_key(d), CreatePod(manifest=manifest, reply_to="session", reply_key=key, session=d.name,
                                   generation=d.generation))
    return moved(d, "create")


def serve(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> SessionDecision | Moved:
    """Provisioning and Ready: fail on what the pod or a clone says, else route and wait for ready."""
    verdict = pod_verdict(d)
    if verdict is not None:
        return fail(ctx, key, d, *verdict)
    if not running(d):
        return d
    # Routed once the pod runs with an address: the endpoints controllers then write each
    # Service's EndpointSlice once, with its one endpoint, instead of again on every pod status.
    d = sync_endpoints(ctx, key, d, spec, cfg)
    if d.phase == "Provisioning" and d.pod.ready and repos_synced(d) and endpoints_settled(d, spec, cfg):
        return moved(d, "serve")  # Ready is said once, with its endpoints
    return d
