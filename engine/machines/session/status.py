"""What a Session's status says, computed from the decision record; written only when it changes.

Guarantees:
- ``compute`` is a pure function of (decision, validated spec, config): the same facts always
  give the same status, byte for byte (``digest``).
- ``write`` emits one ``PatchObject(subresource="status")`` only when the status differs from the
  last one written (kept in ``status_written``) in something a user reads; a failed write clears
  that, so the next decision writes again. A Session that is gone is never written.
- Written only when it tells a user something new: a bring-up of generation N > 1 is written when
  it starts (Pending, with its generation: what a lost journal resumes from; generation 1 needs no
  such record), then when it is Ready (with its endpoints: the phase moves to Ready only once they
  are published); the steps between (Creating, Provisioning) are written only when something
  besides the step changed (the pod's provisioning message, a condition, a run). A Session being
  deleted is not written (it is about to go; nobody reads a Stopping or Stopped on it) unless its
  teardown is blocked (the condition says why its deletion waits). A stop that keeps the Session
  writes Stopping and Stopped.
- Convergence (``session.observed._overwritten``): once kfold's last write has been seen on the watch, a
  later observation showing another phase or generation is another writer's, and the status is
  written again. Status writes are merge patches without a resourceVersion precondition, so a
  write that was on the wire when its replica froze (SIGSTOP, a GC pause) can land after another
  replica took the Session over and wrote; the replica that holds the Session sees it on its watch
  and restates its own.
- Every field the CRD declares is present (``None`` clears a field under a JSON merge patch), so a
  stale provisioning message or pod name never lingers.
- Says which spec it is about (DESIGN invariant 13; docs/session-status.md): ``observedGeneration``
  on the status and on every condition is the ``metadata.generation`` of the spec the decision
  folded. A spec change that starts a bring-up moves the phase to Pending in the step that folds
  it, and that Pending is written (Ready False at the new generation); a ports-only change while
  Ready writes Ready False (``Routing``) until the Service and Ingress route the new ports. So a
  client waiting for Ready never takes the previous spec's Ready for the new one's; a
  metadata-only edit keeps the generation and writes nothing. ``status.generation`` is kfold's
  pod generation (``-g<N>``), another count.
- Conditions follow ``metav1.Condition``: ``lastTransitionTime`` (``stamp``) is kept while a
  condition's status stays and moves when it changes, on the home apiserver's clock as the record
  carries it (a record stamped on another cluster's clock uses the latest home-clock time this
  Session's record knows: its last status write or observation; never the local clock). The
  digest a write is compared on leaves the times out, so a time alone never causes a write.
- Events (docs/session-status.md "Events"): a status write that reports a decision a user acts on
  (Ready, Failed with its reason, Stopped, TeardownBlocked; ``quarantined``: Quarantined) also
  emits one ``PostEvent`` about the Session, once per decision (``evented``; a record rebuilt from
  the status starts from what it shows, so a lost journal posts no second Ready), at key
  ``<session key>#events``: its answer routes to no record, so an Event never holds the
  Session's own requests back. At ``events.level: Warning`` (``SessionConfig.event_level``) the
  Normal ones (Ready, Stopped) are not posted; the warnings always are.
"""
from __future__ import annotations

import json
from typing import Any

from engine.machines.session.model import canonical_json
from engine.machines.base import Ctx
from engine.effects.models import PatchObject, PostEvent
from engine.machines.session.manifests import API_VERSION, host, pod_name
from engine.machines.session import finalizer
from engine.machines.session.endpoints import endpoints_settled, ports_routed, SERVING
from engine.machines.session.model import RepoFacts, SessionConfig, SessionDecision
from engine.machines.session.spec import Spec, SpecError
from engine.rfc3339 import to_seconds_text



def compute(d: SessionDecision, spec: Spec | SpecError, cfg: SessionConfig) -> dict[str, Any]:
    live = d.phase in ("Creating", "Provisioning", "Ready") and d.pod.name != ""
    return {
        "phase": d.phase,
        "generation": d.generation,
        "podName": d.pod.name if live else None,
        "endpoints": _endpoints(d, spec, cfg) if d.phase == "Ready" and live and d.service.have else [],
        "provisioningMessage": d.pod.provisioning or None if d.phase == "Provisioning" and d.pod.phase != "Running" else None,
        "runs": [r.model_dump() for r in d.runs],
        "observedGeneration": d.spec_generation or None,
        "conditions": [_observed(d, c) for c in _conditions(d, spec, cfg)],
    }


