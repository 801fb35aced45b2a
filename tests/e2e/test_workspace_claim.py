"""The workspace claim on the real control plane (config ``workspace.storage_class``): one
PersistentVolumeClaim per Session, bound by the controller manager to a PersistentVolume of that
class, mounted by every generation's pod (suspend and resume keep it, same uid), deleted at stop.
The expectations come from the config and the spec, read back from the apiserver by the test."""
from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, World, session_manifest

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def volume(admin, namespace):
    """A PersistentVolume of a storage class of this test's own (no provisioner runs here)."""
    core = client.CoreV1Api(admin)
    name = f"ws-{namespace}"
    core.create_persistent_volume({
        "metadata": {"name": name},
        "spec": {"storageClassName": name, "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/tmp/kfold-{name}"}}})
    yield name
    try:
        core.delete_persistent_volume(name)
    except ApiException:
        pass


def _claim(w: World, name: str):
    try:
        return w.core.read_namespaced_persistent_volume_claim(name, w.ns)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _claim_of(w: World, pod: str) -> str:
    spec = w.core.read_namespaced_pod(pod, w.ns).spec
    (vol,) = [v for v in spec.volumes if v.name == "workspace"]
    return vol.persistent_volume_claim.claim_name if vol.persistent_volume_claim else ""


def test_a_sessions_workspace_claim_outlives_its_pods_and_goes_at_stop(admin, cp, namespace, daemon_factory,
                                                                        tmp_path, volume):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon_factory(str(kubeconfig), [namespace],
                   {"workspace": {"storage_class": volume, "size": "2Gi"}}).start()
    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    w.phase_is("Ready", 1)
    claim = _claim(w, "demo-workspace")
    assert claim is not None
    assert claim.spec.storage_class_name == volume and claim.spec.resources.requests["storage"] == "2Gi"
    assert claim.metadata.labels["app.kubernetes.io/managed-by"] == "kfold"
    assert claim.metadata.labels["kfold.dev/session"] == "demo"
    session_uid = w.co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")["metadata"]["uid"]
    assert [(o.kind, o.uid) for o in claim.metadata.owner_references] == [("Session", session_uid)]
    wait_for(lambda: _claim(w, "demo-workspace").status.phase == "Bound", 30, what="the claim bound to the volume")
    assert _claim_of(w, "demo-g1") == "demo-workspace"

    w.patch_spec(suspended=True)
    w.phase_is("Suspended")
    wait_for(lambda: w.all_pods() == [], 30, what="pod demo-g1 gone on suspend")
    assert _claim(w, "demo-workspace").metadata.uid == claim.metadata.uid, "a suspend keeps the workspace"
    w.patch_spec(suspended=False)
    w.phase_is("Ready", 2)
    assert _claim_of(w, "demo-g2") == "demo-workspace"
    assert _claim(w, "demo-workspace").metadata.uid == claim.metadata.uid, "the resumed pod mounts the same claim"

    w.patch_spec(stopped=True)
    w.phase_is("Stopped")
    wait_for(lambda: _claim(w, "demo-workspace") is None, 60, what="the claim deleted at stop")
