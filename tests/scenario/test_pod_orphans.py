"""The orphan-pod sweep (``pod.sweep_orphans``, engine/machines/pod/orphans.py), through the full engine.

Found by kfold sim (seeds 71590, 72011, 72638): a pod create on cluster ``east`` was in flight when
the journal was lost; the fresh record met the Session with no status, the user deleted it, nothing
was torn down, and the pod appeared on east afterwards (no ownerReference crosses clusters).
"""
from __future__ import annotations

from typing import Any

import pytest

from engine.machines.session.model import FINALIZER
from tests.harness import Scenario, of_type
from tests.scenario.test_session_support import NS, SPEC, at, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

MANAGED = {"app.kubernetes.io/managed-by": "kfold"}


def east_pod(name: str = "demo-g1", session: str | None = "demo", session_ns: str | None = NS,
             labels: dict[str, str] | None = None, uid: str = "", terminating: bool = False) -> dict[str, Any]:
    lbl = dict(MANAGED if labels is None else labels)
    if session:
        lbl["kfold.dev/session"] = session
    if session_ns:
        lbl["kfold.dev/session-namespace"] = session_ns
    md: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid or f"uid-{name}", "resourceVersion": "7",
                          "labels": lbl}
    if terminating:
        md["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md}


def two_clusters() -> Scenario:
    s = Scenario()
    s.command("session.configure", at(0), clusters=["local", "east"], base_domain="sessions.example.test")
    return s


def sweep(s: Scenario, pods: list[dict[str, Any]], cluster: str = "east") -> tuple[Any, list[Any]]:
    """One sweep of ``team`` on ``cluster``: the list answered with ``pods``; the Session GETs it sends."""
    [listed] = of_type(s.command("pod.sweep_orphans", at(1), cluster=cluster, namespace=NS, home="local"), "list")
    after = s.outcome(listed, "ok", at(2), items=tuple(pods))
    return listed, [e for e in after if e.type == "get"]


def pod_deletes(s: Scenario) -> list[tuple[str, str, str, str, str]]:
    return [(e.cluster, e.namespace, e.name, e.uid, e.rv) for e in s.effects if e.type == "delete" and e.kind == "Pod"]


def test_a_remote_pod_of_a_deleted_session_is_deleted_fenced_by_uid_and_a_foreign_pod_is_left_alone():
    s = two_clusters()
    foreign = east_pod("demo-g1x", labels={}, session="demo", session_ns=None)   # not kfold's: never listed by
    listed, reads = sweep(s, [east_pod(), foreign])                           # the selector, kept if it were
    assert (listed.cluster, listed.kind, listed.namespace, listed.label_selector) == \
        ("east", "Pod", NS, "app.kubernetes.io/managed-by=kfold")
    assert [(g.cluster, g.kind, g.namespace, g.name) for g in reads] == [("local", "Session", NS, "demo")]
    s.outcome(reads[0], "not_found", at(3))
    assert pod_deletes(s) == [("east", NS, "demo-g1", "uid-demo-g1", "7")]
    assert s.decision("pod", f"east/{NS}/#orphans") is None, "the sweep ends once every read answered"


@pytest.mark.parametrize("result,fields", [("ok", {"obj": session_obj(SPEC)}), ("transient", {}),
                                           ("forbidden", {"status_reason": "Forbidden"})],
                         ids=["session-exists", "transient", "forbidden"])
def test_only_a_404_of_the_session_deletes(result, fields):
    s = two_clusters()
    _, [read] = sweep(s, [east_pod()])
    s.outcome(read, result, at(3), **fields)
    assert pod_deletes(s) == []


def test_pods_of_a_session_the_fold_tracks_cost_no_request():
    """The normal path: every pod belongs to a tracked Session; the sweep is one list, no GET."""
    s = two_clusters()
    s.observe(session_obj({**SPEC, "cluster": "east"}, finalizers=(FINALIZER,)), at(0))
    gets_before = len(of_type(s.effects, "get"))
    _, reads = sweep(s, [east_pod()])
    assert reads == [] and len(of_type(s.effects, "get")) == gets_before
    assert s.decision("pod", f"east/{NS}/#orphans") is None


@pytest.mark.parametrize("pod", [east_pod(session_ns=None), east_pod(session=None), east_pod(terminating=True)],
                         ids=["no-session-namespace-on-another-cluster", "no-session-label", "terminating"])
def test_pods_that_cannot_name_their_session_or_are_going_anyway_are_not_read(pod):
    s = two_clusters()
    _, reads = sweep(s, [pod])
    assert reads == []


def test_on_the_home_cluster_an_unlabelled_pod_names_a_session_of_its_own_namespace():
    s = two_clusters()
    _, reads = sweep(s, [east_pod(session_ns=None)], cluster="local")
    assert [(g.cluster, g.namespace, g.name) for g in reads] == [("local", NS, "demo")]


def test_a_session_of_that_name_seen_before_the_404_keeps_the_pod():
    s = two_clusters()
    _, [read] = sweep(s, [east_pod()])
    s.observe(session_obj({**SPEC, "cluster": "east"}, finalizers=(FINALIZER,)), at(2))  # a new one, placed there
    s.outcome(read, "not_found", at(3))
    assert ("east", NS, "demo-g1", "uid-demo-g1", "7") not in pod_deletes(s)


def test_one_read_per_session_for_several_of_its_pods():
    s = two_clusters()
    _, reads = sweep(s, [east_pod("demo-g1"), east_pod("demo-g2"), east_pod("other-g1", session="other")])
    assert sorted(g.name for g in reads) == ["demo", "other"]
    s.outcome(next(g for g in reads if g.name == "demo"), "not_found", at(3))
    assert [d[2] for d in pod_deletes(s)] == ["demo-g1", "demo-g2"]
    assert s.decision("pod", f"east/{NS}/#orphans") is not None, "still waiting for the other read"


def test_a_read_in_doubt_ends_the_sweep_without_deleting():
    s = two_clusters()
    _, [read] = sweep(s, [east_pod()])
    s.command("effect.in_doubt", at(3), effect_id=read.id)
    assert s.decision("pod", f"east/{NS}/#orphans") is None
    assert pod_deletes(s) == []


def test_a_pod_placed_away_from_its_session_names_the_sessions_namespace():
    s = two_clusters()
    s.observe(session_obj({**SPEC, "cluster": "east"}, finalizers=(FINALIZER,)), at(0))
    for ensure in s.pending("ensure_namespace"):
        s.outcome(ensure, "ok", at(0))
    home = two_clusters()
    home.observe(session_obj(SPEC, finalizers=(FINALIZER,)), at(0))
    [away] = [e for e in s.effects if e.type == "create" and e.kind == "Pod"]
    [beside] = [e for e in home.effects if e.type == "create" and e.kind == "Pod"]
    assert away.manifest["metadata"]["labels"]["kfold.dev/session-namespace"] == NS
    assert "ownerReferences" not in away.manifest["metadata"]
    assert "kfold.dev/session-namespace" not in beside.manifest["metadata"]["labels"]
    assert beside.manifest["metadata"]["ownerReferences"][0]["kind"] == "Session"


def test_an_orphan_pod_delete_that_fails_is_logged_and_not_resent():
    """A refused delete is not retried by the sweep (the next sweep lists again); it is reported
    once, as a warning naming the pod."""
    s = two_clusters()
    _, [read] = sweep(s, [east_pod()])
    [delete] = [e for e in s.outcome(read, "not_found", at(3)) if e.type == "delete"]
    after = s.outcome(delete, "forbidden", at(4), status_reason="Forbidden")
    [log] = of_type(after, "log")
    assert log.level == "warning" and f"{NS}/demo-g1" in log.message and "not deleted" in log.message
    assert len(pod_deletes(s)) == 1
