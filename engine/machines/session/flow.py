"""Decide what a session does next, from its decision record alone: bring-up, serve, suspend, stop.

Expected flow: every handler of the session machine updates facts on the decision record, then
calls ``decide``. ``decide`` reduces the spec to one wish (tear down / invalid / suspend / run),
handles each exhaustively, arms or cancels deadlines, and writes status if it changed.

Bring-up of generation N, one step at a time (each step waits for its answer), beside the
finalizer patch (sent first, not waited for: the pod names the Session as its owner where it can,
and a Session deleted before the finalizer landed is seen going and its pod released):
namespace (pod machine; skipped on a namespace-bounded registration, where namespaces are
cluster-scoped and refused, and where the pod runs beside its Session: that namespace exists)
-> repositories (repo machine) -> session Secret (made or mended with env references, dropped
without: ``session.secret``) -> pod ``<session>-g<N>`` (pod machine ``create``) -> Running with a
pod IP within the start deadline -> the workspace container ready (and every repository synced on
the pod's node) within the ready deadline, and its Service and Ingress published -> Ready.
Endpoints are upserted once the pod runs with an address (they name the pod as owner), so each
Service's EndpointSlice is written once, with its endpoint, not again on every pod status of its start.

Sections, each part of the one decision: ``decide`` and its steps; the pods ahead of a stale
record (``defer_ahead``/``judge_ahead``/``read_ahead``: a pod of a generation the record cannot
account for is noted, judged once the record catches up or a quorum read settles it); the
endpoints (``sync_endpoints``/``endpoint_outcome``: one Service and one Ingress per Session,
upserted to match the declared ports). Each section's own contract heads it.

Guarantees:
- Idempotent: calling ``decide`` again with the same record emits nothing new (steps are marked
  "sent" before their answer, deadlines are armed once, status is written only when it changes).
- Every pod create and delete goes through the pod machine; a delete wanted while a create is in
  flight waits for the create's answer (``abandoned``), so no pod is leaked or raced.
- A new generation always gets a new pod name; the predecessor is released, never reused.
- A failure records a reason and a message for status and releases the pod.

- Everything on the target side (pod, Secret, Service, Ingress, Events, repositories) goes to the
  Session's target cluster handle, tenant and namespace (session.tenancy); the Session's own
  finalizer and status patches go to its home cluster.

Caveats:
- A Session whose target slot (cluster handle, namespace, name) is held by another Session fails
  with ``TargetTaken`` and stays failed until its spec changes.
- With no server time on the record that should arm a deadline (``ctx.now is None``), the deadline
  is armed by the next record that has one: time-gated decisions wait rather than guess.
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.machines.session.model import canonical_json
from engine.effects.models import CreateObject, DeleteObject, GetObject, Log, PatchObject, ReplaceObject
from engine.machines.base import Ctx, object_key, remember, split_key
from engine.machines.session import finalizer
from engine.machines.session import model
from engine.machines.session import manifests as mf
from engine.machines.session import secret
from engine.machines.session import seen
from engine.machines.session import steps
from engine.machines.session import status
from engine.machines.session import tenancy
from engine.machines.session.model import (
    BRINGING_UP, FINALIZER, LIVE, Failure, Moved, PodFacts, RepoFacts, SessionConfig, SessionDecision, Upsert, fire,
    moved,
)
from engine.machines.session.owned import TEARDOWN_KINDS, owned, start_teardown, uid_of
from engine.machines.session.spec import Spec, SpecError, validate
from engine.repo_names import cache_key
from journal.records import Outcome


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
        # (``session.machine.release_stale``).
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
            return _invalid(ctx, key, d, spec)
        case "suspend", _:
            return suspend(ctx, key, d)
        case "run", _:
            return run(ctx, key, d, spec, cfg)
        case other:
            raise AssertionError(f"session {key}: no decision for {other!r}")


def _spec_text(d: SessionDecision) -> str:
    return canonical_json(d.spec_raw)


# -- failing and releasing -----------------------------------------------------------------------

def fail(ctx: Ctx, key: str, d: SessionDecision, reason: str, message: str) -> Moved:
    ctx.emit(Log, key, level="warning", message=f"session {d.name} failed: {message}", fields={"reason": reason})
    d = release(ctx, key, d, f"session failed: {reason}")
    return moved(d.but(failure=Failure(reason=reason, message=message), failed_spec=_spec_text(d)), "fail")


def _invalid(ctx: Ctx, key: str, d: SessionDecision, spec: SpecError) -> SessionDecision | Moved:
    if d.phase == "Failed" and d.failure and d.failure.message == spec.message:
        return d
    return fail(ctx, key, d, "InvalidSpec", spec.message)


def pod_key(d: SessionDecision, pod: str | None = None) -> str:
    return object_key(d.target, d.target_ns, pod or d.pod.name)


def release(ctx: Ctx, key: str, d: SessionDecision, reason: str) -> SessionDecision:
    """Let go of the current pod: delete it through the pod machine (or once its create answers)."""
    if not d.pod.name or d.pod.gone:
        return d.but(pod=PodFacts())
    pk = pod_key(d)
    if not d.pod.created:
        return d.but(pod=PodFacts(), abandoned=d.abandoned + (pk,))
    return delete_pod(ctx, key, d, pk, reason).but(pod=PodFacts())


def delete_pod(ctx: Ctx, key: str, d: SessionDecision, pk: str, reason: str,
               by_name: bool = False) -> SessionDecision:
    """``by_name``: a pod this record never created nor adopted, known only by its name (the
    generation the status names): the pod machine deletes it only if it carries this Session's
    label, so a pod kfold refused to adopt (another Session's) is never deleted by name."""
    extra = {"session": d.name} if by_name else {}
    ctx.tell("pod", pk, "delete", reply_to="session", reply_key=key, reason=reason, **extra)
    return d.but(releasing=tuple(dict.fromkeys(d.releasing + (pk,))))


# -- suspend and teardown -------------------------------------------------------------------------

def suspend(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision | Moved:
    if d.phase == "Suspended":
        return d
    d = _release_unmade(ctx, key, d, "session suspended")
    return moved(_release_resumed(ctx, key, release(ctx, key, d.but(failure=None), "session suspended")), "suspend")


def teardown(ctx: Ctx, key: str, d: SessionDecision, claimed: bool = False) -> SessionDecision | Moved:
    """Stop: release the pod, delete Service, Ingress, Secret and the workspace claim (each read first and
    deleted only when it is this Session's, fenced by its uid: ``session.owned``); then, if the
    Session is being deleted, remove the finalizer. Repeated requests change nothing. ``claimed``:
    the config gives Sessions a workspace claim (one may exist even if this record never made it)."""
    if d.phase not in ("Stopping", "Stopped"):
        d = _release_unmade(ctx, key, d, "session stopped")
        d = _release_resumed(ctx, key, release(ctx, key, d, "session stopped"))
        d = start_teardown(ctx, key, d, claimed=claimed).but(secret_step=steps.object_after(d.secret_step, "again"),
                                                             claim_step=steps.object_after(d.claim_step, "again"))
        return moved(d, "stop")
    if d.phase == "Stopping" and not (d.teardown or d.releasing or d.abandoned or d.blocked):
        return moved(d, "stopped")
    if d.phase == "Stopped" and d.deleting and not any(e.type == "create" for e in ctx.pending_for(key)):
        # A create still unanswered may land after the teardown's read found nothing; its answer
        # reopens the teardown, so the finalizer waits for it (found by kfold sim, seed 199).
        d = _remove_finalizer(ctx, key, d)
    return d


RELEASED = ("Suspended", "Stopping", "Stopped", "Failed")  # phases whose pod kfold had begun to release


def _release_unmade(ctx: Ctx, key: str, d: SessionDecision, reason: str) -> SessionDecision:
    """Stopped (or suspended) while Pending: this record has not sent generation N's pod create,
    but another replica (leading while this one, standby, decided the same bring-up) or an earlier
    life may have, and its pod may already run and have been seen. ``<session>-gN`` is released
    through the pod machine (deleted fenced by uid and resourceVersion), so a stop never leaks it (found by
    kfold sim, soak seed 73426: a standby's record resumed a Session to generation 3, the leader
    created its pod on east, the standby took over and stopped the Session as Pending, the pod lived on)."""
    if d.phase != "Pending" or d.pod.name or d.generation <= 0 or not d.target:
        return d
    pk = object_key(d.target, d.target_ns, mf.pod_name(d.name, d.generation))
    if pk in d.releasing or pk in d.abandoned or not ctx.ask("pod", "uid", pk):
        # Only a pod kfold has seen (the pod machine's answer): one that shows up later is
        # released when it is observed (``session.machine.release_stale``: a stopped Session has no
        # pod), so a stop costs no read on the normal path.
        return d
    return delete_pod(ctx, key, d, pk, reason, by_name=True)


def _release_resumed(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """Stopped (or suspended) before a resumed record (``session.from_status``: a lost journal) re-adopted its
    pod — before its ``begin`` (generation N-1) or after it, while the bring-up had not reached
    the pod yet (generation N, no pod name): the pod the Session's status names is released
    through the pod machine all the same (it reads first and deletes fenced by uid; a 404 is
    fine), so a stop never leaks it. A status already Suspended/Stopping/Stopped/Failed names no pod but
    may have been written before its pod was gone: generation N's pod is released the same way."""
    phase, generation = reported(d)
    live = phase in LIVE and generation in (d.generation, d.generation + 1)
    released = phase in RELEASED and generation == d.generation
    if d.pod.name or generation <= 0 or not (live or released):
        return d
    pk = object_key(d.target or d.home, d.target_ns, mf.pod_name(d.name, generation))
    # That generation is spent: a resume is the next one, never its name again (the pod released
    # may still be terminating; found by kfold sim, soak seed 20337).
    return delete_pod(ctx, key, d.but(generation=max(d.generation, generation)), pk, "session stopped", by_name=True)


def reported(d: SessionDecision) -> tuple[str, int]:
    """The phase and generation the Session's status reports. A Session that carries kfold's
    finalizer but no status at all, seen by a record that has begun nothing (a fresh or lost
    journal), was being brought up as generation 1, whose status is first written at Ready: its
    pod ``<session>-g1`` may exist (found by kfold sim, seeds 153 and 240: a standby that took over
    a Session suspended, then stopped, before any status left generation 1's pod running)."""
    if d.reported_generation <= 0 and d.generation == 0 and FINALIZER in d.finalizers:
        return "Creating", 1
    return d.reported_phase, d.reported_generation


def _remove_finalizer(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    if FINALIZER not in d.finalizers or not finalizer.may_remove(d.finalizer_step):
        return d
    # Preconditioned on exactly the field it changes (a JSON patch ``test`` of the list entry),
    # not on the resourceVersion, which kfold's own status writes move: a list another writer
    # changed meanwhile fails the test (422), and the Session is read again before a retry.
    at = f"/metadata/finalizers/{d.finalizers.index(FINALIZER)}"
    _patch_session(ctx, key, d, [{"op": "test", "path": at, "value": FINALIZER}, {"op": "remove", "path": at}])
    return d.but(finalizer_step=finalizer.after(d.finalizer_step, "remove"))


def _patch_session(ctx: Ctx, key: str, d: SessionDecision, patch: dict[str, Any] | list[dict[str, Any]]) -> None:
    ctx.emit(PatchObject, key, cluster=d.home, api_version=status.API_VERSION, kind="Session",
             namespace=d.namespace, name=d.name, patch=patch, safe_to_retry=False)


# -- running ---------------------------------------------------------------------------------------

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
        return d.failed_spec != _spec_text(d)
    return d.shape != spec.digest   # set-apps (or image, env...): recreate as N+1


def _taken(ctx: Ctx, key: str, d: SessionDecision, spec: Spec) -> str:
    """Why this Session cannot run its pods where its spec places them ("" = it can)."""
    namespace = spec.namespace or d.namespace
    holder = model.lookup(ctx, spec.cluster, namespace, d.name)
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
    _patch_session(ctx, key, d, {"metadata": {"finalizers": [*d.finalizers, FINALIZER], "resourceVersion": d.rv}})
    return d.but(finalizer_step=finalizer.after(d.finalizer_step, "add"))


def bring_up(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> SessionDecision | Moved:
    if d.namespace_step != "done" and spec.bounded:   # namespaces are cluster-scoped: refused on a bounded registration
        d = d.but(namespace_step=steps.ask_after(d.namespace_step, "skip"))
    if d.namespace_step != "done" and (d.target, d.target_ns) == (d.home, d.namespace):
        d = d.but(namespace_step=steps.ask_after(d.namespace_step, "skip"))  # the Session lives in it: nothing to do
    if d.namespace_step != "done":
        if d.namespace_step == "":
            ctx.tell("pod", object_key(d.target, d.target_ns, ""), "ensure_namespace",
                     reply_to="session", reply_key=key)
            d = d.but(namespace_step=steps.ask_after(d.namespace_step, "ask"))
        return d
    if not all(r.ensured for r in d.repos):
        if d.repos_step == "":
            for r in d.repos:
                ctx.tell("repo", r.key, "ensure", url=r.url, reply_to="session", reply_key=key)
            d = d.but(repos_step=steps.ask_after(d.repos_step, "ask"))
        return d
    if d.secret_step != "done":
        d = secret.step(ctx, key, d, spec)   # made, mended or dropped as the spec's env implies
        if d.secret_step != "done":
            return d
    if d.claim_step != "done":
        if not cfg.workspace_class:   # each pod's workspace is an emptyDir: no claim to make
            d = d.but(claim_step=steps.object_after(d.claim_step, "skip"))
        elif d.claim_step == "":
            owner = d.uid if _ownable(d) else ""
            ctx.emit(CreateObject, key, cluster=d.target, tenant=d.target_tenant, api_version="v1",
                     kind="PersistentVolumeClaim", namespace=d.target_ns, name=mf.claim_name(d.name),
                     manifest=mf.workspace_claim(d.name, d.target_ns, cfg.workspace_class, cfg.workspace_size,
                                                 cfg.workspace_access, owner))
            return d.but(claim_step=steps.object_after(d.claim_step, "create"), claim_made=True)
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
    found = seen.pod_of(ctx, d.target, d.target_ns, d.name, name) if _looks_up(d, cfg, "Pod") else None
    if found is not None and found.generation == str(d.generation) and not found.terminating:
        return _adopt_seen(ctx, key, d, name, found)
    return _create_pod(ctx, key, d, spec, cfg)


# -- a record rebuilt from its status (``session.machine.from_status``) and the first lists ------

def resuming(d: SessionDecision) -> bool:
    """Bringing back the generation its status named (``SessionDecision.resumed``), or an earlier one."""
    return d.resumed > 0 and d.generation <= d.resumed


def _looks_up(d: SessionDecision, cfg: SessionConfig, kind: str) -> bool:
    """What the lists of ``kind`` showed is what this record goes by (``session.seen``)."""
    return resuming(d) and kind in cfg.listed


def waiting(ctx: Ctx, d: SessionDecision, cfg: SessionConfig, kind: str) -> bool:
    """Its target's first list of ``kind`` has not been folded yet: what would be created may be there."""
    return _looks_up(d, cfg, kind) and not seen.listed(ctx, d.target, d.target_ns, kind)


LISTS_TIMER = "lists"   # the wait for the first lists is over (``seen.LIST_WAIT_MS``): decided without them


def _waits(ctx: Ctx, d: SessionDecision, cfg: SessionConfig) -> bool:
    return d.phase in ("Pending", "Provisioning") and any(waiting(ctx, d, cfg, k) for k in cfg.listed)


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
    manifest = mf.pod(d.name, d.target_ns, d.generation, spec, owner, away, claim=claim, seed=spec.seed or cfg.workspace_seed)
    ctx.tell("pod", pod_key(d), "create", manifest=manifest,
             reply_to="session", reply_key=key, session=d.name, generation=d.generation)
    return moved(d, "create")


def serve(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> SessionDecision | Moved:
    """Provisioning and Ready: fail on what the pod or a clone says, else route and wait for ready."""
    verdict = _pod_verdict(d)
    if verdict is not None:
        return fail(ctx, key, d, *verdict)
    if not running(d):
        return d
    # Routed once the pod runs with an address: the endpoints controllers then write each
    # Service's EndpointSlice once, with its one endpoint, instead of again on every pod status.
    d = sync_endpoints(ctx, key, d, spec, cfg)
    if d.phase == "Provisioning" and d.pod.ready and _repos_synced(d) and endpoints_settled(d, spec, cfg):
        return moved(d, "serve")  # Ready is said once, with its endpoints
    return d


def running(d: SessionDecision) -> bool:
    return d.pod.phase == "Running" and d.pod.ip != ""


def _pod_verdict(d: SessionDecision) -> tuple[str, str] | None:
    p, serving = d.pod, d.phase == "Ready"
    if p.gone:
        where = "after serving" if serving else ("before serving" if running(d) else "before reaching Running")
        return "PodGone", f"pod {p.name} disappeared {where}"
    if p.phase in ("Failed", "Succeeded"):
        tail = f" ({p.detail})" if p.detail else ""
        what = f"session pod {p.name} reached {p.phase}" + ("" if serving else " before serving")
        return "PodFailed", what + tail
    clone = _clone_error(d)
    if clone is not None and not serving:
        return "CloneFailed", clone
    return None


def _node_status(r: RepoFacts, node: str) -> dict[str, Any]:
    got = r.nodes.get(node)
    return got if isinstance(got, dict) else {}


def _clone_error(d: SessionDecision) -> str | None:
    """Seed 000: only a failed Clone fails a session waiting on the node. A failed Probe (no pod on
    the node mounts the repository yet) or Fetch (a warm cache that could not refresh) is a status
    signal (``session.status.repo_signals``), never a verdict."""
    for r in d.repos:
        st = _node_status(r, d.pod.node) if d.pod.node else {}
        if st.get("attempted") == "Clone" and st.get("lastError") and not st.get("synced"):
            return f"repository {r.url} failed to clone on node {d.pod.node}: {st['lastError']}"
    return None


def _repos_synced(d: SessionDecision) -> bool:
    return bool(d.pod.node) and all(_node_status(r, d.pod.node).get("synced") is True for r in d.repos) \
        if d.repos else True


def unsynced(d: SessionDecision) -> list[str]:
    return [r.url for r in d.repos if _node_status(r, d.pod.node).get("synced") is not True]


# -- deadlines -------------------------------------------------------------------------------------

def arm_deadlines(ctx: Ctx, key: str, d: SessionDecision, cfg: SessionConfig) -> SessionDecision:
    """Start deadline while the pod is not Running, ready deadline once it is; cancelled otherwise;
    the bound on the wait for the first lists while a resumed record waits for one."""
    want_timer(ctx, key, LISTS_TIMER, _waits(ctx, d, cfg), seen.LIST_WAIT_MS, d.target)
    provisioning = d.phase == "Provisioning"
    want_timer(ctx, key, "start", provisioning and not running(d), d.start_ms, d.target)
    want_timer(ctx, key, "ready", provisioning and running(d), d.ready_ms, d.target)
    want_timer(ctx, key, POD_DELETE_RETRY, d.phase == "Stopping" and bool(d.blocked_pod), backoff.BLOCKED_TEARDOWN_MS, d.target)
    return d


POD_DELETE_RETRY = "pod-delete-retry"   # replies.retry_pod_delete, after backoff.BLOCKED_TEARDOWN_MS


def want_timer(ctx: Ctx, key: str, name: str, wanted: bool, after_ms: int, cluster: str) -> None:
    """Judged on the clock of ``cluster``, where the pod runs (the deadline is about it)."""
    armed = ctx.timer_due(key, name) is not None
    if not wanted and armed:
        ctx.cancel_timer(key, name)
    elif wanted and not armed and ctx.now_on(cluster) is not None:
        ctx.set_timer(key, name, ctx.now_on(cluster) + after_ms, cluster)


# --------------------------------------------------------------------------------------------------
# Pods of a generation newer than a podless Session's record knows: judged once it catches up.
#
# Why: a podless Session (Suspended, Stopping, Stopped, Failed) releases a live pod seen under its
# labels (``session.machine.release_stale``: made by a life or replica whose record this one never
# saw; seed 240). But a record can be behind the Session: a replica paused (SIGSTOP) while the user
# resumed it comes back still Suspended, and its pod watch may deliver the pod the other replica made
# for that resume before its Session watch delivers the resume. Released then, the other replica's
# Ready Session fails ``PodGone`` (found by kfold sim, soak seed 77898). A pod of a generation the
# record cannot account for is evidence that the record, not the pod, is stale.
#
# Expected flow: ``defer_ahead`` notes such a pod (``SessionDecision.ahead``) instead of releasing it ->
# every decision afterwards re-judges the noted pods (``judge_ahead``, from ``session.save``, after
# ``decide``): once the record knows the pod's generation (a Session observation brought it: the
# resume begins that generation, whose create adopts the pod; or its status reports it) the pod is
# the current one, or it is spent and released as any other -> a pod still ahead after
# ``AHEAD_GRACE_MS`` on the target's clock (the record may never hear of its generation: the replica that
# made it may have died before writing any status for it) is settled by a quorum GET of the Session
# (``read_ahead``), issued after the pod was seen, so its answer is at least as new as the pod: after it
# the pod is judged on what the record then knows, and released unless it is the Session's current
# generation's.
#
# Guarantees:
# - The generation a record knows is the latest of its own, the one the Session's status reports,
#   and 1 (generation 1's status is first written at Ready: its pod may exist with no trace, which
#   is seed 240's case, released at once as before).
# - No pod is held forever: each noted pod is released, becomes the current pod, or is dropped
#   when it is deleted; a Session deleted releases every pod it noted.
# - Nothing here reads a clock: the grace is a timer on the target cluster's server time.

AHEAD_TIMER = "ahead"
AHEAD_GRACE_MS = 30_000   # how long a record may take to catch up before the Session is read


def podless(d: SessionDecision) -> bool:
    return d.phase in RELEASED and not d.pod.name


def known_generation(d: SessionDecision) -> int:
    return max(d.generation, d.reported_generation, 1)


def is_ahead(d: SessionDecision, generation: int) -> bool:
    """A pod of ``generation`` seen by this record is one to wait for (see the module doc)."""
    return podless(d) and generation > known_generation(d)


def defer_ahead(ctx: Ctx, key: str, d: SessionDecision, pk: str, generation: int) -> SessionDecision:
    if pk in d.ahead:
        return d
    ctx.log(key, f"session {d.name}: pod {split_key(pk)[2]} is of generation {generation}, newer than this "
                 f"record knows ({known_generation(d)}); it is judged once the Session's newer state is seen", pod=pk)
    return d.but(ahead={**d.ahead, pk: generation})


def forget_ahead(d: SessionDecision, pk: str) -> SessionDecision:
    """The pod is deleted (or being deleted): nothing is left to judge."""
    return d.but(ahead={k: g for k, g in d.ahead.items() if k != pk}) if pk in d.ahead else d


def judge_ahead(ctx: Ctx, key: str, d: SessionDecision, settled: bool = False) -> SessionDecision:
    """Release or drop each noted pod the record can now account for; ``settled``: after the
    quorum read, every one of them is judged on what the record knows."""
    for pk, generation in sorted(d.ahead.items()):
        verdict = _ahead_verdict(d, pk, generation, settled)
        if verdict == "wait":
            continue
        d = forget_ahead(d, pk)
        if verdict == "release":
            d = release_spent(ctx, key, d, pk, generation)
    return d


def release_spent(ctx: Ctx, key: str, d: SessionDecision, pk: str, generation: int) -> SessionDecision:
    """Delete pod ``pk`` of a spent ``generation`` (through the pod machine, fenced). A podless
    Session moves its own generation up to it: a resume is a later one, never that name again
    (found by kfold sim, seed 240)."""
    d = d.but(generation=max(d.generation, generation)) if podless(d) else d
    return delete_pod(ctx, key, d, pk, f"generation {generation} is spent (the Session is at {d.generation})")


def _ahead_verdict(d: SessionDecision, pk: str, generation: int, settled: bool) -> str:
    if (d.pod.name and pk == pod_key(d)) or pk in d.releasing or pk in d.abandoned:
        return "drop"   # the current pod now (its create adopts it), or already being let go
    if podless(d):
        return "wait" if generation > known_generation(d) and not settled else "release"
    if generation < d.generation:
        return "release"
    # Running at an earlier generation than the pod's (its status may yet overtake the record:
    # ``session._overtaken``), or at the pod's own, whose create adopts it.
    return "wait" if generation > d.generation and not settled else "drop"


def arm_ahead(ctx: Ctx, key: str, d: SessionDecision) -> None:
    want_timer(ctx, key, AHEAD_TIMER, bool(d.ahead) and not d.ahead_read, AHEAD_GRACE_MS, d.target)


def read_ahead(ctx: Ctx, key: str, d: SessionDecision) -> SessionDecision:
    """The grace is over and pods are still ahead: read the Session (quorum GET)."""
    if not d.ahead or d.ahead_read:
        return d
    eff = ctx.emit(GetObject, key, cluster=d.home, api_version=status.API_VERSION, kind="Session",
                   namespace=d.namespace, name=d.name)
    return d.but(ahead_read=eff.id)


def release_ahead(ctx: Ctx, key: str, d: SessionDecision, reason: str) -> SessionDecision:
    """The Session is gone: every pod it noted is spent."""
    for pk in sorted(d.ahead):
        d = delete_pod(ctx, key, forget_ahead(d, pk), pk, reason)
    return d


# --------------------------------------------------------------------------------------------------
# Endpoints: one Service and one Ingress per session, upserted to match the declared ports.
#
# Expected flow, per object: ``CreateObject`` (or straight to the read when kfold already routed
# it); on ``already_exists`` a quorum ``GetObject``, then a
# ``ReplaceObject`` carrying the read ``resourceVersion`` (and, for the Service, ``clusterIP`` and
# ``clusterIPs``); a ``conflict`` on replace reads again. When no port is left to route, the object
# is read, then deleted with a uid precondition. Both objects name the pod as their owner (by uid):
# routing starts as soon as the pod's create answered (its uid known), while it is scheduled and
# started, and when the pod goes they go with it (the garbage collector); nothing is sent for them
# once the pod was let go (an answer that arrives then is only recorded). One request per object is
# in flight at a time; a change of the desired manifest while one is in flight is picked up when it
# completes (``sync_endpoints`` compares digests).
#
# Guarantees:
# - Desired manifests come from ``session.manifests`` only; the digest of what the apiserver last
#   accepted is kept (``Upsert.have``), so an unchanged port set sends nothing.
# - A ports-only change re-routes here; nothing in this module touches the pod.
# - Retries of one manifest are bounded (``engine.backoff.ENDPOINT``); the last error is kept for status.
#   A safe request's (read, replace) transient answer comes once the executor's retries are spent: it is
#   not repeated here (one retry loop per request).
# - Own before touching (``session.owned``): a same-name object found by the read is replaced only
#   when it carries this Session's labels (else the session machine fails the Session naming it),
#   and an object no longer wanted is read, then deleted only if it is this Session's, by uid.
#
# Caveats:
# - The Ingress only exists with a base domain and at least one TCP port (UDP is Service-only).

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
        if u.stage != "idle":
            return False
        if want != u.have and not (u.sending == want and backoff.exhausted(backoff.ENDPOINT, u.tries)):
            return False
    return True


def sync_endpoints(ctx: Ctx, key: str, d: SessionDecision, spec: Spec, cfg: SessionConfig) -> SessionDecision:
    """Start whatever request brings each endpoint object to its desired manifest."""
    for kind, (manifest, want) in _wanted_endpoints(d, spec, cfg).items():
        d = _sync_endpoint(ctx, key, d, kind, manifest, want, cfg)
    return d


def _sync_endpoint(ctx: Ctx, key: str, d: SessionDecision, kind: str, manifest: dict[str, Any] | None,
              want: str, cfg: SessionConfig) -> SessionDecision:
    u = _upsert_of(d, kind)
    if u.stage != "idle" or want == u.have:
        return d
    tries = u.tries if want == u.sending else 0   # a new manifest starts its own tries
    if tries and backoff.exhausted(backoff.ENDPOINT, tries):
        return d
    if manifest is not None and not u.have and _looks_up(d, cfg, kind):
        # A record rebuilt from its status: the object may be there, made by an earlier life.
        if waiting(ctx, d, cfg, kind):
            return d
        found = seen.endpoint_of(ctx, d.target, d.target_ns, d.name, kind)
        if found is not None and found.owned and seen.matches(found, manifest):
            return _with_upsert(d, kind, u.but(have=want, sending="", tries=0, error=""))   # nothing to write
        if found is not None and found.owned:   # this Session's, saying something else: read, then replace
            _request_endpoint(ctx, key, d, kind, GetObject)
            return _with_upsert(d, kind, u.but(stage="read", sending=want, tries=tries))
    if manifest is None:  # read first: only this Session's object is deleted, fenced by its uid
        _request_endpoint(ctx, key, d, kind, GetObject)
        return _with_upsert(d, kind, u.but(stage="read", sending="", tries=tries))
    if u.have:  # it exists: re-route by read-then-replace
        _request_endpoint(ctx, key, d, kind, GetObject)
        return _with_upsert(d, kind, u.but(stage="read", sending=want, tries=tries))
    _request_endpoint(ctx, key, d, kind, CreateObject, manifest=manifest)
    return _with_upsert(d, kind, u.but(stage="create", sending=want, tries=tries))


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
        done = rec.result == "ok" and u.stage in ("create", "replace")
        return _with_upsert(d, kind, u.but(stage="idle", have=u.sending if done else u.have, tries=0))
    match (u.stage, rec.result):
        case ("create" | "replace", "ok"):
            u = u.but(stage="idle", have=u.sending, tries=0, error="")
        case ("delete", "ok" | "not_found"):
            u = u.but(stage="idle", have="", tries=0, error="")
        case ("replace", "conflict") if backoff.exhausted(backoff.ENDPOINT, u.tries + 1):   # changed under every replace
            u = u.but(stage="idle", tries=u.tries + 1, error=f"{rec.result}: {rec.message or rec.status_reason}")
        case ("create", "already_exists") | ("replace", "conflict"):
            _request_endpoint(ctx, key, d, kind, GetObject)
            u = u.but(stage="read", tries=u.tries + (rec.result == "conflict"))
        case ("read", "ok"):
            return _replace_endpoint(ctx, key, d, kind, rec.obj or {}, desired_endpoints(d, spec, cfg)[kind])
        case ("read" | "replace", "not_found"):
            u = u.but(stage="idle", have="", tries=u.tries + 1)
        case (_, "transient") if effect.safe_to_retry:   # the executor's retries of it are spent: not repeated here
            u = u.but(stage="idle", tries=backoff.ENDPOINT.limit, error=f"{rec.result}: {rec.message or rec.status_reason}")
        case _:
            u = u.but(stage="idle", tries=u.tries + 1, error=f"{rec.result}: {rec.message or rec.status_reason}")
    return sync_endpoints(ctx, key, _with_upsert(d, kind, u), spec, cfg)


def _replace_endpoint(ctx: Ctx, key: str, d: SessionDecision, kind: str, existing: dict[str, Any],
             manifest: dict[str, Any] | None) -> SessionDecision:
    u = _upsert_of(d, kind)
    if manifest is None and owned(existing, d.name) and uid_of(existing):  # nothing to route: delete ours
        _request_endpoint(ctx, key, d, kind, DeleteObject, uid=uid_of(existing))
        return _with_upsert(d, kind, u.but(stage="delete", sending=""))
    if manifest is None:  # not ours (or no uid to fence by): leave it, route nothing
        return _with_upsert(d, kind, u.but(stage="idle", have="", sending=""))
    _request_endpoint(ctx, key, d, kind, ReplaceObject, manifest=mf.for_replace(manifest, existing))
    return _with_upsert(d, kind, u.but(stage="replace", sending=_endpoint_digest(manifest)))

__all__ = ["LIVE", "TEARDOWN_KINDS", "decide", "fail", "release", "delete_pod", "running", "spec_of", "teardown", "unsynced"]
