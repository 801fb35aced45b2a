"""A Session status written by another writer after kfold's own is restated (issue 14, the
SIGSTOP window; ``session._overwritten``).

Status writes are merge patches without a resourceVersion precondition: a replica frozen with one
on the wire (SIGSTOP, a GC pause) can have it land after the replica that took the Session over
wrote. That replica sees it on its watch: a phase other than the one it wrote, at a resourceVersion
newer than its own write's answer, with no status write of its own in flight: it writes its status
again. Its own writes' events arriving late, and later changes that keep its phase, are not
restated.
"""
from __future__ import annotations

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import SPEC, World, at, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def status_writes(w: World) -> list:
    return [e for e in w.s.pending("patch") if e.subresource == "status"]


def answered_ready(w: World) -> tuple[World, int]:
    """A Ready Session whose status writes were all answered; returns the last answer's rv."""
    w.to_ready()
    rv = 40
    for e in sorted(status_writes(w), key=lambda e: tuple(int(p) for p in e.id.split("."))):
        rv += 1
        w.s.outcome(e, "ok", at(7), obj=shown(e.patch["status"]["phase"], rv, w.decision().generation))
    assert w.phase == "Ready" and not status_writes(w)
    return w, rv


def shown(phase: str, rv: int, gen: int) -> dict:
    obj = session_obj(SPEC, rv=str(rv), finalizers=(FINALIZER,))
    obj["status"] = {"phase": phase, "generation": gen, "podName": f"demo-g{gen}"}
    return obj


def test_a_stale_phase_written_after_ours_is_written_again():
    w, rv = answered_ready(World())
    gen = w.decision().generation
    w.s.observe(shown("Pending", rv + 5, gen), at(8))   # the frozen replica's write lands late
    (again,) = status_writes(w)
    assert again.patch["status"]["phase"] == "Ready" and again.patch["status"]["generation"] == gen
    w.s.outcome(again, "ok", at(9), obj=shown("Ready", rv + 6, gen))
    w.s.observe(shown("Ready", rv + 6, gen), at(9))      # its own event: settled, nothing more
    assert not status_writes(w)


def test_our_own_write_seen_late_is_not_restated():
    w, rv = answered_ready(World())
    w.s.observe(shown("Provisioning", rv - 1, w.decision().generation), at(8))   # an older event of ours
    assert not status_writes(w)


def test_a_later_change_that_keeps_our_phase_is_not_restated():
    w, rv = answered_ready(World())
    w.s.observe(shown("Ready", rv + 3, w.decision().generation), at(8))   # e.g. a label edited
    assert not status_writes(w)


def test_nothing_is_restated_while_a_status_write_of_ours_is_in_flight():
    w = World().to_ready()
    assert status_writes(w), "the bring-up's status writes are unanswered here"
    before = len(w.effects("patch", "Session"))
    w.s.observe(shown("Pending", 999, w.decision().generation), at(8))
    assert len(w.effects("patch", "Session")) == before
