"""The fold reads no clock and does no I/O: checked by import-linter and by an AST scan for the
calls an import check cannot see (``datetime.now``, ``os.environ``, ``open``)."""
import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PURE = [p for p in (ROOT / "engine").rglob("*.py")
        if "effects" not in p.relative_to(ROOT / "engine").parts[:-1] or p.name in ("models.py", "__init__.py")]
FORBIDDEN_ATTRS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
                   ("os", "environ"), ("os", "getenv"), ("time", "time"), ("time", "monotonic")}
FORBIDDEN_CALLS = {"open", "input", "print"}


def offences(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in FORBIDDEN_ATTRS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.func.id}()")
    return found


def test_the_scan_covers_the_machines():
    names = {p.relative_to(ROOT).as_posix() for p in PURE}
    assert "engine/core.py" in names and "engine/machines/base.py" in names
    assert "engine/effects/models.py" in names
    assert not any(n.startswith("engine/effects/executor") for n in names)


@pytest.mark.parametrize("path", PURE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pure_module_reads_no_clock_environment_or_files(path):
    assert offences(path) == []


def test_the_scan_catches_a_wall_clock_read(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from datetime import datetime\nx = datetime.now()\n")
    assert offences_at(bad) == ["bad.py:2 datetime.now"]


def offences_at(path):
    tree = ast.parse(path.read_text())
    return [f"{path.name}:{n.lineno} {n.value.id}.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (n.value.id, n.attr) in FORBIDDEN_ATTRS]


def _lint_imports() -> list[str]:
    """import-linter's own command, run by this interpreter (the venv's, whether or not its bin/
    is on PATH). ``python -m importlinter.cli`` would exit 0 without checking anything."""
    return [sys.executable, "-c",
            "import sys; from importlinter.cli import lint_imports_command as c; sys.argv[0] = 'lint-imports'; sys.exit(c())"]


def test_import_contracts_hold():
    proc = subprocess.run(_lint_imports() + [str(ROOT / ".importlinter")], cwd=ROOT,
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_contracts_catch_a_forbidden_import(tmp_path):
    """The same config fails when a machine imports the Kubernetes client (proves the check bites)."""
    pkg = tmp_path / "engine"
    (pkg / "machines").mkdir(parents=True)
    (pkg / "effects").mkdir()
    for d in (pkg, pkg / "machines", pkg / "effects"):
        (d / "__init__.py").write_text("")
    for module in ("backoff", "core", "labels", "repo_names", "seams", "snapshot"):
        (pkg / f"{module}.py").write_text("")
    (pkg / "effects" / "models.py").write_text("")
    for m in ("pod", "repo", "session"):
        (pkg / "machines" / m).mkdir()
        (pkg / "machines" / m / "__init__.py").write_text("")
        (pkg / "machines" / m / "machine.py").write_text("")
    (pkg / "machines" / "pod" / "machine.py").write_text("import socket\n")
    for extra in ("journal", "kfold"):
        (tmp_path / extra).mkdir()
        (tmp_path / extra / "__init__.py").write_text("")
    cfg = (ROOT / ".importlinter").read_text()
    (tmp_path / ".importlinter").write_text(cfg)
    proc = subprocess.run(_lint_imports() + [str(tmp_path / ".importlinter")], cwd=tmp_path,
                          capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert proc.returncode != 0
    assert "engine.machines.pod.machine -> socket" in proc.stdout