def _observed(d: SessionDecision, cond: dict[str, Any]) -> dict[str, Any]:
    """``cond`` about the spec of ``metadata.generation`` ``d.spec_generation`` (0: not known)."""
    return {**cond, "observedGeneration": d.spec_generation} if d.spec_generation else cond


def _endpoints(d: SessionDecision, spec: Spec | SpecError, cfg: SessionConfig) -> list[dict[str, Any]]:
    if isinstance(spec, SpecError):
        return []
    out = []
    for app, port in spec.routed:
        if port.protocol == "TCP" and cfg.base_domain:
            name = host(port, d.name, cfg.base_domain)
            out.append({"app": app, "port": port.port, "host": name, "url": f"http://{name}"})
        else:
            name = f"{d.name}.{d.target_ns}.svc"
            out.append({"app": app, "port": port.port, "host": name, "url": f"{port.protocol.lower()}://{name}:{port.port}"})
    return out


MAX_MESSAGE = 32768   # metav1.Condition's message bound (the CRD's maxLength: a longer one is refused)


def _cond(type_: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": "True" if ok else "False", "reason": reason, "message": message[:MAX_MESSAGE]}


def _conditions(d: SessionDecision, spec: Spec | SpecError, cfg: SessionConfig) -> list[dict[str, Any]]:
    if isinstance(spec, SpecError):
        return [_cond("SpecValid", False, "InvalidSpec", spec.message), _ready(d, cfg)]
    if d.phase == "Ready" and not endpoints_settled(d, spec, cfg):
        # the ports changed while serving: Ready again once the Service and Ingress route them
        ready = _cond("Ready", False, "Routing", f"routing the declared ports to pod {d.pod.name}")
    else:
        ready = _ready(d, cfg)
    out = [_cond("SpecValid", True, "Valid", "spec accepted"), ready]
    errors = [f"{k}: {u.error}" for k, u in (("Service", d.service), ("Ingress", d.ingress)) if u.error]
    routes = _ports_routed(d, spec, cfg, errors)
    if routes is not None:
        out.append(routes)
    if errors:
        out.append(_cond("EndpointsPublished", False, "UpsertFailed", "; ".join(errors)))
    if d.blocked:
        out.append(_cond("TeardownComplete", False, "TeardownBlocked", d.blocked))
    signals = repo_signals(d) if d.phase in ("Provisioning", "Ready") else []
    if signals:  # a failed probe or fetch: reported, never a failure (seed 000)
        out.append(_cond("RepositoriesSynced", False, "SyncFailed", "; ".join(signals)))
    return out


def _ports_routed(d: SessionDecision, spec: Spec, cfg: SessionConfig, errors: list[str]) -> dict[str, Any] | None:
    """``PortsRouted`` (present when the spec declares apps). ``status_rules`` 1 (a journal kfold
    wrote before it stated them): True whenever no port is rejected. 2: True only while the Service
    and Ingress route every declared port to the current pod (``endpoints.ports_routed``); else
    False saying why nothing is: the Session's failure (its reason: a taken Service name is
    ``NameTaken``), the Service or Ingress write that failed, the bring-up still routing, or no pod
    to route to."""
    if spec.rejected:
        text = "; ".join(f"app {r.app!r} {r.port.protocol} port {r.port.port} rejected: {r.reason}" for r in spec.rejected)
        return _cond("PortsRouted", False, "PortConflict", text)
    if not spec.apps:
        return None
    if cfg.status_rules < 2 or ports_routed(d, spec, cfg):
        return _cond("PortsRouted", True, "AllRouted", "every declared port is routed")
    if d.phase == "Failed" and d.failure is not None:
        return _cond("PortsRouted", False, d.failure.reason, f"no port is routed: {d.failure.message}")
    if errors:
        return _cond("PortsRouted", False, "UpsertFailed", "; ".join(errors))
    if d.phase in ("Pending", "Creating", *SERVING):
        to = f"pod {_pod_of(d)}" if d.generation else "the Session's pod"
        return _cond("PortsRouted", False, "Routing", f"routing the declared ports to {to}")
    return _cond("PortsRouted", False, "NoPod", f"no pod to route to: the Session is {d.phase}")


def _pod_of(d: SessionDecision) -> str:
    """The current pod generation's pod, named before it is created."""
    return d.pod.name or pod_name(d.name, d.generation)


_WAITING = {
    "Pending": ("Preparing", "preparing namespace, repositories and secret"),
    "Creating": ("CreatingPod", "creating pod {pod}"),
    "Provisioning": ("Provisioning", "waiting for pod {pod} to serve"),
    "Suspended": ("Suspended", "suspended; the pod was released"),
    "Stopping": ("Stopping", "tearing down"),
    "Stopped": ("Stopped", "stopped"),
}


def _ready(d: SessionDecision, cfg: SessionConfig) -> dict[str, Any]:
    if d.phase == "Ready":
        return _cond("Ready", True, "Serving", f"pod {d.pod.name} is serving")
    if d.phase == "Failed" and d.failure is not None:
        # its observedGeneration names the spec that failed, for a record rebuilt from this status
        # (``from_status``)
        return _cond("Ready", False, d.failure.reason, d.failure.message)
    reason, text = _WAITING.get(d.phase, ("Failed", "failed"))
    if "{pod}" in text:  # the pod's name is derived only for a text that names it
        text = text.format(pod=_pod_of(d))
    waiting = waiting_for(d, cfg)
    return _cond("Ready", False, reason, f"{text}: {waiting}" if waiting else text)


def waiting_for(d: SessionDecision, cfg: SessionConfig) -> str:
    """What the pod of a Session being provisioned waits for, in its own words (the scheduler's
    reason, a container's waiting reason and message: ``session.views.provisioning_message``), as
    the status's ``provisioningMessage`` says it; "" when it waits for nothing it names, or under
    ``status_rules`` < 3 (a journal written before kfold reported them refolds as it was decided)."""
    if cfg.status_rules < 3 or d.phase != "Provisioning" or d.pod.phase == "Running":
        return ""
    return d.pod.provisioning


def repo_signals(d: SessionDecision) -> list[str]:
    """Failed probes and fetches on the pod's node: ``<url>: <attempted> failed on node N: <error>``
    (a failed Clone fails the session instead: ``session.reduce``)."""
    out = []
    for r in d.repos:
        st = _on_node(r, d.pod.node)
        if st.get("attempted") != "Clone" and st.get("lastError") and not st.get("synced"):
            out.append(f"{r.url}: {st.get('attempted') or 'last attempt'} failed on node {d.pod.node}: {st['lastError']}")
    return out


def _on_node(r: RepoFacts, node: str) -> dict[str, Any]:
    got = r.nodes.get(node) if node else None
    return got if isinstance(got, dict) else {}


def digest(status: dict[str, Any]) -> str:
    return canonical_json(status)


_FIELDS = ("phase", "generation", "podName", "endpoints", "provisioningMessage", "runs", "observedGeneration", "conditions")


def written(observed: dict[str, Any]) -> str:
    """The ``digest`` of a status as it stands on the Session, as ``write`` compares it: a field a
    merge patch cleared (``None``) is absent there, and the times are left out."""
    conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                  for c in observed.get("conditions") or () if isinstance(c, dict)]
    return digest({**{k: observed.get(k) for k in _FIELDS}, "conditions": conditions})


