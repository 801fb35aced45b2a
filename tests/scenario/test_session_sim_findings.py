"""Session regressions found by the simulator (``kfold sim``); each names the seed that found it."""
from __future__ import annotations

from typing import Any

import pytest

from engine.machines.session.model import FINALIZER
from tests.harness import Scenario
from tests.scenario.test_session_support import ENV_SPEC, KEY, SPEC, World, at, owned_obj, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def _finish_teardown(w: World, when: float) -> None:
    w.tear_down(when)
    w.answer("delete", "Pod", when=when)
    w.observe_pod(when, gen=1, event="DELETED")


def test_unstopped_while_stopping_finishes_the_teardown_then_starts_the_next_generation():
    """Seed 5 (200 steps): a Session un-stopped while its teardown ran made the fold raise
    IllegalTransition ('begin' from Stopping) — a poison record for the whole daemon."""
    w = World().to_ready()
    w.submit({**SPEC, "stopped": True}, 10)
    assert w.phase == "Stopping"
    w.submit(SPEC, 11)
    assert w.phase == "Stopping", "the teardown in flight finishes first"
    assert w.pod_creates() == ["demo-g1"]
    _finish_teardown(w, 12)
    assert w.phase == "Creating" or w.phase == "Pending"
    assert w.decision().generation == 2


def test_a_stale_observation_without_deletion_does_not_resume_a_session_being_deleted():
    """Seed 5: a stale list replayed the Session as it was before its deletion."""
    w = World().to_ready()
    w.submit(SPEC, 10, deleting=True)
    assert w.phase == "Stopping"
    w.submit(SPEC, 11)  # the same uid, no deletionTimestamp: older than what was folded
    assert w.phase == "Stopping" and w.decision().deleting
    _finish_teardown(w, 12)
    assert w.phase == "Stopped"
    assert w.pod_creates() == ["demo-g1"], "no pod for a Session being deleted"


def test_a_stopped_session_asked_to_be_suspended_instead_is_suspended():
    w = World().to_ready()
    w.submit({**SPEC, "stopped": True}, 10)
    _finish_teardown(w, 11)
    assert w.phase == "Stopped"
    w.submit({**SPEC, "suspended": True}, 12)
    assert w.phase == "Suspended"
    assert w.pod_creates() == ["demo-g1"]


