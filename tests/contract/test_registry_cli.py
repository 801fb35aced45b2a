"""``kfold cluster register|list|deregister`` against the local stub apiserver."""

import argparse
import json

import pytest
import yaml

from kfold.cli.commands import cluster
from tests.contract.registry_stub import FIXED_DATE_MS, api_stub  # noqa: F401


@pytest.fixture
def kfold(tmp_path, capsys):
    """Run ``kfold cluster ...`` with the registry in tmp_path; returns (exit code, stdout, stderr)."""

    def run(*argv):
        code = cluster.main(["cluster", *argv, "--registry-dir", str(tmp_path / "reg")])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture
def kubeconfig_file(tmp_path, api_stub):
    path = tmp_path / "kubeconfig"
    path.write_text(api_stub.kubeconfig())
    return str(path)


def test_register_then_list_as_json_yaml_and_table(kfold, kubeconfig_file, api_stub):
    code, out, _ = kfold("register", "gpu-east", "--tenant", "acme", "--kubeconfig", kubeconfig_file,
                         "--provider", "lux", "--default", "-o", "json")
    assert code == 0 and json.loads(out)[0]["name"] == "gpu-east"
    code, out, _ = kfold("list", "--tenant", "acme", "-o", "json")
    [row] = json.loads(out)
    assert (row["tenant"], row["provider"], row["default"], row["registered_at"]) == ("acme", "lux", True, FIXED_DATE_MS)
    assert row["inventory"] == {"nodes": 3, "nvidia_gpu": 8, "amd_gpu": 4}
    assert yaml.safe_load(kfold("list", "-o", "yaml")[1])[0]["endpoint"] == api_stub.url
    table = kfold("list")[1].splitlines()
    assert table[0].split()[:3] == ["NAME", "TENANT", "PROVIDER"]
    assert table[1].split()[:3] == ["gpu-east", "acme", "lux"] and "2000-01-01T00:00:00Z" in table[1]
    assert "stub-token" not in "".join(table)


def test_a_namespace_bound_is_given_by_repeating_the_flag(kfold, kubeconfig_file):
    kfold("register", "shared", "--tenant", "acme", "--kubeconfig", kubeconfig_file,
          "--namespace-bound", "team-a", "--namespace-bound", "team-b")
    [row] = json.loads(kfold("list", "-o", "json")[1])
    assert row["namespaces"] == ["team-a", "team-b"] and row["inventory"] is None


def test_bad_input_exits_2_and_an_unknown_cluster_1_with_the_reason(kfold, kubeconfig_file):
    code, _, err = kfold("register", "Bad", "--tenant", "acme", "--kubeconfig", kubeconfig_file)
    assert code == 2 and "uppercase letters are not allowed" in err
    code, _, err = kfold("deregister", "ghost", "--tenant", "acme")
    assert code == 1 and "no cluster named ghost is registered for this tenant" in err


def test_deregister_removes_the_cluster(kfold, kubeconfig_file, tmp_path):
    kfold("register", "gpu-east", "--tenant", "acme", "--kubeconfig", kubeconfig_file)
    code, out, _ = kfold("deregister", "gpu-east", "--tenant", "acme")
    assert code == 0 and "credential is destroyed" in out
    assert json.loads(kfold("list", "-o", "json")[1]) == []
    assert list((tmp_path / "reg" / "credentials").iterdir()) == []


def test_another_tenants_cluster_is_not_found_from_the_cli(kfold, kubeconfig_file):
    kfold("register", "gpu-east", "--tenant", "beta", "--kubeconfig", kubeconfig_file)
    code, _, err = kfold("deregister", "gpu-east", "--tenant", "acme")
    assert code == 1 and "no cluster named gpu-east is registered for this tenant" in err
    assert json.loads(kfold("list", "--tenant", "acme", "-o", "json")[1]) == []


def test_the_registry_dir_defaults_to_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KFOLD_REGISTRY_DIR", str(tmp_path / "env-reg"))
    parser = argparse.ArgumentParser()
    cluster.register(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["cluster", "list"]).registry_dir == str(tmp_path / "env-reg")
