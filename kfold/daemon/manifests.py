"""``kfold manifests``: a complete in-cluster install as one multi-document YAML stream.

Guarantees:
- Namespace, ServiceAccount, least-privilege RBAC, the CRDs (``kfold/data/crds/*.yaml``), a
  ConfigMap with the config, a PVC, a Deployment running ``kfold run --config
  /etc/kfold/config.yaml`` with ``/healthz`` liveness and ``/readyz`` readiness probes, and a
  ``kfold-metrics`` Service on the metrics port (``https`` with a secure ``metrics.listen``, else
  ``http``); the session editor/viewer ClusterRoles that aggregate into the built-in
  ``edit``/``admin`` and ``view`` roles.
- ``parts`` selects (default all, in this order): ``crds``, ``namespaces`` (kfold's and the watched
  ones) and ``app`` (everything else). Deleting ``app`` uninstalls kfold and keeps the CRDs, the
  namespaces and every Session in them (deleting a CRD or a namespace deletes its Sessions).
- RBAC lists exactly what kfold's requests need (``RBAC``: each rule with why, docs/install.md
  prints the table): no wildcards, no ``deletecollection``/``escalate``; cluster-wide only the
  ``create`` of TokenReviews and SubjectAccessReviews a secure ``metrics.listen`` needs
  (``METRICS_AUTH_RULES``, ClusterRole ``kfold-metrics-auth``), plus the unbound ClusterRole
  ``kfold-metrics-reader`` (``get`` on ``/metrics``) for the scraper's ServiceAccount;
  registered clusters are reached with their own credentials, never this ServiceAccount.
- The install's own objects carry the recommended ``app.kubernetes.io/*`` labels with
  ``managed-by: kfold-manifests`` (``INSTALL_MANAGER``), never kfold's ownership label
  (``engine.labels.MANAGED_SELECTOR``): no sweep or watch of kfold selects its own install.
- The config is a readable block scalar; its sha256 is the pod template's
  ``kfold.dev/config-sha256`` annotation, so a config change rolls the pod.
- The journal lives on a PersistentVolumeClaim, not an emptyDir: the journal IS the state (an
  emptyDir would lose every in-flight decision on a reschedule and make "in doubt" unknowable),
  and ``replicas: 1`` + ``strategy: Recreate`` keep a single writer on the ReadWriteOnce volume.
  ``replicas`` > 1: a StatefulSet (a claim per replica), a PodDisruptionBudget (one down at a
  time), preferred anti-affinity per node and a zone topology spread.
- The Deployment fits the image ``scripts/build_image.sh`` builds (``DEFAULT_IMAGE``): uid/gid
  65532 (the image's ``nonroot`` user), a read-only root filesystem with the claim mounted on the
  config's journal directory and an emptyDir on ``/tmp`` (the only places kfold writes), probes on
  the config's ``http.listen`` port, requests/limits from measured figures (``RESOURCES``); with
  a secure ``metrics.listen`` and a ``metrics.cert_dir``, the Secret ``kfold-metrics-tls``
  mounted there if it exists (``optional``: without it kfold makes a self-signed certificate).
- ``InstallError`` (one line naming the fix) for an invalid namespace, image reference, a
  loopback ``http.listen`` or ``metrics.listen`` (the kubelet's probes, the metrics Service could
  not reach it) or ``replicas`` > 1 without leader election.
"""
from __future__ import annotations

import hashlib
import ipaddress
import posixpath
import re
from pathlib import Path
from typing import Any

import yaml

from engine.labels import MANAGED_BY
from kfold import __version__

DATA = Path(__file__).parents[1] / "data"
INSTALL_MANAGER = "kfold-manifests"   # app.kubernetes.io/managed-by of the install (kfold's own objects say "kfold")
LABELS = {"app.kubernetes.io/name": "kfold", "app.kubernetes.io/instance": "kfold",
          "app.kubernetes.io/version": __version__, "app.kubernetes.io/part-of": "kfold",
          MANAGED_BY: INSTALL_MANAGER}