def _deleted_while_its_secret_create_is_in_flight() -> tuple[World, Any]:
    """A Session with env, deleted while its Secret create is unanswered; the teardown's read of
    the Secret has found nothing. Returns the world and the create."""
    w = World()
    w.submit(ENV_SPEC, 0)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(ENV_SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    create = w.pending("create", "Secret")[0]
    w.submit(ENV_SPEC, 1, deleting=True)
    w.answer("get", "Secret", "not_found", when=2)
    return w, create


def test_a_secret_created_after_the_teardown_read_it_is_still_deleted():
    """Found by seed 65: the Secret create was in flight when the Session was deleted; the
    teardown's read (a quorum GET, not queued behind the create) found nothing, the create then
    landed, and the Secret outlived its Session."""
    w, create = _deleted_while_its_secret_create_is_in_flight()
    assert w.phase == "Stopped"
    w.s.outcome(create, "ok", at(3), obj=owned_obj("Secret"))
    assert w.phase == "Stopping", "the finalizer stays until the late Secret is gone"
    w.tear_down(4, ("Secret",))
    assert w.phase == "Stopped"


def _finalizer_removals(w: World) -> list:
    return [e for e in w.effects("patch", "Session") if isinstance(e.patch, list)
            and any(op.get("op") == "remove" and op.get("path", "").startswith("/metadata/finalizers") for op in e.patch)]


def test_the_finalizer_waits_for_a_create_still_unanswered():
    """Found by seed 199 (kfold sim, every fault): as seed 65, but the finalizer removal was emitted
    when the teardown's reads found nothing, before the Secret create answered; it went out, the
    Session was gone when the create's answer reopened the teardown, and the Secret leaked."""
    w, create = _deleted_while_its_secret_create_is_in_flight()
    assert not _finalizer_removals(w), "the create in flight may still land: the finalizer stays"
    w.s.outcome(create, "ok", at(3), obj=owned_obj("Secret"))
    w.tear_down(4, ("Secret",))
    assert w.phase == "Stopped" and len(_finalizer_removals(w)) == 1


def _two_clusters() -> Scenario:
    s = Scenario()
    s.command("session.configure", at(0), clusters=["local", "east"], base_domain="sessions.example.test")
    return s


def test_a_resumed_session_stopped_tears_down_on_the_cluster_its_spec_names():
    """Found by seed 76 (kfold sim, cluster_skew and second_daemon): a second daemon (a fresh
    journal) met a stopped Session whose status said Ready with pod demo-g2, placed on cluster
    east; it read and released ``local/team/demo-g2`` and the Service, Ingress and Secret on
    local, found nothing, wrote Stopped, and the pod on east lived on."""
    s = _two_clusters()
    obj = session_obj({**SPEC, "cluster": "east", "stopped": True}, rv="500", finalizers=(FINALIZER,))
    obj["status"] = {"phase": "Ready", "generation": 2, "podName": "demo-g2"}
    s.observe(obj, at(0))
    reads = [(e.kind, e.cluster, e.name) for e in s.pending("get") if e.kind != "Session"]
    assert ("Pod", "east", "demo-g2") in reads, reads
    assert {c for _, c, _ in reads} == {"east"}, reads


def test_a_pod_delete_budget_is_judged_on_the_pod_clusters_clock_from_its_own_time():
    """Found by seed 37 (kfold sim, cluster_skew): a pod on east (an hour ahead) was released by a
    Session record stamped on local's clock; its 600 s delete budget was local's time + 600 s,
    judged on east's clock: it fired at once, the delete was abandoned and the Session stayed
    Stopping. A due time for a cluster now comes only from a record its own clock stamped."""
    s = _two_clusters()
    obj = session_obj({**SPEC, "cluster": "east", "stopped": True}, rv="500", finalizers=(FINALIZER,))
    obj["status"] = {"phase": "Ready", "generation": 2, "podName": "demo-g2"}
    s.observe(obj, at(0))
    budgets = [t for t in s.state.timers.values() if t.machine == "pod" and t.name == "budget"]
    assert not budgets, "no east due time from a record on local's clock"
    read = next(e for e in s.pending("get") if e.kind == "Pod")
    pod = pod_obj(2, phase="Running", ready=True, rv="40")
    s.outcome(read, "ok", at(3600), obj=pod)          # east's clock: an hour ahead
    budgets = [t for t in s.state.timers.values() if t.machine == "pod" and t.name == "budget"]
    assert [t.due for t in budgets] == [at(3600) + 600_000]
    assert not [t for t in s.state.due_timers(lambda c: at(3600) if c == "east" else at(1)) if t.name == "budget"]


def test_the_configured_start_deadline_is_the_one_armed():
    """Found while building the simulator: the daemon sends ``start_ms``/``ready_ms`` (config
    ``deadlines.*_seconds``) but the machine read ``defaults.start_deadline_s``, which nothing
    sends: every configured deadline was silently 180 s / 120 s."""
    w = World()
    w.s.command("session.configure", at(0), clusters=["local"], base_domain="sessions.example.test",
                start_ms=60_000, ready_ms=30_000, defaults={"start_seconds": 60, "ready_seconds": 30})
    w.to_provisioning()
    assert w.s.state.timers[f"session:{KEY}:start"].due == at(60)


def test_a_status_write_that_fails_is_written_again_without_waiting_for_another_event():
    """Found by seeds 136 and 261 (80 steps): the last status write of a quiet Session failed and
    nothing rewrote it, so the Session showed Creating/Stopping for ever."""
    w = World().to_ready()
    w.submit({**SPEC, "stopped": True}, 10)
    before = len(w.effects("patch", "Session"))
    last = _status_writes(w)[-1]
    assert last.patch["status"]["phase"] == "Stopping"
    w.s.outcome(last, "conflict", at(11))
    assert len(w.effects("patch", "Session")) == before + 1
    assert _status_writes(w)[-1].patch["status"]["phase"] == "Stopping"


def test_a_status_write_answered_transient_goes_on_as_the_same_write():
    """One loop per request: a status write whose executor's attempts are spent is the same write
    (same effect) sent again on the backoff, never a second write beside it."""
    w = World().to_ready()
    w.submit({**SPEC, "stopped": True}, 10)
    before = len(w.effects("patch", "Session"))
    last = _status_writes(w)[-1]
    w.s.outcome(last, "transient", at(11))
    assert len(w.effects("patch", "Session")) == before, "no new write"
    assert [p.effect.id for p in w.s.waiting_retries()] == [last.id]
    assert w.s.advance_to(at(12) - 1) == []
    assert [e.id for e in w.s.advance_to(at(12))] == [last.id], "sent again when the backoff has passed"
    w.s.outcome(last, "ok", at(13))
    assert not w.s.waiting_retries() and last.id not in {e.id for e in _status_writes(w)}


def _status_writes(w: World) -> list:
    found = [e for e in w.s.pending("patch") if e.subresource == "status"]
    return sorted(found, key=lambda e: tuple(int(p) for p in e.id.split(".")))


# -- two daemons (kfold sim --faults ...,second_daemon,leader_pause), soak seeds 20010-20337 ------

def _with_status(spec: dict, rv: str, phase: str, gen: int) -> dict:
    obj = session_obj(spec, rv=rv, finalizers=(FINALIZER,))
    obj["status"] = {"phase": phase, "generation": gen, "podName": f"demo-g{gen}"}
    return obj


def test_a_record_overtaken_by_another_replicas_status_resumes_from_it():
    """Soak seed 20035: a standby's record was bringing up generation 2 (decided, never issued)
    while the leader suspended and resumed the Session to generation 3; on takeover the standby
    re-created ``demo-g2``, a name the leader had used and released, and wrote generation 2 back."""
    w = World().to_ready()
    assert w.decision().generation == 1
    w.s.observe(_with_status(SPEC, "90", "Pending", 3), at(20))
    assert w.decision().generation == 3, "the record resumes at the generation the status reports"
    assert "demo-g2" not in w.pod_creates()
    assert w.pod_creates()[-1] == "demo-g3", w.pod_creates()


def test_a_failed_record_overtaken_by_another_replicas_status_resumes_from_it():
    """Soak seed 82541: a second daemon's fresh record met Session s3 after the user changed its
    spec, with the status still saying Failed (generation 1, the old spec's failure): it resumed
    Failed, taking the changed spec for the one that failed. The leader retried the changed spec as
    generation 2 (pod ``s3-g2``, status Provisioning); the standby's Failed record, seeing that
    status, released ``s3-g2`` as spent and, once it took over, wrote Failed over the Ready pod. A
    Failed record whose Session's status reports a later generation is behind, as a live one is
    (``session._overtaken``): it resumes from the status, and the create adopts the pod."""
    w = World()
    w.s.observe(_with_status(SPEC, "144", "Failed", 1), at(0))   # fresh: cannot tell the spec changed
    assert w.phase == "Failed"
    w.s.observe(pod_obj(2, phase="Running", ip="10.0.0.9", node="n", ready=True, rv="120"), at(1), event="ADDED")
    w.s.observe(_with_status(SPEC, "147", "Provisioning", 2), at(2))  # the leader's retry, generation 2
    assert not [e for e in w.s.effects if getattr(e, "kind", "") == "Pod" and e.type == "delete"]
    assert not [e for e in _status_writes(w) if (e.patch["status"]["phase"], e.patch["status"]["generation"])
                == ("Failed", 2)], "no Failed written for the generation the leader is bringing up"
    d = w.decision()
    assert (d.phase, d.generation, d.pod.name) == ("Creating", 2, "demo-g2"), (d.phase, d.generation, d.pod.name)
    assert w.pod_creates()[-1] == "demo-g2", "its create meets the pod (AlreadyExists) and adopts it"


def test_a_pod_created_after_its_session_is_gone_is_released():
    """Soak seed 20010: the pod create was in flight (a retry after a 500) when the Session was
    deleted; the record, and its note to let the pod go once created, went with the Session; the
    create then succeeded and ``pod_created`` for an untracked Session was ignored: the pod leaked."""
    w = World().to_creating()
    w.s.observe(session_obj(SPEC, rv="80", finalizers=()), at(2), event="DELETED")
    assert w.decision() is None
    w.answer("create", "Pod", when=3, obj=pod_obj(1))
    assert [e.name for e in w.s.pending() if getattr(e, "kind", "") == "Pod"] == ["demo-g1"], \
        "the pod machine is asked to let the orphan pod go (it reads, then deletes it fenced by uid)"


def test_a_status_another_writer_overwrote_is_written_again():
    """Soak seeds 20111, 20132: the leader wrote Stopped (and saw it); a second daemon that led
    for a while wrote Stopping over it from its stale record; the first, leading again, trusted what
    it had last written and never wrote Stopped again."""
    w = World().to_ready()
    status = [e for e in w.s.pending("patch") if e.subresource == "status"]
    for e in status:
        w.s.outcome(e, "ok", at(7), obj={"metadata": {"resourceVersion": "70"}})
    w.s.observe(_with_status(SPEC, "70", "Ready", 1), at(8))             # kfold's own write, seen
    before = len(w.effects("patch", "Session"))
    w.s.observe(_with_status(SPEC, "71", "Ready", 1), at(9))             # a user's edit: same status
    assert len(w.effects("patch", "Session")) == before, "an unchanged status is not written again"
    w.s.observe(_with_status(SPEC, "75", "Provisioning", 1), at(10))     # another writer's
    assert len(w.effects("patch", "Session")) == before + 1
    assert w.status()["phase"] == "Ready"


def test_a_generation_released_after_a_lost_journal_is_not_reused_on_resume():
    """Soak seed 20337: a fresh journal met a suspended Session whose status still said Ready,
    generation 2; it released ``demo-g2`` (still terminating, perhaps) and, on resume, created
    ``demo-g2`` again instead of generation 3."""
    w = World()
    w.s.observe(_with_status({**SPEC, "suspended": True}, "500", "Ready", 2), at(0))
    assert w.phase == "Suspended"
    w.rv = 600
    w.submit(SPEC, 5)
    assert w.pod_creates() == [], "generation 3 waits for demo-g2 to be gone"
    _gone(w, "demo-g2", 6)
    assert w.pod_creates() == ["demo-g3"], w.pod_creates()


def test_a_live_pod_of_a_spent_generation_is_released():
    """Soak seed 30281: a daemon that led for a while created ``demo-g2`` while the other's record
    (after a lost journal and a late list) had moved to generation 3; the new leader ignored g2
    (not its current pod) and it outlived the Session. A live pod of an earlier generation than
    the Session's, not already being let go, is released."""
    w = World().to_ready()
    w.submit({**SPEC, "suspended": True}, 10)
    w.answer("delete", "Pod", when=10)
    w.observe_pod(11, gen=1, event="DELETED")
    w.submit(SPEC, 12)
    assert w.decision().generation == 2
    def pod_effects(name: str) -> list:
        return [(e.type, getattr(e, "uid", "")) for e in w.s.pending() if getattr(e, "kind", "") == "Pod" and e.name == name]

    assert not pod_effects("demo-g1")
    w.s.observe(pod_obj(1, phase="Running", ready=True, rv="90"), at(13), event="ADDED")   # someone made g1 again
    assert pod_effects("demo-g1") == [("delete", "pod-uid-1")], "the spent generation's pod is deleted, fenced by uid"
    w.s.observe(pod_obj(2, phase="Running", ready=True, rv="91"), at(14), event="ADDED")
    assert not [t for t, _ in pod_effects("demo-g2") if t == "delete"], "the current generation's pod is kept"


def test_a_start_deadline_met_while_the_pod_is_being_read_waits_for_the_answer():
    """Soak seed 40120: after a takeover the Session adopted ``demo-g1`` (AlreadyExists, then the
    pod machine's read), its own read of the pod answered 500 and the start deadline fired before
    the retry: the Session was failed while its pod had long been Running and Ready."""
    w = World(start_seconds=60)
    w.to_creating(when=0)
    w.answer("create", "Pod", "already_exists", when=1, status_reason="AlreadyExists")
    w.answer("get", "Pod", when=1, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="n", ready=True))
    assert w.phase == "Provisioning" and w.decision().pod.reading
    w.s.advance_to(at(62))
    assert w.phase == "Provisioning", "not failed on a picture kfold knows to be stale"
    w.answer("get", "Pod", when=63, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="n", ready=True))
    w.s.advance_to(at(70))
    assert w.phase != "Failed" and w.decision().pod.phase == "Running"


