"""docs/testing.md's seed table holds: each pinned row names a test that exists and whose
docstring cites the row's seed line (``seed NNN:L``), and each decided row says why."""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing.md"
SEED_ROW = re.compile(r"^\| `(\d{3}:\d+(?:-\d+)?)` \| (.+?) \| (.+) \|$")
CONTRACT_ROW = re.compile(r"^\| ([^`|][^|]*?) \| (.+?) \| `(tests/[^`]+)` \|$")


def _section(start: str, end: str) -> list[str]:
    text = DOC.read_text()
    body = text[text.index(start):]
    return body[:body.index(end)].splitlines() if end in body else body.splitlines()


def seed_rows() -> list[tuple[str, str, str]]:
    return [m.groups() for line in _section("## The seeds' rules", "### The Kubernetes contract")
            if (m := SEED_ROW.match(line))]


def contract_rows() -> list[tuple[str, str, str]]:
    return [m.groups() for line in _section("### The Kubernetes contract", "\n## ") if (m := CONTRACT_ROW.match(line))]


@lru_cache(maxsize=None)
def _functions(path: str) -> dict[str, str | None]:
    tree = ast.parse((ROOT / path).read_text())
    return {n.name: ast.get_docstring(n) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _test_of(cell: str) -> tuple[str, str]:
    m = re.fullmatch(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", cell)
    assert m, f"not a test reference: {cell}"
    return m.group(1), m.group(2) or ""


def cites(doc: str | None, cite: str) -> bool:
    return re.search(r"seed " + re.escape(cite) + r"(?![\d-])", doc or "", re.I) is not None


def test_the_table_is_there_and_counts_itself():
    rows = seed_rows()
    pinned = [r for r in rows if r[2].startswith("`")]
    assert len(rows) >= 100 and contract_rows()
    assert f"{len(rows)} rows, {len(pinned)} pinned, {len(rows) - len(pinned)} decided" in DOC.read_text()


@pytest.mark.parametrize("cite, rule, cell", seed_rows(), ids=lambda v: v if re.fullmatch(r"\d{3}:[\d-]+", str(v)) else "")
def test_each_seed_row_is_pinned_by_a_test_citing_its_line_or_decided_with_a_reason(cite, rule, cell):
    if cell.startswith("decided: "):
        assert len(cell) > 60, f"seed {cite}: a decision says why"
        return
    path, name = _test_of(cell)
    functions = _functions(path)
    assert name in functions, f"seed {cite}: no test {name} in {path}"
    assert cites(functions[name], cite), f"seed {cite}: {path}::{name}'s docstring does not cite 'seed {cite}'"


@pytest.mark.parametrize("contract, rule, ref", contract_rows(), ids=lambda v: "")
def test_each_contract_row_names_a_test_that_exists(contract, rule, ref):
    path, _, name = ref.partition("::")
    assert (ROOT / path).exists(), ref
    assert not name or name in _functions(path), f"{contract}: no test {name} in {path}"


def test_a_docstring_citing_a_nearby_line_is_not_taken_for_the_row():
    assert cites("Seed 002:200-201: a pod", "002:200-201") and not cites("seed 002:200-201", "002:200")
    assert not cites("seed 000:500", "000:50") and cites("(seed 000:50) and", "000:50")
