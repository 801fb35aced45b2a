"""deploy/prometheus/ against the Prometheus Operator's own API: its CRDs (tests/data/prometheus-operator,
unchanged from the operator's release) are applied to the control plane, then the ServiceMonitor
and the PrometheusRule pass ``kubectl apply --dry-run=server`` (the CRDs' schemas validate them;
nothing is persisted), and a ServiceMonitor that breaks the schema is refused, so the check has
teeth. (That it selects the install's metrics Service and port: tests/unit/test_release_manifests.py.)"""
from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import REPO

KUBECTL = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin" / "kubectl"
CRDS = REPO / "tests" / "data" / "prometheus-operator"
PROMETHEUS = REPO / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def kubectl(cp):
    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(KUBECTL), "--kubeconfig", cp["kubeconfig"], *args], input=stdin,
                              capture_output=True, text=True, timeout=120)
    r = run("apply", "--server-side", "--force-conflicts", "-f", str(CRDS / "monitoring.coreos.com_servicemonitors.yaml"),
            "-f", str(CRDS / "monitoring.coreos.com_prometheusrules.yaml"))
    assert r.returncode == 0, r.stderr
    for crd in ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"):
        r = run("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
        assert r.returncode == 0, r.stderr
    return run


@pytest.fixture(scope="module")
def kfold_namespace(admin):
    """The ServiceMonitor's namespace (``kfold``) exists for the dry run; made here if absent."""
    core = client.CoreV1Api(admin)
    try:
        core.create_namespace({"metadata": {"name": "kfold"}})
        made = True
    except client.ApiException as exc:
        assert exc.status == 409
        made = False
    yield "kfold"
    if made:
        core.delete_namespace("kfold")


def test_the_servicemonitor_and_the_prometheusrule_pass_a_server_side_dry_run(kubectl, kfold_namespace):
    monitoring = f"kfold-mon-{uuid.uuid4().hex[:6]}"
    assert kubectl("create", "namespace", monitoring).returncode == 0
    try:
        r = kubectl("apply", "--dry-run=server", "-f", str(PROMETHEUS / "kfold-servicemonitor.yaml"))
        assert r.returncode == 0 and "servicemonitor.monitoring.coreos.com/kfold created (server dry run)" in r.stdout, r.stderr
        r = kubectl("apply", "--dry-run=server", "-n", monitoring, "-f", str(PROMETHEUS / "kfold-prometheusrule.yaml"))
        assert r.returncode == 0 and "prometheusrule.monitoring.coreos.com/kfold created (server dry run)" in r.stdout, r.stderr
        assert kubectl("get", "servicemonitor", "-n", "kfold", "kfold").returncode != 0   # nothing persisted
    finally:
        kubectl("delete", "namespace", monitoring, "--wait=false")


def test_a_servicemonitor_the_schema_refuses_is_refused(kubectl, kfold_namespace):
    doc = yaml.safe_load((PROMETHEUS / "kfold-servicemonitor.yaml").read_text())
    doc["spec"]["endpoints"][0]["scheme"] = "htps"
    r = kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(doc))
    assert r.returncode != 0 and "scheme" in r.stderr and "htps" in r.stderr, r.stdout + r.stderr

