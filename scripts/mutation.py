#!/usr/bin/env python3
"""Mutation testing (mutmut 3) over engine/machines, journal/ and kfold/registry/bounds.py.

    python scripts/mutation.py [--package machines|journal|bounds ...] [--workers 1|2]
                               [--sample N --seed S] [--report FILE] [--fresh]
    python scripts/mutation.py --package P --stratified N --seed S [--chunk K] [--suite whole]

--stratified draws N mutants of a package by stratum (source file x operator class,
scripts/mutation_strata.py), runs the next K of them not yet judged (all without --chunk),
and keeps every verdict in tests/mutation/results/<package>.json, so a run that takes days is
resumed chunk by chunk, on any machine; it prints the stratified score with its 95% interval.
A verdict is kept while its source file is unchanged (the file's hash is part of the record).
--suite whole judges against tests/{unit,scenario,contract,sim} (mutmut's coverage-based selection
picks the tests that reach each mutant) instead of the package's own selection.

Each package runs in its own copy of the tree (``build/mutation/<package>/``; mutmut keeps its
results there, so a second run resumes), with a test selection of the unit and scenario tests
for that package (never e2e). The report lists every mutant that was not killed: file:line, the
mutation (mutmut's diff), and its verdict: ``survived`` or ``no tests`` (no selected test reaches
it), or ``equivalent`` when tests/mutation/equivalent.txt names it with a reason.
The score of a package is killed / (mutants - equivalent). Exit 1 when a mutant outside the
equivalent list survives, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import mutation_strata as ms  # noqa: E402
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.txt"
# Survivors found by a run and not killed yet, each still counted against the score; --sample
# leaves them out of what it runs, so that CI guards what the suite kills.
KNOWN = ROOT / "tests" / "mutation" / "survivors.txt"

# Tests that read the source tree, start a fresh interpreter (which imports the unmutated code),
# or take long without touching these packages: they can neither kill a mutant nor pass on the
# trampolined copy mutmut runs.
_NEVER = [
    "tests/unit/test_layering.py", "tests/unit/test_layering_clients.py",
    "tests/unit/test_python_floor.py", "tests/unit/test_one_name.py", "tests/unit/test_diagrams.py",
    "tests/unit/test_canonical_json.py", "tests/unit/test_run_refusals.py", "tests/unit/test_leader.py",
    "tests/unit/test_export_cut.py", "tests/unit/test_safe_tar.py", "tests/unit/test_replay_cli.py",
    "tests/unit/test_trace_cli.py", "tests/unit/test_bench_phases.py", "tests/unit/test_ui_api.py",
    "tests/unit/test_redaction.py::test_the_occurrence_scan_gives_the_count_scans_verdict_on_every_payload",
    "tests/unit/test_redaction.py::test_a_pods_spec_is_walked_once_across_its_events",
    # names each table row's handler as the source spells it (the trampolines rename them)
    "tests/scenario/test_zz_table_rows.py",
    # a runtime-checkable Protocol: the trampolines add members the fold's StepContext lacks
    "tests/unit/test_core.py::test_the_fold_step_is_what_machines_are_typed_against",
]


@dataclass(frozen=True)
class Package:
    name: str
    mutate: str | tuple[str, ...]    # only_mutate globs: package directories or modules
    tests: list[str]                 # the test selection (files or directories)
    deselect: list[str] = field(default_factory=list)
    sample_tests: list[str] | None = None   # a narrower selection for --quick (CI), if any
    quick_files: int = 1                     # how many of its modules --quick mutates

    @property
    def globs(self) -> list[str]:
        return [self.mutate] if isinstance(self.mutate, str) else list(self.mutate)


# The whole in-process suite: what --suite whole judges against (never e2e nor the real node).
WHOLE = ["tests/unit", "tests/scenario", "tests/contract", "tests/sim"]


PACKAGES = {
    "machines": Package("machines", "engine/machines/*", ["tests/scenario"] + [f"tests/unit/test_{t}.py" for t in (
        "core", "fold_many", "golden_journals", "session_conditions", "session_defaults", "session_snapshot",
        "session_spec", "repo_crd", "repo_names", "repo_status", "fastpath_observe", "fastpath_pod_observe",
        "fastpath_records", "timer_index", "clocks_per_cluster", "shards", "progress", "poison", "manifests",
        "manifests_image", "object_trim", "records", "machine_tables", "machine_rules", "session_table_order",
        "session_target_index")],
                        sample_tests=["tests/scenario"], quick_files=3),
    "journal": Package("journal", "journal/*", [
        "tests/unit/test_journal_full.py", "tests/unit/test_journal_retention.py",
        "tests/unit/test_jsonl.py", "tests/unit/test_records.py", "tests/unit/test_projection.py",
        "tests/unit/test_replay_projection.py", "tests/unit/test_redaction.py",
        "tests/unit/test_poison.py", "tests/unit/test_daemon_one_transaction.py",
        "tests/unit/test_daemon_recovery.py", "tests/contract/test_journal_contract.py",
        # the other in-process tests that drive journal code (export format, golden journals,
        # fast-path records, replay check, the daemon's follow and order, the observer's digests)
        "tests/unit/test_export_format.py", "tests/unit/test_golden_journals.py",
        "tests/unit/test_fastpath_records.py", "tests/unit/test_replay_missing_effects.py",
        "tests/unit/test_daemon_follow.py", "tests/unit/test_observer_digests.py",
        "tests/unit/test_executor_order.py", "tests/unit/test_registry_records.py",
        "tests/contract/test_observer.py", "tests/unit/test_journal_rules.py",
    ], quick_files=2),
    "bounds": Package("bounds", "kfold/registry/bounds.py", [
        "tests/unit/test_registry_bounds.py", "tests/unit/test_registry_tenancy.py",
        "tests/contract/test_registry_bounds.py", "tests/contract/test_registry_wire_fuzz.py",
    ]),
    # judged only against the whole suite (--suite whole is implied): their defaults and fences
    # are read all over it
    "config": Package("config", "kfold/daemon/config.py", WHOLE),
    "lease": Package("lease", ("kfold/daemon/leader.py", "kfold/daemon/shards.py"), WHOLE),
    "registry": Package("registry", "kfold/registry/*", WHOLE),
}
DEFAULT = ("bounds", "journal", "machines")   # without --package (the CI sample's three)
RESULTS = ROOT / "tests" / "mutation" / "results"


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def quick_files(pkg: Package, seed: int) -> list[str]:
    """--quick mutates only ``pkg.quick_files`` of the package's modules, drawn with ``seed``:
    mutmut writes every mutant of a file it mutates, which is most of a run's cost in CI."""
    files = sorted(str(p.relative_to(ROOT)) for g in pkg.globs for p in ROOT.glob(g.replace("/*", "/**/*"))
                   if p.suffix == ".py" and p.name != "__init__.py")
    return sorted(random.Random(seed).sample(files, min(pkg.quick_files, len(files))))