SELECTOR = {"app.kubernetes.io/name": "kfold"}   # immutable in a Deployment/StatefulSet: as the first installs had it
DEFAULT_IMAGE = f"localhost/kfold:{__version__}"  # the name scripts/build_image.sh gives its archive
NONROOT = 65532  # the image's "nonroot" user and group
CONFIG_CHECKSUM = "kfold.dev/config-sha256"
PARTS = ("crds", "namespaces", "app")
# Measured on a 2-vCPU AMD EPYC (docs/install.md "Resources"): idle 77 MiB, ~0 CPU; 50 Sessions at
# once 85 MiB, 0.33 core; 300 at once 122 MB peak, ~0.8 core. Requests: the steady state; limits:
# the burst with headroom.
RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}

# (rule, why): the verbs kfold's requests use, each site named (docs/install.md "RBAC").
RBAC: list[tuple[dict[str, Any], str]] = [
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
     "the Pod watch (list/watch); a session pod is created, read before a fenced delete, and deleted; "
     "the orphan sweep lists"),
    ({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "create", "update", "delete"]},
     "the Session env Secret and the Repo credential Secrets kfold owns: created, read, replaced (PUT), "
     "deleted at teardown; the orphan Secret sweep lists them (label-selected). No watch"),
    ({"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch", "create", "update", "delete"]},
     "the Service watch (list/watch, label-selected: what a fresh journal adopts); the Session's Service: "
     "created, read after AlreadyExists, replaced (PUT), deleted"),
    ({"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"],
      "verbs": ["get", "list", "watch", "create", "update", "delete"]},
     "the Session's Ingress (with a base_domain): as the Service"),
    ({"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "create", "delete"]},
     "the workspace claim (workspace.storage_class): made at bring-up, read to adopt, deleted at teardown"),
    ({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
     "Events on Sessions and pods (core/v1); patch: a repeated Event's count"),
    ({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
     "Events on Sessions (events.k8s.io/v1, deduplicated by series: patch)"),
    ({"apiGroups": ["kfold.dev"], "resources": ["sessions"], "verbs": ["get", "list", "watch", "patch"]},
     "the Session watch; a quorum read before acting; patch: the teardown finalizer. Never create/update/delete"),
    ({"apiGroups": ["kfold.dev"], "resources": ["sessions/status"], "verbs": ["patch"]},
     "the status kfold writes (JSON merge patch)"),
    ({"apiGroups": ["kfold.dev"], "resources": ["repos"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
     "the Repo watch; Repos created for bindings and Sessions, re-labelled (patch), listed and deleted "
     "(fenced) by the gc. No status: the cache agent writes it"),
]
RULES: list[dict[str, Any]] = [rule for rule, _ in RBAC]
# get/create/update: the Lease (or each shard's); list/delete: the replicas' member Leases (kfold.daemon.shards)
LEASE_RULES = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "create", "update", "delete"]}]
LEASE_WHY = ("leader election (kfold.daemon.leader: get/create/update the Lease) and shards (kfold.daemon.shards: "
             "list/delete the replicas' member Leases), in kfold's own namespace only")
# A secure metrics.listen (kfold.daemon.secure): who asks for /metrics is checked by the apiserver
METRICS_AUTH: list[tuple[dict[str, Any], str]] = [
    ({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
     "a secure metrics.listen (kfold.daemon.secure): who a scrape's bearer token is. A cluster-scoped kind: a ClusterRole"),
    ({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
     "a secure metrics.listen: whether that user may get /metrics. A cluster-scoped kind: a ClusterRole"),
]
METRICS_AUTH_RULES = [rule for rule, _ in METRICS_AUTH]
METRICS_READER_RULES = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
METRICS_TLS_SECRET = "kfold-metrics-tls"   # optional: mounted at metrics.cert_dir when it exists
REGISTRY_WHY = "registry.credentials: secrets: read the registered clusters' kubeconfig Secrets (kfold cluster register writes them)"
# Tenants: the built-in edit/admin and view roles gain these (ClusterRole aggregation).
EDITOR_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
_IMAGE = re.compile(r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class InstallError(ValueError):
    """An install ``kfold manifests`` refuses to print; the message names the fix."""


class _Block(str):
    """A string YAML prints as a literal block scalar (``|``)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Block, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", str(v), style="|"))


def _meta(name: str, namespace: str | None = None, component: str = "controller") -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "labels": {**LABELS, "app.kubernetes.io/component": component}}
    if namespace:
        md["namespace"] = namespace
    return md


def crds() -> list[dict[str, Any]]:
    docs = [doc for f in sorted((DATA / "crds").glob("*.yaml")) for doc in yaml.safe_load_all(f.read_text()) if doc]
    for doc in docs:
        doc["metadata"]["labels"] = {**LABELS, "app.kubernetes.io/component": "crd"}
    return docs


def _binding(kind: str, name: str, ns: str | None, sa_ns: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": _meta(name, ns, "rbac"),
            "subjects": [{"kind": "ServiceAccount", "name": "kfold", "namespace": sa_ns}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}}


def _role(name: str, ns: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(name, ns, "rbac"), "rules": rules}


def rbac(ns: str, watched: list[str]) -> list[dict[str, Any]]:
    """Namespaced only: the Lease Role in kfold's namespace, the session Role in each watched one."""
    out = [_role("kfold-leader", ns, LEASE_RULES), _binding("Role", "kfold-leader", ns, ns)]
    for w in watched:
        out += [_role("kfold", w, RULES), _binding("Role", "kfold", w, ns)]
    return out


def tenant_roles() -> list[dict[str, Any]]:
    """Sessions for tenants: ``kfold-session-editor`` aggregates into the built-in ``edit`` and
    ``admin`` roles, ``kfold-session-viewer`` into ``view`` (a namespace's editors may run
    Sessions, its viewers read them and their Repos). Neither grants the status subresource."""
    def role(name: str, rules: list[dict[str, Any]], *into: str) -> dict[str, Any]:
        md = _meta(name, component="rbac")
        md["labels"].update({f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in into})
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": md, "rules": rules}
    return [
        role("kfold-session-editor", [{"apiGroups": ["kfold.dev"], "resources": ["sessions"], "verbs": EDITOR_VERBS},
                                      {"apiGroups": ["kfold.dev"], "resources": ["repos"], "verbs": ["get", "list", "watch"]}],
             "edit", "admin"),
        role("kfold-session-viewer", [{"apiGroups": ["kfold.dev"], "resources": ["sessions", "repos"],
                                       "verbs": ["get", "list", "watch"]}], "view"),
    ]


def metrics_rbac(ns: str) -> list[dict[str, Any]]:
    """A secure ``metrics.listen``: ``kfold-metrics-auth`` bound to kfold's ServiceAccount (the
    binding is named per install namespace, so two installs never take it from each other), and
    ``kfold-metrics-reader``, bound to nobody: ``kubectl create clusterrolebinding`` gives it to
    the scraper (docs/operations.md "Metrics and alerts")."""
    def cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": _meta(name, component="rbac"), "rules": rules}
    binding = _binding("ClusterRole", "kfold-metrics-auth", None, ns)
    binding["metadata"]["name"] = f"kfold-metrics-auth-{ns}"
    return [cluster_role("kfold-metrics-auth", METRICS_AUTH_RULES), binding,
            cluster_role("kfold-metrics-reader", METRICS_READER_RULES)]


def _template(spec: dict[str, Any], checksum: str) -> dict[str, Any]:
    return {"metadata": {"labels": {**LABELS, "app.kubernetes.io/component": "controller"},
                         "annotations": {CONFIG_CHECKSUM: checksum}}, "spec": spec}


class Listen:
    """The ports the config opens: ``http`` (probes), ``metrics`` (None: /metrics beside the probes),
    ``secure`` and the certificate directory of a secure one."""

    def __init__(self, cfg: dict[str, Any]):
        self.http = _port((cfg.get("http") or {}).get("listen", "0.0.0.0:8080"))
        m = cfg.get("metrics") or {}
        self.metrics = _port(m["listen"]) if m.get("listen") else None
        self.secure = self.metrics is not None and m.get("secure", True) is not False
        self.cert_dir = m.get("cert_dir") if self.secure else None

    def container_ports(self) -> list[dict[str, Any]]:
        return [{"name": "http", "containerPort": self.http}] + (
            [{"name": "metrics", "containerPort": self.metrics}] if self.metrics is not None else [])

    def service_port(self) -> dict[str, Any]:
        if self.metrics is None:
            return {"name": "http", "port": self.http, "targetPort": "http"}
        return {"name": "https" if self.secure else "metrics", "port": self.metrics, "targetPort": "metrics"}


def _port(listen: Any) -> int:
    return int(str(listen).rpartition(":")[2])


def deployment(ns: str, image: str, listen: Listen, journal_dir: str = "/var/lib/kfold",
               checksum: str = "") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta("kfold", ns),
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": dict(SELECTOR)},
                     "template": _template(_pod_spec(image, listen, journal_dir), checksum)}}


def statefulset(ns: str, image: str, listen: Listen, replicas: int, journal_dir: str = "/var/lib/kfold",
                checksum: str = "") -> list[dict[str, Any]]:
    """``replicas`` daemons, each with its own journal claim (``journal-kfold-<i>``), one of them
    leading (``leader.enabled``); started in parallel so the standbys are warm at once. The
    headless Service is the StatefulSet's governing service (stable pod names = Lease holders);
    the PodDisruptionBudget lets a drain take one at a time; anti-affinity and a zone spread keep
    the standbys off the leader's node and zone where the cluster allows (preferred, never blocking)."""
    spec = _pod_spec(image, listen, journal_dir)
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "journal"]
    spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                            "labelSelector": {"matchLabels": dict(SELECTOR)}}}]}}
    spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                          "whenUnsatisfiable": "ScheduleAnyway",
                                          "labelSelector": {"matchLabels": dict(SELECTOR)}}]
    claim = {"metadata": {"name": "journal"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    return [{"apiVersion": "v1", "kind": "Service", "metadata": _meta("kfold", ns),
             "spec": {"clusterIP": "None", "selector": dict(SELECTOR),
                      "ports": [{"name": p["name"], "port": p["containerPort"]} for p in listen.container_ports()]}},
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta("kfold", ns),
             "spec": {"replicas": replicas, "serviceName": "kfold", "podManagementPolicy": "Parallel",
                      "selector": {"matchLabels": dict(SELECTOR)}, "template": _template(spec, checksum),
                      "volumeClaimTemplates": [claim]}},
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta("kfold", ns),
             "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(SELECTOR)}}}]


def _pod_spec(image: str, listen: Listen, journal_dir: str) -> dict[str, Any]:
    probe = lambda path, delay: {"httpGet": {"path": path, "port": listen.http}, "initialDelaySeconds": delay, "periodSeconds": 10}  # noqa: E731
    container = {
        "name": "kfold", "image": image, "args": ["run", "--config", "/etc/kfold/config.yaml"],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],  # the Lease holder
        "ports": listen.container_ports(),
        "resources": {k: dict(v) for k, v in RESOURCES.items()},
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
    if listen.cert_dir:
        container["volumeMounts"].append({"name": "metrics-tls", "mountPath": listen.cert_dir, "readOnly": True})
        spec["volumes"].append({"name": "metrics-tls", "secret": {"secretName": METRICS_TLS_SECRET, "optional": True}})
    return spec


def check_install(namespace: str, image: str, cfg: dict[str, Any]) -> None:
    """``InstallError`` naming the fix for what would install but never run (module contract)."""
    if not _DNS_LABEL.match(namespace):
        raise InstallError(f"--namespace {namespace!r} is not a namespace name (a DNS label: lower-case letters, "
                           "digits and '-', at most 63 characters)")
    if len(image) > 4096 or not _IMAGE.match(image):
        raise InstallError(f"--image {image!r} is not an image reference; e.g. registry.example/kfold:{__version__}")
    for field, listen in (("http.listen", (cfg.get("http") or {}).get("listen", "0.0.0.0:8080")),
                          ("metrics.listen", (cfg.get("metrics") or {}).get("listen"))):
        if listen is not None and _loopback(str(listen)):
            raise InstallError(f"{field} {listen!r} listens on loopback only: the kubelet's probes and the metrics "
                               f"Service cannot reach it; use 0.0.0.0:PORT (or [::]:PORT) in the config")


def _loopback(listen: str) -> bool:
    host = listen.rpartition(":")[0].strip("[]")
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def install(namespace: str = "kfold", image: str = DEFAULT_IMAGE, config_text: str | None = None,
            replicas: int = 1, parts: tuple[str, ...] = PARTS) -> list[dict[str, Any]]:
    """``replicas`` > 1: a StatefulSet, and the config must turn leader election on
    (``InstallError`` naming the fix otherwise): two daemons without it would both issue effects."""
    text = config_text or (DATA / "config.example.yaml").read_text()
    cfg = yaml.safe_load(text) or {}
    check_install(namespace, image, cfg)
    if replicas > 1 and not (cfg.get("leader") or {}).get("enabled"):
        raise InstallError(f"--replicas {replicas} needs leader election: set `leader: {{enabled: true}}` in the "
                           "config passed with --config (docs/config.md)")
    watched = list(cfg.get("namespaces") or [namespace])
    docs: list[dict[str, Any]] = crds() if "crds" in parts else []
    if "namespaces" in parts:
        docs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(n, component="namespace")}
                 for n in dict.fromkeys([namespace] + watched)]
    if "app" not in parts:
        return docs
    listen = Listen(cfg)
    journal_dir = posixpath.dirname(str((cfg.get("journal") or {}).get("path") or "/var/lib/kfold/journal.db"))
    checksum = hashlib.sha256(text.encode()).hexdigest()
    docs += [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("kfold", namespace)}]
    docs += rbac(namespace, watched) + registry_rbac(namespace, cfg) + tenant_roles()
    docs += metrics_rbac(namespace) if listen.secure else []
    docs += [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("kfold-config", namespace),
              "data": {"config.yaml": _Block(text if text.endswith("\n") else text + "\n")}}]
    docs += [{"apiVersion": "v1", "kind": "Service", "metadata": _meta("kfold-metrics", namespace, "metrics"),
              "spec": {"selector": dict(SELECTOR), "ports": [listen.service_port()]}}]
    if replicas > 1:
        return docs + statefulset(namespace, image, listen, replicas, journal_dir, checksum)
    docs += [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta("kfold-journal", namespace),
              "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
             deployment(namespace, image, listen, journal_dir, checksum)]
    return docs


