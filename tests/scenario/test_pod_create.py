"""Creating a session pod under its deterministic name, and adopting it only when provably ours."""
from __future__ import annotations

import pytest

from engine import backoff
from journal.records import EffectIssued
from engine.effects.models import effect_to_dict
from tests.harness import T0, Scenario, of_type
from tests.scenario.test_pod_world import KEY, SECOND, answers, ask, ask_create, ask_delete, deletes, one, pod, world


def test_a_create_sends_the_manifest_with_the_keys_name_and_the_kfold_labels(frozen_world):
    s = world()
    c = one(ask_create(s, T0, session="s1", generation=1), "create")
    md = c.manifest["metadata"]
    assert (c.kind, c.namespace, c.name) == ("Pod", "ns", "s1-g1")
    assert (md["name"], md["namespace"]) == ("s1-g1", "ns")
    assert md["labels"] == {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "s1",
                            "kfold.dev/generation": "1"}
    assert c.manifest["spec"]["containers"][0]["name"] == "agent"


def test_a_created_pod_is_reported_with_its_uid_and_fenced(frozen_world):
    s = world()
    s.outcome(one(ask_create(s, T0), "create"), "ok", T0 + SECOND, obj=pod("A", "1"))
    assert answers(s) == [("pod_created", {"pod": KEY, "uid": "A", "adopted": False})]
    e = s.decision("pod", KEY)
    assert (e.op, e.uid, e.rv, e.manifest) == ("", "A", "1", None)
    assert s.state.next_due() is None


@pytest.mark.parametrize("first", ["already_exists", "transient"])
def test_a_lost_or_doubtful_create_adopts_this_sessions_generation_after_a_quorum_read(first, frozen_world):
    """Seed 001:206-210: a pod create met by AlreadyExists is a lost race: kfold's own pod is adopted by a quorum
    read."""
    s = world()
    read = one(s.outcome(one(ask_create(s, T0), "create"), first, T0 + SECOND), "get")
    s.outcome(read, "ok", T0 + 2 * SECOND, obj=pod("A", "4"))
    assert answers(s) == [("pod_created", {"pod": KEY, "uid": "A", "adopted": True})]


@pytest.mark.parametrize("holder", [
    pod("X", "1", session="other"),
    pod("X", "1", generation=2),
    pod("X", "1", managed=False),
], ids=["another-session", "another-generation", "not-kfolds"])
def test_a_name_held_by_someone_else_fails_with_a_conflict_naming_the_pod(holder, frozen_world):
    s = world()
    read = one(s.outcome(one(ask_create(s, T0), "create"), "already_exists", T0 + SECOND,
                         status_reason="AlreadyExists", code=409), "get")
    assert s.outcome(read, "ok", T0 + 2 * SECOND, obj=holder) == ()
    [(message, args)] = answers(s)
    assert message == "pod_create_failed"
    assert "pod ns/s1-g1 already exists" in args["reason"] and "refusing to adopt" in args["reason"]
    assert deletes(s) == []


def test_our_pod_found_terminating_is_not_adopted(frozen_world):
    s = world()
    read = one(s.outcome(one(ask_create(s, T0), "create"), "already_exists", T0 + SECOND), "get")
    s.outcome(read, "ok", T0 + 2 * SECOND, obj=pod("A", "4", terminating=True))
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "terminating" in args["reason"]


def test_a_name_freed_before_the_read_is_created_again(frozen_world):
    s = world()
    first = one(ask_create(s, T0), "create")
    read = one(s.outcome(first, "already_exists", T0 + SECOND), "get")
    second = one(s.outcome(read, "not_found", T0 + 2 * SECOND, status_reason="NotFound"), "create")
    assert second.manifest == first.manifest


@pytest.mark.parametrize("result", ["forbidden", "invalid", "error", "conflict"])
def test_a_refused_create_fails_with_the_servers_reason(result, frozen_world):
    """Seed 001:211: any other pod create refusal fails with "could not create pod"."""
    s = world()
    s.outcome(one(ask_create(s, T0), "create"), result, T0 + SECOND, message="denied by policy")
    [(message, args)] = answers(s)
    assert message == "pod_create_failed"
    assert args["reason"].startswith(f"could not create pod ns/s1-g1: {result}") and "denied by policy" in args["reason"]
    assert s.decision("pod", KEY) is None


def test_a_create_in_doubt_after_a_crash_is_resolved_by_a_quorum_read(frozen_world):
    s = Scenario(world().machines, issue_effects=False)
    c = one(ask_create(s, T0), "create")
    s.feed(EffectIssued(at=T0, effect=effect_to_dict(c)))
    read = one(s.command("effect.in_doubt", T0 + 30 * SECOND, effect_id=c.id), "get")
    s.outcome(read, "ok", T0 + 31 * SECOND, obj=pod("A", "2"))
    assert answers(s) == [("pod_created", {"pod": KEY, "uid": "A", "adopted": True})]
    assert [e.type for e in s.effects] == ["create", "get"]


