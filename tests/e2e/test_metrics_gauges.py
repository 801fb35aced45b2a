"""The size gauges a soak samples (docs/metrics.md "Sizes"), on ``kfold run`` against the real
apiserver: each one moves with what it counts, read from the apiserver or the kernel, not from
kfold's code. Sessions made raise the decisions in the fold's state and the objects the watches
remember by as many as the apiserver holds; deleted, both fall back; Events posted open series; at
rest the daemon's per-effect maps are empty; threads are the kernel's count of the process'
threads."""
from __future__ import annotations

import os

from kubernetes import client

from tests.e2e.conftest import install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.test_metrics_scrape import scrape, value
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, session_manifest


def by_label(fams: dict, name: str, label: str) -> dict[str, float]:
    fam = fams.get(name)
    return {s.labels[label]: s.value for s in fam.samples} if fam else {}


def watch_objects(fams: dict, kind: str) -> float:
    return sum(s.value for s in fams["kfold_watch_objects"].samples if s.labels["kind"] == kind)


def at_rest(daemon) -> dict:
    def quiet():
        fams = scrape(daemon)[1]
        return fams if value(fams, "kfold_effects_in_flight") == 0 and value(fams, "kfold_effects_waiting") == 0 else None
    return wait_for(quiet, 30, what="no effect in flight or waiting")


def test_size_gauges_move_with_what_they_count(admin, cp, namespace, daemon_factory, tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon = daemon_factory(str(kubeconfig), [namespace]).start()
    base = at_rest(daemon)
    co, core = client.CustomObjectsApi(admin), client.CoreV1Api(admin)
    names = ["g-a", "g-b", "g-c"]
    was = by_label(base, "kfold_state_objects", "machine")
    rested: list[dict] = []
    tasks: list[float] = []
    for round_ in range(2):   # the same work twice: the second leaves the state as the first did
        for name in names:
            body = session_manifest(namespace, [WEB])
            body["metadata"]["name"] = name
            co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        for name in names:
            wait_for(lambda: (co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
                              .get("status") or {}).get("phase") == "Ready", 60, what=f"Session {name} Ready")
        fams = at_rest(daemon)
        pods = core.list_namespaced_pod(namespace).items
        assert watch_objects(fams, "Pod") == len(pods) == 3
        assert watch_objects(fams, "Session") == 3
        objects = by_label(fams, "kfold_state_objects", "machine")
        assert objects["session"] - was.get("session", 0) >= 3 and objects["pod"] - was.get("pod", 0) == 3
        if round_ == 0:   # each Session's Ready is an Event: a series each
            assert value(fams, "kfold_event_series") >= (value(base, "kfold_event_series") or 0) + 3
        rest = by_label(fams, "kfold_bookkeeping_entries", "map")
        assert {m: n for m, n in rest.items() if n} == {}, "the daemon's maps hold nothing at rest"
        threads = len(os.listdir(f"/proc/{daemon.proc.pid}/task"))
        assert value(fams, "kfold_threads") == threads
        # a task per watch and the committer at least; the per-key workers are gone at rest
        assert len(fams["kfold_watch_objects"].samples) + 1 <= value(fams, "kfold_asyncio_tasks")
        tasks.append(value(fams, "kfold_asyncio_tasks"))

        for name in names:
            co.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        wait_for(lambda: not co.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
                 and not core.list_namespaced_pod(namespace).items, 60, what="Sessions and pods gone")
        after = wait_for(lambda: (lambda f: f if watch_objects(f, "Pod") == 0 else None)(at_rest(daemon)), 30,
                         what="the Pod watch forgets the deleted pods")
        assert watch_objects(after, "Session") == watch_objects(after, "Service") == 0
        left = by_label(after, "kfold_state_objects", "machine")
        assert left.get("pod", 0) == 0 and left["session"] < objects["session"]
        rested.append(left)
    assert abs(tasks[1] - tasks[0]) <= 1, f"asyncio tasks at rest {tasks}: the second round's as the first's"
    assert rested[1] == rested[0], "a second round of the same Sessions leaves the fold's state as the first did"