def prepare(pkg: Package, work: Path, fresh: bool, tests: list[str] | None = None,
            only: list[str] | None = None) -> None:
    """A copy of the tracked tree at ``work`` with the package's mutmut config appended."""
    if fresh and work.exists():
        shutil.rmtree(work)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src, dst = ROOT / rel, work / rel
        if not src.is_file():
            continue
        if dst.exists() and dst.stat().st_mtime >= src.stat().st_mtime and rel != "pyproject.toml":
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    deselect = []
    for d in _NEVER + pkg.deselect:
        deselect += ["--deselect", d]
    config = (ROOT / "pyproject.toml").read_text() + f"""
[tool.mutmut]
source_paths = ["engine", "journal", "kfold"]
only_mutate = {_toml_list(only or pkg.globs)}
also_copy = ["tests", "examples", "scripts", "docs", "deploy", "README.md", "CHANGELOG.md", "LICENSE", "constraints.txt"]
pytest_add_cli_args = {_toml_list(["-p", "no:cacheprovider", "--timeout", "120"] + deselect)}
pytest_add_cli_args_test_selection = {_toml_list(tests or pkg.tests)}
use_git_change_detection = false
"""
    (work / "pyproject.toml").write_text(config)


def mutmut(work: Path, args: list[str], log: Path | None = None) -> int:
    exe = Path(sys.executable).parent / "mutmut"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = open(log, "a") if log else None
    try:
        return subprocess.run([str(exe), *args], cwd=work, env=env, stdout=out or None,
                              stderr=subprocess.STDOUT if out else None).returncode
    finally:
        if out:
            out.close()


