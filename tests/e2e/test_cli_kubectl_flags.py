"""kubectl's flags on the real apiserver: ``kfold repos`` picks the kubeconfig from ``--kubeconfig``
or ``$KUBECONFIG`` (its first existing file), the context from ``--context`` and the namespace from
that context when ``-n`` is not given, and lists the Repo created there (``-o json|yaml|wide``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

FILE_FIELDS = ("certificate-authority", "client-certificate", "client-key")


def _kubeconfig_with_namespace_context(source: str, namespace: str, out: Path) -> Path:
    """A copy of the admin kubeconfig (file references made absolute) whose current context points
    nowhere and whose context ``e2e-ns`` is the admin's, with ``namespace``."""
    doc = yaml.safe_load(Path(source).read_text())
    base = Path(source).resolve().parent
    for section, body in (("clusters", "cluster"), ("users", "user")):
        for item in doc.get(section) or ():
            for f in FILE_FIELDS:
                if item.get(body, {}).get(f) and not os.path.isabs(item[body][f]):
                    item[body][f] = str(base / item[body][f])
    admin = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])
    doc["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    doc["contexts"] += [{"name": "e2e-ns", "context": {**admin["context"], "namespace": namespace}},
                        {"name": "nowhere", "context": {**admin["context"], "cluster": "nowhere"}}]
    doc["current-context"] = "nowhere"
    out.write_text(yaml.safe_dump(doc))
    return out


def _repos(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run([sys.executable, "-m", "kfold", "repos", *argv], capture_output=True, text=True,
                          timeout=60, env={**base, **(env or {})})


def test_repos_reads_the_cluster_like_kubectl(admin, cp, namespace, tmp_path):
    from kubernetes import client
    client.CustomObjectsApi(admin).create_namespaced_custom_object(
        "kfold.dev", "v1alpha1", namespace, "repos",
        {"apiVersion": "kfold.dev/v1alpha1", "kind": "Repo", "metadata": {"name": "cli-flags"},
         "spec": {"url": "https://git.example/cli-flags.git"}})
    kc = _kubeconfig_with_namespace_context(cp["kubeconfig"], namespace, tmp_path / "kubeconfig")

    by_flag = _repos("--kubeconfig", str(kc), "--context", "e2e-ns", "-o", "json")
    assert by_flag.returncode == 0, by_flag.stderr
    assert [(r["namespace"], r["key"]) for r in json.loads(by_flag.stdout)] == [(namespace, "cli-flags")]

    by_env = _repos("--context", "e2e-ns", "-n", namespace, "-o", "yaml",
                    env={"KUBECONFIG": f"{tmp_path / 'absent'}:{kc}"})
    assert by_env.returncode == 0, by_env.stderr
    assert [r["key"] for r in yaml.safe_load(by_env.stdout)] == ["cli-flags"]

    wide = _repos("--kubeconfig", str(kc), "--context", "e2e-ns", "-o", "wide")
    assert wide.returncode == 0 and "IDENTITY" in wide.stdout.splitlines()[0] and "cli-flags" in wide.stdout

    nowhere = _repos("--kubeconfig", str(kc), "-n", namespace)   # the current context: a closed port
    assert nowhere.returncode == 1 and "Traceback" not in nowhere.stderr
    assert len(nowhere.stderr.strip().splitlines()) == 1 and "connection refused" in nowhere.stderr.lower()
