"""Ensuring a session namespace: ready, Forbidden with the administrator's command, retries."""
from __future__ import annotations

import pytest

from engine import backoff
from journal.records import EffectIssued
from engine.effects.models import effect_to_dict
from tests.harness import T0, Scenario
from tests.scenario.test_pod_world import SECOND, answers, ask, one, world

NS_KEY = "local/team-a/"


def ensure(s: Scenario, at: int | None, reply_key: str = "s1"):
    return ask(s, "ensure_namespace", at, key=NS_KEY, reply_key=reply_key)


@pytest.mark.parametrize("result", ["ok", "already_exists"])
def test_an_existing_or_created_namespace_is_ready(result, frozen_world):
    """Seed 001:159-161: AlreadyExists on the namespace create is the desired end state."""
    s = world()
    e = one(ensure(s, T0), "ensure_namespace")
    assert (e.cluster, e.namespace, e.labels) == ("local", "team-a", {"app.kubernetes.io/managed-by": "kfold"})
    s.outcome(e, result, T0 + SECOND)
    assert answers(s) == [("namespace_ready", {"namespace": "team-a"})]
    assert s.decision("pod", NS_KEY) is None


def test_forbidden_names_the_command_an_administrator_runs_and_tries_no_other_namespace(frozen_world):
    """Seed 001:162-170: forbidden names ``kubectl create namespace X`` and no other namespace is tried."""
    s = world()
    s.outcome(one(ensure(s, T0), "ensure_namespace"), "forbidden", T0 + SECOND, status_reason="Forbidden")
    [(message, args)] = answers(s)
    assert message == "namespace_failed" and args["namespace"] == "team-a"
    assert "`kubectl create namespace team-a`" in args["reason"]
    assert [e.type for e in s.effects] == ["ensure_namespace"]


def test_a_forbidden_check_says_kfold_could_not_check_not_that_it_may_not_create(frozen_world):
    """Seed 001: a 403 on the GET (the namespace may well exist) is "could not check whether
    namespace X exists" with the cause, never "not authorized to create namespace X".
    Seed table: seed 001:144."""
    s = world()
    s.outcome(one(ensure(s, T0), "ensure_namespace"), "forbidden", T0 + SECOND, status_reason="Forbidden",
              step="check", message='namespaces "team-a" is forbidden: User "kfold" cannot get resource')
    [(message, args)] = answers(s)
    assert message == "namespace_failed"
    assert args["reason"] == ('could not check whether namespace team-a exists: forbidden (Forbidden): '
                              'namespaces "team-a" is forbidden: User "kfold" cannot get resource')
    assert "not authorized to create" not in args["reason"]


def test_a_transient_failure_repeats_the_idempotent_ensure_after_a_backoff(frozen_world):
    s = world()
    e = one(ensure(s, T0), "ensure_namespace")
    assert s.outcome(e, "transient", T0 + SECOND) == ()
    again = one(s.advance_to(T0 + 3 * SECOND), "ensure_namespace")
    s.outcome(again, "ok", T0 + 4 * SECOND)
    assert answers(s) == [("namespace_ready", {"namespace": "team-a"})]


def test_repeated_transient_failures_give_up_with_a_reason(frozen_world):
    s = world()
    e = one(ensure(s, T0), "ensure_namespace")
    at = T0
    for _ in range(backoff.NAMESPACE.limit - 1):
        at += 60 * SECOND
        s.outcome(e, "transient", at, message="apiserver unavailable")
        assert one(s.advance_to(at + 60 * SECOND), "ensure_namespace").id == e.id
    s.outcome(e, "transient", at + 61 * SECOND, message="apiserver unavailable")
    [(message, args)] = answers(s)
    assert message == "namespace_failed" and f"{backoff.NAMESPACE.limit} attempts" in args["reason"]


def test_the_executors_attempts_and_the_handlers_are_one_loop(frozen_world):
    """The executor retries a safe request first (its decision journaled as ``retry_after_ms``);
    the handler's retries go on from there: one counter, so the ensure is sent exactly
    ``NAMESPACE.limit`` times in all, and one schedule, whose waits never start over."""
    s = world()
    e = one(ensure(s, T0), "ensure_namespace")
    at, sent, waits = T0, 1, []
    while not answers(s):
        at += SECOND
        executor = s.waiting_retries() == [] and sent < backoff.EXECUTOR_ATTEMPTS
        hint = backoff.delay_ms(sent - 1) if executor else None
        s.outcome(e, "transient", at, message="apiserver unavailable", retry_after_ms=hint)
        if answers(s):
            break
        [p] = s.waiting_retries()
        assert p.effect.id == e.id and p.attempt == sent
        waits.append(p.not_before - at)
        assert one(s.advance_to(p.not_before), "ensure_namespace").id == e.id
        sent += 1
        at = p.not_before
    assert sent == backoff.NAMESPACE.limit
    assert waits == sorted(waits) and waits[-1] == backoff.CAP_MS, waits
    [(message, _)] = answers(s)
    assert message == "namespace_failed"


def test_a_second_request_joins_the_running_one(frozen_world):
    s = world()
    e = one(ensure(s, T0), "ensure_namespace")
    assert ensure(s, T0, reply_key="s2") == ()
    s.outcome(e, "ok", T0 + SECOND)
    assert answers(s) == answers(s, "s2") == [("namespace_ready", {"namespace": "team-a"})]


def test_an_ensure_in_doubt_after_a_crash_is_simply_repeated(frozen_world):
    s = Scenario(world().machines, issue_effects=False)
    e = one(ensure(s, T0), "ensure_namespace")
    s.feed(EffectIssued(at=T0, effect=effect_to_dict(e)))
    again = one(s.command("effect.in_doubt", T0 + SECOND, effect_id=e.id), "ensure_namespace")
    assert again.namespace == "team-a" and again.id != e.id


def test_a_transient_failure_without_server_time_repeats_the_ensure_at_once(frozen_world):
    """With no server time to back off on, the idempotent ensure is sent again at once (the
    namespace policy has no untimed bound; its attempt limit still applies)."""
    s = world()
    e = one(ensure(s, None), "ensure_namespace")
    assert s.outcome(e, "transient", None) == ()
    [p] = s.waiting_retries()
    assert p.not_before is None, "due at once"
    again = one(s.advance_to(T0), "ensure_namespace")
    assert again.id == e.id and (again.cluster, again.namespace) == ("local", "team-a")
    s.outcome(again, "ok", None)
    assert answers(s) == [("namespace_ready", {"namespace": "team-a"})]


def test_a_failed_check_names_the_namespace_in_its_answer(frozen_world):
    s = world()
    s.outcome(one(ensure(s, T0), "ensure_namespace"), "error", T0 + SECOND, step="check", message="bad gateway")
    [(message, args)] = answers(s)
    assert message == "namespace_failed" and args["namespace"] == "team-a"