# -- generation 1 without a status (its status is first written at Ready), seeds 153, 240, 296 ----

def _gone(w: World, name: str, when: float) -> None:
    """The released pod's read or delete is answered: the pod machine finds it gone."""
    (op,) = [e for e in w.s.pending() if getattr(e, "kind", "") == "Pod" and e.name == name]
    w.s.outcome(op, "not_found", at(when))


def _pod_effects(s: Scenario, name: str) -> list[tuple[str, str]]:
    return [(e.type, e.cluster) for e in s.pending() if getattr(e, "kind", "") == "Pod" and e.name == name]


def test_a_fresh_record_of_a_suspended_session_with_the_finalizer_releases_generation_1s_pod():
    """CI seed 153 (kfold sim, second_daemon): daemon a brought ``s0-g1`` up, the Session was
    suspended before any status was written; the second daemon, taking over with a journal of its
    own, saw a suspended Session with kfold's finalizer and no status, never released ``s0-g1``,
    and kept it through the stop that followed."""
    w = World()
    w.s.observe(session_obj({**SPEC, "suspended": True}, rv="500", finalizers=(FINALIZER,)), at(0))
    assert w.phase == "Suspended"
    assert _pod_effects(w.s, "demo-g1"), "generation 1's pod is read and released (fenced by uid)"
    w.rv = 600
    w.submit(SPEC, 5)
    _gone(w, "demo-g1", 6)
    assert w.pod_creates() == ["demo-g2"], "a resume is the next generation, never a released name"


