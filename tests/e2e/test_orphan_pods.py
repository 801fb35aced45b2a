"""The orphan-pod sweep on the real apiserver: a pod of kfold's on a registered cluster whose Session
is gone (a create that landed after its Session was deleted across a lost journal; kfold sim seeds
71590, 72011, 72638) is deleted; a pod with a similar name but without kfold's labels is left alone.

The control plane is registered a second time as cluster "edge" of tenant "acme", bounded to one
namespace (as in test_registered_cluster.py): the pods there cannot be owner-referenced to a
Session in another namespace, so only kfold's sweep can remove them. kfold starts with a fresh
journal, so it sweeps once its observers have listed (and then every ``sweep.interval_seconds``).
"""
from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e.conftest import wait_for
from tests.e2e.test_registered_cluster import register


def pod(name: str, ns: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "workspace", "image": "registry.example/ws:1"}]}}


def live(core: client.CoreV1Api, ns: str, name: str) -> bool:
    try:
        p = core.read_namespaced_pod(name, ns)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return p.metadata.deletion_timestamp is None


def test_a_pod_of_a_gone_session_on_a_registered_cluster_is_swept_and_a_foreign_one_kept(
        admin, cp, crds, namespaces, daemon_factory, tmp_path):
    core = client.CoreV1Api(admin)
    acme_ns, bound = namespaces("acme"), namespaces("edge-sb")
    register(tmp_path / "registry", cp, "acme", "edge", bound)
    kfold = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "gone", "kfold.dev/generation": "1",
             "kfold.dev/session-namespace": acme_ns}
    core.create_namespaced_pod(bound, pod("gone-g1", bound, kfold))                       # the orphan
    core.create_namespaced_pod(bound, pod("gone-g1x", bound, {"kfold.dev/session": "gone",  # foreign: no
                                                            "kfold.dev/session-namespace": acme_ns}))  # managed-by
    daemon = daemon_factory(cp["kubeconfig"], [acme_ns], extra={
        "registry": {"dir": str(tmp_path / "registry")}, "tenants": {acme_ns: "acme"},
        "sweep": {"interval_seconds": 10}}).start()
    wait_for(lambda: not live(core, bound, "gone-g1"), 60, what="the orphan pod deleted on the registered cluster")
    assert live(core, bound, "gone-g1x"), "a pod without kfold's labels is never touched"
    assert daemon.stop() == 0


GVP = ("kfold.dev", "v1alpha1")
ENV = [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}}]   # a Session with env gets a Secret


def objects(admin, ns: str, session: str) -> dict[str, str]:
    """kind/name -> uid of the Session's pod, Service, Ingress and env Secret in ``ns`` (live ones only)."""
    core, net = client.CoreV1Api(admin), client.NetworkingV1Api(admin)
    reads = {"Pod": lambda: core.read_namespaced_pod(f"{session}-g1", ns),
             "Service": lambda: core.read_namespaced_service(session, ns),
             "Ingress": lambda: net.read_namespaced_ingress(session, ns),
             "Secret": lambda: core.read_namespaced_secret(f"{session}-env", ns)}
    out = {}
    for kind, read in reads.items():
        try:
            obj = read()
        except client.ApiException as exc:
            if exc.status == 404:
                continue
            raise
        if obj.metadata.deletion_timestamp is None:
            out[f"{kind}/{obj.metadata.name}"] = obj.metadata.uid
    return out