def write(ctx: Ctx, key: str, d: SessionDecision, spec: Spec | SpecError, cfg: SessionConfig) -> SessionDecision:
    """Emit a status patch if the status changed since the last write; returns the decision."""
    if d.gone or (d.deleting and (finalizer_released(d) or not d.blocked)):
        return d
    status = compute(d, spec, cfg)
    text = digest(status)
    if text == d.status_written or regresses(d) or _in_passing(d, status):
        return d
    d = seen_at(d, ctx.now_on(d.home))
    conditions, since = stamp(status["conditions"], d.since, _transition_time(d))
    ctx.emit(PatchObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
             namespace=d.namespace, name=d.name, patch={"status": {**status, "conditions": conditions}},
             subresource="status")
    return _evented(ctx, key, d, cfg).but(status_written=text, status_rv="", status_echoed=False,   # its echo is awaited anew
                                     since=since)


def event_mark(phase: str, generation: int, reason: str = "", blocked: bool = False) -> str:
    """What an Event is posted once for: the phase a user acts on, at its generation (and reason)."""
    if blocked:
        return f"TeardownBlocked/{generation}"
    if phase == "Failed":
        return f"Failed/{generation}/{reason}"
    return f"{phase}/{generation}" if phase in ("Ready", "Stopped") else ""