def test_a_live_pod_seen_under_a_stopped_sessions_labels_is_released():
    """CI seed 240 (kfold sim, kill_lost_journal): the finalizer patch and the pod create went out
    together; the journal was lost before either answered, and the Session was stopped. The new
    life met a stopped Session with no finalizer and no status; ``demo-g1`` ran on, the Session
    showed Stopped."""
    w = World()
    w.s.observe(session_obj({**SPEC, "stopped": True}, rv="500"), at(0))
    assert w.phase == "Stopped" and not _pod_effects(w.s, "demo-g1")
    w.s.observe(pod_obj(1, phase="Running", ready=True, rv="90"), at(1), event="ADDED")
    assert ("delete", "local") in _pod_effects(w.s, "demo-g1"), _pod_effects(w.s, "demo-g1")
    w.rv = 600
    w.submit(SPEC, 5)
    _gone(w, "demo-g1", 6)
    assert w.pod_creates() == ["demo-g2"]


def test_a_pod_no_owner_reference_can_tie_to_its_session_waits_for_the_finalizer():
    """CI seed 296 (kfold sim, second_daemon): a pod on cluster east was created beside the
    finalizer patch, which failed; the Session was deleted (nothing held it) while the replica that
    knew of the pod was standby; the other had never seen the pod, and pod, Service and Ingress
    outlived their Session. Beside its Session an ownerReference takes the pod along; elsewhere the
    pod create waits for the finalizer."""
    s = _two_clusters()
    spec = {**SPEC, "cluster": "east"}
    s.observe(session_obj(spec, rv="500"), at(0))
    patch = next(e for e in s.pending("patch") if e.kind == "Session")
    namespace = [e for e in s.pending() if getattr(e, "type", "") == "ensure_namespace"]
    for e in namespace:
        s.outcome(e, "ok", at(1))
    assert not [e for e in s.effects if e.type == "create" and e.kind == "Pod"], "no pod before the finalizer"
    s.outcome(patch, "ok", at(2), obj=session_obj(spec, rv="501", finalizers=(FINALIZER,)))
    assert [(e.name, e.cluster) for e in s.effects if e.type == "create" and e.kind == "Pod"] == [("demo-g1", "east")]


