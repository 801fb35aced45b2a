"""Only the one dispatcher moves a phase: the rule, read from the pod and repo packages' source.

``Table.next`` is called in one function (``base.moved``, used by ``base.fire``), ``fire`` only by
``Dispatch.run``, and in each machine package ``DISPATCH.run`` only by the machine class (no handler
looks up another, none calls ``fire`` or the phase table), and ``phase=`` is written on a record
nowhere in the package (the orphan-Secret sweep's own entry, ``SweepOp.phase``, secrets -> pods,
is no phase of ``TABLE``). A call is placed
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
    paths = [MACHINES / package] if package.endswith(".py") else sorted((MACHINES / package).glob("*.py"))
    for path in paths:
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


# machine package -> (machine class, the places that pass ``phase=`` for a sub-state of their own)
RULES = {
    "pod": ("PodMachine", {("sweep", "secrets_listed")}),
    "repo": ("RepoMachine", set()),
}


def test_the_phase_table_is_consulted_only_by_moved_and_fire_is_called_only_by_the_table_run():
    assert callers("base.py", "next", "table") == {("base", "moved")}
    assert callers("base.py", "moved") == {("base", "fire")}
    assert callers("base.py", "fire") == {("base", "run"), ("base", "fire")}   # an iterator's moves, in turn
    assert {(m, c) for m, c, fn, call in calls("base.py") if name(call) == "fire" and fn == "run"} == {("base", "Dispatch")}


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_handler_consults_the_phase_table_or_makes_a_move(package):
    assert callers(package, "next", "TABLE") == set()
    assert callers(package, "fire") == set() and callers(package, "moved") == set()


@pytest.mark.parametrize("package", sorted(RULES))
def test_only_the_machine_class_runs_the_table_and_nothing_looks_up_a_handler_by_hand(package):
    assert callers(package, "handler", "DISPATCH") == set()
    assert class_callers(package, "run") == {("machine", RULES[package][0])}


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_handler_writes_a_phase_by_hand(package):
    assert phase_writers(package) == RULES[package][1]


SUB_STATES = {"phase", "stage", "step", "state"}


def raw_sub_state_tests(package: str) -> list[str]:
    """``<record>.phase == "..."`` (``!=``, ``in``) and the like: a sub-state chosen by a string."""
    found = []
    for path in sorted((MACHINES / package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr in SUB_STATES
                    and getattr(node.left.value, "id", "") != "rec"   # an outcome's step names the request, not a state
                    and any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                            or isinstance(c, (ast.Tuple, ast.List, ast.Set)) for c in node.comparators)):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_sub_state_is_chosen_by_a_raw_string_test_outside_the_tables(package):
    assert raw_sub_state_tests(package) == []
