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