def test_a_live_pod_of_a_failed_sessions_generation_is_released_by_a_fresh_record():
    """Soak seed 40322 (two daemons, lost journals): a pod create landed after its Session failed;
    the replica that released the pod lost its journal, and a fresh record resumed the Session as
    Failed at generation 1 from its status and ignored ``demo-g1`` (not a spent generation, not
    its current pod): it ran on, and the status was written Failed again while it was Ready."""
    w = World()
    obj = session_obj(SPEC, rv="500", finalizers=(FINALIZER,))
    obj["status"] = {"phase": "Failed", "generation": 1, "conditions": [
        {"type": "Ready", "status": "False", "reason": "StartDeadlineExceeded", "message": "did not start"}]}
    w.s.observe(obj, at(0))
    assert w.phase == "Failed" and w.decision().generation == 1
    w.s.observe(pod_obj(1, phase="Running", ready=True, rv="90"), at(1), event="ADDED")
    assert ("delete", "local") in _pod_effects(w.s, "demo-g1"), _pod_effects(w.s, "demo-g1")


@pytest.mark.parametrize("edit", [{"stopped": True}, {"suspended": True}], ids=["stopped", "suspended"])
def test_a_session_stopped_while_pending_releases_the_pod_another_replica_may_have_made(edit):
    """Found by the soak (kfold sim --seed 73426 --steps 400 --sessions 4): a standby's record resumed
    Session s2 to generation 3 (Pending: its create decided, never sent) while the leader created
    ``s2-g3`` on east; the standby took over, the user stopped s2, and the record, which had made no
    pod, went to Stopped: the pod lived on. A Session stopped or suspended while Pending now
    releases its generation's pod once kfold has seen it (deleted fenced by uid and resourceVersion);
    one seen only later is released then (``release_stale``), so the normal stop costs no read."""
    s = _two_clusters()
    s.observe(session_obj({**SPEC, "cluster": "east"}, rv="500", finalizers=(FINALIZER,)), at(0))
    assert s.decision("session", KEY).phase == "Pending" and not s.decision("session", KEY).pod.name
    s.observe(pod_obj(1, phase="Running", ready=True, rv="40"), at(1), cluster="east")   # the leader's pod
    s.observe(session_obj({**SPEC, "cluster": "east", **edit}, rv="501", finalizers=(FINALIZER,)), at(2))
    # Known by name only: read first, deleted only as this Session's (issue 33, item 1).
    [read] = [e for e in s.pending("get") if e.kind == "Pod" and e.machine == "pod"]
    s.outcome(read, "ok", at(3), obj=pod_obj(1, phase="Running", ready=True, rv="41"))
    [delete] = [e for e in s.pending("delete") if e.kind == "Pod"]
    assert (delete.cluster, delete.name, delete.uid, delete.rv) == ("east", "demo-g1", "pod-uid-1", "41")