_VERDICT = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
            36: "timeout", -24: "timeout", 24: "timeout", -9: "timeout", 152: "timeout"}


def verdicts(work: Path, pkg: Package) -> dict[str, tuple[str, str]]:
    """mutant name -> (source file, verdict) from mutmut's per-file .meta results."""
    out: dict[str, tuple[str, str]] = {}
    base = work / "mutants"
    for meta in sorted(base.rglob("*.py.meta")):
        rel = str(meta.relative_to(base))[: -len(".meta")]
        data = json.loads(meta.read_text())
        for name, code in data.get("exit_code_by_key", {}).items():
            if code is not None:   # None: not run (yet, or not drawn by --sample)
                out[name] = (rel, _VERDICT.get(code, "suspicious"))
    return out


def equivalents(path: Path = EQUIVALENT) -> dict[str, str]:
    """tests/mutation/equivalent.txt: ``<mutant name>  <why it is equivalent>`` a line."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, why = line.partition(" ")
            out[name] = why.strip()
    return out


def describe(work: Path, names: list[str]) -> dict[str, tuple[int, str]]:
    """mutant name -> (line in its source file, the diff), read with mutmut's own API."""
    if not names:
        return {}
    code = (
        "import json, sys\n"
        "from mutmut.__main__ import find_mutant\n"
        "from mutmut.mutation.diff_apply import get_diff_for_mutant\n"
        "out = {}\n"
        "for n in json.loads(sys.stdin.read()):\n"
        "    m = find_mutant(n)\n"
        "    out[n] = [str(m.path), get_diff_for_mutant(n, path=m.path)]\n"
        "print(json.dumps(out))\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=work, input=json.dumps(names),
                         capture_output=True, text=True, check=True)
    found = json.loads(res.stdout.strip().splitlines()[-1])
    result = {}
    for name, (path, diff) in found.items():
        result[name] = (_line_of(work / path, diff), diff)
    return result


def _line_of(path: Path, diff: str) -> int:
    """The first changed line of ``diff`` in the original source (0 when it cannot be placed)."""
    lines = path.read_text().splitlines()
    removed = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    context = [ln[1:] for ln in diff.splitlines() if ln.startswith(" ")]
    head = next((c for c in context if c.strip().startswith(("def ", "async def "))), None)
    start = 0
    if head:
        start = next((i for i, ln in enumerate(lines) if ln.strip() == head.strip()), 0)
    for want in removed:
        for i in range(start, len(lines)):
            if lines[i].strip() == want.strip():
                return i + 1
    return start + 1


def all_mutant_names(work: Path) -> list[str]:
    """Every mutant mutmut generated in ``work`` (from its trampolined sources)."""
    names = []
    for py in sorted((work / "mutants").rglob("*.py")):
        meta = py.with_name(py.name + ".meta")
        if meta.exists():
            names += sorted(json.loads(meta.read_text()).get("exit_code_by_key", {}))
    return names


def generate(work: Path) -> None:
    """Write mutmut's trampolined copy and its mutant list without running a test."""
    for mutant in (work / "mutants").rglob("*.py"):
        source = work / mutant.relative_to(work / "mutants")
        if mutant.stat().st_size == 0 and source.exists() and source.stat().st_size:
            mutant.unlink()   # cut short by an interrupted run: write it again
    code = ("from mutmut.__main__ import create_mutants, set_mutant_under_test\n"
            "from mutmut.utils.file_utils import copy_src_dir, copy_also_copy_files\n"
            "import os; os.makedirs('mutants', exist_ok=True)\n"
            "set_mutant_under_test('mutant_generation')\n"
            "copy_src_dir(); copy_also_copy_files(); create_mutants(1)\n")
    subprocess.run([sys.executable, "-c", code], cwd=work, check=True, capture_output=True)


def sample(names: list[str], n: int, seed: int) -> list[str]:
    return sorted(random.Random(seed).sample(sorted(names), min(n, len(names))))


def run_package(pkg: Package, work: Path, workers: int, fresh: bool, names: list[str] | None,
                log: Path, quick: bool, only: list[str] | None = None) -> int:
    prepare(pkg, work, fresh, pkg.sample_tests if quick else None, only)
    return mutmut(work, ["run", "--max-children", str(workers), *(names or [])], log)


