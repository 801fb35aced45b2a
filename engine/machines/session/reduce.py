"""What the decision reads of its record's pod and repositories, reduced to small answers: is the
pod running, what it says against serving (``pod_verdict``), are the repositories synced on its node.

``pod_verdict``'s reasons: ``PodGone``, ``PodFailed`` (a terminal phase), ``WorkspaceEnded`` (the
workspace container terminated while the pod runs on its apps: seed 002 fails a session whose
container "dies unrecoverably"; recorded from ``status_rules`` 3 on), ``CloneFailed``. An app
container that ends is a run's end, never a verdict (``session.pods``).

Guarantees: pure functions of the record; seed 000's rule that only a failed Clone fails a
Session waiting on its node (a failed Probe or Fetch is a status signal, ``session.status``).
"""
from __future__ import annotations

from typing import Any

from engine.machines.session.model import RepoFacts, SessionDecision


def running(d: SessionDecision) -> bool:
    return d.pod.phase == "Running" and d.pod.ip != ""


def pod_verdict(d: SessionDecision) -> tuple[str, str] | None:
    p, serving = d.pod, d.phase == "Ready"
    if p.gone:
        where = "after serving" if serving else ("before serving" if running(d) else "before reaching Running")
        return "PodGone", f"pod {p.name} disappeared {where}"
    if p.phase in ("Failed", "Succeeded"):
        tail = f" ({p.detail})" if p.detail else ""
        what = f"session pod {p.name} reached {p.phase}" + ("" if serving else " before serving")
        return "PodFailed", what + tail
    if p.ended:   # restartPolicy Never: the pod stays Running on its apps, and nothing serves them
        return "WorkspaceEnded", f"pod {p.name}: {p.ended}" + ("" if serving else " before serving")
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


def repos_synced(d: SessionDecision) -> bool:
    return bool(d.pod.node) and all(_node_status(r, d.pod.node).get("synced") is True for r in d.repos) \
        if d.repos else True


def unsynced(d: SessionDecision) -> list[str]:
    return [r.url for r in d.repos if _node_status(r, d.pod.node).get("synced") is not True]
