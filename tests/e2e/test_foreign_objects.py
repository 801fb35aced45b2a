"""Issue 12 item 3 on the real control plane: a same-name Service, Ingress or Secret that kfold did
not create is never taken over or deleted. The Session fails with a message naming it; the object
keeps its uid, labels, spec/data and resourceVersion, through the failure and through a stop.
Issue 33 item 1: the same for a pod ``<session>-g1`` of another Session, through a stop and
through the Session's deletion."""
from __future__ import annotations

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.drills import ENV, Cluster

NAME = "fx"
FOREIGN = {"app": "billing"}


def _create_foreign(cluster: Cluster, kind: str) -> None:
    md = {"name": f"{NAME}-env" if kind == "Secret" else NAME, "namespace": cluster.ns, "labels": FOREIGN}
    if kind == "Service":
        cluster.core.create_namespaced_service(cluster.ns, {
            "metadata": md, "spec": {"selector": FOREIGN, "ports": [{"port": 80, "targetPort": 8080}]}})
    elif kind == "Ingress":
        cluster.net.create_namespaced_ingress(cluster.ns, {"metadata": md, "spec": {"rules": [{
            "host": "billing.example", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                "service": {"name": "billing", "port": {"number": 80}}}}]}}]}})
    else:
        cluster.core.create_namespaced_secret(cluster.ns, {"metadata": md, "stringData": {"token": "not-kfolds"}})


def _read(cluster: Cluster, kind: str) -> dict:
    if kind == "Service":
        obj = cluster.core.read_namespaced_service(NAME, cluster.ns)
        body = obj.spec.to_dict()
    elif kind == "Ingress":
        obj = cluster.net.read_namespaced_ingress(NAME, cluster.ns)
        body = obj.spec.to_dict()
    else:
        obj = cluster.core.read_namespaced_secret(f"{NAME}-env", cluster.ns)
        body = obj.data
    md = obj.metadata
    return {"uid": md.uid, "rv": md.resource_version, "labels": md.labels, "owners": md.owner_references,
            "body": body}


def _condition(cluster: Cluster) -> dict:
    s = next(x for x in cluster.sessions() if x["metadata"]["name"] == NAME)
    return next(c for c in (s.get("status") or {}).get("conditions") or [] if c["type"] == "Ready")


@pytest.mark.parametrize("kind", ["Service", "Ingress", "Secret"])
def test_a_same_name_foreign_object_is_untouched_and_the_session_fails_naming_it(
        cp, admin, namespace, daemon_factory, kind):
    cluster = Cluster(admin, namespace)
    _create_foreign(cluster, kind)
    before = _read(cluster, kind)
    d = daemon_factory(cp["kubeconfig"], [namespace]).start()
    cluster.create_session(NAME, env=ENV if kind == "Secret" else None)   # a Secret is made only with env
    wait_for(lambda: cluster.phases().get(NAME) == "Failed", timeout=60, what="the Session Failed")
    cond = _condition(cluster)
    shown = f"{NAME}-env" if kind == "Secret" else NAME
    assert cond["reason"] == "NameTaken"
    assert cond["message"].startswith(f"{kind} {namespace}/{shown} already exists and is not Session {NAME}'s")
    assert _read(cluster, kind) == before, f"the foreign {kind} was modified"

    cluster.patch_spec(NAME, stopped=True)
    wait_for(lambda: cluster.phases().get(NAME) == "Stopped", timeout=60, what="the Session Stopped")
    assert _read(cluster, kind) == before, f"the foreign {kind} was modified or deleted by the stop"
    assert d.stop() == 0


# -- issue 33, item 1: a pod kfold refused to adopt --------------------------------------------

OTHER_SESSION = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "other", "kfold.dev/generation": "1"}


def _foreign_pod(cluster: Cluster) -> str:
    pod = cluster.core.create_namespaced_pod(cluster.ns, {
        "metadata": {"name": f"{NAME}-g1", "namespace": cluster.ns, "labels": OTHER_SESSION},
        "spec": {"containers": [{"name": "workspace", "image": "registry.example/other:1"}]}})
    return pod.metadata.uid


def _pod_uid(cluster: Cluster) -> str | None:
    pod = cluster.read_or_none(cluster.core.read_namespaced_pod, f"{NAME}-g1")
    return None if pod is None or pod.metadata.deletion_timestamp else pod.metadata.uid


@pytest.mark.parametrize("how", ["stopped", "deleted"])
def test_a_pod_of_another_session_under_the_name_survives_the_sessions_stop_and_deletion(
        cp, admin, namespace, daemon_factory, how):
    cluster = Cluster(admin, namespace)
    uid = _foreign_pod(cluster)
    d = daemon_factory(cp["kubeconfig"], [namespace]).start()
    cluster.create_session(NAME)
    wait_for(lambda: cluster.phases().get(NAME) == "Failed", timeout=60, what="the Session Failed")
    cond = _condition(cluster)
    assert cond["reason"] == "NameTaken" and f"{NAME}-g1" in cond["message"], cond
    assert _pod_uid(cluster) == uid

    if how == "stopped":
        cluster.patch_spec(NAME, stopped=True)
        wait_for(lambda: cluster.phases().get(NAME) == "Stopped", timeout=60, what="the Session Stopped")
    else:
        cluster.delete_session(NAME)
        wait_for(lambda: NAME not in cluster.phases(), timeout=60, what="the Session gone")
    import time
    time.sleep(3)   # a delete sent by the teardown would have landed by now
    assert _pod_uid(cluster) == uid, "the other Session's pod was deleted"
    assert d.stop() == 0
