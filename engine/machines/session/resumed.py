"""A record rebuilt from its Session's status (``session.observed.from_status``: a fresh or lost
journal) goes by what its target's first lists show (``session.seen``) while it brings back the
generation that status named.

Guarantees: ``waiting`` holds only while such a record's target has not had its first list of a
kind the daemon lists; the wait is bounded (``session.timers``, timer ``lists``).
"""
from __future__ import annotations

from engine.machines.base import Ctx
from engine.machines.session import seen
from engine.machines.session.model import SessionConfig, SessionDecision


def resuming(d: SessionDecision) -> bool:
    """Bringing back the generation its status named (``SessionDecision.resumed``), or an earlier one."""
    return d.resumed > 0 and d.generation <= d.resumed


def looks_up(d: SessionDecision, cfg: SessionConfig, kind: str) -> bool:
    """What the lists of ``kind`` showed is what this record goes by (``session.seen``)."""
    return resuming(d) and kind in cfg.listed


def waiting(ctx: Ctx, d: SessionDecision, cfg: SessionConfig, kind: str) -> bool:
    """Its target's first list of ``kind`` has not been folded yet: what would be created may be there."""
    return looks_up(d, cfg, kind) and not seen.listed(ctx, d.target, d.target_ns, kind)
