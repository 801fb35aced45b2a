"""The orphan Secret sweep decides on the apiserver's Date, never on the local clock."""
from __future__ import annotations

from typing import Any

import pytest

from journal.records import EffectIssued
from engine.effects.models import effect_to_dict
from tests.conftest import run_in_all_worlds
from tests.harness import T0, Scenario
from tests.scenario.test_pod_world import SECOND, deletes, one, pod, world

CREATED = "2030-01-01T00:00:00Z"   # == T0
GRACE = 600 * SECOND


def secret(name: str, session: str | None = "s1", created: str | None = CREATED, ns: str = "ns") -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "kfold"}
    if session:
        labels["kfold.dev/session"] = session
    md = {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": "1", "labels": labels}
    if created:
        md["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Secret", "metadata": md}


def sweep(s: Scenario, secrets: list[dict[str, Any]], at: int | None, pods: list[dict[str, Any]] = (),
          namespace: str = "ns", **args: Any) -> list[Any]:
    """Run one sweep; the Secret list answers with ``at`` as its Date, the Pod list with ``pods``."""
    listed = one(s.command("pod.sweep_secrets", T0, cluster="local", namespace=namespace, **args), "list")
    after = s.outcome(listed, "ok", at, items=tuple(secrets))
    lists = [e for e in after if e.type == "list"]
    if lists:
        after = s.outcome(lists[0], "ok", at, items=tuple(pods))
    return [e for e in after if e.type == "delete"]


def test_the_sweep_lists_secrets_first_by_the_kfold_label_then_pods():
    s = world()
    listed = one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "list")
    assert (listed.kind, listed.namespace, listed.label_selector) == ("Secret", "ns", "app.kubernetes.io/managed-by=kfold")
    pods = one(s.outcome(listed, "ok", T0 + GRACE + SECOND, items=(secret("a"),)), "list")
    assert (pods.kind, pods.label_selector) == ("Pod", "app.kubernetes.io/managed-by=kfold")


def test_an_old_secret_whose_session_has_no_pod_is_deleted_with_a_uid_precondition():
    def run():
        s = world()
        [d] = sweep(s, [secret("s1-env")], T0 + GRACE + SECOND)
        assert (d.kind, d.namespace, d.name, d.uid) == ("Secret", "ns", "s1-env", "uid-s1-env")
        return s.transcript()
    run_in_all_worlds(run)


@pytest.mark.parametrize("age_ms,deleted", [(GRACE - 1, False), (GRACE, False), (GRACE + 1, True)],
                         ids=["inside-grace", "exactly-the-grace", "past-the-grace"])
def test_only_a_secret_older_than_the_grace_on_the_server_clock_is_deleted(age_ms, deleted, frozen_world):
    """Seed 001:84-88: the orphan Secret sweep dates Secrets on the list response's Date."""
    s = world()
    assert bool(sweep(s, [secret("s1-env")], T0 + age_ms)) is deleted


def test_the_grace_comes_from_the_command(frozen_world):
    s = world()
    assert sweep(s, [secret("s1-env")], T0 + 61 * SECOND, grace_seconds=60)


@pytest.mark.parametrize("live", [pod("A", "1"), pod("A", "1", terminating=True)], ids=["running", "terminating"])
def test_a_secret_whose_session_pod_still_exists_is_kept(live, frozen_world):
    s = world()
    assert sweep(s, [secret("s1-env")], T0 + 2 * GRACE, pods=[live]) == []


def test_a_pod_of_the_same_session_in_another_namespace_does_not_keep_a_secret(frozen_world):
    s = world()
    other = pod("A", "1", ns="elsewhere")
    assert [d.name for d in sweep(s, [secret("s1-env")], T0 + 2 * GRACE, pods=[other], namespace="")] == ["s1-env"]


@pytest.mark.parametrize("kept", [secret("git-creds", session=None), secret("s1-env", created=None),
                                  secret("s1-env", created="yesterday")],
                         ids=["no-session-label", "no-creation-time", "garbage-creation-time"])
def test_secrets_that_cannot_be_proven_orphaned_are_kept(kept, frozen_world):
    s = world()
    assert sweep(s, [kept], T0 + 2 * GRACE) == []


def test_a_missing_or_malformed_date_skips_the_sweep_with_a_logged_reason(frozen_world):
    """Seed 001:338-347: with no usable Date the orphan sweep skips."""
    s = world()
    listed = one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "list")
    log = one(s.outcome(listed, "ok", None, items=(secret("s1-env", created="1990-01-01T00:00:00Z"),)), "log")
    assert log.level == "warning" and "no valid Date header" in log.message
    assert [e.type for e in s.effects] == ["list", "log"]
    assert len(s.state.table("pod")) == 0


def test_a_failed_list_ends_the_sweep_with_a_log(frozen_world):
    s = world()
    listed = one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "list")
    log = one(s.outcome(listed, "forbidden", T0, status_reason="Forbidden"), "log")
    assert "listing Secrets failed: forbidden" in log.message
    assert deletes(s) == []


def test_a_sweep_already_running_is_not_started_twice(frozen_world):
    s = world()
    one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "list")
    assert "still running" in one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "log").message


def test_a_list_in_doubt_after_a_crash_abandons_the_sweep(frozen_world):
    s = Scenario(world().machines, issue_effects=False)
    listed = one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "list")
    s.feed(EffectIssued(at=T0, effect=effect_to_dict(listed)))
    log = one(s.command("effect.in_doubt", T0, effect_id=listed.id), "log")
    assert log.message == "orphan Secret sweep abandoned: a list was in doubt after a restart"
    assert log.level == "warning"
    assert one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "list").kind == "Secret"


def test_an_orphan_secret_delete_that_fails_is_logged_and_not_resent(frozen_world):
    s = world()
    [d] = sweep(s, [secret("s1-env")], T0 + GRACE + SECOND)
    log = one(s.outcome(d, "forbidden", T0 + GRACE + SECOND, status_reason="Forbidden"), "log")
    assert log.level == "warning" and "ns/s1-env" in log.message and "not deleted" in log.message
    assert len(deletes(s)) == 1


def test_an_orphan_secret_delete_in_doubt_after_a_crash_is_logged_and_left_to_the_next_sweep(frozen_world):
    """A delete that may or may not have happened is not sent again: the next sweep's fresh list
    decides (a Secret still there and still without a pod is deleted then)."""
    s = Scenario(world().machines, issue_effects=False)
    [d] = sweep(s, [secret("s1-env")], T0 + GRACE + SECOND)
    s.feed(EffectIssued(at=T0 + GRACE + SECOND, effect=effect_to_dict(d)))
    log = one(s.command("effect.in_doubt", T0 + GRACE + 2 * SECOND, effect_id=d.id), "log")
    assert log.level == "warning"
    assert log.message == "orphan Secret delete ns/s1-env in doubt; the next sweep decides again"
    assert len(deletes(s)) == 1 and len(s.state.table("pod")) == 0
    assert one(s.command("pod.sweep_secrets", T0, cluster="local", namespace="ns"), "list").kind == "Secret"
