"""Golden journals: every tests/data/*.jsonl (recorded by scripts/record_golden.py from a real run or
a ``kfold sim`` seed) replays with the current code without a divergence, and an edited effect is
caught and named. Each scenario's journal still holds what it was recorded for (the recorder's
``FACTS``: a 409 on a fenced pod delete, a Ready Session's pod deleted by someone else, a clone
failing, a lost journal, a taken name), so a re-recording cannot quietly lose its point.

A failure here means the current code decides differently from the code that recorded the journal:
a regression, or an intended change (then re-record with scripts/record_golden.py).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from journal.redact import PREFIX
from kfold.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = sorted(DATA.glob("*.jsonl"))
_spec = importlib.util.spec_from_file_location("record_golden", DATA.parents[1] / "scripts" / "record_golden.py")
RECORDER = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(RECORDER)
SCENARIOS = list(RECORDER.REAL) + [f"sim_{s}" for s in RECORDER.SIM_SEEDS]


def test_there_is_a_golden_journal():
    assert GOLDEN, f"no golden journals in {DATA}; record one with scripts/record_golden.py"


def test_every_scenario_has_its_journal_and_every_journal_a_scenario():
    assert sorted(RECORDER.output_of(n) for n in SCENARIOS) == GOLDEN


@pytest.mark.parametrize("name", sorted(RECORDER.FACTS))
def test_each_scenario_journal_holds_what_it_was_recorded_for(name):
    recs = [json.loads(line) for line in RECORDER.output_of(name).read_text().splitlines()]
    assert RECORDER.FACTS[name](recs) == ""
    # the fact is specific: the plain happy path does not hold it
    plain = [json.loads(line) for line in RECORDER.output_of("session").read_text().splitlines()]
    assert RECORDER.FACTS[name](plain) != "", f"{name}'s fact also holds on the happy path"


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_journal_replays_without_divergence(path, capsys):
    code = main(["replay", str(path), "--check"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "divergence" not in out + err
    assert "check: every journaled effect matches the current code" in out


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_journal_holds_no_secret_values(path):
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        obj = rec.get("obj") or {}
        if obj.get("kind") == "Secret":
            for field in ("data", "stringData"):
                for value in (obj.get(field) or {}).values():
                    assert str(value).startswith(PREFIX), f"seq {rec['seq']}: Secret {field} not redacted"


def _edited(src: Path, dst: Path) -> tuple[int, str, str, str]:
    """Copy ``src`` with the first pod create's pod renamed; returns (seq, effect id, old, new)."""
    lines = src.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        eff = rec.get("effect") or {}
        if rec["rec"] == "effect" and eff.get("type") == "create" and eff.get("kind") == "Pod":
            old = eff["name"]
            new = old + "-edited"
            eff["name"] = new
            eff["manifest"]["metadata"]["name"] = new
            lines[i] = json.dumps(rec, separators=(",", ":"))
            dst.write_text("\n".join(lines) + "\n")
            return rec["seq"], eff["id"], old, new
    pytest.skip(f"{src.name} has no pod create to edit")


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_an_edited_effect_is_a_divergence_naming_record_and_the_differing_fields(path, tmp_path, capsys):
    seq, eid, old, new = _edited(path, tmp_path / "edited.jsonl")
    code = main(["replay", str(tmp_path / "edited.jsonl"), "--check"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert f"divergence at record {seq}: effect {eid}" in err
    fields = [line.strip() for line in err.splitlines() if ": expected " in line]
    assert fields == [f'name: expected "{new}", got "{old}"',               # expected = journaled,
                      f'manifest.metadata.name: expected "{new}", got "{old}"']   # got = the current code
    assert "2 field(s) differ" in err and "cause:" in err  # the record whose fold emitted the effect
    assert max(map(len, err.splitlines())) < 200   # no dict reprs
