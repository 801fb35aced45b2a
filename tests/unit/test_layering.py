"""The fold reads no clock and does no I/O: checked by import-linter and by an AST scan for the
calls an import check cannot see (``datetime.now``, ``os.environ``, ``open``)."""
import ast
import configparser
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
IO = ROOT / "engine" / "effects" / "io"
PURE = [p for p in (ROOT / "engine").rglob("*.py") if IO not in p.parents]
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
    assert "engine/effects/timers.py" in names
    assert not any(n.startswith("engine/effects/io/") for n in names)


def pure_layers() -> list[set[str]]:
    """The layers contract's layers below the effects' I/O and above the journal: the pure engine,
    top to bottom, each layer's modules by name."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    layers = [line.strip() for line in cfg["importlinter:contract:layers"]["layers"].strip().splitlines()]
    pure = layers[layers.index("engine.effects.io") + 1:layers.index("journal")]
    return [{m.strip() for m in layer.replace("|", ":").split(":")} for layer in pure]


def test_the_pure_engine_is_ordered_snapshots_over_the_fold_over_the_machines_over_effects():
    layers = pure_layers()
    order = {m: i for i, layer in enumerate(layers) for m in layer}
    assert order["engine.snapshot"] < order["engine.core"] < order["engine.machines"] < order["engine.effects.timers"]
    assert order["engine.machines"] < order["engine.seams"] < order["engine.effects.models"]


def test_the_layers_contract_names_every_pure_module():
    """The pure engine is a stack of layers of the layers contract, its modules listed by name: a
    module of engine/ (outside engine/effects/io/) that the lists miss would go unchecked."""
    pure = set().union(*pure_layers())
    for path in PURE:
        parts = path.relative_to(ROOT).with_suffix("").parts
        if path.name == "__init__.py":
            continue   # a package's face: its modules are named
        names = {".".join(parts[:i]) for i in range(2, len(parts) + 1)}
        assert names & pure, f"{path.relative_to(ROOT)} is in no layer: add it to the pure layer of .importlinter"


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


PLANTED = {
    "a machine imports a socket": ("engine/machines/pod/__init__.py", "import socket", "engine.machines.pod -> socket"),
    "what may be issued reads the fold": ("engine/effects/timers.py", "import engine.core",
                                          "engine.effects.timers -> engine.core"),
    "a circle between two pod modules": ("engine/machines/pod/records.py", "import engine.machines.pod.acts",
                                         "No cycles are allowed in engine.machines.pod"),
    "a circle between base and a machine": ("engine/machines/base.py", "import engine.machines.repo.records",
                                            "No cycles are allowed in engine.machines"),
}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_import_contracts_catch_a_forbidden_import(tmp_path, planted):
    """The same config fails on a copy of the tree with one import planted (proves each check bites)."""
    path, line, expected = PLANTED[planted]
    for top in ("engine", "journal", "kfold"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__", "static", "data"))
    target = tmp_path / path
    target.write_text(target.read_text() + f"\n{line}\n")
    cfg = (ROOT / ".importlinter").read_text()
    (tmp_path / ".importlinter").write_text(cfg)
    proc = subprocess.run(_lint_imports() + [str(tmp_path / ".importlinter")], cwd=tmp_path,
                          capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert proc.returncode != 0
    assert expected in proc.stdout, proc.stdout


def test_no_module_repeats_its_package_or_stands_in_a_prefix_family():
    """The layout shows the packages: a module is not named after its own folder
    (``registry/registry.py``), and three or more modules of one folder sharing a ``<word>_``
    prefix are a package waiting to be made (``session_*`` was eleven)."""
    repeated, families = [], {}
    for root in ("engine", "journal", "kfold"):
        for path in (ROOT / root).rglob("*.py"):
            if path.stem == path.parent.name:
                repeated.append(path.relative_to(ROOT).as_posix())
            if "_" in path.stem and not path.stem.startswith("_"):
                families.setdefault((path.parent, path.stem.split("_")[0]), []).append(path.name)
    assert not repeated, f"modules named after their folder: {repeated}"
    crowded = {f"{d.relative_to(ROOT)}/{p}_*": names for (d, p), names in families.items() if len(names) >= 3}
    assert not crowded, f"prefix families that want a package: {crowded}"