def test_a_session_stopped_while_pending_with_no_pod_seen_sends_nothing_for_it():
    s = _two_clusters()
    s.observe(session_obj({**SPEC, "cluster": "east"}, rv="500", finalizers=(FINALIZER,)), at(0))
    s.observe(session_obj({**SPEC, "cluster": "east", "stopped": True}, rv="501", finalizers=(FINALIZER,)), at(1))
    assert not [e for e in s.effects if getattr(e, "kind", "") == "Pod"]
    s.observe(pod_obj(1, phase="Running", ready=True, rv="40"), at(2), cluster="east")   # shows up later
    assert [(e.type, e.name) for e in s.pending() if getattr(e, "kind", "") == "Pod"] == [("delete", "demo-g1")]


def test_a_created_pod_is_not_judged_on_facts_about_another_pod_of_the_same_name():
    """Soak seed 830708 (a second daemon with its own journal, takeover): while this record's pod
    create was held, it saw another replica's pod under the same name run and then be deleted;
    its own create then made the pod again (201, a new uid). The old pod's facts (Running, then
    gone) stayed on the record and failed the Session as "disappeared before serving". The pod
    the create made starts with no facts but its uid; its own events tell the rest."""
    w = World().to_creating()
    other = pod_obj(1, phase="Running", ip="10.0.0.9", node="node-b", ready=True)
    other["metadata"]["uid"] = "someone-elses-uid"
    w.s.observe(other, at(2), event="ADDED")
    w.s.observe(other, at(3), event="DELETED")
    w.answer("create", "Pod", when=4, obj=pod_obj(1))
    d = w.decision()
    assert d.phase == "Provisioning" and d.failure is None
    assert (d.pod.uid, d.pod.gone, d.pod.phase, d.pod.ready) == ("pod-uid-1", False, "", False)
    w.run_pod(5)
    w.publish_endpoints(6)
    assert w.phase == "Ready"
