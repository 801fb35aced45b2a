"""One name per concept, one place per constant: what issue 12 found defined two or three times
with different meanings stays defined once."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for d in ("engine", "journal", "kfold") for p in (ROOT / d).rglob("*.py"))


def _strings(tree: ast.AST) -> list[str]:
    """Every string constant in code, docstrings left out."""
    docs = {id(body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (body := node.body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_the_managed_by_label_is_spelt_in_one_place():
    spelt = [p.relative_to(ROOT).as_posix() for p in SOURCES
             if any("app.kubernetes.io/managed-by" in s for s in _strings(ast.parse(p.read_text())))]
    assert spelt == ["engine/labels.py"]



def test_each_class_name_is_defined_once():
    defined: dict[str, list[str]] = {}
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(p.relative_to(ROOT).as_posix())
    twice = {name: where for name, where in defined.items() if len(where) > 1}
    assert twice == {}, twice


def test_the_repo_machine_reads_reply_addresses_from_snapshots_that_spelt_them_machine():
    from engine.machines.base import Reply
    assert Reply.model_validate({"machine": "session", "key": "local/ns/s"}) == Reply(to="session", key="local/ns/s")
