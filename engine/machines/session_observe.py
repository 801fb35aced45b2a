"""Reduce raw Session and Pod objects to the few facts the session machine decides on.

Guarantees:
- Total on malformed input: missing or wrongly typed fields read as absent, never raise.
- ``provisioning_message`` is the pod's own words (scheduler message, container waiting reason
  and message), so a reader is sent to the real cause; ``None`` when nothing is pending.
- ``ended_apps`` reports only ``app-<name>`` containers that have terminated, in the pod's order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.machines.session_manifests import GENERATION_LABEL, SESSION_LABEL, WORKSPACE

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


@dataclass(frozen=True, slots=True)
class Ended:
    app: str
    reason: str
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class PodView:
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
    md = _d(obj.get("metadata"))
    return SessionView(
        name=str(md.get("name", "")), namespace=str(md.get("namespace", "")), uid=str(md.get("uid", "")),
        rv=str(md.get("resourceVersion", "")), spec=_d(obj.get("spec")),
        deleting=bool(md.get("deletionTimestamp")), finalizers=tuple(str(f) for f in _l(md.get("finalizers"))))


def pod_view(obj: dict[str, Any]) -> PodView:
    md, status = _d(obj.get("metadata")), _d(obj.get("status"))
    lbl = _d(md.get("labels"))
    containers = [_d(c) for c in _l(status.get("containerStatuses"))]
    return PodView(
        name=str(md.get("name", "")), uid=str(md.get("uid", "")), rv=str(md.get("resourceVersion", "")),
        session=str(lbl.get(SESSION_LABEL, "")), generation=_int(lbl.get(GENERATION_LABEL)),
        phase=str(status.get("phase", "")), ip=str(status.get("podIP", "") or ""),
        node=str(_d(obj.get("spec")).get("nodeName", "") or ""),
        ready=any(c.get("name") == WORKSPACE and c.get("ready") is True for c in containers),
        detail=_detail(status), provisioning=provisioning_message(status), ended=ended_apps(containers))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _detail(status: dict[str, Any]) -> str:
    parts = [str(status[k]) for k in ("reason", "message") if status.get(k)]
    return ": ".join(parts)


def provisioning_message(status: dict[str, Any]) -> str | None:
    """Why a pod is not Running yet, in its own words: scheduling first, then containers."""
    for cond in _l(status.get("conditions")):
        cond = _d(cond)
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k)) or "Unschedulable"
    for c in _l(status.get("initContainerStatuses")) + _l(status.get("containerStatuses")):
        waiting = _d(_d(_d(c).get("state")).get("waiting"))
        reason = waiting.get("reason")
        if reason and reason not in _QUIET_WAITING:
            tail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"container {_d(c).get('name', '?')}: {reason}{tail}"
    return None


def ended_apps(containers: list[dict[str, Any]]) -> tuple[Ended, ...]:
    out = []
    for c in containers:
        name = str(c.get("name", ""))
        term = _d(_d(c.get("state")).get("terminated"))
        if name.startswith("app-") and term:
            out.append(_ended(name[len("app-"):], term))
    return tuple(out)


def _ended(app: str, term: dict[str, Any]) -> Ended:
    code = term.get("exitCode") if isinstance(term.get("exitCode"), int) else None
    shown = "unknown" if code is None else code
    reason = term.get("reason")
    if reason and reason != "Completed":
        return Ended(app, f"application container {reason} (exit code {shown})", code)
    return Ended(app, f"application container exited (code {shown})", code)
