"""Fenced pod deletes: every outcome, the races, a crash in flight, the budget."""
from __future__ import annotations

from journal.records import EffectIssued
from engine.effects.models import effect_to_dict
from tests.conftest import run_in_all_worlds
from tests.harness import T0, Scenario
from tests.scenario.test_pod_world import KEY, SECOND, answers, ask_delete, deletes, one, pod, world


def watched(uid: str = "A", rv: str = "5") -> Scenario:
    s = world()
    s.observe(pod(uid, rv), T0)
    return s


def test_a_delete_carries_the_watched_fence_and_no_grace_period(frozen_world):
    s = watched()
    d = one(ask_delete(s, T0), "delete")
    assert (d.kind, d.namespace, d.name, d.uid, d.rv) == ("Pod", "ns", "s1-g1", "A", "5")
    assert "grace" not in str(effect_to_dict(d)).lower()


def test_an_accepted_delete_waits_for_the_deleted_event_before_answering(frozen_world):
    s = watched()
    d = one(ask_delete(s, T0), "delete")
    s.outcome(d, "ok", T0 + SECOND)
    assert answers(s) == []
    assert s.decision("pod", KEY).phase == "terminating"
    s.observe(pod("A", "7", terminating=True), T0 + 2 * SECOND, event="DELETED")
    assert answers(s) == [("pod_gone", {"pod": KEY})]
    assert s.decision("pod", KEY) is None


def test_a_relist_without_the_terminating_pod_re_reads_it_and_a_404_proves_it_gone(frozen_world):
    s = watched()
    s.outcome(one(ask_delete(s, T0), "delete"), "ok", T0 + SECOND)
    read = one(s.relist("Pod", [], T0 + 5 * SECOND), "get")
    assert answers(s) == [], "a list alone proves nothing"
    s.outcome(read, "not_found", T0 + 6 * SECOND, status_reason="NotFound")
    assert answers(s) == [("pod_gone", {"pod": KEY})]


def test_a_relist_without_a_terminating_pod_that_still_exists_keeps_waiting(frozen_world):
    s = watched()
    s.outcome(one(ask_delete(s, T0), "delete"), "ok", T0 + SECOND)
    read = one(s.relist("Pod", [], T0 + 5 * SECOND), "get")
    s.outcome(read, "ok", T0 + 6 * SECOND, obj=pod("A", "8", terminating=True))
    assert answers(s) == []
    assert s.decision("pod", KEY).phase == "terminating"


def test_regression_a_relist_without_the_pod_while_its_delete_is_unanswered_is_followed_by_a_read(frozen_world):
    """The delete's answer is held; meanwhile the watch ended with 410 and the relist lacks the pod
    (it was already removed). The watch resumed from that list will never send its DELETED: the
    delete's ``ok`` (the pod terminating, as it was when the apiserver took the delete) is
    followed by a quorum read, and its 404 proves the pod gone."""
    s = watched()
    d = one(ask_delete(s, T0), "delete")
    assert [e for e in s.relist("Pod", [], T0 + SECOND) if e.type == "get"] == [], "the delete's answer decides first"
    read = one(s.outcome(d, "ok", T0 + 2 * SECOND), "get")
    assert answers(s) == []
    s.outcome(read, "not_found", T0 + 3 * SECOND, status_reason="NotFound")
    assert answers(s) == [("pod_gone", {"pod": KEY})]
    assert s.decision("pod", KEY) is None


def test_an_accepted_delete_without_a_relist_meanwhile_sends_no_read(frozen_world):
    s = watched()
    d = one(ask_delete(s, T0), "delete")
    assert [e for e in s.outcome(d, "ok", T0 + SECOND) if e.type == "get"] == []
    assert s.decision("pod", KEY).phase == "terminating"


def test_not_found_means_gone(frozen_world):
    s = watched()
    s.outcome(one(ask_delete(s, T0), "delete"), "not_found", T0 + SECOND, status_reason="NotFound")
    assert answers(s) == [("pod_gone", {"pod": KEY})]


def test_a_failed_precondition_re_reads_and_deletes_again_with_the_new_fence(frozen_world):
    s = watched(rv="5")
    first = one(ask_delete(s, T0), "delete")
    read = one(s.outcome(first, "conflict", T0 + SECOND, status_reason="Conflict", code=409), "get")
    second = one(s.outcome(read, "ok", T0 + 2 * SECOND, obj=pod("A", "9")), "delete")
    assert (second.uid, second.rv) == ("A", "9")
    s.outcome(second, "ok", T0 + 3 * SECOND)
    s.observe(pod("A", "10"), T0 + 4 * SECOND, event="DELETED")
    assert answers(s) == [("pod_gone", {"pod": KEY})]


