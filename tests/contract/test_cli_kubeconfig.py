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
    assert main(["repos", "--kubeconfig", str(kc), "--context", "nope"]) == 2   # bad input: as kfold run
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'nope'" in err and "Traceback" not in err


def _exec_kubeconfig(path, command: str, server: str = "http://127.0.0.1:1"):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                  "command": command, "interactiveMode": "Never"}}}]}))
    return path


def test_an_exec_plugin_is_refused_without_allow_exec(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = _exec_kubeconfig(tmp_path / "exec.yaml", "gke-gcloud-auth-plugin")
    assert main(["repos", "--kubeconfig", str(kc), "-n", "x"]) == 2
    assert "--allow-exec" in capsys.readouterr().err


FAILING_PLUGIN = """#!/bin/sh
echo "F1207 15:14:24.509609   32446 cred.go:145] print credential failed: you are not logged in" >&2
for i in 1 2 3 4 5 6 7 8 9; do echo "  detail line $i of the plugin's advice" >&2; done
exit 1
"""


def _plugin(tmp_path, script: str):
    plugin = tmp_path / "auth-plugin"
    plugin.write_text(script)
    plugin.chmod(0o755)
    return str(plugin)


@pytest.mark.parametrize("command", ["repos", "run"])
def test_a_failing_exec_plugin_is_one_line_and_exit_2(tmp_path, command):
    """The client library logs the plugin's whole stderr and goes on without credentials; kfold
    says it in one line (the plugin, its first line) and stops before any request."""
    import subprocess
    import sys
    kc = _exec_kubeconfig(tmp_path / "exec.yaml", _plugin(tmp_path, FAILING_PLUGIN))
    config = tmp_path / "config.yaml"
    config.write_text(f"namespaces: [x]\njournal: {{path: {tmp_path / 'j.db'}}}\n")
    argv = {"repos": ["repos", "-n", "x"], "run": ["run", "--config", str(config)]}[command]
    done = subprocess.run([sys.executable, "-m", "kfold", *argv, "--kubeconfig", str(kc), "--allow-exec"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"kfold {command}: ")
    assert (f"home kubeconfig {kc}: refused: user 'u': its exec credential plugin {tmp_path / 'auth-plugin'} failed: "
            "process returned 1. print credential failed: you are not logged in; run it yourself") in line
    assert "detail line" not in line and not (tmp_path / "j.db").exists()


def test_a_missing_exec_plugin_says_it_is_not_on_path(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = _exec_kubeconfig(tmp_path / "exec.yaml", "kfold-test-no-such-plugin")
    assert main(["repos", "--kubeconfig", str(kc), "-n", "x", "--allow-exec"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "its exec credential plugin kfold-test-no-such-plugin failed: not found on PATH" in line


def test_a_working_exec_plugin_token_is_sent(stub, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    token = json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                        "status": {"token": "plugin-token"}})
    kc = _exec_kubeconfig(tmp_path / "exec.yaml", _plugin(tmp_path, f"#!/bin/sh\necho '{token}'\n"), stub.url)
    assert main(["repos", "--kubeconfig", str(kc), "-n", "team-a", "--allow-exec", "-o", "json"]) == 0
    assert [r["key"] for r in json.loads(capsys.readouterr().out)] == ["r-1"]
    assert {k.lower(): v for k, v in stub.requests[-1].headers.items()}["authorization"] == "Bearer plugin-token"


def test_an_unreachable_apiserver_is_one_line_naming_server_and_context(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = _kubeconfig(tmp_path / "kc.yaml", "http://127.0.0.1:9")   # current context "dead": port 1
    assert main(["repos", "--kubeconfig", str(kc), "-n", "x"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"kfold repos: {kc}: cannot reach the apiserver at http://127.0.0.1:1 (context dead of {kc}): "
                   "connection refused")
