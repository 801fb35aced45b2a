"""Smoke test for the local control plane used by kfold's e2e tests.

Checks: /version reports the pinned gitVersion; a namespace + pod can be created; the
pod is scheduled onto a kwok fake node and becomes Running/Ready with a podIP within 60s;
after etcd compaction a watch from an old resourceVersion fails with 410 Gone.
"""
from __future__ import annotations

import json
import time
import urllib.error
import uuid

import pytest

from tests.e2e import controlplane as cp

pytestmark = pytest.mark.e2e

FAKE_NODES = {"kfold-node-1", "kfold-node-2"}  # controlplane.sh makes these; a bench may add more fake nodes


@pytest.fixture(scope="module")
def info():
    return cp.ensure_controlplane()


@pytest.fixture(scope="module")
def core(info):
    kubernetes = pytest.importorskip("kubernetes")
    return kubernetes.client.CoreV1Api(cp.kube_client(info))


@pytest.fixture
def namespace(core):
    from kubernetes import client

    name = f"kfold-smoke-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def test_version_is_pinned(info):
    v = cp.api_get_json(info, "/version")
    assert v["gitVersion"] == cp.pinned_k8s_version()
    assert v["major"] == "1"


def test_pod_scheduled_running_ready(core, namespace):
    from kubernetes import client

    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="smoke"),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="c", image="registry.k8s.io/pause:3.10")]
        ),
    )
    core.create_namespaced_pod(namespace, pod)
    deadline = time.monotonic() + 60
    while True:
        p = core.read_namespaced_pod("smoke", namespace)
        conds = {c.type: c.status for c in (p.status.conditions or [])}
        if p.status.phase == "Running" and conds.get("Ready") == "True" and p.status.pod_ip:
            break
        assert time.monotonic() < deadline, f"pod not Running/Ready in 60s: {p.status}"
        time.sleep(0.5)
    node = core.read_node(p.spec.node_name)
    assert (node.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake", p.spec.node_name
    assert FAKE_NODES <= {n.metadata.name for n in core.list_node().items}


def test_every_fake_node_heartbeats_through_its_lease(info, core):
    """kwok renews a Lease per fake node (``--node-lease-duration-seconds``). Without it the
    controller manager heard no heartbeat within its grace period (~50 s after it started), marked
    every node NotReady and every pod on them Ready=False, which kwok never undid: a pod created
    then stayed unready for good (seen as e2e timeouts right after a control-plane start)."""
    from kubernetes import client

    fake = {n.metadata.name for n in core.list_node().items
            if (n.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake"}
    leases = client.CoordinationV1Api(cp.kube_client(info))

    def renewals() -> dict:
        return {lease.metadata.name: lease.spec.renew_time
                for lease in leases.list_namespaced_lease("kube-node-lease").items if lease.metadata.name in fake}

    first = renewals()
    assert set(first) == fake, f"fake nodes without a Lease: {sorted(fake - set(first))}"
    deadline = time.monotonic() + 30   # renewed every 10 s (a quarter of the 40 s duration)
    while True:
        later = renewals()
        if all(later[n] != first[n] for n in fake):
            break
        assert time.monotonic() < deadline, f"Leases not renewed within 30 s: {sorted(n for n in fake if later[n] == first[n])}"
        time.sleep(1)


def _first_watch_event(info, path: str, rv: str) -> tuple[int, dict | None]:
    """Start a watch from rv; return (http status, first event or None)."""
    sep = "&" if "?" in path else "?"
    try:
        with cp.api_get(info, f"{path}{sep}watch=1&resourceVersion={rv}") as r:
            line = r.readline()
            return r.status, json.loads(line) if line else None
    except urllib.error.HTTPError as e:
        return e.code, None


def test_compaction_forces_410(info, core, namespace):
    from kubernetes import client

    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"), data={"n": "0"})
    )
    old_rv = cp.api_get_json(info, cms)["metadata"]["resourceVersion"]
    # Before compaction the old RV is watchable.
    status, _ = _first_watch_event(info, f"{cms}?timeoutSeconds=1", old_rv)
    assert status == 200
    for i in range(1, 4):  # move the revision past old_rv
        core.patch_namespaced_config_map("a", namespace, {"data": {"n": str(i)}})
    rev = cp.compact_etcd()
    assert rev > int(old_rv)
    status, event = _first_watch_event(info, f"{cms}?timeoutSeconds=5", old_rv)
    if status == 200:
        assert event is not None and event["type"] == "ERROR", event
        assert event["object"]["code"] == 410, event
    else:
        assert status == 410
