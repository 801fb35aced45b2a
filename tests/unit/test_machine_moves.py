"""Only a machine's dispatcher moves its phase: the rule, read from the pod and repo packages' source.

For each machine: ``TABLE.next`` is called in one function (``fire``), that function only by the
dispatcher (``dispatch``), the dispatcher (the one caller of ``DISPATCH.handler``) only by the
machine class, and ``phase=`` is written on a record only where the move is made (the orphan-Secret
sweep's own entry, ``SweepEntry.phase``, secrets -> pods, is no phase of ``TABLE``). A call is placed
by its module, its class ("" for a module function) and its top-level function (a nested function's
calls count as its enclosing one's). The session machine's rule is tests/unit/test_session_moves.py;
what the pod and repo moves do is tests/unit/test_pod_moves.py and test_repo_moves.py."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest

MACHINES = Path(__file__).resolve().parents[2] / "engine" / "machines"


def calls(package: str) -> Iterator[tuple[str, str, str, ast.Call]]:
    for path in sorted((MACHINES / package).glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for top in tree.body:
            fns = [(top.name, f) for f in top.body] if isinstance(top, ast.ClassDef) else [("", top)]
            for cls, fn in fns:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for node in ast.walk(fn):
                        if isinstance(node, ast.Call):
                            yield path.stem, cls, fn.name, node


def name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def on(call: ast.Call, receiver: str) -> bool:
    """``receiver.<something>(...)``."""
    return isinstance(call.func, ast.Attribute) and getattr(call.func.value, "id", "") == receiver


def callers(package: str, called: str, receiver: str = "") -> set[tuple[str, str]]:
    """(module, function) of every call of ``called`` (on ``receiver``, when given)."""
    return {(m, fn) for m, _, fn, c in calls(package) if name(c) == called and (not receiver or on(c, receiver))}


def class_callers(package: str, called: str) -> set[tuple[str, str]]:
    """(module, class or "") of every call of ``called``."""
    return {(m, cls) for m, cls, _, c in calls(package) if name(c) == called}


def phase_writers(package: str) -> set[tuple[str, str]]:
    """(module, function) of every call that passes ``phase=``."""
    return {(m, fn) for m, _, fn, c in calls(package) if any(k.arg == "phase" for k in c.keywords)}


# machine package -> (module of fire, machine class, the other places that pass ``phase=``)
RULES = {
    "pod": ("acts", "PodMachine", {("sweep", "_secrets_listed")}),
    "repo": ("ops", "RepoMachine", set()),
}


@pytest.mark.parametrize("package", sorted(RULES))
def test_the_table_is_consulted_only_by_fire_and_fire_is_called_only_by_the_dispatcher(package):
    fire_module = RULES[package][0]
    assert callers(package, "next", "TABLE") == {(fire_module, "fire")}
    assert callers(package, "fire") == {("machine", "dispatch")}


@pytest.mark.parametrize("package", sorted(RULES))
def test_the_dispatcher_alone_looks_up_handlers_and_only_the_machine_class_calls_it(package):
    assert callers(package, "handler", "DISPATCH") == {("machine", "dispatch")}
    assert class_callers(package, "dispatch") == {("machine", RULES[package][1])}


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_handler_writes_a_phase_by_hand(package):
    fire_module, _, others = RULES[package]
    assert phase_writers(package) == {(fire_module, "fire")} | others
