"""deploy/ (the release install and the kustomize base) is what `kfold manifests` renders now."""
import subprocess
import sys
from pathlib import Path

import yaml

from kfold import __version__

REPO = Path(__file__).resolve().parents[2]


def test_deploy_is_current():
    r = subprocess.run([sys.executable, "scripts/release_manifests.py", "--check"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_release_is_versioned_with_kfold():
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "install.yaml").read_text()) if d]
    assert {d["metadata"]["labels"]["app.kubernetes.io/version"] for d in docs} == {__version__}
    kust = yaml.safe_load((REPO / "deploy" / "kustomize" / "kustomization.yaml").read_text())
    assert kust["images"] == [{"name": "localhost/kfold", "newTag": __version__}]


def test_the_servicemonitor_scrapes_the_installs_metrics_service_on_its_https_port_only():
    from kfold.daemon.manifests import install
    doc = yaml.safe_load((REPO / "deploy" / "prometheus" / "kfold-servicemonitor.yaml").read_text())
    services = [d for d in install() if d["kind"] == "Service"]
    selected = doc["spec"]["selector"]["matchLabels"]
    (svc,) = [d for d in services if selected.items() <= d["metadata"]["labels"].items()]
    assert svc["metadata"]["name"] == "kfold-metrics" and doc["metadata"]["namespace"] == svc["metadata"]["namespace"]
    (endpoint,) = doc["spec"]["endpoints"]
    assert [p["name"] for p in svc["spec"]["ports"]] == [endpoint["port"]] == ["https"]
    assert endpoint["scheme"] == "https" and endpoint["bearerTokenFile"].endswith("/serviceaccount/token")
