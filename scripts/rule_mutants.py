#!/usr/bin/env python3
"""Mutants of rules, not of tokens: a small libcst operator set beside mutmut's.

    python scripts/rule_mutants.py --list [--package engine/machines]
    python scripts/rule_mutants.py --run [--package engine/machines] [--only ID ...]
                                   [--results FILE] [--timeout S] [--tests PATH ...]

mutmut mutates tokens inside functions; it never touches a module-level table and seldom breaks a
rule the way a person would. The operators here each break one rule, in one place:

- ``row-drop``      drop one row of a ``Dispatch(...)`` or ``Table(...)`` declared at module level,
                    or one entry of a module-level dict of handlers;
- ``row-retarget``  a ``Dispatch`` row's handler replaced by ``ignore`` (the event silently
                    dropped), or by the next row's handler when it is ``ignore`` already; a
                    ``Table`` row's destination replaced by the next state; a handler dict entry
                    pointing at the next entry's handler;
- ``branch-swap``   the two bodies of an ``if``/``else`` (or of a conditional expression) swapped;
- ``member-drop``   one member dropped from a literal tuple, list or set a value is tested
                    against (``x in ("ok", "not_found")`` -> ``x in ("ok",)``), or from a ``case``
                    of alternatives;
- ``precondition-drop``  one of ``uid``, ``rv``, ``resource_version``, ``preconditions`` left
                    out of an effect a handler emits (a delete or replace fenced by less);
- ``other-clock``   ``ctx.now_on(cluster)`` replaced by ``ctx.now`` (the folded record's time,
                    whichever cluster's clock stamped it), and ``.home`` and ``.target`` swapped
                    in its argument;
- ``selector-widen`` a ``label_selector=``/``field_selector=`` argument replaced by ``""``.

A mutant is judged in a copy of the tree (``build/rule-mutants/``) by the tests given (default:
``tests/unit`` and ``tests/scenario``, the real-clock variant of each scenario, stopping at the
first failure), killed when they fail. Results (one JSON object per mutant: id, operator, file,
line, the changed source line(s), verdict, seconds) go to ``--results`` as they come, so an
interrupted run resumes: a mutant already judged on the same source (its file's hash) is skipped.
Exit 1 when a mutant survives, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

ROOT = Path(__file__).resolve().parent.parent
FENCES = ("uid", "rv", "resource_version", "preconditions")
SELECTORS = ("label_selector", "field_selector")
TABLE_CALLS = {"Dispatch": 1, "Table": 2}   # constructor -> index of its rows argument


@dataclass(frozen=True)
class Mutant:
    id: str
    operator: str
    file: str
    line: int
    before: str
    after: str


# -- finding the places -----------------------------------------------------------------------------
class _Sites(cst.CSTVisitor):
    """Every node an operator applies to, with the operator's name and a replacement builder."""
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.sites: list[tuple[str, cst.CSTNode, Callable[[], cst.CSTNode | cst.RemovalSentinel]]] = []
        self._depth = 0   # function nesting: 0 = module level

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth -= 1

    # tables ------------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        name = _name(node.func)
        if self._depth == 0 and name in TABLE_CALLS and len(node.args) > TABLE_CALLS[name]:
            rows = node.args[TABLE_CALLS[name]].value
            if isinstance(rows, (cst.List, cst.Tuple)):
                self._table_rows(name, rows, node)
        if name == "now_on" and isinstance(node.func, cst.Attribute) and node.args:
            self._clock(node)
        if name == "emit" or (name or "").endswith("Object") or any(
                (_name(a.value) or "").endswith("Object") for a in node.args if a.keyword is None):
            self._fences(node)   # a request (an effect, or a call sending one), not a message or record
        self._selectors(node)

    def _table_rows(self, kind: str, rows: cst.List | cst.Tuple, call: cst.Call) -> None:
        elements = list(rows.elements)
        for i, el in enumerate(elements):
            if not isinstance(el.value, cst.Tuple) or len(el.value.elements) != 3:
                continue
            self.sites.append(("row-drop", el, lambda: cst.RemovalSentinel.REMOVE))
            target = el.value.elements[2].value
            if kind == "Dispatch":
                other = cst.Name("ignore")
                if _name(target) == "ignore":
                    other = next((e.value.elements[2].value for e in elements[i + 1:] + elements[:i]
                                  if isinstance(e.value, cst.Tuple) and len(e.value.elements) == 3
                                  and _name(e.value.elements[2].value) not in ("ignore", None)), None)
                if other is not None:
                    self.sites.append(("row-retarget", target, lambda o=other: o))
            elif isinstance(target, cst.SimpleString):
                states = _states(call)
                if target.evaluated_value in states:
                    nxt = states[(states.index(target.evaluated_value) + 1) % len(states)]
                    self.sites.append(("row-retarget", target, lambda n=nxt: cst.SimpleString(json.dumps(n))))

    def visit_Dict(self, node: cst.Dict) -> None:
        """A module-level dict whose values are all plain names: a handler table."""
        if self._depth != 0:
            return
        entries = [e for e in node.elements if isinstance(e, cst.DictElement)]
        if len(entries) < 2 or not all(isinstance(e.value, cst.Name) for e in entries):
            return
        for i, e in enumerate(entries):
            self.sites.append(("row-drop", e, lambda: cst.RemovalSentinel.REMOVE))
            nxt = entries[(i + 1) % len(entries)].value
            if nxt.value != e.value.value:
                self.sites.append(("row-retarget", e.value, lambda n=nxt: n))

    # branches ----------------------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        if self._depth and isinstance(node.orelse, cst.Else):
            self.sites.append(("branch-swap", node, lambda n=node: n.with_changes(
                body=n.orelse.body, orelse=n.orelse.with_changes(body=n.body))))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self._depth:
            self.sites.append(("branch-swap", node, lambda n=node: n.with_changes(body=n.orelse, orelse=n.body)))

    # members -----------------------------------------------------------------------------------
    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self._depth:
            return
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)):
                self._members(target.comparator)

    def _members(self, seq: cst.BaseExpression) -> None:
        if not isinstance(seq, (cst.Tuple, cst.List, cst.Set)) or len(seq.elements) < 2:
            return
        for i in range(len(seq.elements)):
            def drop(s=seq, i=i) -> cst.CSTNode:
                kept = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT) for j, e in enumerate(s.elements) if j != i]
                if isinstance(s, cst.Tuple) and len(kept) == 1:
                    kept = [kept[0].with_changes(comma=cst.Comma())]
                return s.with_changes(elements=kept)
            self.sites.append(("member-drop", seq, drop))

    def visit_MatchOr(self, node: cst.MatchOr) -> None:
        for i in range(len(node.patterns)):
            def drop(n=node, i=i) -> cst.CSTNode:
                kept = [p.with_changes(separator=cst.MaybeSentinel.DEFAULT) for j, p in enumerate(n.patterns) if j != i]
                return kept[0].pattern if len(kept) == 1 else n.with_changes(patterns=kept)
            self.sites.append(("member-drop", node, drop))

    # requests ------------------------------------------------------------------------------------
    def _fences(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in FENCES:
                self.sites.append(("precondition-drop", arg, lambda: cst.RemovalSentinel.REMOVE))

    def _selectors(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in SELECTORS and not (
                    isinstance(arg.value, cst.SimpleString) and arg.value.evaluated_value == ""):
                self.sites.append(("selector-widen", arg.value, lambda: cst.SimpleString('""')))

    def _clock(self, node: cst.Call) -> None:
        owner = node.func.value  # type: ignore[attr-defined]
        self.sites.append(("other-clock", node, lambda o=owner: cst.Attribute(value=o, attr=cst.Name("now"))))
        arg = node.args[0].value
        if isinstance(arg, cst.Attribute) and arg.attr.value in ("home", "target"):
            swapped = "target" if arg.attr.value == "home" else "home"
            self.sites.append(("other-clock", arg, lambda a=arg, s=swapped: a.with_changes(attr=cst.Name(s))))


def _name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _states(call: cst.Call) -> list[str]:
    """A ``Table``'s states when its second argument spells them as strings (``*BUSY`` skipped)."""
    seq = call.args[1].value
    if not isinstance(seq, (cst.List, cst.Tuple)):
        return []
    return [e.value.evaluated_value for e in seq.elements if isinstance(e.value, cst.SimpleString)]


class _Replace(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, build: Callable[[], cst.CSTNode | cst.RemovalSentinel]) -> None:
        self.target, self.build = target, build

    def on_leave(self, original, updated):  # type: ignore[override]
        return self.build() if original is self.target else updated


# -- mutants ----------------------------------------------------------------------------------------
@dataclass
class Site:
    """One place an operator applies; ``render`` makes its mutant (None: no valid mutant there)."""
    id: str
    operator: str
    file: str
    line: int
    source: str
    module: cst.Module
    node: cst.CSTNode
    build: Callable[[], cst.CSTNode | cst.RemovalSentinel]

    def render(self) -> tuple[Mutant, str] | None:
        try:
            mutated = self.module.visit(_Replace(self.node, self.build)).code
            compile(mutated, self.file, "exec")
        except Exception:   # a replacement libcst cannot render here, or that does not compile
            return None
        if mutated == self.source:
            return None
        before, after = _changed(self.source, mutated)
        return Mutant(self.id, self.operator, self.file, self.line, before, after), mutated


def sites_of(path: Path) -> list[Site]:
    """Every site of every operator in ``path``, named ``file:line:operator:n`` (n counts the
    operator's sites in the file, so a name is stable while the file is unchanged)."""
    source = path.read_text()
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    finder = _Sites()
    wrapper.visit(finder)
    positions = wrapper.resolve(PositionProvider)
    rel = str(path.relative_to(ROOT))
    counts: dict[str, int] = {}
    out = []
    for operator, node, build in finder.sites:
        counts[operator] = counts.get(operator, 0) + 1
        line = positions[node].start.line
        out.append(Site(f"{rel}:{line}:{operator}:{counts[operator]}", operator, rel, line, source, module, node, build))
    return out


def mutants_of(path: Path) -> Iterator[tuple[Mutant, str]]:
    seen: set[str] = set()
    for site in sites_of(path):
        got = site.render()
        if got is not None and got[1] not in seen:
            seen.add(got[1])
            yield got


def _changed(a: str, b: str) -> tuple[str, str]:
    old, new = [], []
    for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0):
        if line.startswith("-") and not line.startswith("---"):
            old.append(line[1:].strip())
        elif line.startswith("+") and not line.startswith("+++"):
            new.append(line[1:].strip())
    return " / ".join(old)[:300], " / ".join(new)[:300]


def all_sites(package: str) -> list[Site]:
    return [site for path in sorted((ROOT / package).rglob("*.py")) for site in sites_of(path)]


# -- judging ----------------------------------------------------------------------------------------
def _tree(work: Path) -> Path:
    """A copy of the sources and tests to mutate in (refreshed from the repository each run)."""
    for part in ("engine", "journal", "kfold", "tests", "scripts", "deploy", "docs", "examples"):
        dest = work / part
        if dest.exists():
            shutil.rmtree(dest)
        if (ROOT / part).exists():
            shutil.copytree(ROOT / part, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "constraints.txt", "README.md", "CHANGELOG.md"):
        shutil.copy2(ROOT / name, work / name)
    return work


def judge(work: Path, m: Mutant, mutated: str, stages: list[str], timeout: int) -> tuple[str, str]:
    """Run each stage (a test path; the next only when the one before passed): killed at the first
    failure, survived when every stage passed."""
    path = work / m.file
    original = path.read_text()
    path.write_text(mutated)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        for stage in stages:
            cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "not frozen",
                   *stage.split()]
            try:
                r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                return "killed", f"timeout in {stage}"
            if r.returncode not in (0, 5):
                failed = next((ln[7:] for ln in r.stdout.splitlines() if ln.startswith(("FAILED ", "ERROR "))), "")
                return "killed", failed or (r.stdout.strip().splitlines() or ["?"])[-1][:200]
        return "survived", ""
    finally:
        path.write_text(original)


