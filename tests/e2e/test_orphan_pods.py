"""The orphan-pod sweep on the real apiserver: a pod of kfold's on a registered cluster whose Session
is gone (a create that landed after its Session was deleted across a lost journal; kfold sim seeds
71590, 72011, 72638) is deleted; a pod with a similar name but without kfold's labels is left alone.

The control plane is registered a second time as cluster "edge" of tenant "acme", bounded to one
namespace (as in test_registered_cluster.py): the pods there cannot be owner-referenced to a
Session in another namespace, so only kfold's sweep can remove them. kfold starts with a fresh
journal, so it sweeps once its observers have listed (and then every ``sweep.interval_seconds``).
"""
from __future__ import annotations

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
