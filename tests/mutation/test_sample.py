"""A seeded sample of mutants of engine/machines, journal/ and kfold/registry/bounds.py must die.

scripts/mutation.py runs the whole set (docs/testing.md, "Mutation testing"); this is its bounded
form for CI: the same tool and test selections, SAMPLE mutants a package drawn with SEED, and no
survivor allowed (those tests/mutation/equivalent.txt explains and those survivors.txt lists are
left out of the draw, never redrawn).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = 34
SAMPLE = 10   # a package: 30 mutants in all


@pytest.mark.timeout(900)
def test_a_seeded_sample_of_mutants_is_killed_by_the_suite(tmp_path):
    report = tmp_path / "report.md"
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "mutation.py"), "--sample", str(SAMPLE), "--seed", str(SEED),
         "--quick", "--workers", "2", "--work", str(tmp_path / "work"), "--report", str(report)],
        capture_output=True, text=True, timeout=880)
    text = report.read_text() if report.exists() else ""
    assert res.returncode == 0, (
        f"mutants survived (seed {SEED}; logs in {tmp_path / 'work'}):\n{text}\n{res.stderr[-3000:]}")
    rows = {cells[0]: cells[1:] for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| "))}
    for package in ("machines", "journal", "bounds"):
        mutants, killed, _, not_killed, _ = rows[package]
        assert int(not_killed) == 0 and int(killed) == int(mutants) >= SAMPLE // 2, text
