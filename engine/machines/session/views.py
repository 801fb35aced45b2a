"""Raw Session and Pod objects reduced to the few facts the session machine decides on.

Guarantees:
- Total on malformed input: missing or wrongly typed fields read as absent, never raise.
- ``provisioning_message`` is the pod's own words (scheduler message, container waiting reason
  and message), so a reader is sent to the real cause; ``None`` when nothing is pending.
  ``PodStatus.waiting`` is its reason alone (the kubelet's ``ErrImagePull``, the scheduler's
  ``Unschedulable``), "" with no message.
- ``ended_apps`` reports only ``app-<name>`` containers that have terminated, in the pod's order;
  ``PodStatus.workspace_ended`` says how the workspace container ended ("" = it has not).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.machines.session.manifests import GENERATION_LABEL, SESSION_LABEL, WORKSPACE


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
    waiting: str = ""              # the provisioning message's reason ("" = none)
    workspace_ended: str = ""      # how the workspace container ended ("" = it has not)
    deleting: bool = False         # metadata.deletionTimestamp is set: the pod is going


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
    waiting = _provisioning(status)
    return PodStatus(
        str(md.get("name", "")), str(md.get("uid", "")), str(md.get("resourceVersion", "")),
        str(lbl.get(SESSION_LABEL, "")), _int(lbl.get(GENERATION_LABEL)), str(status.get("phase", "")),
        str(ip or ""), str(node or ""), ready, _detail(status), waiting[1] if waiting else None,
        ended_apps(containers), waiting[0] if waiting else "", workspace_ended(containers),
        bool(md.get("deletionTimestamp")))


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
    found = _provisioning(status)
    return found[1] if found else None


def _provisioning(status: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of ``provisioning_message``."""
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            text = ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k)) or "Unschedulable"
            return str(cond.get("reason") or "Unschedulable"), text
    for c in _l(status.get("initContainerStatuses")) + _l(status.get("containerStatuses")):
        state = c.get("state") if isinstance(c, dict) else None
        waiting = state.get("waiting") if isinstance(state, dict) else None
        if not isinstance(waiting, dict):
            continue
        reason = waiting.get("reason")
        if reason and reason not in _QUIET_WAITING:
            tail = f": {waiting['message']}" if waiting.get("message") else ""
            return str(reason), f"container {_d(c).get('name', '?')}: {reason}{tail}"
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


def workspace_ended(containers: list[dict[str, Any]]) -> str:
    """How the workspace container ended, in the words ``_ended`` gives an app ("" = it has not)."""
    for c in containers:
        if c.get("name") == WORKSPACE:
            term = _d(_d(c.get("state")).get("terminated"))
            return _ended(WORKSPACE, term).reason.replace("application", WORKSPACE, 1) if term else ""
    return ""


def _ended(app: str, term: dict[str, Any]) -> Ended:
    code = term.get("exitCode") if isinstance(term.get("exitCode"), int) else None
    shown = "unknown" if code is None else code
    reason = term.get("reason")
    if reason and reason != "Completed":
        return Ended(app, f"application container {reason} (exit code {shown})", code)
    return Ended(app, f"application container exited (code {shown})", code)