def registry_rbac(ns: str, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """With ``registry.credentials: secrets`` kfold reads cluster kubeconfigs from Secrets in its own
    namespace: ``get`` on Secrets there, nothing more (``kfold cluster register`` writes them)."""
    reg = cfg.get("registry") or {}
    if reg.get("credentials") != "secrets":
        return []
    where = reg.get("secrets_namespace") or ns
    return [_role("kfold-registry", where, [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
            _binding("Role", "kfold-registry", where, ns)]


def rbac_table() -> str:
    """The RBAC rules and why each exists, as the Markdown table docs/install.md holds."""
    rows = [(r, why, "each watched namespace") for r, why in RBAC]
    rows += [(LEASE_RULES[0], LEASE_WHY, "kfold's namespace")]
    rows += [({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, REGISTRY_WHY,
              "kfold's namespace, only with registry.credentials: secrets")]
    rows += [(r, why, "cluster (ClusterRole kfold-metrics-auth), only with a secure metrics.listen")
             for r, why in METRICS_AUTH]
    rows += [(METRICS_READER_RULES[0], "for the scraper, not kfold: bind it to Prometheus' ServiceAccount "
              "(docs/operations.md)", "cluster (ClusterRole kfold-metrics-reader, bound to nobody)")]
    out = ["| API group | resources | verbs | where | why |", "|---|---|---|---|---|"]
    for rule, why, where in rows:
        group = f"`{rule['apiGroups'][0] or 'core'}`" if "apiGroups" in rule else "(non-resource URL)"
        what = ", ".join(rule.get("resources") or [f"`{u}`" for u in rule["nonResourceURLs"]])
        out.append(f"| {group} | {what} | {', '.join(rule['verbs'])} | {where} | {why} |")
    return "\n".join(out) + "\n"


SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def service_monitor(namespace: str = "kfold") -> dict[str, Any]:
    """The Prometheus Operator's scrape of ``kfold-metrics`` (port ``https``), as kubebuilder's
    scaffold scrapes a controller's secure metrics: HTTPS, Prometheus' own ServiceAccount token as
    the bearer (that ServiceAccount needs ``kfold-metrics-reader``), the certificate not verified
    (kfold's is self-signed unless ``kfold-metrics-tls`` is mounted; then set ``tlsConfig.ca``)."""
    md = _meta("kfold", namespace, "metrics")
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": md,
            "spec": {"selector": {"matchLabels": {**SELECTOR, "app.kubernetes.io/component": "metrics"}},
                     "endpoints": [{"port": "https", "scheme": "https", "path": "/metrics", "bearerTokenFile": SA_TOKEN,
                                    "tlsConfig": {"insecureSkipVerify": True}}]}}


def prometheus_rule(rule_file: dict[str, Any]) -> dict[str, Any]:
    """The rule file's groups, unchanged, as a PrometheusRule (no namespace: applied to the monitoring one)."""
    md = _meta("kfold", component="alerting")
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": md,
            "spec": {"groups": rule_file["groups"]}}


def render(docs: list[dict[str, Any]], width: int = 80) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=width)


KUSTOMIZATION_HEAD = "# Generated by `kfold manifests --kustomize` (kfold {version}); regenerate, do not edit.\n"


def write_kustomize(directory: str | Path, namespace: str = "kfold", image: str = DEFAULT_IMAGE,
                    config_text: str | None = None, replicas: int = 1) -> list[Path]:
    """A kustomize base: ``crds.yaml``, ``namespaces.yaml``, ``kfold.yaml`` (the parts) and a
    ``kustomization.yaml`` listing them, with the image as an ``images`` entry an overlay
    retags. ``kubectl apply -k DIR`` installs it; no other tool is needed."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    name, _, tag = image.rpartition(":") if ":" in image.rpartition("/")[2] else (image, "", "")
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                     "resources": [f"{part}.yaml" for part in ("crds", "namespaces", "kfold")],
                     "images": [{"name": name, **({"newTag": tag} if tag else {})}]}
    files = {f"{'kfold' if part == 'app' else part}.yaml": render(install(namespace, image, config_text, replicas, parts=(part,)))
             for part in PARTS}
    files.update({
             "kustomization.yaml": KUSTOMIZATION_HEAD.format(version=__version__) + render([kustomization])})
    for fname, body in files.items():
        (out / fname).write_text(body)
    return [out / f for f in files]
