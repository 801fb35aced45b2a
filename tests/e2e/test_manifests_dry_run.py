"""``kfold manifests`` is accepted by the real apiserver: every document of its output passes a
server-side apply with ``dryRun=All`` (schema, defaulting, validation and admission, nothing
persisted), with the optional registry RBAC included.

The namespaces the install creates are made for real first (a namespaced dry run needs its
namespace to exist) and deleted afterwards; the names are unique per run, so the shared control
plane's other tests are untouched.
"""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from kfold.daemon.manifests import DATA, DEFAULT_IMAGE, NONROOT
from tests.e2e.conftest import REPO


@pytest.fixture
def rendered(tmp_path):
    suffix = uuid.uuid4().hex[:6]
    home, sessions = f"kfold-dry-{suffix}", f"kfold-dry-{suffix}-s"
    cfg = yaml.safe_load((DATA / "config.example.yaml").read_text())
    cfg["namespaces"] = [sessions]
    cfg["registry"] = {"credentials": "secrets"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "kfold", "manifests", "--namespace", home, "--config", str(path)],
                         cwd=REPO, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d], [home, sessions]


def test_every_document_of_kfold_manifests_passes_a_server_side_dry_run(admin, crds, rendered):
    docs, namespaces = rendered
    dyn = DynamicClient(admin)
    core = client.CoreV1Api(admin)

    def dry_apply(doc):  # forced: the cluster-scoped kfold ClusterRole/Binding may belong to another install
        resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        return resource.server_side_apply(body=doc, namespace=doc["metadata"].get("namespace"),
                                          field_manager="kfold-e2e-dry-run", force_conflicts=True,
                                          dry_run="All").to_dict()

    assert sorted({d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}) == sorted(namespaces)
    try:
        seen = {}
        for doc in docs:
            if doc["kind"] == "Namespace":
                dry_apply(doc)
                core.create_namespace({"metadata": {"name": doc["metadata"]["name"]}})
        for doc in docs:
            returned = dry_apply(doc)
            assert returned["kind"] == doc["kind"] and returned["metadata"]["name"] == doc["metadata"]["name"]
            seen[(doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace"))] = returned
        for ns in namespaces:  # nothing but the namespaces themselves was persisted
            assert not client.AppsV1Api(admin).list_namespaced_deployment(ns).items
            assert not client.RbacAuthorizationV1Api(admin).list_namespaced_role(ns).items
    finally:
        for ns in namespaces:
            try:
                core.delete_namespace(ns)
            except client.ApiException:
                pass
    assert {k[0] for k in seen} == {"Namespace", "ServiceAccount", "CustomResourceDefinition", "ClusterRole",
                                    "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Service",
                                    "PersistentVolumeClaim", "Deployment"}
    (dep,) = [v for k, v in seen.items() if k[0] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == DEFAULT_IMAGE
    assert pod["securityContext"]["runAsUser"] == NONROOT and pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
    assert {v["name"] for v in pod["volumes"]} == {"config", "journal", "tmp", "metrics-tls"}


def test_replicas_render_a_statefulset_the_apiserver_accepts(admin, crds, tmp_path):
    """``kfold manifests --replicas 3`` (leader election on): the StatefulSet, its headless Service
    and the Lease RBAC pass a server-side dry run."""
    suffix = uuid.uuid4().hex[:6]
    home = f"kfold-dry-{suffix}"
    cfg = yaml.safe_load((DATA / "config.example.yaml").read_text())
    cfg["namespaces"] = [home]
    cfg["leader"] = {"enabled": True}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "kfold", "manifests", "--namespace", home, "--config", str(path),
                          "--replicas", "3"], cwd=REPO, check=True, capture_output=True, text=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    dyn, core = DynamicClient(admin), client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": home}})
    try:
        kinds = set()
        for doc in docs:
            if doc["kind"] == "Namespace":
                continue
            resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            back = resource.server_side_apply(body=doc, namespace=doc["metadata"].get("namespace"),
                                              field_manager="kfold-e2e-dry-run", force_conflicts=True,
                                              dry_run="All").to_dict()
            kinds.add(back["kind"])
            if back["kind"] == "StatefulSet":
                assert back["spec"]["replicas"] == 3 and back["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "journal"
        assert {"StatefulSet", "Service", "Role", "PodDisruptionBudget"} <= kinds and "Deployment" not in kinds
    finally:
        core.delete_namespace(home)