def test_a_doubt_resolved_after_the_budget_passed_gets_the_whole_budget_for_its_read(frozen_world):
    """A standby decides the create and holds it (never sent) while the leader makes the pod; it
    takes over after the budget has passed: the create is in doubt and its confirming read must be
    allowed to answer. Before: the spent budget fired first, failed the create (the Session with
    it) and the Session then deleted its healthy pod (kfold sim, soak seed 731012)."""
    s = Scenario(world().machines, issue_effects=False)
    c = one(ask_create(s, T0, budget_s=600), "create")
    read = one(s.command("effect.in_doubt", T0 + 700 * SECOND, effect_id=c.id), "get")
    s.advance_to(T0 + 705 * SECOND)   # the old due (T0 + 600 s) is stale: nothing fails
    assert answers(s) == [] and s.decision("pod", KEY).awaiting == read.id
    s.outcome(read, "ok", T0 + 760 * SECOND, obj=pod("A", "2"))
    assert answers(s) == [("pod_created", {"pod": KEY, "uid": "A", "adopted": True})]


def test_a_doubt_still_unresolved_a_whole_budget_later_fails(frozen_world):
    s = Scenario(world().machines, issue_effects=False)
    c = one(ask_create(s, T0, budget_s=600), "create")
    one(s.command("effect.in_doubt", T0 + 700 * SECOND, effect_id=c.id), "get")
    s.advance_to(T0 + 1300 * SECOND)
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "exceeded its budget of 600 s (still confirming)" in args["reason"]


def test_a_create_over_budget_fails_and_late_answers_change_nothing(frozen_world):
    s = world()
    c = one(ask_create(s, T0, budget_s=60), "create")
    s.advance_to(T0 + 60 * SECOND)
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "exceeded its budget of 60 s" in args["reason"]
    assert s.outcome(c, "already_exists", T0 + 61 * SECOND) == ()
    assert len(answers(s)) == 1


def test_a_delete_asked_during_a_create_runs_after_it_with_the_created_fence(frozen_world):
    s = world()
    c = one(ask_create(s, T0), "create")
    assert ask_delete(s, T0 + SECOND) == ()
    d = one(s.outcome(c, "ok", T0 + 2 * SECOND, obj=pod("A", "1")), "delete")
    assert (d.uid, d.rv) == ("A", "1")
    s.outcome(d, "not_found", T0 + 3 * SECOND)
    assert [m for m, _ in answers(s)] == ["pod_created", "pod_gone"]


def test_a_create_found_absent_after_its_delete_was_asked_is_not_made_again(frozen_world):
    """Found by kfold sim (soak seed 30337, two daemons): the create answered 429, its read waited
    through a standby stretch while the Session asked for the delete; the read then found nothing
    and the pod was created just to be deleted, a delete whose read later timed out: it leaked."""
    s = world()
    read = one(s.outcome(one(ask_create(s, T0), "create"), "transient", T0 + SECOND), "get")
    assert ask_delete(s, T0 + 2 * SECOND) == ()
    after = s.outcome(read, "not_found", T0 + 3 * SECOND, status_reason="NotFound")
    assert [e.type for e in after if e.type != "log"] == ["get"], "no create: the delete reads, finds nothing"
    s.outcome(one(after, "get"), "not_found", T0 + 4 * SECOND, status_reason="NotFound")
    assert [m for m, _ in answers(s)] == ["pod_create_failed", "pod_gone"]


def test_a_second_create_while_deleting_is_refused(frozen_world):
    s = world()
    s.observe(pod("A", "5"), T0)
    ask_delete(s, T0)
    assert ask_create(s, T0) == ()
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "is being deleted" in args["reason"]


@pytest.mark.parametrize("session,generation", [("s2", 1), ("s1", 2)], ids=["another-session", "another-generation"])
def test_a_create_for_another_owner_while_creating_is_refused_and_the_first_goes_on(session, generation, frozen_world):
    """One pod name, one create at a time: an asker who is not the create in flight's own (its
    session and generation) is refused at once, naming whom the pod is being created for."""
    s = world()
    c = one(ask_create(s, T0), "create")
    manifest = {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}
    assert ask(s, "create", T0 + SECOND, reply_key="other", manifest=manifest, session=session,
               generation=generation) == (), "nothing is sent for the second asker"
    assert answers(s, "other") == [("pod_create_failed", {
        "pod": KEY, "reason": "pod ns/s1-g1 is being created for session s1 generation 1; refusing a second create"})]
    s.outcome(c, "ok", T0 + 2 * SECOND, obj=pod("A", "1"))
    assert answers(s) == [("pod_created", {"pod": KEY, "uid": "A", "adopted": False})]
    assert len(answers(s, "other")) == 1, "the refused asker is told nothing more"


