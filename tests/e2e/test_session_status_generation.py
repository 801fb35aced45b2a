"""A Session's status says which spec it is about (DESIGN invariant 13, docs/session-status.md),
checked with the real ``kubectl wait`` against the real apiserver and ``kfold run``.

The oracle is the Kubernetes condition convention as ``kubectl wait`` reads it: after a spec
change, ``--for=condition=Ready`` returns only on a Ready that is about the new spec (its
``observedGeneration`` equals ``metadata.generation``), and by then the pod runs the new image;
``lastTransitionTime`` moves only when a condition's status changes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from kubernetes import client

from tests.e2e.conftest import install_crds, install_rbac, service_account_kubeconfig, wait_for

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
KUBECTL = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin" / "kubectl"
IMAGE = "registry.example/sandbox"


@pytest.fixture
def kubectl(cp):
    if not os.access(KUBECTL, os.X_OK):
        pytest.fail(f"{KUBECTL} is missing: the control plane's build lacks kubectl "
                    "(bash scripts/build_controlplane.sh builds it)")

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(KUBECTL), "--kubeconfig", cp["kubeconfig"], *args],
                              capture_output=True, text=True, timeout=timeout)
    return run


@pytest.fixture
def sa_daemon(admin, cp, namespace, daemon_factory, tmp_path):
    install_crds(admin)   # this checkout's CRD (status.observedGeneration, lastTransitionTime)
    time.sleep(1.0)
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    return daemon_factory(str(kubeconfig), [namespace]).start()


def _crd_columns(admin) -> list[str]:
    crd = client.ApiextensionsV1Api(admin).read_custom_resource_definition("sessions.kfold.dev")
    return [c.name for c in crd.spec.versions[0].additional_printer_columns or ()]


@pytest.fixture(autouse=True)
def _this_checkouts_crd(admin):
    """The control plane is shared: another checkout's test may install an older Session CRD
    meanwhile, whose schema prunes the fields checked here. Said, rather than misread as kfold's."""
    yield
    columns = _crd_columns(admin)
    assert "PodGen" in columns, f"the Session CRD was replaced by an older one during the test: {columns}"


def _session(co, ns: str) -> dict:
    return co.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "demo")


def _ready(obj: dict) -> dict:
    return next(c for c in obj.get("status", {}).get("conditions") or () if c["type"] == "Ready")


def _rfc3339(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def _about_its_spec(obj: dict) -> None:
    """The status and every condition name the spec's metadata.generation; each condition has a
    transition time and the shape of a metav1.Condition."""
    gen, st = obj["metadata"]["generation"], obj["status"]
    assert st.get("observedGeneration") == gen, st
    for c in st["conditions"]:
        assert c.get("observedGeneration") == gen, c
        assert c["status"] in ("True", "False", "Unknown") and c["reason"] and "message" in c, c
        _rfc3339(c["lastTransitionTime"])


def _create(co, ns: str, apps: list) -> None:
    co.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session", "metadata": {"name": "demo", "namespace": ns},
        "spec": {"image": f"{IMAGE}:1", "apps": apps}})


def _wait_ready(kubectl, ns: str) -> None:
    done = kubectl("wait", "--for=condition=Ready", "session/demo", "-n", ns, "--timeout=60s")
    assert done.returncode == 0, done.stderr


def test_kubectl_wait_for_ready_after_a_spec_change_waits_for_the_new_spec(admin, namespace, sa_daemon, kubectl):
    co, core = client.CustomObjectsApi(admin), client.CoreV1Api(admin)
    _create(co, namespace, [{"name": "web", "ports": [{"port": 8080}]}])
    _wait_ready(kubectl, namespace)
    first = _session(co, namespace)
    assert first["status"]["podName"] == "demo-g1"

    # A new image: a new bring-up. While kfold has not seen it yet (held stopped), the status still
    # says the previous spec's Ready: kubectl wait must not take it for the new spec's.
    os.kill(sa_daemon.proc.pid, signal.SIGSTOP)
    try:
        co.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo", {"spec": {"image": f"{IMAGE}:2"}})
        early = kubectl("wait", "--for=condition=Ready", "session/demo", "-n", namespace, "--timeout=3s")
        assert early.returncode != 0, f"kubectl wait returned on the previous spec's Ready: {early.stdout}"
        assert "timed out" in early.stderr, early.stderr
    finally:
        os.kill(sa_daemon.proc.pid, signal.SIGCONT)
    _wait_ready(kubectl, namespace)
    after = _session(co, namespace)
    assert after["status"]["phase"] == "Ready" and after["status"]["podName"] == "demo-g2", after["status"]
    pod = core.read_namespaced_pod("demo-g2", namespace)
    assert {c.image for c in pod.spec.containers} == {f"{IMAGE}:2"}
    assert pod.metadata.deletion_timestamp is None
    wanted = first["metadata"]["generation"] + 1
    assert after["metadata"]["generation"] == wanted
    _about_its_spec(after)
    assert _rfc3339(_ready(after)["lastTransitionTime"]) >= _rfc3339(_ready(first)["lastTransitionTime"])

    done = kubectl("wait", f"--for=jsonpath={{.status.observedGeneration}}={wanted}", "session/demo",
                   "-n", namespace, "--timeout=30s")
    assert done.returncode == 0, done.stderr

    # A ports-only change keeps the pod: Ready again once the Service routes the new port.
    co.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo",
                                      {"spec": {"apps": [{"name": "web", "ports": [{"port": 9090}]}]}})
    _wait_ready(kubectl, namespace)
    routed = _session(co, namespace)
    _about_its_spec(routed)
    assert routed["metadata"]["generation"] == wanted + 1 and routed["status"]["podName"] == "demo-g2"
    assert [p.port for p in core.read_namespaced_service("demo", namespace).spec.ports] == [9090]


def test_a_metadata_only_edit_moves_nothing_in_the_status(admin, namespace, sa_daemon, kubectl):
    co = client.CustomObjectsApi(admin)
    _create(co, namespace, [])
    _wait_ready(kubectl, namespace)
    first = _session(co, namespace)
    _about_its_spec(first)
    co.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo",
                                      {"metadata": {"annotations": {"example.test/note": "touched"}}})
    time.sleep(3.0)   # kfold has seen the edit (its watch answers in well under a second)
    touched = _session(co, namespace)
    assert touched["metadata"]["annotations"]["example.test/note"] == "touched"
    assert touched["metadata"]["generation"] == first["metadata"]["generation"]
    assert touched["status"] == first["status"], "a metadata-only edit rewrote the status"
    assert _ready(touched)["lastTransitionTime"] == _ready(first)["lastTransitionTime"]


def test_ready_goes_false_at_the_new_generation_when_a_suspend_is_seen(admin, namespace, sa_daemon, kubectl):
    co = client.CustomObjectsApi(admin)
    _create(co, namespace, [])
    _wait_ready(kubectl, namespace)
    co.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo", {"spec": {"suspended": True}})
    done = kubectl("wait", "--for=condition=Ready=false", "session/demo", "-n", namespace, "--timeout=60s")
    assert done.returncode == 0, done.stderr
    obj = _session(co, namespace)
    _about_its_spec(obj)
    assert _ready(obj)["reason"] == "Suspended"
    out = kubectl("get", "session/demo", "-n", namespace)
    assert out.returncode == 0 and out.stdout.split()[:5] == ["NAME", "READY", "PHASE", "REASON", "POD"], out.stdout
    wait_for(lambda: _session(co, namespace)["status"].get("phase") == "Suspended", 30, what="Suspended")
