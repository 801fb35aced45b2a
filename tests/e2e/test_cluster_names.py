"""Cluster names are trimmed as seed 004 does (``Register`` and ``Reach`` trim the name), on the real
apiserver through ``kfold cluster register`` and ``kfold run`` with a config file: a cluster
registered as " edge " is "edge", a Session naming " edge\\n" runs there, one naming "  " runs on
the home cluster."""
from __future__ import annotations

import json
import subprocess
import sys

from kubernetes import client

from tests.e2e.conftest import REPO, wait_for

GVP = ("kfold.dev", "v1alpha1")


def kfold(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfold", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def session(ns, name, cluster):
    return {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": {"name": name, "namespace": ns},
            "spec": {"image": "registry.example/sandbox:1", "cluster": cluster, "apps": [{"name": "web"}]}}


def test_padded_cluster_names_register_and_place_trimmed(admin, cp, crds, namespaces, daemon_factory, tmp_path):
    core, co = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    acme_ns, bound = namespaces("acme"), namespaces("edge-sb")
    registry_dir = tmp_path / "registry"
    proc = kfold("cluster", "register", " edge ", "--tenant", "acme", "--kubeconfig", cp["kubeconfig"],
                 "--namespace-bound", bound, "--registry-dir", str(registry_dir), "-o", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r["name"] for r in json.loads(proc.stdout)] == ["edge"]

    daemon_factory(cp["kubeconfig"], [acme_ns], extra={
        "registry": {"dir": str(registry_dir)}, "tenants": {acme_ns: "acme"}}).start()
    co.create_namespaced_custom_object(*GVP, acme_ns, "sessions", session(acme_ns, "far", " edge\n"))
    co.create_namespaced_custom_object(*GVP, acme_ns, "sessions", session(acme_ns, "near", "   "))

    def ready(name):
        st = co.get_namespaced_custom_object(*GVP, acme_ns, "sessions", name).get("status", {})
        return st if st.get("phase") == "Ready" else None
    wait_for(lambda: ready("far"), 45, what="far Ready on edge")
    wait_for(lambda: ready("near"), 45, what="near Ready at home")
    assert [p.metadata.name for p in core.list_namespaced_pod(bound, label_selector="kfold.dev/session=far").items] \
        == ["far-g1"], "the padded name placed the pod on the registered cluster, inside its bound"
    assert [p.metadata.name for p in core.list_namespaced_pod(acme_ns, label_selector="kfold.dev/session=near").items] \
        == ["near-g1"], "a blank name is the home cluster: the pod runs beside its Session"

    proc = kfold("cluster", "deregister", "edge ", "--tenant", "acme", "--registry-dir", str(registry_dir))
    assert proc.returncode == 0 and "deregistered cluster edge of tenant acme" in proc.stdout, proc.stdout + proc.stderr