@pytest.mark.parametrize("cluster", ["edge", ""], ids=["registered", "home"])
def test_a_session_deleted_across_a_lost_journal_leaves_nothing_behind_on_its_cluster(
        admin, cp, crds, namespaces, daemon_factory, tmp_path, cluster):
    """kfold runs two Sessions, Ready, on the registered cluster edge (or the home cluster); it is
    SIGKILLed and its journal deleted; the user deletes one Session and strips its finalizer
    (nothing of kfold's sees it go). kfold restarts on a fresh journal: the gone Session's pod,
    Service, Ingress and env Secret are deleted; the other Session's objects, labelled the same
    way, keep their uids and it stays Ready. On edge no ownerReference reaches the pod from the
    Session: the orphan-pod sweep deletes it, fenced by its uid and resourceVersion, and the
    garbage collector takes its Service and Ingress; on the home cluster the garbage collector
    takes the pod with the Session. The env Secret is the orphan Secret sweep's on both."""
    from tests.e2e.test_kill9 import journal, replay_check
    co = client.CustomObjectsApi(admin)
    acme_ns = namespaces("acme")
    registry = tmp_path / "registry"
    bound = namespaces("edge-sb") if cluster else acme_ns
    if cluster:
        register(registry, cp, "acme", cluster, bound)
    where = {"cluster": cluster} if cluster else {}
    extra = {"registry": {"dir": str(registry)}, "tenants": {acme_ns: "acme"}}
    first = daemon_factory(cp["kubeconfig"], [acme_ns], extra=extra).start()
    for name in ("gone", "kept"):
        co.create_namespaced_custom_object(*GVP, acme_ns, "sessions", {
            "apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": {"name": name, "namespace": acme_ns},
            "spec": {"image": "registry.example/sandbox:1", **where, "env": ENV,
                     "apps": [{"name": "web", "ports": [{"port": 8080}]}]}})

    def phase(name: str) -> str:
        return (co.get_namespaced_custom_object(*GVP, acme_ns, "sessions", name).get("status") or {}).get("phase", "")
    wait_for(lambda: phase("gone") == phase("kept") == "Ready", 90, what="both Sessions Ready")
    wait_for(lambda: all(len(objects(admin, bound, s)) == 4 for s in ("gone", "kept")), 30,
             what="pod, Service, Ingress and Secret of each Session")
    gone, kept = objects(admin, bound, "gone"), objects(admin, bound, "kept")

    first.kill9()
    for suffix in ("", "-wal", "-shm"):
        first.journal.with_name(first.journal.name + suffix).unlink(missing_ok=True)
    co.delete_namespaced_custom_object(*GVP, acme_ns, "sessions", "gone")
    co.patch_namespaced_custom_object(*GVP, acme_ns, "sessions", "gone", {"metadata": {"finalizers": None}})

    def absent() -> bool:
        try:
            co.get_namespaced_custom_object(*GVP, acme_ns, "sessions", "gone")
        except client.ApiException as exc:
            return exc.status == 404
        return False
    wait_for(absent, 30, what="Session gone deleted")
    if cluster:   # on the home cluster the garbage collector may already be at work
        assert objects(admin, bound, "gone") == gone, "nothing removed them while kfold was down"

    second = daemon_factory(cp["kubeconfig"], [acme_ns], extra={
        **extra, "sweep": {"interval_seconds": 10, "grace_seconds": 1}}).start()
    try:
        wait_for(lambda: not objects(admin, bound, "gone"), 120,
                 what="the gone Session's pod, Service, Ingress and Secret deleted")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; left: {objects(admin, bound, 'gone')}") from None
    assert objects(admin, bound, "kept") == kept, "the live Session's objects keep their uids"
    assert phase("kept") == "Ready"
    assert second.stop() == 0

    deletes = [r["effect"] for r in journal(second.journal) if r["rec"] == "effect" and r["effect"]["type"] == "delete"]
    pod_deletes = [e for e in deletes if e.get("kind") == "Pod"]
    if cluster:
        assert [(e["name"], e["uid"], e["key"]) for e in pod_deletes] == \
            [("gone-g1", gone["Pod/gone-g1"], f"edge@acme/{bound}/#orphans")], "the orphan-pod sweep's delete"
        assert pod_deletes[0]["rv"], "a pod delete carries the resourceVersion the list showed"
    else:
        assert pod_deletes == [], "on the home cluster the garbage collector takes the pod with its Session"
    assert [(e["name"], e["uid"]) for e in deletes if e.get("kind") == "Secret"] == \
        [("gone-env", gone["Secret/gone-env"])], "the orphan Secret sweep's delete, fenced by uid"
    assert not [e for e in deletes if e.get("name", "").startswith("kept")], deletes
    assert replay_check(second.journal).returncode == 0
