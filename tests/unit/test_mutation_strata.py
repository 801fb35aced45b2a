"""scripts/mutation_strata.py: what a mutant did, a stratified draw, and a score's interval that
covers the true score of the population it was drawn from."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import mutation_strata as ms  # noqa: E402


@pytest.mark.parametrize("orig, mutant, want", [
    ("return 'ok'", "return 'XXokXX'", "string"),
    ("return n + 1", "return n + 2", "number"),
    ("return False", "return True", "constant"),
    ("return a == b", "return a != b", "operator"),
    ("return a and b", "return a or b", "operator"),
    ("return x if a else y", "return x if a and False else y", "condition"),
    ("f(a, b)", "f(a)", "removal"),
    ("x = compute()", "x = None", "to_none"),
    ("s.partition('?')", "s.rpartition('?')", "name"),
])
def test_a_mutant_is_classed_by_what_it_changed(orig, mutant, want):
    assert ms.classify(orig, mutant) == want


def _population(sizes: list[int]) -> dict[str, ms.Stratum]:
    return {f"m{i}_{j}": ms.Stratum(f"f{i}.py", ms.OPERATORS[i % len(ms.OPERATORS)])
            for i, size in enumerate(sizes) for j in range(size)}


def test_the_draw_is_proportional_covers_every_stratum_and_grows_by_supersets():
    pop = _population([500, 200, 50, 5, 1, 1])
    small, large = ms.draw(pop, 60, seed=7), ms.draw(pop, 120, seed=7)
    assert len(small) == 60 and len(large) == 120 and len(set(large)) == 120
    assert set(small) <= set(large)
    per = {s: sum(1 for n in large if pop[n] == s) for s in set(pop.values())}
    assert min(per.values()) >= 1                        # every stratum drawn
    assert per[ms.Stratum("f0.py", ms.OPERATORS[0])] in range(70, 80)   # 500/757 of 120 ~ 79
    assert ms.draw(pop, 60, seed=7) == small and ms.draw(pop, 60, seed=8) != small
    assert sorted(ms.draw(pop, 10_000, seed=1)) == sorted(pop)


def test_the_interval_covers_the_populations_true_score():
    """The oracle is the population itself: each mutant's verdict is fixed, the true score is
    their mean; 300 independent stratified draws of 250 of 3,000 must bracket it about 95% of the
    time, strata killed to the last mutant included."""
    rng = random.Random(49)
    sizes = [rng.randint(20, 400) for _ in range(24)]
    pop = _population(sizes)
    rates = {s: rng.choice([1.0, 1.0, 0.99, 0.97, 0.9, 0.8]) for s in set(pop.values())}
    truth_of = {n: "killed" if rng.random() < rates[s] else "survived" for n, s in pop.items()}
    truth = sum(v == "killed" for v in truth_of.values()) / len(pop)
    hits = 0
    for seed in range(300):
        drawn = ms.draw(pop, 250, seed=seed)
        e = ms.estimate(pop, {n: truth_of[n] for n in drawn})
        hits += e.low <= truth <= e.high
        assert e.drawn == 250 and e.population == len(pop)
    assert hits / 300 >= 0.93, (hits, truth)


def test_equivalent_mutants_leave_the_score_and_a_full_draw_is_exact():
    pop = _population([10, 10])
    verdicts = {n: "survived" if n in ("m0_0", "m0_1") else "killed" for n in pop}
    exact = ms.estimate(pop, verdicts)
    assert exact.score == pytest.approx(18 / 20) and exact.low == exact.high == pytest.approx(0.9)
    assert ms.estimate(pop, verdicts, equivalent={"m0_0", "m0_1"}).score == pytest.approx(1.0)
