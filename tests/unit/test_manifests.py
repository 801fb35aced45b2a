"""The install is complete and least-privilege: no wildcards, no escalation verbs, the journal on
a volume that survives a reschedule, probes on the daemon's own endpoints."""
import yaml

from kfold.daemon.manifests import install

FORBIDDEN_VERBS = {"*", "escalate", "bind", "impersonate", "deletecollection"}


def kinds(docs):
    return sorted({d["kind"] for d in docs})


def test_the_install_has_everything_a_cluster_operator_needs():
    docs = install("kfold", "img:1")
    assert kinds(docs) == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition",
                           "Deployment", "Namespace", "PersistentVolumeClaim", "Role", "RoleBinding", "ServiceAccount"]
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition") == \
        ["repos.kfold.dev", "sessions.kfold.dev"]


def test_rbac_has_no_wildcards_and_namespaces_are_only_read_or_created():
    docs = install("kfold", "img:1")
    for d in docs:
        for rule in d.get("rules", []):
            assert "*" not in rule["resources"] and "*" not in rule.get("apiGroups", [])
            assert not FORBIDDEN_VERBS & set(rule["verbs"]), rule
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert cluster_role["rules"] == [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "create"]}]


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
                   if "leases" in r["resources"]]
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
    (svc,) = [d for d in docs if d["kind"] == "Service"]
    assert svc["spec"]["clusterIP"] == "None" and spec["serviceName"] == svc["metadata"]["name"]
