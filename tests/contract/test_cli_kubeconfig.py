"""``kfold repos`` reaches a cluster as kubectl does: ``--kubeconfig``, else ``$KUBECONFIG``'s first
existing file, else ``~/.kube/config``; ``--context`` picks the context; the namespace is ``-n``,
else the context's; ``-o`` prints a table, a wider one, JSON or YAML. Against a recording stub
apiserver over real HTTP (which namespace was asked is read from its request log)."""
from __future__ import annotations

import json

import pytest
import yaml

from kfold.cli import main
from tests.contract.stub_apiserver import StubApiServer

REPO = {"apiVersion": "kfold.dev/v1alpha1", "kind": "Repo",
        "metadata": {"name": "r-1", "namespace": "team-a", "resourceVersion": "1",
                     "annotations": {"kfold.dev/repo-identity": "sha256:abc"}},
        "spec": {"url": "https://git.example/project.git"},
        "status": {"nodes": [{"node": "n1", "present": True, "synced": True}]}}


def _path(ns: str) -> str:
    return f"/apis/kfold.dev/v1alpha1/namespaces/{ns}/repos"


@pytest.fixture
def stub():
    with StubApiServer() as s:
        for ns in ("team-a", "team-b", "default"):
            s.answer("GET", _path(ns), 200, {"kind": "RepoList", "apiVersion": "kfold.dev/v1alpha1",
                                             "metadata": {"resourceVersion": "1"},
                                             "items": [dict(REPO, metadata=dict(REPO["metadata"], namespace=ns))]})
        yield s


def _kubeconfig(path, good: str, current: str = "dead"):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}},
                     {"name": "good", "context": {"cluster": "good", "user": "u", "namespace": "team-a"}}],
        "clusters": [{"name": "dead", "cluster": {"server": "http://127.0.0.1:1"}},
                     {"name": "good", "cluster": {"server": good}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path


def _asked(stub) -> list[str]:
    return [r.path for r in stub.requests]


def test_context_and_its_namespace_are_used(stub, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = _kubeconfig(tmp_path / "kc.yaml", stub.url)
    assert main(["repos", "--kubeconfig", str(kc), "--context", "good", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert _asked(stub) == [_path("team-a")] and [r["key"] for r in rows] == ["r-1"]
    assert main(["repos", "--kubeconfig", str(kc), "--context", "good", "-n", "team-b"]) == 0
    assert _asked(stub)[-1] == _path("team-b")
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["CLUSTER", "NAMESPACE", "KEY"] and "team-b" in out


def test_kubeconfig_env_first_existing_file_and_its_current_context(stub, tmp_path, capsys, monkeypatch):
    kc = _kubeconfig(tmp_path / "kc.yaml", stub.url, current="good")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{kc}")
    assert main(["repos", "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)[0]["namespace"] == "team-a"
    assert _asked(stub) == [_path("team-a")]


def test_wide_adds_identity_and_an_unknown_context_is_one_clear_line(stub, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = _kubeconfig(tmp_path / "kc.yaml", stub.url)
    assert main(["repos", "--kubeconfig", str(kc), "--context", "good", "-o", "wide"]) == 0
    out = capsys.readouterr().out
    assert "IDENTITY" in out.splitlines()[0] and "sha256:abc" in out
    assert main(["repos", "--kubeconfig", str(kc), "--context", "nope"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'nope'" in err and "Traceback" not in err


def test_an_exec_plugin_is_refused_without_allow_exec(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = tmp_path / "exec.yaml"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                  "command": "gke-gcloud-auth-plugin"}}}]}))
    assert main(["repos", "--kubeconfig", str(kc), "-n", "x"]) == 1
    assert "--allow-exec" in capsys.readouterr().err


def test_an_unreachable_apiserver_is_one_line_naming_server_and_context(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = _kubeconfig(tmp_path / "kc.yaml", "http://127.0.0.1:9")   # current context "dead": port 1
    assert main(["repos", "--kubeconfig", str(kc), "-n", "x"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"kfold repos: {kc}: cannot reach the apiserver at http://127.0.0.1:1 (context dead of {kc}): "
                   "connection refused")