def _evented(ctx: Ctx, key: str, d: SessionDecision, cfg: SessionConfig) -> SessionDecision:
    """Post the Event of the phase a user acts on, once per ``event_mark``; a Normal one only at
    ``events.level: Normal`` (it is marked all the same, so it is never posted later)."""
    mark = event_mark(d.phase, d.generation, d.failure.reason if d.failure else "", bool(d.blocked))
    if not mark or mark == d.evented:
        return d
    if d.blocked:
        event = ("Warning", "TeardownBlocked", "Teardown", d.blocked)
    elif d.phase == "Failed":
        reason, note = (d.failure.reason, d.failure.message) if d.failure else ("Failed", "failed")
        event = ("Warning", reason, "BringUp", _of_generation(d, note, cfg))
    elif d.phase == "Ready":
        serving = f"pod {d.pod.name} is serving"
        event = ("Normal", "Ready", "BringUp", serving if cfg.status_rules >= 2 else f"generation {d.generation}: {serving}")
    else:
        event = ("Normal", "Stopped", "Teardown", "stopped: its pod, Secret and workspace claim are deleted")
    if event[0] == "Warning" or cfg.event_level == "Normal":
        post_event(ctx, key, d, *event)
    return d.but(evented=mark)


def _of_generation(d: SessionDecision, note: str, cfg: SessionConfig) -> str:
    """A failure's note, naming the pod generation it ended (``status.generation``, the pod
    ``<session>-g<N>``); a Session that failed before its first bring-up has none to name
    (``status_rules`` 1: ``generation N:`` whatever N)."""
    if cfg.status_rules < 2:
        return f"generation {d.generation}: {note}"
    return f"pod generation {d.generation}: {note}" if d.generation else note


def post_event(ctx: Ctx, key: str, d: SessionDecision, type_: str, reason: str, action: str, note: str) -> None:
    ctx.emit(PostEvent, f"{key}#events", cluster=d.home, namespace=d.namespace, reason=reason, action=action,
             note=note, event_type=type_, regarding={"apiVersion": API_VERSION, "kind": "Session", "name": d.name,
                                                     "namespace": d.namespace, "uid": d.uid})


def stamp(conditions: list[dict[str, Any]], since: dict[str, tuple[str, str]],
          now: str | None) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """``conditions`` with their ``lastTransitionTime``, and what the next write keeps them from.

    A condition whose status is the one ``since`` holds for its type keeps that time; one whose
    status changed, or that is new, gets ``now`` (none while no time is known: the next write
    stamps it). A type absent from ``conditions`` is dropped: when it comes back, it transitions."""
    out, kept = [], {}
    for cond in conditions:
        prev = since.get(cond["type"])
        at = prev[1] if prev is not None and prev[0] == cond["status"] else now
        if at is None:
            out.append(cond)
            continue
        out.append({**cond, "lastTransitionTime": at})
        kept[cond["type"]] = (cond["status"], at)
    return out, kept


def seen_at(d: SessionDecision, now: int | None) -> SessionDecision:
    """``d`` knowing ``now``, a time on its home cluster's clock (``None``: not known this step).
    Kept as ``metav1.Time`` text (one form, so later is greater), changed at most once a second."""
    if now is None:
        return d
    text = to_seconds_text(now)
    return d.but(home_time=text) if text > d.home_time else d


