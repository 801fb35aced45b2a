"""The package says its license: pyproject.toml's SPDX expression (PEP 639, what pip, PyPI and SBOM
tools read from the built metadata's License-Expression) is the one LICENSE holds."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_names_the_license_the_license_file_holds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    head = (ROOT / "LICENSE").read_text().split()
    assert head[:4] == ["Apache", "License", "Version", "2.0,"]

