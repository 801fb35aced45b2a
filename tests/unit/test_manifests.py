"""The install is complete and least-privilege: no wildcards, no escalation verbs, the journal on
a volume that survives a reschedule, probes on the daemon's own endpoints."""
import pytest
import yaml

from kfold.daemon.manifests import install

FORBIDDEN_VERBS = {"*", "escalate", "bind", "impersonate", "deletecollection"}


def kinds(docs):
    return sorted({d["kind"] for d in docs})


def test_the_install_has_everything_a_cluster_operator_needs():
    docs = install("kfold", "img:1")
    assert kinds(docs) == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "Deployment",
                           "Namespace", "PersistentVolumeClaim", "Role", "RoleBinding", "Service", "ServiceAccount"]
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition") == \
        ["repos.kfold.dev", "sessions.kfold.dev"]


def test_kfolds_rbac_has_no_wildcards_and_cluster_wide_only_the_metrics_reviews():
    docs = install("kfold", "img:1")
    for d in docs:
        kfolds = d["kind"] == "Role" or d["metadata"]["name"].startswith("kfold-metrics-")   # not the tenants'
        for rule in d.get("rules", []) if kfolds else []:
            assert "*" not in rule.get("resources", []) and "*" not in rule.get("apiGroups", [])
            assert not FORBIDDEN_VERBS & set(rule["verbs"]), rule
    # kfold's ServiceAccount is bound cluster-wide to one role: creating the two reviews /metrics needs
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["metadata"]["name"] == "kfold-metrics-auth-kfold" and binding["roleRef"]["name"] == "kfold-metrics-auth"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kfold", "namespace": "kfold"}]
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    assert sorted(roles) == ["kfold-metrics-auth", "kfold-metrics-reader", "kfold-session-editor", "kfold-session-viewer"]
    assert roles["kfold-metrics-auth"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]
    assert roles["kfold-metrics-reader"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_metrics_beside_the_probes_need_nothing_cluster_wide():
    docs = install("kfold", "img:1", yaml.safe_dump({"namespaces": ["sb"]}))
    assert not [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole") == \
        ["kfold-session-editor", "kfold-session-viewer"]
    plain = yaml.safe_dump({"namespaces": ["sb"], "metrics": {"listen": "0.0.0.0:9090", "secure": False}})
    assert not [d for d in install("kfold", "img:1", plain) if d["kind"] == "ClusterRoleBinding"]


def test_the_daemon_runs_once_with_probes_and_its_journal_on_a_claim():
    (dep,) = [d for d in install("kfold", "img:1") if d["kind"] == "Deployment"]
    spec = dep["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    (c,) = spec["template"]["spec"]["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert any(v.get("persistentVolumeClaim") for v in spec["template"]["spec"]["volumes"])


def test_secret_credentials_add_only_a_get_on_secrets_in_kfolds_namespace():
    cfg = yaml.safe_dump({"namespaces": ["sb"], "base_domain": "s.example.com",
                          "registry": {"credentials": "secrets"}})
    docs = install("kfold", "img:1", cfg)
    roles = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "kfold-registry"]
    assert [(r["metadata"]["namespace"], r["rules"]) for r in roles] == \
        [("kfold", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])]
    assert not [d for d in install("kfold", "img:1") if d["metadata"]["name"] == "kfold-registry"]


def test_leader_election_may_use_leases_in_kfolds_namespace_only():
    docs = install("kfold", "img:1")
    lease_rules = [(d["metadata"].get("namespace"), r) for d in docs for r in d.get("rules", [])
                   if "leases" in r.get("resources", [])]
    assert lease_rules == [("kfold", {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                      "verbs": ["get", "list", "create", "update", "delete"]})]
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "kfold-leader"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kfold", "namespace": "kfold"}]


def test_replicas_render_a_statefulset_with_a_journal_per_replica_and_need_leader_election():
    import pytest
    plain = yaml.safe_dump({"namespaces": ["sb"], "base_domain": "s.example.com"})
    with pytest.raises(ValueError, match="leader: {enabled: true}"):
        install("kfold", "img:1", plain, replicas=3)
    cfg = yaml.safe_dump({"namespaces": ["sb"], "base_domain": "s.example.com", "leader": {"enabled": True}})
    docs = install("kfold", "img:1", cfg, replicas=3)
    assert "Deployment" not in kinds(docs) and "PersistentVolumeClaim" not in kinds(docs)
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    spec = sts["spec"]
    assert spec["replicas"] == 3 and spec["podManagementPolicy"] == "Parallel"
    assert [t["metadata"]["name"] for t in spec["volumeClaimTemplates"]] == ["journal"]
    (c,) = spec["template"]["spec"]["containers"]
    assert {"name": "journal", "mountPath": "/var/lib/kfold"} in c["volumeMounts"]
    assert c["env"][0]["name"] == "POD_NAME"
    (svc,) = [d for d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None"]
    assert svc["spec"]["clusterIP"] == "None" and spec["serviceName"] == svc["metadata"]["name"]


def test_tenant_roles_aggregate_into_the_built_in_edit_admin_and_view():
    roles = {d["metadata"]["name"]: d for d in install("kfold", "img:1") if d["kind"] == "ClusterRole"}
    agg = lambda name: sorted(k.rsplit("-", 1)[1] for k, v in roles[name]["metadata"]["labels"].items()  # noqa: E731
                              if k.startswith("rbac.authorization.k8s.io/aggregate-to-") and v == "true")
    assert agg("kfold-session-editor") == ["admin", "edit"] and agg("kfold-session-viewer") == ["view"]
    for role in roles.values():  # tenants never write what kfold alone writes
        assert all("sessions/status" not in r.get("resources", []) for r in role["rules"])
    viewer_verbs = {v for r in roles["kfold-session-viewer"]["rules"] for v in r["verbs"]}
    assert viewer_verbs == {"get", "list", "watch"}


def test_the_install_never_carries_kfolds_ownership_label():
    """kfold's watches and sweeps select managed-by=kfold: its own install must never match."""
    from engine.labels import MANAGED_BY, MANAGER
    docs = install("kfold", "img:1")
    for d in docs:
        labels = d["metadata"]["labels"]
        assert labels.get(MANAGED_BY) != MANAGER and labels["app.kubernetes.io/managed-by"] == "kfold-manifests", d["kind"]
        assert {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
                "app.kubernetes.io/component", "app.kubernetes.io/part-of"} <= set(labels)
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    assert dep["spec"]["template"]["metadata"]["labels"].get(MANAGED_BY) != MANAGER


def test_the_config_is_a_readable_block_and_its_checksum_rolls_the_pod():
    from kfold.daemon.manifests import CONFIG_CHECKSUM, render
    a = yaml.safe_dump({"namespaces": ["sb"]})
    b = yaml.safe_dump({"namespaces": ["sb"], "log": {"level": "debug"}})
    sums = [[d for d in install("kfold", "img:1", t) if d["kind"] == "Deployment"][0]
            ["spec"]["template"]["metadata"]["annotations"][CONFIG_CHECKSUM] for t in (a, a, b)]
    assert sums[0] == sums[1] != sums[2]
    assert "  config.yaml: |\n    # kfold run --config" in render(install("kfold", "img:1"))


def test_a_metrics_service_and_measured_resources():
    docs = install("kfold", "img:1")
    (svc,) = [d for d in docs if d["kind"] == "Service"]
    assert svc["metadata"]["name"] == "kfold-metrics"
    assert svc["spec"]["ports"] == [{"name": "https", "port": 8443, "targetPort": "metrics"}]
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["ports"] == [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 8443}]
    assert c["livenessProbe"]["httpGet"]["port"] == c["readinessProbe"]["httpGet"]["port"] == 8080
    res = c["resources"]
    assert set(res) == {"requests", "limits"} and set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}