def test_a_manifest_naming_another_pod_is_refused_before_anything_is_sent(frozen_world):
    s = world()
    manifest = {"metadata": {"name": "elsewhere"}, "spec": {}}
    effects = s.command("probe.tell", T0, machine="pod", key=KEY, message="create",
                        args={"reply_to": "probe", "reply_key": "s1", "manifest": manifest,
                              "session": "s1", "generation": 1})
    assert effects == ()
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "names pod ns/elsewhere" in args["reason"]


@pytest.mark.parametrize("first", ["already_exists", "transient"])
def test_a_delete_after_a_refused_adoption_never_touches_the_pod_holding_the_name(first, frozen_world):
    """Found by ``kfold sim --seed 14``: the create of s0-g1 answered 500, the read found a pod
    that is not kfold's under that name, the adoption was refused — but its uid was kept as the
    fence, so stopping the Session deleted the foreign pod."""
    s = world()
    read = one(s.outcome(one(ask_create(s, T0), "create"), first, T0 + SECOND), "get")
    s.outcome(read, "ok", T0 + 2 * SECOND, obj=pod("X", "1", managed=False))
    reread = one(ask_delete(s, T0 + 3 * SECOND), "get")
    s.outcome(reread, "ok", T0 + 4 * SECOND, obj=pod("X", "1", managed=False))
    assert deletes(s) == []
    assert answers(s)[-1] == ("pod_gone", {"pod": KEY})


SA_MISSING = {"status_reason": "Forbidden", "code": 403,
              "message": 'pods "s1-g1" is forbidden: error looking up service account ns/default: '
                         'serviceaccount "default" not found'}


def test_a_create_refused_for_a_missing_serviceaccount_goes_again_on_the_backoff_until_accepted(frozen_world):
    s = world()
    first = one(ask_create(s, T0), "create")
    s.outcome(first, "forbidden", T0 + SECOND, **SA_MISSING)
    assert s.decision("pod", KEY).phase == "creating" and answers(s) == []
    assert [e.type for e in s.advance_to(T0 + 2 * SECOND - 1)] == []
    second = one(s.advance_to(T0 + 2 * SECOND), "create")
    assert second.manifest == first.manifest and second.id != first.id
    s.outcome(second, "forbidden", T0 + 2 * SECOND, **SA_MISSING)
    assert of_type(s.advance_to(T0 + 4 * SECOND - 1), "create") == []   # failure 2 waits 2 s
    third = one(s.advance_to(T0 + 4 * SECOND), "create")
    s.outcome(third, "ok", T0 + 5 * SECOND, obj=pod("A", "1"))
    assert answers(s) == [("pod_created", {"pod": KEY, "uid": "A", "adopted": False})]
    assert s.state.next_due() is None


def test_a_delete_asked_while_a_refused_create_backs_off_ends_it_unsent(frozen_world):
    s = world()
    s.outcome(one(ask_create(s, T0), "create"), "forbidden", T0 + SECOND, **SA_MISSING)
    read = one(ask_delete(s, T0 + SECOND), "get")   # at once: the delete does not wait for the backoff
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "delete was asked for meanwhile" in args["reason"]
    s.outcome(read, "not_found", T0 + SECOND, status_reason="NotFound")
    assert answers(s)[1] == ("pod_gone", {"pod": KEY})
    s.advance_to(T0 + 60 * SECOND)
    assert [e.type for e in s.effects].count("create") == 1


def test_a_create_refused_for_a_missing_serviceaccount_for_its_whole_budget_fails(frozen_world):
    s = world()
    c = one(ask_create(s, T0, budget_s=60), "create")
    t = T0
    while not answers(s):
        s.outcome(c, "forbidden", t + SECOND, **SA_MISSING)
        due = s.state.next_due()
        t = due
        sent = of_type(s.advance_to(due), "create")
        c = sent[0] if sent else c
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "exceeded its budget of 60 s" in args["reason"]
    assert T0 + 60 * SECOND <= t < T0 + 61 * SECOND


def test_without_server_time_a_refused_create_repeats_at_once_a_few_times_then_fails(frozen_world):
    s = world()
    c = one(ask_create(s, None), "create")
    creates = 1
    while not answers(s):
        sent = of_type(s.outcome(c, "forbidden", None, **SA_MISSING), "create")
        if sent:
            c, creates = sent[0], creates + 1
    [(message, args)] = answers(s)
    assert creates == 1 + backoff.MAX_UNTIMED
    assert message == "pod_create_failed" and "no server time to back off on" in args["reason"]
    assert 'serviceaccount "default" not found' in args["reason"]
