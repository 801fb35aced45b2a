"""Nothing in kfold, its scripts or its tests needs a Python newer than the oldest supported one,
3.11.2 (Debian 12's /usr/bin/python3; README "Two commands").

vermin checks the minor version (any 3.12+ API or syntax fails). Patch-level additions that vermin
does not know are checked here by name: the tarfile/shutil extraction ``filter=`` argument (3.11.4)
may only be passed where its absence is handled (tests/safe_tar.py).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREES = ["engine", "journal", "kfold", "scripts", "tests"]
FILTER_GUARDED = {REPO / "tests" / "safe_tar.py"}


VERMIN = [str(Path(sys.executable).with_name("vermin")), "-t=3.11-", "--no-tips", "--violations",
          "--eval-annotations"]


def test_vermin_finds_nothing_that_needs_more_than_python_3_11():
    out = subprocess.run([*VERMIN, *TREES], cwd=REPO, capture_output=True, text=True, timeout=200)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_vermin_refuses_a_python_3_12_api(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import itertools\nprint(list(itertools.batched('abcd', 2)))\n")
    out = subprocess.run([*VERMIN, str(probe)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "batched" in out.stdout, out.stdout


def _filter_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"extractall", "extract", "unpack_archive"}
            and any(k.arg == "filter" for k in node.keywords)]


def test_extraction_filters_are_passed_only_where_their_absence_is_handled():
    found = {str(p.relative_to(REPO)): lines for tree in TREES for p in (REPO / tree).rglob("*.py")
             if p not in FILTER_GUARDED and (lines := _filter_calls(p))}
    assert not found, f"filter= needs Python 3.11.4+; use tests/safe_tar.extract_all: {found}"


def test_the_scan_sees_a_filter_argument(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import tarfile\nwith tarfile.open('a') as tf:\n    tf.extractall('d', filter='data')\n")
    assert _filter_calls(probe) == [3]