def _transition_time(d: SessionDecision) -> str | None:
    """Now on the home apiserver's clock: the step's record's time when that clock stamped it,
    else the latest one this Session's record knows (``seen_at``: its last status write or
    observation of the Session, both on that clock)."""
    return d.home_time or None


_STEPS = ("Creating", "Provisioning")


def _in_passing(d: SessionDecision, status: dict[str, Any]) -> bool:
    """A bring-up step that tells a user nothing new: not written (Ready follows, or a provisioning
    message when the pod waits). Generation 1 before anything was written: the step itself (the
    Session has no status yet; a lost journal resumes it as generation 1 all the same). Later: only
    the step changed since the last write, which already says this generation is being brought up
    (a later generation's start is written: it is what a lost journal resumes from)."""
    if d.phase not in ("Pending", *_STEPS):
        return False
    if not d.status_written:
        return d.generation == 1 and _sans_step(status) == _sans_step(_quiet(status))
    if d.phase == "Pending":
        return False
    last = json.loads(d.status_written)
    return (last.get("phase") in ("Pending", *_STEPS) and last.get("generation") == d.generation
            and _sans_step(last) == _sans_step(status))


_ROUTING = ("Routing", "AllRouted")   # PortsRouted as a bring-up moves it: routed as it goes


def _sans_step(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` without what the bring-up's step moves: the phase, the pod, Ready, and
    PortsRouted going from routing to routed."""
    conditions = [{"type": "PortsRouted", "routing": True} if c.get("type") == "PortsRouted" and c.get("reason") in _ROUTING
                  else c for c in status.get("conditions") or () if c.get("type") != "Ready"]
    return {**status, "phase": None, "podName": None, "conditions": conditions}


def _quiet(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` with nothing a user would act on: no message, no run, only good conditions
    (PortsRouted still routing is one: the bring-up routes as it goes)."""
    good = [c for c in status.get("conditions") or () if c.get("type") in ("SpecValid", "PortsRouted")
            and (c.get("status") == "True" or c.get("reason") == "Routing")]
    return {**status, "provisioningMessage": None, "runs": [], "endpoints": [], "conditions": good}


_BRING_UP_RANK = {"Pending": 0, "Creating": 1, "Provisioning": 2, "Ready": 3}


def regresses(d: SessionDecision) -> bool:
    """Writing ``d.phase`` now would move the Session's visible phase backwards within the same
    generation (e.g. Ready -> Pending while a fresh journal re-adopts what is running): held back
    until the decision catches up. Within one generation the table never moves a phase backwards,
    so this only ever holds while kfold re-learns a cluster it lost its journal for, and never past
    the bring-up deadlines: one that passes fails the Session (``session.deadlines._judge_later``), and Failed
    is written."""
    mine, seen = _BRING_UP_RANK.get(d.phase), _BRING_UP_RANK.get(d.reported_phase)
    return (mine is not None and seen is not None and d.reported_generation == d.generation
            and mine < seen)


def quarantined(ctx: Ctx, key: str, d: SessionDecision, spec: Spec | SpecError, cfg: SessionConfig,
                error: str) -> None:
    """The Session's status says kfold stopped deciding about it, and why (``engine.core``
    quarantine): Ready False, reason ``Quarantined``. The decision record is left as it was."""
    if d.gone or (d.deleting and finalizer_released(d)):
        return
    st = compute(d, spec, cfg)
    at = _transition_time(seen_at(d, ctx.now_on(d.home)))
    st["conditions"] = stamp([_observed(d, _cond("Ready", False, "Quarantined", f"kfold stopped deciding about this Session: {error}"))
                              if c["type"] == "Ready" else c for c in st["conditions"]], d.since, at)[0]
    ctx.emit(PatchObject, key, cluster=d.home, api_version=API_VERSION, kind="Session",
             namespace=d.namespace, name=d.name, patch={"status": st}, subresource="status")
    post_event(ctx, key, d, "Warning", "Quarantined", "Decide", f"kfold stopped deciding about this Session: {error}")


def finalizer_released(d: SessionDecision) -> bool:
    """The finalizer removal was sent: the Session may vanish at any moment; stop writing to it."""
    return d.phase == "Stopped" and finalizer.released(d.finalizer_step)
