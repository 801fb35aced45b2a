"""The session's timers, armed and cancelled by the decision (``arm_deadlines``, after each one).

- ``start``: the pod must reach Running (with an IP) within ``start_ms`` of Provisioning;
  ``ready``: once Running, the workspace must be ready (and the endpoints settled) within
  ``ready_ms`` (judged by ``session.deadlines``).
- ``pod-delete-retry``: a teardown blocked by a failed pod delete asks again
  ``engine.backoff.BLOCKED_TEARDOWN_MS`` later (``session.replies.retry_pod_delete``).
- ``lists``: a resumed record waits at most ``seen.LIST_WAIT_MS`` for its target's first lists.

Every timer runs on the server time of the cluster it is about (the target's); with none known
yet, it is armed by the next record that carries one.
"""
from __future__ import annotations

from engine import backoff
from engine.machines.base import Ctx
from engine.machines.session import seen
from engine.machines.session.model import SessionConfig, SessionDecision
from engine.machines.session.reduce import running
from engine.machines.session.resumed import waiting


LISTS_TIMER = "lists"   # the wait for the first lists is over (``seen.LIST_WAIT_MS``): decided without them
POD_DELETE_RETRY = "pod-delete-retry"   # session.replies.retry_pod_delete, after backoff.BLOCKED_TEARDOWN_MS


def _waits(ctx: Ctx, d: SessionDecision, cfg: SessionConfig) -> bool:
    return d.phase in ("Pending", "Provisioning") and any(waiting(ctx, d, cfg, k) for k in cfg.listed)


def arm_deadlines(ctx: Ctx, key: str, d: SessionDecision, cfg: SessionConfig) -> SessionDecision:
    """Start deadline while the pod is not Running, ready deadline once it is; cancelled otherwise;
    the bound on the wait for the first lists while a resumed record waits for one."""
    want_timer(ctx, key, LISTS_TIMER, _waits(ctx, d, cfg), seen.LIST_WAIT_MS, d.target)
    provisioning = d.phase == "Provisioning"
    want_timer(ctx, key, "start", provisioning and not running(d), d.start_ms, d.target)
    want_timer(ctx, key, "ready", provisioning and running(d), d.ready_ms, d.target)
    want_timer(ctx, key, POD_DELETE_RETRY, d.phase == "Stopping" and bool(d.blocked_pod), backoff.BLOCKED_TEARDOWN_MS, d.target)
    return d


def want_timer(ctx: Ctx, key: str, name: str, wanted: bool, after_ms: int, cluster: str) -> None:
    """Judged on the clock of ``cluster``, where the pod runs (the deadline is about it)."""
    armed = ctx.timer_due(key, name) is not None
    if not wanted and armed:
        ctx.cancel_timer(key, name)
    elif wanted and not armed and ctx.now_on(cluster) is not None:
        ctx.set_timer(key, name, ctx.now_on(cluster) + after_ms, cluster)