def test_the_metrics_certificate_is_an_optional_secret_mounted_at_cert_dir():
    (dep,) = [d for d in install("kfold", "img:1") if d["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert {"name": "metrics-tls", "mountPath": "/etc/kfold-metrics-tls", "readOnly": True} in c["volumeMounts"]
    assert {"name": "metrics-tls", "secret": {"secretName": "kfold-metrics-tls", "optional": True}} in pod["volumes"]
    no_dir = yaml.safe_dump({"namespaces": ["sb"], "metrics": {"listen": "0.0.0.0:8443"}})
    (dep,) = [d for d in install("kfold", "img:1", no_dir) if d["kind"] == "Deployment"]
    assert "metrics-tls" not in {v["name"] for v in dep["spec"]["template"]["spec"]["volumes"]}


def test_without_a_metrics_port_the_service_is_the_probes_port():
    docs = install("kfold", "img:1", yaml.safe_dump({"namespaces": ["sb"]}))
    (svc,) = [d for d in docs if d["kind"] == "Service"]
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http"}]


def test_replicas_get_a_disruption_budget_anti_affinity_and_a_zone_spread():
    cfg = yaml.safe_dump({"namespaces": ["sb"], "leader": {"enabled": True}})
    docs = install("kfold", "img:1", cfg, replicas=3)
    (pdb,) = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    pod = sts["spec"]["template"]["spec"]
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["selector"] == sts["spec"]["selector"]
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert not [d for d in install("kfold", "img:1") if d["kind"] == "PodDisruptionBudget"]


def test_parts_split_the_install_so_an_uninstall_keeps_crds_and_namespaces():
    everything = install("kfold", "img:1")
    parts = [install("kfold", "img:1", parts=(p,)) for p in ("crds", "namespaces", "app")]
    assert [d for part in parts for d in part] == everything
    assert kinds(parts[0]) == ["CustomResourceDefinition"] and kinds(parts[1]) == ["Namespace"]
    assert not {"CustomResourceDefinition", "Namespace"} & set(kinds(parts[2]))


@pytest.mark.parametrize("args, words", [
    (["--namespace", "Kfold_1"], "--namespace 'Kfold_1' is not a namespace name"),
    (["--image", "Not An Image"], "--image 'Not An Image' is not an image reference"),
    (["--config", "LOOPBACK"], "http.listen '127.0.0.1:8080' listens on loopback only"),
    (["--config", "METRICS_LOOPBACK"], "metrics.listen '127.0.0.1:8443' listens on loopback only"),
])
def test_kfold_manifests_refuses_what_would_never_run_in_one_line_exit_2(tmp_path, args, words):
    import subprocess
    import sys
    cfg = tmp_path / "c.yaml"
    cfg.write_text('namespaces: [sb]\nhttp: {listen: "127.0.0.1:8080"}\n')
    (tmp_path / "m.yaml").write_text('namespaces: [sb]\nmetrics: {listen: "127.0.0.1:8443"}\n')
    args = [str(cfg) if a == "LOOPBACK" else str(tmp_path / "m.yaml") if a == "METRICS_LOOPBACK" else a for a in args]
    r = subprocess.run([sys.executable, "-m", "kfold", "manifests", *args], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and words in r.stderr and r.stderr.startswith("kfold manifests: "), r.stderr


@pytest.mark.parametrize("image", ["localhost/kfold:0.1.0", "ghcr.io/org/kfold:v1", "registry:5000/a/b",
                                   "kfold", "kfold@sha256:" + "0" * 64])
def test_ordinary_image_references_are_accepted(image):
    assert install("kfold", image)


def test_the_rbac_table_in_the_docs_is_the_rules_kfold_ships():
    from pathlib import Path
    from kfold.daemon.manifests import rbac_table
    assert rbac_table() in (Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()
