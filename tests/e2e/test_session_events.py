"""Issue 36 item 4 on the real control plane: Events on the Session, seen as a user sees them.

``kfold run`` under the install's own RBAC (``kfold manifests``: a ServiceAccount token), the real
``kubectl describe session``. The oracle is the events.k8s.io/v1 contract and what kubectl shows:
a ``Normal Ready`` Event from ``kfold.dev/kfold`` once the Session serves, a ``Warning`` naming the
failure's reason when one fails (here ``NameTaken``: its ``<session>-env`` Secret belongs to
someone else), each ``regarding`` the Session by uid, and a second pod generation's Ready an Event
of its own naming its pod (an Event's note cannot change, so a series never counts a later
generation under the first one's note).

Issue 52 item 4, as ``kubectl`` shows it: a Session whose Service name is taken says
``PortsRouted=False`` with reason ``NameTaken`` (nothing was routed for it), never ``True`` beside
``Ready=False NameTaken``; a Session refused before its first bring-up has no "generation 0" in
anything ``kubectl describe`` shows.
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

    cluster.patch_spec("demo", image="registry.example/sandbox:2")   # pod generation 2: Ready again
    wait_for(lambda: [(s.get("status") or {}).get("generation") for s in cluster.sessions()
                      if s["metadata"]["name"] == "demo"] == [2] and cluster.phases()["demo"] == "Ready",
             timeout=90, what="demo Ready at generation 2")
    wait_for(lambda: len([e for e in _events(admin, namespace, "demo") if e.reason == "Ready"]) == 2, timeout=20,
             what="generation 2's Ready Event")
    readies = sorted((e for e in _events(admin, namespace, "demo") if e.reason == "Ready"), key=lambda e: e.event_time)
    assert [(e.note, e.series) for e in readies] == [("pod demo-g1 is serving", None), ("pod demo-g2 is serving", None)]
    assert "pod demo-g2 is serving" in _describe(kubectl, namespace, "demo").split("Events:")[-1]
    assert sa_daemon.stop() == 0


def _jsonpath(kubectl, ns: str, name: str, path: str) -> str:  # noqa: F811
    out = kubectl("get", "session", name, "-n", ns, "-o", f"jsonpath={path}")
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_kubectl_shows_a_taken_service_name_as_nothing_routed_and_no_generation_0(admin, namespace, sa_daemon, kubectl):  # noqa: F811
    cluster = Cluster(admin, namespace)
    made = kubectl("create", "service", "clusterip", "demo", "--tcp=80:8080", "-n", namespace)   # someone else's
    assert made.returncode == 0, made.stderr
    cluster.create_session("demo")
    cluster.co.create_namespaced_custom_object("kfold.dev", "v1alpha1", namespace, "sessions", {
        "apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": {"name": "bad", "namespace": namespace},
        "spec": {"image": "registry.example/sandbox:1", "cluster": "mars"}})   # only kfold refuses it
    wait_for(lambda: cluster.phases() == {"demo": "Failed", "bad": "Failed"}, timeout=90, what="demo and bad Failed")

    waited = kubectl("wait", "--for=condition=PortsRouted=False", "session/demo", "-n", namespace, "--timeout=20s")
    assert waited.returncode == 0, waited.stderr
    ready = _jsonpath(kubectl, namespace, "demo", '{.status.conditions[?(@.type=="Ready")].reason}')
    routed = _jsonpath(kubectl, namespace, "demo", '{.status.conditions[?(@.type=="PortsRouted")].reason}')
    message = _jsonpath(kubectl, namespace, "demo", '{.status.conditions[?(@.type=="PortsRouted")].message}')
    assert (ready, routed) == ("NameTaken", "NameTaken")
    assert message.startswith("no port is routed: ") and f"Service {namespace}/demo" in message

    wait_for(lambda: "InvalidSpec" in _describe(kubectl, namespace, "bad").split("Events:")[-1], timeout=20,
             what="bad's InvalidSpec Event")
    wait_for(lambda: "NameTaken" in _describe(kubectl, namespace, "demo").split("Events:")[-1], timeout=20,
             what="demo's NameTaken Event")
    for name in ("demo", "bad"):
        shown = _describe(kubectl, namespace, name)
        assert "generation 0" not in shown, shown
    [bad] = [e for e in _events(admin, namespace, "bad") if e.reason == "InvalidSpec"]
    assert bad.note.startswith("spec.cluster: ") and "mars" in bad.note
    [taken] = [e for e in _events(admin, namespace, "demo") if e.reason == "NameTaken"]
    assert taken.note.startswith("pod generation 1: Service ")
    assert sa_daemon.stop() == 0
