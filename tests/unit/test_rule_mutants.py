"""scripts/rule_mutants.py: each operator breaks the rule it names, in one place, and every mutant
it makes compiles and differs from the source."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import rule_mutants as rm  # noqa: E402

SOURCE = '''\
DISPATCH = Dispatch("m", [
    ("idle", Seen, on_seen),
    ("busy", Seen, ignore),
])
TABLE = Table("m", ["idle", "busy"], [
    ("go", "idle", "busy"),
])
HANDLERS = {A: on_a, B: on_b}


def handle(ctx, d, rec):
    if rec.result in ("ok", "not_found"):
        return d
    match rec.result:
        case "conflict" | "gone":
            pass
    if d.ready:
        x = 1
    else:
        x = 2
    ctx.emit(DeleteObject, "k", uid=d.uid, rv=d.rv)
    ctx.emit(ListObjects, "k", label_selector="app=kfold")
    return ctx.now_on(d.target)
'''


@pytest.fixture
def mutants(tmp_path, monkeypatch):
    monkeypatch.setattr(rm, "ROOT", tmp_path)
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    return [(m, code) for m, code in rm.mutants_of(path)]


def _after(mutants, operator):
    return sorted(m.after for m, _ in mutants if m.operator == operator)


def test_table_rows_are_dropped_and_retargeted(mutants):
    drops = [m.before for m, _ in mutants if m.operator == "row-drop"]
    assert '("idle", Seen, on_seen),' in drops and '("go", "idle", "busy"),' in drops and "A: on_a," in " ".join(drops)
    retargets = _after(mutants, "row-retarget")
    assert '("idle", Seen, ignore),' in retargets          # the event silently dropped
    assert '("busy", Seen, on_seen),' in retargets         # an ignored one handled by the next row's handler
    assert '("go", "idle", "idle"),' in retargets          # a transition to another state
    assert "HANDLERS = {A: on_b, B: on_b}" in retargets


def test_a_tested_member_and_a_case_alternative_are_dropped_one_at_a_time(mutants):
    after = _after(mutants, "member-drop")
    assert 'if rec.result in ("ok",):' in after and 'if rec.result in ("not_found",):' in after
    assert 'case "gone":' in after and 'case "conflict":' in after


def test_branches_preconditions_clocks_and_selectors(mutants):
    assert any("x = 2" in m.after.split(" / ")[0] for m, _ in mutants if m.operator == "branch-swap")
    assert _after(mutants, "precondition-drop") == ['ctx.emit(DeleteObject, "k", rv=d.rv)',
                                                     'ctx.emit(DeleteObject, "k", uid=d.uid, )']
    assert _after(mutants, "other-clock") == ["return ctx.now", "return ctx.now_on(d.home)"]
    assert _after(mutants, "selector-widen") == ['ctx.emit(ListObjects, "k", label_selector="")']


def test_every_mutant_compiles_differs_and_is_named_once(mutants):
    assert len({m.id for m, _ in mutants}) == len(mutants) > 10
    for m, code in mutants:
        assert code != SOURCE
        compile(code, m.file, "exec")


def test_the_machines_give_sites_of_every_operator():
    ops = {site.operator for site in rm.all_sites("engine/machines/repo")}
    assert {"row-drop", "row-retarget", "branch-swap", "member-drop", "precondition-drop", "other-clock"} <= ops