def _interleaved(found: list[Site]) -> list[Site]:
    """Round robin over the operators (each in file order), so a run cut short has judged a like
    share of each."""
    by: dict[str, list[Site]] = {}
    for item in found:
        by.setdefault(item.operator, []).append(item)
    out = []
    for i in range(max((len(v) for v in by.values()), default=0)):
        out.extend(v[i] for v in by.values() if i < len(v))
    return out


def _hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", default="engine/machines")
    ap.add_argument("--list", action="store_true", help="print the mutants, judge nothing")
    ap.add_argument("--run", action="store_true", help="judge every mutant not judged yet")
    ap.add_argument("--only", nargs="*", default=[], help="mutant ids (or an operator name) to judge")
    ap.add_argument("--results", default=str(ROOT / "build" / "rule-mutants" / "results.jsonl"))
    ap.add_argument("--tests", nargs="*", default=["tests/scenario", "tests/unit"],
                    help="stages (each one or more test paths, space-separated), run in turn while they pass")
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args(argv)
    if not (ROOT / args.package).is_dir() or args.list == args.run:
        print("rule_mutants: give --list or --run, and a --package directory of the repository", file=sys.stderr)
        return 2
    found = _interleaved(all_sites(args.package))
    if args.only:
        found = [site for site in found if site.id in args.only or site.operator in args.only]
    if args.list:
        n = 0
        for site in found:
            if (got := site.render()) is not None:
                n += 1
                print(f"{got[0].id}\t{got[0].before}  ->  {got[0].after}")
        print(f"{n} mutants", file=sys.stderr)
        return 0
    results = Path(args.results)
    results.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if results.exists():
        for line in results.read_text().splitlines():
            rec = json.loads(line)
            done[(rec["id"], rec["hash"])] = rec
    work = _tree(results.parent / "tree")
    survived = 0
    with results.open("a") as out:
        seen: set[str] = set()
        for site in found:
            key = (site.id, _hash(ROOT / site.file))
            if key in done:
                survived += done[key]["verdict"] == "survived"
                continue
            got = site.render()
            if got is None or got[1] in seen:
                continue
            m, mutated = got
            seen.add(mutated)
            t0 = time.monotonic()
            verdict, why = judge(work, m, mutated, args.tests, args.timeout)
            rec = {**asdict(m), "hash": key[1], "verdict": verdict, "by": why, "seconds": round(time.monotonic() - t0, 1)}
            out.write(json.dumps(rec) + "\n")
            out.flush()
            survived += verdict == "survived"
            print(f"{verdict:9} {m.id}  {m.before}  ->  {m.after}  {why}", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
