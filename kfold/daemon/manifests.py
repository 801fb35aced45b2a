"""``kfold manifests``: a complete in-cluster install as one multi-document YAML stream.

Guarantees:
- Namespace, ServiceAccount, least-privilege RBAC, the CRDs (``kfold/data/crds/*.yaml``), a
  ConfigMap with the config, a PVC and a Deployment running ``kfold run --config
  /etc/kfold/config.yaml`` with ``/healthz`` liveness and ``/readyz`` readiness probes.
- RBAC lists only what kfold does: the observers' list/watch, the effects' verbs
  (``ops``) on the kinds of ``resources``; namespaces get/create only; no
  ``deletecollection``, no ``escalate``, no wildcards; get/create/update on leases in kfold's own
  namespace, for leader election (``leader.enabled``).
- The journal lives on a PersistentVolumeClaim, not an emptyDir: the journal IS the state (an
  emptyDir would lose every in-flight decision on a reschedule and make "in doubt" unknowable),
  and ``replicas: 1`` + ``strategy: Recreate`` keep a single writer on the ReadWriteOnce volume.
- The Deployment fits the image ``scripts/build_image.sh`` builds (``DEFAULT_IMAGE``): uid/gid
  65532 (the image's ``nonroot`` user), a read-only root filesystem with the claim mounted on the
  config's journal directory and an emptyDir on ``/tmp`` (the only places kfold writes), probes on
  the config's ``http.listen`` port.
"""
from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import yaml

from kfold import __version__
from engine.labels import MANAGED_LABELS

DATA = Path(__file__).parents[1] / "data"
LABELS = {"app.kubernetes.io/name": "kfold", **MANAGED_LABELS}
WATCH = ["get", "list", "watch"]
DEFAULT_IMAGE = f"localhost/kfold:{__version__}"  # the name scripts/build_image.sh gives its archive
NONROOT = 65532  # the image's "nonroot" user and group

RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": WATCH + ["create", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": WATCH + ["create", "update", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "create", "update", "patch", "delete"]},
    # The workspace claim (config workspace.storage_class): made at bring-up, read to adopt, deleted at teardown.
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "create", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # Events on a Session (engine/effects/io/event_series): posted, then patched as a series grows.
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "create", "update", "patch", "delete"]},
    {"apiGroups": ["kfold.dev"], "resources": ["sessions", "repos"], "verbs": WATCH + ["create", "update", "patch", "delete"]},
    {"apiGroups": ["kfold.dev"], "resources": ["sessions/status", "repos/status"], "verbs": ["get", "patch", "update"]},
]
CLUSTER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "create"]},
]


# get/create/update: the Lease (or each shard's); list/delete: the replicas' member Leases (kfold.daemon.shards)
LEASE_RULES = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "create", "update", "delete"]}]


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace:
        md["namespace"] = namespace
    return md


def crds() -> list[dict[str, Any]]:
    return [doc for f in sorted((DATA / "crds").glob("*.yaml")) for doc in yaml.safe_load_all(f.read_text()) if doc]


def rbac(ns: str, watched: list[str]) -> list[dict[str, Any]]:
    sa = [{"kind": "ServiceAccount", "name": "kfold", "namespace": ns}]
    out: list[dict[str, Any]] = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta("kfold"), "rules": CLUSTER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _meta("kfold"), "subjects": sa,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kfold"}},
    ]
    out += [  # leader election (kfold.daemon.leader): the Lease lives in kfold's own namespace
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta("kfold-leader", ns), "rules": LEASE_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta("kfold-leader", ns),
         "subjects": sa, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kfold-leader"}},
    ]
    for w in watched:
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta("kfold", w), "rules": RULES})
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta("kfold", w),
                    "subjects": sa, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kfold"}})
    return out


def deployment(ns: str, image: str, port: int, journal_dir: str = "/var/lib/kfold") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta("kfold", ns),
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                     "selector": {"matchLabels": {"app.kubernetes.io/name": "kfold"}},
                     "template": {"metadata": {"labels": dict(LABELS)}, "spec": _pod_spec(image, port, journal_dir)}}}


