"""Strata of mutmut's mutants, a stratified draw, and the score's estimate with its 95% interval.

A mutant's stratum is (source file, operator class). mutmut 3 writes each mutant as a function
``x_<name>__mutmut_<n>`` beside ``x_<name>__mutmut_orig`` in its trampolined copy; the operator
class is read from the first tokens where the two differ:

    string    a string literal changed           number    a number changed
    constant  True/False/None swapped in or out  operator  an operator or keyword changed
    removal   tokens removed (an argument, ...)  to_none   something replaced by None
    condition a test forced (``and False``, ``or True``)
    name      one name replaced by another (``partition`` -> ``rpartition``)
    other     anything else

These are this project's labels of what a mutant did, not mutmut's operator names (its generator
does not record which operator made a mutant).

The draw allocates ``n`` mutants to strata in proportion to their size (largest remainder, at least
one a stratum while ``n`` allows), each stratum drawn with its own seeded generator, so a larger
``n`` with the same seed draws a superset of a smaller one's strata draws.

The estimate is the stratified mean of the strata's kill rates weighted by their sizes; its variance
sums each stratum's W_h^2 (1 - n_h/N_h) p~_h (1 - p~_h) / n_h with the Agresti-Coull proportion
p~_h = (k_h + 2) / (n_h + 4), so a stratum whose draw was all killed still carries its
uncertainty; the interval is the estimate +- 1.96 standard errors, clipped to [0, 1]. A drawn
mutant listed equivalent leaves its stratum's draw (killed / (drawn - equivalent)); a timeout
counts as killed.
"""
from __future__ import annotations

import ast
import difflib
import io
import math
import random
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

OPERATORS = ("string", "number", "constant", "operator", "condition", "removal", "to_none", "name", "other")
_MUTANT = re.compile(r"^(?P<base>.+)__mutmut_(?P<n>\d+|orig)$")
_CONSTANTS = {"True", "False", "None"}
_KEYWORD_OPS = {"and", "or", "not", "in", "is", "if", "else", "break", "continue", "return", "del"}


def _tokens(src: str) -> list[tuple[int, str]]:
    out = []
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                      tokenize.COMMENT, tokenize.ENDMARKER):
            continue
        out.append((t.type, t.string))
    return out


def classify(orig: str, mutant: str) -> str:
    """The operator class of ``mutant`` against ``orig`` (two function bodies' source)."""
    a, b = _tokens(orig), _tokens(mutant)
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops:
        return "other"
    tag, i1, i2, j1, j2 = ops[0]
    old, new = a[i1:i2], b[j1:j2]
    if tag == "delete":
        return "removal"
    if tag == "insert" and [t for _, t in new] in (["and", "False"], ["or", "True"]):
        return "condition"
    if any(s == "None" for _, s in new) and not any(s == "None" for _, s in old):
        return "to_none"
    if len(old) == 1 and len(new) == 1:
        (ta, sa), (tb, sb) = old[0], new[0]
        if sa in _CONSTANTS or sb in _CONSTANTS:
            return "constant"
        if ta == tb == tokenize.STRING:
            return "string"
        if ta == tb == tokenize.NUMBER:
            return "number"
        if ta == tokenize.OP or tb == tokenize.OP or sa in _KEYWORD_OPS or sb in _KEYWORD_OPS:
            return "operator"
        if ta == tb == tokenize.NAME:
            return "name"
    if all(t == tokenize.OP or s in _KEYWORD_OPS for t, s in old + new):
        return "operator"
    if tag == "insert" and all(s in _KEYWORD_OPS for _, s in new):
        return "operator"
    if any(t == tokenize.STRING for t, _ in old + new) and all(t in (tokenize.STRING, tokenize.OP) for t, _ in old + new):
        return "string"
    return "other"


def _bodies(tree: ast.AST) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _MUTANT.match(node.name):
            out[node.name] = node
    return out