def test_a_pod_replaced_between_observation_and_delete_is_left_alone(frozen_world):
    s = watched(uid="A")
    first = one(ask_delete(s, T0), "delete")
    read = one(s.outcome(first, "conflict", T0 + SECOND, status_reason="Conflict"), "get")
    more = s.outcome(read, "ok", T0 + 2 * SECOND, obj=pod("B", "20"))
    assert more == ()
    assert answers(s) == [("pod_gone", {"pod": KEY})]
    assert [d.uid for d in deletes(s)] == ["A"]


def test_a_stale_fence_racing_a_recreate_never_touches_the_new_pod(frozen_world):
    s = watched(uid="A", rv="5")
    d = one(ask_delete(s, T0), "delete")
    s.observe(pod("A", "6"), T0 + SECOND, event="DELETED")
    s.observe(pod("B", "7"), T0 + SECOND, event="ADDED")
    late = s.outcome(d, "conflict", T0 + 2 * SECOND, status_reason="Conflict")
    assert late == ()
    assert answers(s) == [("pod_gone", {"pod": KEY})]
    assert [(x.uid, x.rv) for x in deletes(s)] == [("A", "5")]
    assert s.decision("pod", KEY).uid == "B" and s.decision("pod", KEY).op == ""


def test_a_transient_delete_is_in_doubt_and_re_read_never_re_sent(frozen_world):
    s = watched()
    d = one(ask_delete(s, T0), "delete")
    after = s.outcome(d, "transient", T0 + SECOND, message="connection reset")
    assert [e.type for e in after] == ["get"]
    s.outcome(after[0], "not_found", T0 + 2 * SECOND, status_reason="NotFound")
    assert answers(s) == [("pod_gone", {"pod": KEY})]
    assert len(deletes(s)) == 1


def crash_with_delete_in_flight() -> Scenario:
    s = Scenario(world().machines, issue_effects=False)
    s.observe(pod("A", "5"), T0)
    d = one(ask_delete(s, T0), "delete")
    s.feed(EffectIssued(at=T0, effect=effect_to_dict(d)))   # journaled, performed, then the crash
    assert s.state.in_doubt() == [d]
    return s


def test_an_in_doubt_delete_after_a_crash_is_resolved_by_a_quorum_read():
    def run():
        s = crash_with_delete_in_flight()
        d = s.state.in_doubt()[0]
        read = one(s.command("effect.in_doubt", T0 + 60 * SECOND, effect_id=d.id), "get")
        assert s.outcome(read, "ok", T0 + 61 * SECOND, obj=pod("A", "6", terminating=True)) == ()
        s.observe(pod("A", "7", terminating=True), T0 + 70 * SECOND, event="DELETED")
        assert answers(s) == [("pod_gone", {"pod": KEY})]
        assert len(deletes(s)) == 1
        return s.transcript()
    run_in_all_worlds(run)


def test_a_held_delete_in_doubt_after_its_budget_passed_is_still_resolved_by_its_read(frozen_world):
    """A standby decides the delete and holds it (never sent) while the leader deletes the pod; it
    takes over after the budget has passed. Before: the spent budget fired before the read
    answered and the Session stayed blocked in Stopping with its pod gone (kfold sim, seed 731264)."""
    s = Scenario(world().machines, issue_effects=False)
    s.observe(pod("A", "5"), T0)
    d = one(ask_delete(s, T0), "delete")
    read = one(s.command("effect.in_doubt", T0 + 700 * SECOND, effect_id=d.id), "get")
    s.advance_to(T0 + 705 * SECOND)
    assert answers(s) == []
    s.outcome(read, "not_found", T0 + 760 * SECOND, status_reason="NotFound")
    assert answers(s) == [("pod_gone", {"pod": KEY})] and deletes(s) == [d]


def test_an_in_doubt_delete_that_never_landed_is_sent_again_only_with_a_fresh_fence(frozen_world):
    s = crash_with_delete_in_flight()
    read = one(s.command("effect.in_doubt", T0 + 60 * SECOND, effect_id=s.state.in_doubt()[0].id), "get")
    again = one(s.outcome(read, "ok", T0 + 61 * SECOND, obj=pod("A", "8")), "delete")
    assert (again.uid, again.rv) == ("A", "8")


def test_without_an_observation_the_delete_reads_first(frozen_world):
    s = world()
    read = one(ask_delete(s, T0), "get")
    d = one(s.outcome(read, "ok", T0 + SECOND, obj=pod("A", "3")), "delete")
    assert (d.uid, d.rv) == ("A", "3")


