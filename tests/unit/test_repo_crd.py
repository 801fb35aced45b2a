"""The Repo CRD shipped as package data (issue 3, rule 1), and the repo modules' purity."""
from __future__ import annotations

import ast
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "kfold" / "data" / "crds" / "repos.yaml"
FORBIDDEN = {"time", "asyncio", "os", "random", "kubernetes", "aiosqlite", "sqlite3", "socket", "subprocess"}


def test_the_crd_declares_kfold_dev_v1alpha1_repo_with_status_and_columns():
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "repos.kfold.dev" and spec["group"] == "kfold.dev"
    assert spec["scope"] == "Namespaced" and spec["names"]["kind"] == "Repo" and spec["names"]["plural"] == "repos"
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    props = version["schema"]["openAPIV3Schema"]["properties"]
    assert props["spec"]["properties"]["refreshInterval"]["default"] == "5m"
    assert props["spec"]["properties"]["secretRef"]["required"] == ["name"]
    node = props["status"]["properties"]["nodes"]["items"]["properties"]
    assert set(node) == {"node", "present", "synced", "attempted", "lastAttempt", "lastFetched", "lastError"}
    assert node["attempted"]["enum"] == ["Probe", "Clone", "Fetch"]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["URL", "Bound", "Last-Attached", "Age"]


def test_the_repo_machine_modules_import_no_io_and_read_no_clock():
    for name in ("machines/repo/machine", "repo_names", "machines/repo/creds", "machines/repo/bindings",
                 "machines/repo/ops", "machines/repo/records"):
        tree = ast.parse((ROOT / "engine" / f"{name}.py").read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & FORBIDDEN, f"{name}.py imports {imported & FORBIDDEN}"
        clocks = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                  and (n.attr in ("utcnow", "today") or (n.attr == "now" and ast.unparse(n.value) != "ctx"))]
        assert clocks == [], f"{name}.py reads a clock: {clocks}"