def report(results: dict[str, dict[str, tuple[str, str]]], works: dict[str, Path],
           only: dict[str, list[str]] | None = None) -> tuple[str, int]:
    eq = equivalents()
    lines = ["# Mutation report", "", "| package | mutants | killed | equivalent | not killed | score |",
             "|---|---|---|---|---|---|"]
    body: list[str] = []
    bad = 0
    for pkg, res in results.items():
        if only is not None:
            res = {k: v for k, v in res.items() if k in only.get(pkg, [])}
        # a timeout is a mutant the tests did not pass on in time: detected, as mutmut's and
        # Stryker's scores count it
        res = {k: (p, "killed" if v == "timeout" else v) for k, (p, v) in res.items()}
        killed = sum(1 for _, v in res.values() if v == "killed")
        equiv = [k for k, (_, v) in res.items() if v != "killed" and k in eq]
        open_ = sorted(k for k, (_, v) in res.items() if v != "killed" and k not in eq)
        total = len(res) - len(equiv)
        score = f"{100.0 * killed / total:.1f}%" if total else "-"
        lines.append(f"| {pkg} | {len(res)} | {killed} | {len(equiv)} | {len(open_)} | {score} |")
        bad += len(open_)
        info = describe(works[pkg], open_ + equiv)
        for k in open_ + equiv:
            path, verdict = res[k]
            line, diff = info.get(k, (0, ""))
            verdict = f"equivalent ({eq[k]})" if k in eq else verdict
            body += [f"## {path}:{line} `{k}`: {verdict}", "", "```diff", diff.strip(), "```", ""]
    return "\n".join(lines + [""] + body) + "\n", bad


def _population(work: Path, pkg: Package) -> tuple[dict[str, ms.Stratum], dict[str, str]]:
    """Every mutant of the package with its stratum, and each mutated file's sha256."""
    population: dict[str, ms.Stratum] = {}
    hashes: dict[str, str] = {}
    for py in sorted((work / "mutants").rglob("*.py")):
        rel = str(py.relative_to(work / "mutants"))
        if not py.with_name(py.name + ".meta").exists():
            continue
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        hashes[rel] = hashlib.sha256((ROOT / rel).read_bytes()).hexdigest()
        for name, op in ms.strata_of_file(py, module).items():
            population[name] = ms.Stratum(rel, op)
    return population, hashes


