"""Layering: the cluster registry is the only constructor of a Kubernetes client in kfold.

Scans every module under engine/, journal/ and kfold/ (except kfold/registry/) for a call to a
client or client-configuration constructor, or an import of one under another name. Tests may
build clients (e2e fixtures); the product may not.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("engine", "journal", "kfold")
ALLOWED = ROOT / "kfold" / "registry"
FORBIDDEN = {
    "ApiClient", "Configuration", "new_client_from_config", "new_client_from_config_dict",
    "load_kube_config", "load_kube_config_from_dict", "load_incluster_config", "load_config",
    "KubeConfigLoader", "InClusterConfigLoader",
}


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def violations(source: str, filename: str = "<source>") -> list[str]:
    """``file:line name`` for every forbidden constructor call or renamed import in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call) and _called_name(node) in FORBIDDEN:
            found.append(f"{filename}:{node.lineno} calls {_called_name(node)}(")
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in FORBIDDEN and alias.asname not in (None, alias.name):
                    found.append(f"{filename}:{node.lineno} imports {alias.name} as {alias.asname}")
    return found


def product_modules() -> list[Path]:
    files = [p for d in SCANNED for p in (ROOT / d).rglob("*.py")]
    return sorted(p for p in files if ALLOWED not in p.parents)


def test_nothing_outside_the_registry_constructs_a_kubernetes_client():
    found = [v for p in product_modules() for v in violations(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == [], "build clients with kfold.registry (Registry.reach / Registry.home):\n" + "\n".join(found)


def test_the_scan_covers_the_product_packages():
    scanned = {p.relative_to(ROOT).parts[0] for p in product_modules()}
    assert {"engine", "journal", "kfold"} <= scanned


@pytest.mark.parametrize(
    "source",
    [
        "from kubernetes import client\nc = client.ApiClient()",
        "from kubernetes.client import Configuration\ncfg = Configuration()",
        "from kubernetes import config\nconfig.load_kube_config()",
        "import kubernetes\nkubernetes.config.load_incluster_config()",
        "from kubernetes.config import new_client_from_config\nnew_client_from_config('x')",
        "from kubernetes.client import ApiClient as Door",
    ],
    ids=["ApiClient", "Configuration", "load_kube_config", "load_incluster_config", "new_client", "renamed-import"],
)
def test_the_scan_catches_each_way_of_building_a_client(source):
    assert violations(source) != []


def test_the_scan_allows_using_a_client_handed_out_by_the_registry():
    assert violations("from kubernetes import client\napi = client.CoreV1Api(registry.reach(t, n))") == []
