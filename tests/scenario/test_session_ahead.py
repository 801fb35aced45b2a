"""A podless Session's record that sees a pod of a newer generation than it knows waits for its
Session to catch up before releasing it (``session.ahead``; soak seed 77898), and never leaks it."""
from __future__ import annotations

from typing import Any

import pytest

from engine.machines.session import ahead as session_ahead
from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import KEY, SPEC, World, at, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

SUSPENDED = {**SPEC, "suspended": True}
GRACE_S = session_ahead.AHEAD_GRACE_MS / 1000


def _suspended_at_generation_1() -> World:
    """A Session brought up as generation 1, then suspended: its pod released and gone."""
    w = World().to_ready()
    w.submit(SUSPENDED, 10)
    w.answer("delete", "Pod", when=10)
    w.observe_pod(11, gen=1, event="DELETED")
    assert w.phase == "Suspended" and w.decision().generation == 1
    return w


def _session(w: World, spec: dict[str, Any], status: tuple[str, int] | None = None) -> dict[str, Any]:
    w.rv += 1
    obj = session_obj(spec, rv=str(w.rv), finalizers=(FINALIZER,))
    if status is not None:
        obj["status"] = {"phase": status[0], "generation": status[1]}
    return obj


def _other_replicas_pod(w: World, when: float, gen: int = 2) -> None:
    w.s.observe(pod_obj(gen, phase="Running", ip="10.0.0.9", node="n", ready=True, rv=str(100 + gen)), at(when),
                event="ADDED")


def _gone(w: World, name: str, when: float) -> None:
    """The released pod's read (or delete) is answered: the pod machine finds it gone."""
    (op,) = [e for e in w.s.pending() if getattr(e, "kind", "") == "Pod" and e.name == name]
    w.s.outcome(op, "not_found", at(when))


def _deletes(w: World, name: str) -> list[Any]:
    return [e for e in w.s.effects if getattr(e, "kind", "") == "Pod" and e.name == name and e.type in ("delete", "get")]


def _session_reads(w: World) -> list[Any]:
    return w.pending("get", "Session")


def test_a_newer_generations_pod_seen_before_the_resume_is_adopted_not_released():
    """Soak seed 77898: the pod watch of a replica whose record is Suspended at generation 1
    delivers ``demo-g2`` (made by the other replica for a resume) before its Session watch
    delivers the resume. Released then, the other replica's Ready Session failed PodGone."""
    w = _suspended_at_generation_1()
    _other_replicas_pod(w, 20)
    assert not _deletes(w, "demo-g2"), "the record may be the stale one: the pod waits"
    w.s.observe(_session(w, SPEC, status=("Ready", 2)), at(21))     # the resume, seen late
    d = w.decision()
    assert (d.phase, d.generation, d.pod.name, d.ahead) == ("Creating", 2, "demo-g2", {})
    assert w.pod_creates()[-1] == "demo-g2", "its create meets the pod (AlreadyExists) and adopts it"
    assert not _deletes(w, "demo-g2")
    w.s.advance_to(at(21 + 2 * GRACE_S))
    assert not _session_reads(w), "caught up: no read"


def test_a_newer_generations_pod_is_released_once_the_status_reports_that_generation_suspended():
    """The other replica resumed and suspended again before this record saw either: the status
    it wrote (Suspended, generation 2) tells this record that ``demo-g2`` is spent."""
    w = _suspended_at_generation_1()
    _other_replicas_pod(w, 20)
    w.s.observe(_session(w, SUSPENDED, status=("Suspended", 2)), at(21))
    assert _deletes(w, "demo-g2"), "released (read, then deleted fenced by uid) by the existing path"
    assert w.decision().ahead == {} and w.decision().generation == 2
    w.submit(SPEC, 30)
    assert w.pod_creates()[-1] == "demo-g1", "generation 3 waits for demo-g2 to be gone"
    _gone(w, "demo-g2", 31)
    assert w.pod_creates()[-1] == "demo-g3", "a resume is the next generation, never a released name"


