"""Issue 36 item 4 on the real control plane: Events on the Session, seen as a user sees them.

``kfold run`` under the install's own RBAC (``kfold manifests``: a ServiceAccount token), the real
``kubectl describe session``. The oracle is the events.k8s.io/v1 contract and what kubectl shows:
a ``Normal Ready`` Event from ``kfold.dev/kfold`` once the Session serves, a ``Warning`` naming the
failure's reason when one fails (here ``NameTaken``: its ``<session>-env`` Secret belongs to
someone else), each ``regarding`` the Session by uid, and a second Ready of the same Session
within the window counted in the first Event's ``series`` rather than posted again.
"""
from __future__ import annotations

from kubernetes import client

from tests.e2e.conftest import wait_for
from tests.e2e.drills import Cluster
from tests.e2e.test_session_status_generation import kubectl, sa_daemon  # noqa: F401  (fixtures)

ENV = [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}}]


def _events(admin, ns: str, name: str) -> list:
    return [e for e in client.EventsV1Api(admin).list_namespaced_event(ns).items
            if e.regarding is not None and e.regarding.name == name and e.regarding.kind == "Session"]


def _describe(kubectl, ns: str, name: str) -> str:  # noqa: F811
    out = kubectl("describe", "session", name, "-n", ns)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_kubectl_describe_shows_ready_and_a_failure_with_its_reason(admin, namespace, sa_daemon, kubectl):  # noqa: F811
    cluster = Cluster(admin, namespace)
    client.CoreV1Api(admin).create_namespaced_secret(namespace, {"metadata": {"name": "taken-env"}})  # not kfold's
    cluster.create_session("demo")
    cluster.create_session("taken", env=ENV)
    wait_for(lambda: cluster.phases() == {"demo": "Ready", "taken": "Failed"}, timeout=90, what="demo Ready, taken Failed")

    wait_for(lambda: "Ready" in _describe(kubectl, namespace, "demo").split("Events:")[-1], timeout=20,
             what="the Ready Event in kubectl describe")
    events = _describe(kubectl, namespace, "demo").split("Events:")[-1]
    [row] = [line for line in events.splitlines() if "Ready" in line.split()]
    assert row.split()[:2] == ["Normal", "Ready"] and "kfold.dev/kfold" in row, events

    wait_for(lambda: "NameTaken" in _describe(kubectl, namespace, "taken").split("Events:")[-1], timeout=20,
             what="the NameTaken Event in kubectl describe")
    events = _describe(kubectl, namespace, "taken").split("Events:")[-1]
    [row] = [line for line in events.splitlines() if "NameTaken" in line.split()]
    assert row.split()[:2] == ["Warning", "NameTaken"] and "taken-env" in row, events

    uids = {s["metadata"]["name"]: s["metadata"]["uid"] for s in cluster.sessions()}
    [ready] = _events(admin, namespace, "demo")
    assert (ready.regarding.uid, ready.reporting_controller, ready.action, ready.type) == \
        (uids["demo"], "kfold.dev/kfold", "BringUp", "Normal")
    assert ready.event_time is not None and ready.reporting_instance and ready.series is None

    cluster.patch_spec("demo", image="registry.example/sandbox:2")   # generation 2: Ready again
    wait_for(lambda: [(s.get("status") or {}).get("generation") for s in cluster.sessions()
                      if s["metadata"]["name"] == "demo"] == [2] and cluster.phases()["demo"] == "Ready",
             timeout=90, what="demo Ready at generation 2")
    wait_for(lambda: [e.series.count if e.series else 1 for e in _events(admin, namespace, "demo")
                      if e.reason == "Ready"] == [2], timeout=20, what="the second Ready counted in the series")
    assert sa_daemon.stop() == 0