def strata_of_file(trampolined: Path, module: str) -> dict[str, str]:
    """mutant name (``<module>.<function>__mutmut_<n>``) -> operator class, for one file of
    mutmut's trampolined copy."""
    tree = ast.parse(trampolined.read_text())
    bodies = _bodies(tree)
    out = {}
    for name, node in bodies.items():
        m = _MUTANT.match(name)
        if m is None or m["n"] == "orig":
            continue
        orig = bodies.get(f"{m['base']}__mutmut_orig")
        if orig is None:
            out[f"{module}.{name}"] = "other"
            continue
        body = lambda f: "\n".join(ast.unparse(s) for s in f.body)  # noqa: E731
        out[f"{module}.{name}"] = classify(body(orig), body(node))
    return out


@dataclass(frozen=True)
class Stratum:
    file: str
    operator: str

    @property
    def label(self) -> str:
        return f"{self.file}:{self.operator}"


def allocate(sizes: dict[Stratum, int], n: int) -> dict[Stratum, int]:
    """How many of ``n`` draws each stratum gets: proportional to its size, largest remainder,
    at least one a stratum while ``n`` allows (smallest strata last), never more than its size."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    strata = sorted(sizes, key=lambda s: (-sizes[s], s.label))
    out = {s: 1 if n >= len(strata) else 0 for s in strata}
    left = n - sum(out.values())
    share = {s: left * sizes[s] / total for s in strata}
    for s in strata:
        out[s] = min(sizes[s], out[s] + int(share[s]))
    rest = n - sum(out.values())
    by_remainder = sorted(strata, key=lambda s: (-(share[s] - int(share[s])), -sizes[s], s.label))
    while rest > 0:
        moved = False
        for s in by_remainder:
            if rest and out[s] < sizes[s]:
                out[s] += 1
                rest -= 1
                moved = True
        if not moved:
            break
    return out


def draw(population: dict[str, Stratum], n: int, seed: int) -> list[str]:
    """A stratified draw of ``n`` mutant names (sorted), reproducible from ``seed``."""
    members: dict[Stratum, list[str]] = {}
    for name, s in population.items():
        members.setdefault(s, []).append(name)
    counts = allocate({s: len(v) for s, v in members.items()}, n)
    out: list[str] = []
    for s, k in counts.items():
        names = sorted(members[s])
        rng = random.Random(f"{seed}:{s.label}")
        out += rng.sample(names, k)   # a prefix of one shuffle: a larger k keeps the smaller draw
    return sorted(out)


@dataclass(frozen=True)
class Estimate:
    score: float
    low: float
    high: float
    drawn: int
    population: int

    def __str__(self) -> str:
        return (f"{100 * self.score:.1f}% (95% interval {100 * self.low:.1f}-{100 * self.high:.1f}%, "
                f"{self.drawn} of {self.population} mutants)")


def estimate(population: dict[str, Stratum], verdicts: dict[str, str],
             equivalent: set[str] = frozenset()) -> Estimate:  # type: ignore[assignment]
    """The stratified kill-rate estimate over ``population`` from the drawn mutants' ``verdicts``
    (name -> killed|timeout|survived|no tests|...)."""
    sizes: dict[Stratum, int] = {}
    for s in population.values():
        sizes[s] = sizes.get(s, 0) + 1
    killed: dict[Stratum, int] = {}
    judged: dict[Stratum, int] = {}
    for name, verdict in verdicts.items():
        s = population.get(name)
        if s is None or name in equivalent:
            continue
        judged[s] = judged.get(s, 0) + 1
        killed[s] = killed.get(s, 0) + (verdict in ("killed", "timeout"))
    seen = {s: sizes[s] for s in judged}
    total = sum(seen.values())   # strata with no judged mutant are outside what the draw measures
    if not total:
        return Estimate(0.0, 0.0, 1.0, 0, sum(sizes.values()))
    score = var = 0.0
    for s, n_h in judged.items():
        w = seen[s] / total
        p = killed[s] / n_h
        p_adj = (killed[s] + 2) / (n_h + 4)
        fpc = max(0.0, 1 - n_h / seen[s])
        score += w * p
        var += w * w * fpc * p_adj * (1 - p_adj) / n_h
    half = 1.96 * math.sqrt(var)
    return Estimate(score, max(0.0, score - half), min(1.0, score + half), sum(judged.values()), sum(sizes.values()))