def statefulset(ns: str, image: str, port: int, replicas: int, journal_dir: str = "/var/lib/kfold") -> list[dict[str, Any]]:
    """``replicas`` daemons, each with its own journal claim (``journal-kfold-<i>``), one of them
    leading (``leader.enabled``); started in parallel so the standbys are warm at once. The
    headless Service is the StatefulSet's governing service (stable pod names = Lease holders)."""
    spec = _pod_spec(image, port, journal_dir)
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "journal"]
    claim = {"metadata": {"name": "journal"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    return [{"apiVersion": "v1", "kind": "Service", "metadata": _meta("kfold", ns),
             "spec": {"clusterIP": "None", "selector": {"app.kubernetes.io/name": "kfold"},
                      "ports": [{"name": "http", "port": port}]}},
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta("kfold", ns),
             "spec": {"replicas": replicas, "serviceName": "kfold", "podManagementPolicy": "Parallel",
                      "selector": {"matchLabels": {"app.kubernetes.io/name": "kfold"}},
                      "template": {"metadata": {"labels": dict(LABELS)}, "spec": spec},
                      "volumeClaimTemplates": [claim]}}]


def _pod_spec(image: str, port: int, journal_dir: str) -> dict[str, Any]:
    probe = lambda path, delay: {"httpGet": {"path": path, "port": port}, "initialDelaySeconds": delay, "periodSeconds": 10}  # noqa: E731
    container = {
        "name": "kfold", "image": image, "args": ["run", "--config", "/etc/kfold/config.yaml"],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],  # the Lease holder
        "ports": [{"name": "http", "containerPort": port}],
        "livenessProbe": probe("/healthz", 10), "readinessProbe": probe("/readyz", 5),
        "volumeMounts": [{"name": "config", "mountPath": "/etc/kfold", "readOnly": True},
                         {"name": "journal", "mountPath": journal_dir}, {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    spec = {"serviceAccountName": "kfold", "terminationGracePeriodSeconds": 30, "containers": [container],
            "securityContext": {"runAsUser": NONROOT, "runAsGroup": NONROOT, "fsGroup": NONROOT, "runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "config", "configMap": {"name": "kfold-config"}},
                        {"name": "journal", "persistentVolumeClaim": {"claimName": "kfold-journal"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]}
    return spec


def install(namespace: str = "kfold", image: str = DEFAULT_IMAGE, config_text: str | None = None,
            replicas: int = 1) -> list[dict[str, Any]]:
    """``replicas`` > 1: a StatefulSet, and the config must turn leader election on (``ValueError``
    naming the fix otherwise): two daemons without it would both issue effects."""
    text = config_text or (DATA / "config.example.yaml").read_text()
    cfg = yaml.safe_load(text) or {}
    if replicas > 1 and not (cfg.get("leader") or {}).get("enabled"):
        raise ValueError(f"--replicas {replicas} needs leader election: set `leader: {{enabled: true}}` in the "
                         "config passed with --config (docs/config.md)")
    watched = list(cfg.get("namespaces") or [namespace])
    port = int(str((cfg.get("http") or {}).get("listen", "0.0.0.0:8080")).rpartition(":")[2])
    journal_dir = posixpath.dirname(str((cfg.get("journal") or {}).get("path") or "/var/lib/kfold/journal.db"))
    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(n)} for n in dict.fromkeys([namespace] + watched)]
    docs += [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("kfold", namespace)}]
    docs += crds() + rbac(namespace, watched) + registry_rbac(namespace, cfg)
    docs += [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("kfold-config", namespace), "data": {"config.yaml": text}}]
    if replicas > 1:
        return docs + statefulset(namespace, image, port, replicas, journal_dir)
    docs += [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta("kfold-journal", namespace),
              "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
             deployment(namespace, image, port, journal_dir)]
    return docs


def registry_rbac(ns: str, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """With ``registry.credentials: secrets`` kfold reads cluster kubeconfigs from Secrets in its own
    namespace: ``get`` on Secrets there, nothing more (``kfold cluster register`` writes them)."""
    reg = cfg.get("registry") or {}
    if reg.get("credentials") != "secrets":
        return []
    where = reg.get("secrets_namespace") or ns
    sa = [{"kind": "ServiceAccount", "name": "kfold", "namespace": ns}]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta("kfold-registry", where),
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": _meta("kfold-registry", where),
         "subjects": sa, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kfold-registry"}},
    ]


def render(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)