def test_a_pod_already_terminating_is_awaited_not_deleted_again(frozen_world):
    s = world()
    s.observe(pod("A", "5", terminating=True), T0)
    assert ask_delete(s, T0) == ()
    s.observe(pod("A", "6", terminating=True), T0 + SECOND, event="DELETED")
    assert answers(s) == [("pod_gone", {"pod": KEY})]


def test_forbidden_fails_the_delete_with_the_servers_message(frozen_world):
    s = watched()
    s.outcome(one(ask_delete(s, T0), "delete"), "forbidden", T0 + SECOND, status_reason="Forbidden",
              message='pods "s1-g1" is forbidden: User "kfold" cannot delete')
    [(message, args)] = answers(s)
    assert message == "pod_delete_failed"
    assert "could not delete pod ns/s1-g1" in args["reason"] and "cannot delete" in args["reason"]


def test_a_delete_over_budget_fails_and_sends_nothing_more(frozen_world):
    s = watched()
    d = one(ask_delete(s, T0), "delete")
    s.outcome(d, "ok", T0 + SECOND)
    assert s.advance_to(T0 + 599 * SECOND) == []
    fired = s.advance_to(T0 + 600 * SECOND)
    assert [e.type for e in fired] == ["log"]
    [(message, args)] = answers(s)
    assert message == "pod_delete_failed" and "exceeded its budget of 600 s" in args["reason"]
    assert s.observe(pod("A", "9"), T0 + 700 * SECOND) == ()


def test_the_budget_waits_for_server_time_rather_than_guessing(frozen_world):
    s = world()
    s.observe(pod("A", "5"), None)
    d = one(ask_delete(s, None), "delete")
    assert s.state.next_due() is None
    s.outcome(d, "ok", T0)
    assert s.state.next_due() == T0 + 600 * SECOND


def test_a_second_delete_joins_the_running_one(frozen_world):
    s = watched()
    d = one(ask_delete(s, T0), "delete")
    assert ask_delete(s, T0, reply_key="other") == ()
    s.outcome(d, "not_found", T0 + SECOND)
    assert answers(s) == answers(s, "other") == [("pod_gone", {"pod": KEY})]


def test_a_read_that_fails_transiently_is_retried_after_a_backoff_on_server_time(frozen_world):
    s = world()
    read = one(ask_delete(s, T0), "get")
    assert s.outcome(read, "transient", T0 + SECOND, message="connection reset") == ()
    assert s.advance_to(T0 + 1999) == []
    again = one(s.advance_to(T0 + 2 * SECOND), "get")
    assert again.id == read.id   # the same read, its loop's next attempt: no new request
    assert s.outcome(again, "transient", T0 + 2 * SECOND) == ()
    assert s.next_retry() == T0 + 4 * SECOND  # doubled
    assert [p.attempt for p in s.waiting_retries()] == [2]


def test_another_uid_seen_while_terminating_triggers_a_read_not_a_delete(frozen_world):
    s = watched()
    s.outcome(one(ask_delete(s, T0), "delete"), "ok", T0 + SECOND)
    read = one(s.observe(pod("B", "30"), T0 + 2 * SECOND, event="ADDED"), "get")
    s.outcome(read, "ok", T0 + 3 * SECOND, obj=pod("A", "31", terminating=True))
    assert answers(s) == [] and len(deletes(s)) == 1
    s.observe(pod("A", "32", terminating=True), T0 + 4 * SECOND, event="DELETED")
    assert answers(s) == [("pod_gone", {"pod": KEY})]


def test_a_read_waiting_for_its_retry_is_dropped_when_the_budget_ends_the_delete(frozen_world):
    """One loop per request, and it ends with what wanted it: a delete over budget sends nothing
    more, not even the read that was waiting for its retry."""
    s = world()
    read = one(ask_delete(s, T0), "get")
    at = T0
    while at < T0 + 590 * SECOND:   # the apiserver answers every read transient
        at += SECOND
        s.outcome(read, "transient", at, message="connection reset")
        [p] = s.waiting_retries()
        assert p.effect.id == read.id
        at = p.not_before
        assert [e.id for e in s.advance_to(at) if e.type == "get"] == [read.id]
    s.outcome(read, "transient", at + SECOND)
    assert s.waiting_retries(), "still retrying inside the budget"
    fired = s.advance_to(T0 + 600 * SECOND)
    assert [e.type for e in fired] == ["log"], "nothing sent once the budget is spent"
    assert not s.waiting_retries() and not s.pending("get")
    [(message, _)] = answers(s)
    assert message == "pod_delete_failed"