@pytest.mark.parametrize("then", ["suspended", "resumed"])
def test_a_pod_the_record_never_hears_of_is_settled_by_a_quorum_read_after_the_grace(then):
    """The leak case: the replica that made ``demo-g2`` died before it wrote any status for it and
    the user suspended the Session again; this record's Session watch says Suspended, generation 1,
    and nothing ever tells it of generation 2. After the grace, a quorum GET of the Session (newer
    than the pod) settles it: spent if the Session is not running, adopted if it is."""
    w = _suspended_at_generation_1()
    _other_replicas_pod(w, 20)
    w.s.observe(_session(w, SUSPENDED, status=("Suspended", 1)), at(21))   # caught up, and no wiser
    w.s.advance_to(at(20 + GRACE_S - 1))
    assert not _deletes(w, "demo-g2") and not _session_reads(w)
    w.s.advance_to(at(20 + GRACE_S))
    [read] = _session_reads(w)
    assert (read.cluster, read.namespace, read.name) == ("local", "team", "demo")
    answer = _session(w, SUSPENDED if then == "suspended" else SPEC, status=("Suspended", 1))
    w.s.outcome(read, "ok", at(20 + GRACE_S + 1), obj=answer)
    assert w.decision().ahead == {}
    if then == "suspended":
        assert _deletes(w, "demo-g2")
        w.submit(SPEC, 80)
        _gone(w, "demo-g2", 81)
        assert w.pod_creates()[-1] == "demo-g3"
    else:
        assert not _deletes(w, "demo-g2") and w.pod_creates()[-1] == "demo-g2"
    w.s.advance_to(at(80 + 2 * GRACE_S))
    assert not _session_reads(w), "settled: no read again"


@pytest.mark.parametrize("result", ["transient", "in_doubt"])
def test_a_settling_read_that_fails_is_made_again_after_the_grace(result):
    w = _suspended_at_generation_1()
    _other_replicas_pod(w, 20)
    w.s.advance_to(at(20 + GRACE_S))
    [read] = _session_reads(w)
    if result == "in_doubt":
        w.s.command("effect.in_doubt", at(51), effect_id=read.id)
    else:
        w.s.outcome(read, "transient", at(51), message="connection reset")
    assert not _deletes(w, "demo-g2") and w.decision().ahead
    w.s.advance_to(at(51 + GRACE_S))
    [again] = [e for e in _session_reads(w) if e.id != read.id]
    w.s.outcome(again, "ok", at(82), obj=_session(w, SUSPENDED, status=("Suspended", 1)))
    assert _deletes(w, "demo-g2")


def test_a_newer_generations_pod_deleted_meanwhile_is_forgotten():
    w = _suspended_at_generation_1()
    _other_replicas_pod(w, 20)
    w.s.observe(pod_obj(2, rv="200"), at(22), event="DELETED")
    assert w.decision().ahead == {}
    w.s.advance_to(at(20 + 2 * GRACE_S))
    assert not _session_reads(w) and not _deletes(w, "demo-g2")


def test_a_newer_generations_pod_is_released_when_its_session_is_deleted():
    w = _suspended_at_generation_1()
    _other_replicas_pod(w, 20)
    w.s.observe(_session(w, SUSPENDED), at(21), event="DELETED")
    assert w.s.decision("session", KEY) is None
    assert _deletes(w, "demo-g2"), "a deleted Session's pods are all spent"


def test_generation_1s_pod_of_a_record_that_knows_no_generation_is_released_at_once():
    """Seed 240's case, kept: generation 1's status is first written at Ready, so a record with
    none (stopped before its first Ready) may know no generation and still have had generation 1."""
    w = World()
    w.s.observe(session_obj({**SPEC, "stopped": True}, rv="500"), at(0))
    _other_replicas_pod(w, 1, gen=1)
    assert _deletes(w, "demo-g1") and w.decision().ahead == {}


def test_a_stale_replay_of_the_sessions_first_version_does_not_spend_a_generation():
    """Soak seed 81862: a replica's Session list came back stale (older than the Session) and its
    watch replayed the Session's history from there. The first version (not yet suspended, no
    status) taken as current resumed the suspended record to generation 2, then the replayed
    suspend spent it; the user's real resume became generation 3 in this record, and the pod
    ``demo-g2`` the other replica made for it was released as spent: its Ready Session failed
    PodGone. An observation older than the one folded (same uid, earlier resourceVersion) is ignored."""
    w = _suspended_at_generation_1()
    latest = w.rv
    w.s.observe(session_obj(SPEC, rv="1"), at(20), event="ADDED")     # the replay from the stale list
    d = w.decision()
    assert (d.phase, d.generation, d.rv) == ("Suspended", 1, str(latest)), "the older version decides nothing"
    assert w.pod_creates() == ["demo-g1"]
    w.s.observe(session_obj(SUSPENDED, rv=str(latest), finalizers=(FINALIZER,)), at(20))  # replay catches up
    w.s.observe(_session(w, SPEC, status=("Ready", 2)), at(21))     # the user's resume, made Ready by the other replica
    _other_replicas_pod(w, 22)
    d = w.decision()
    assert (d.generation, d.pod.name) == (2, "demo-g2")
    assert not _deletes(w, "demo-g2"), "the resume's pod is this generation's, not a spent one"