def stratified(pkg: Package, a: argparse.Namespace) -> int:
    """Run the next chunk of a stratified draw and report the estimate (module docstring)."""
    whole = a.suite == "whole" or pkg.tests is WHOLE
    label = f"whole-{pkg.name}" if whole else pkg.name
    work, log = a.work / label, a.work / f"{label}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    prepare(pkg, work, a.fresh, WHOLE if whole else None)
    generate(work)
    population, hashes = _population(work, pkg)
    path = RESULTS / f"{label}.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    if (kept.get("seed"), kept.get("n")) not in ((a.seed, a.stratified), (None, None)):
        print(f"mutation: {path} holds the draw of seed {kept['seed']}, n {kept['n']}: use those, "
              f"or move the file to start another draw", file=sys.stderr)
        return 2
    known = {k: v for k, v in kept.get("verdicts", {}).items()
             if k in population and kept.get("files", {}).get(population[k].file) == hashes[population[k].file]}
    drawn = ms.draw(population, a.stratified, a.seed)
    todo = [n for n in drawn if n not in known]
    todo = todo[:a.chunk] if a.chunk else todo
    t0 = time.monotonic()
    if todo:
        print(f"mutation: {label}: {len(todo)} of {len(drawn)} drawn mutants to run, log {log}", file=sys.stderr)
        mutmut(work, ["run", "--max-children", str(a.workers), *todo], log)
        got = verdicts(work, pkg)
        known.update({n: got[n][1] for n in todo if n in got})
    eq = set(equivalents())
    est = ms.estimate(population, {n: known[n] for n in drawn if n in known}, eq)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    runs = kept.get("runs", []) + ([{"date": time.strftime("%Y-%m-%d"), "commit": commit, "mutants": len(todo),
                                      "seconds": round(time.monotonic() - t0)}] if todo else [])
    sizes: dict[str, int] = {}
    for st in population.values():
        sizes[st.label] = sizes.get(st.label, 0) + 1
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "package": pkg.name, "suite": "whole" if whole else "package", "seed": a.seed, "n": a.stratified,
        "population": len(population), "strata": dict(sorted(sizes.items())),
        "files": {f: hashes[f] for f in sorted(hashes)}, "runs": runs,
        "estimate": {"score": round(est.score, 4), "low": round(est.low, 4), "high": round(est.high, 4),
                     "judged": est.drawn},
        "verdicts": dict(sorted(known.items())),
    }, indent=1) + "\n")
    left = sum(1 for n in drawn if n not in known)
    open_ = sorted(n for n in drawn if known.get(n) not in (None, "killed", "timeout") and n not in eq)
    print(f"{pkg.name}: {est}; {left} drawn mutants not judged yet; {len(open_)} not killed"
          + "".join(f"\n  {n}" for n in open_))
    return 1 if open_ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", action="append", choices=sorted(PACKAGES))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--sample", type=int, default=0, help="run only N mutants per package, drawn by --seed")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--quick", action="store_true",
                    help="the narrower CI test selection, in its own work directory (quick-<package>)")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "mutation")
    ap.add_argument("--report", type=Path, default=None, help="write the report here (default: print it)")
    ap.add_argument("--fresh", action="store_true", help="forget earlier results")
    ap.add_argument("--rerun", action="store_true",
                    help="run again only the mutants the last run did not kill (after adding tests)")
    ap.add_argument("--report-only", action="store_true", help="report the results of the last run, run nothing")
    ap.add_argument("--stratified", type=int, default=0, metavar="N",
                    help="a stratified draw of N mutants, verdicts kept in tests/mutation/results/")
    ap.add_argument("--chunk", type=int, default=0, metavar="K", help="with --stratified: run at most K not yet judged")
    ap.add_argument("--suite", choices=("package", "whole"), default="package",
                    help="the tests that judge: the package's selection or the whole in-process suite")
    a = ap.parse_args(argv)
    if not 1 <= a.workers <= 2:
        print(f"mutation: --workers {a.workers}: use 1 or 2 (the machine is shared)", file=sys.stderr)
        return 2
    if shutil.which("mutmut", path=str(Path(sys.executable).parent)) is None:
        print(f"mutation: no mutmut beside {sys.executable}: pip install -c constraints.txt -e '.[test]'",
              file=sys.stderr)
        return 2
    results, works, chosen = {}, {}, {}
    if a.stratified:
        if not a.package:
            print("mutation: --stratified needs --package (one or more)", file=sys.stderr)
            return 2
        return max(stratified(PACKAGES[n], a) for n in a.package)
    for name in a.package or DEFAULT:
        pkg, label = PACKAGES[name], f"quick-{name}" if a.quick else name
        work = works[name] = a.work / label
        log = a.work / f"{label}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        names = None
        if a.report_only:
            results[name] = verdicts(work, pkg)
            continue
        if a.rerun:
            eq = equivalents()
            names = sorted(k for k, (_, v) in verdicts(work, pkg).items() if v != "killed" and k not in eq)
            if not names:
                results[name] = verdicts(work, pkg)
                continue
        elif a.sample:
            only = quick_files(pkg, a.seed) if a.quick else None
            prepare(pkg, work, a.fresh, pkg.sample_tests if a.quick else None, only)
            generate(work)
            eq = equivalents()
            # draw first, then leave out the excused: a newly listed mutant never changes the draw
            excused = eq.keys() | equivalents(KNOWN).keys()
            names = [n for n in sample(all_mutant_names(work), a.sample, a.seed) if n not in excused]
            chosen[name] = names
        print(f"mutation: {name}: mutmut run ({len(names) if names else 'all'} mutants), log {log}",
              file=sys.stderr)
        run_package(pkg, work, a.workers, a.fresh and not a.sample, names, log, a.quick,
                    quick_files(pkg, a.seed) if a.quick else None)
        results[name] = verdicts(work, pkg)
    text, bad = report(results, works, chosen if a.sample and not a.rerun else None)
    if a.report:
        a.report.write_text(text)
    else:
        print(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
