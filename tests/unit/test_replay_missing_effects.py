"""``kfold replay --check`` finds an effect the current code emits that the journal never issued
(DESIGN invariant 8, "Replay is a test"), by the daemon's issuing rule (kfold/offline/replay.py):
a commit journals its records and the ``EffectIssued`` of every touched key's fresh head in one
transaction, so a fresh head left unissued after a run of issues is a divergence, while an effect
held behind its key's head, one decided in the last commit, or one decided by a standby is in flight.

The journals are the real committer's: the golden journal (scripts/record_golden.py, a real run)
and ``kfold sim --journal`` journals (the daemon's committer against a simulated apiserver, a
second daemon standing by or taking over, leader pauses, kills).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kfold.cli import main
from kfold.offline.replay import replay
from kfold.offline.sources import iter_records

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_session.jsonl"
LINES = GOLDEN.read_text().splitlines()
RECORDS = [json.loads(line) for line in LINES]


def _shift(eid: str, removed: int) -> str:
    cause, _, n = eid.partition(".")
    return f"{int(cause) - 1}.{n}" if int(cause) > removed else eid


def without(records: list[dict], seqs: set[int]) -> list[dict]:
    """``records`` minus the ones at ``seqs``, renumbered as a journal that never had them: later
    seqs and the effect ids they caused (``<cause seq>.<n>``) shift down."""
    out = [dict(r) for r in records]
    for removed in sorted(seqs, reverse=True):
        kept = []
        for r in out:
            if r["seq"] == removed:
                continue
            r = json.loads(json.dumps(r))
            if r["seq"] > removed:
                r["seq"] -= 1
            if r["rec"] == "effect":
                r["effect"]["id"] = _shift(r["effect"]["id"], removed)
            elif r["rec"] == "outcome":
                r["effect_id"] = _shift(r["effect_id"], removed)
            elif r["rec"] == "command" and r.get("name") == "effect.in_doubt":
                r["args"]["effect_id"] = _shift(r["args"]["effect_id"], removed)
            kept.append(r)
        out = kept
    return out


def write(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return str(path)


def check(path: str, capsys) -> tuple[int, str, str]:
    code = main(["replay", path, "--check"])
    out, err = capsys.readouterr()
    return code, out, err


FIRST_ISSUES = [r for r in RECORDS if r["rec"] == "effect"
                and r["effect"]["id"] not in {q["effect"]["id"] for q in RECORDS[:r["seq"] - 1] if q["rec"] == "effect"}]


def test_the_golden_journal_issues_effects_to_remove():
    assert len(FIRST_ISSUES) >= 20, "the golden journal should hold a whole Session's effects"


def test_the_unmodified_golden_journal_is_clean(capsys):
    code, out, err = check(str(GOLDEN), capsys)
    assert code == 0, out + err
    assert "check: every journaled effect matches the current code" in out


@pytest.mark.parametrize("issued", FIRST_ISSUES, ids=lambda r: f"seq{r['seq']}-{r['effect']['type']}-{r['effect'].get('kind') or ''}")
def test_any_effectissued_removed_from_the_middle_is_a_named_divergence(issued, tmp_path, capsys):
    eid = issued["effect"]["id"]
    cause = int(eid.split(".")[0])
    code, out, err = check(write(tmp_path / "cut.jsonl", without(RECORDS, {issued["seq"]})), capsys)
    assert code == 1, out + err
    first = err.splitlines()[0]
    assert first.startswith("divergence at record ") and first.endswith(f": effect {eid}"), err
    assert f"the current code emits effect {eid} " in err and f"for record #{cause}; the journal never issued it" in err, err
    assert f"  cause:      seq {cause} " in err


def test_a_new_effect_kind_missing_from_an_old_journal_fails_the_check(tmp_path, capsys):
    """The bug: a journal recorded before the code added Events (no post_event issued) passed."""
    events = {r["seq"] for r in RECORDS if r["rec"] == "effect" and r["effect"]["type"] == "post_event"}
    assert events, "the golden journal issues Events"
    code, out, err = check(write(tmp_path / "old.jsonl", without(RECORDS, events)), capsys)
    assert code == 1, out + err
    assert "post_event" in err and "the journal never issued it" in err, err


def _cause_then_issue() -> tuple[int, str]:
    """A cause record directly followed by the EffectIssued of an effect it emitted."""
    for prev, rec in zip(RECORDS, RECORDS[1:]):
        if rec["rec"] == "effect" and rec["effect"]["id"].split(".")[0] == str(prev["seq"]) and prev["rec"] != "effect":
            return prev["seq"], rec["effect"]["id"]
    pytest.fail("no cause record directly followed by its effect's EffectIssued")


def test_a_journal_cut_after_a_cause_whose_effect_was_not_yet_issued_is_in_flight(tmp_path, capsys):
    seq, eid = _cause_then_issue()
    code, out, err = check(write(tmp_path / "tail.jsonl", RECORDS[:seq]), capsys)
    assert code == 0, out + err
    assert "in flight at the end (emitted, never issued): " in out and eid in out.split("in flight at the end")[1], out


def test_a_journal_cut_inside_its_last_commits_issues_is_in_flight(tmp_path, capsys):
    """The last commit issued one effect of two: the other is in flight, not missing."""
    runs = [(a, b) for a, b in zip(RECORDS, RECORDS[1:]) if a["rec"] == b["rec"] == "effect"
            and a["effect"]["id"] != b["effect"]["id"]]
    assert runs, "the golden journal has a commit issuing two effects"
    first, second = runs[0]
    code, out, err = check(write(tmp_path / "mid.jsonl", RECORDS[:first["seq"]]), capsys)
    assert code == 0, out + err
    assert second["effect"]["id"] in out.split("in flight at the end")[1], out


def test_an_effect_held_behind_its_keys_head_is_not_owed(tmp_path, capsys):
    """Two effects of one key decided together: only the head goes out; the one behind it waits
    for the head's outcome, so a journal cut between them passes."""
    for r in RECORDS:
        if r["rec"] != "effect":
            continue
        cause, _, n = r["effect"]["id"].partition(".")
        behind = [q for q in RECORDS if q["rec"] == "effect" and q["effect"]["id"] == f"{cause}.{int(n) + 1}"
                  and q["effect"]["key"] == r["effect"]["key"] and q["seq"] > r["seq"] + 1]
        if behind:
            break
    else:
        pytest.skip("no effect held behind its key's head in the golden journal")
    code, out, err = check(write(tmp_path / "held.jsonl", RECORDS[:behind[0]["seq"] - 1]), capsys)
    assert code == 0, out + err


SIM = [(90, "second_daemon,leader_pause,kill"), (94, "second_daemon,leader_pause,kill"),
       (97, "second_daemon,leader_pause,kill"), (101, "all")]


@pytest.fixture(scope="module")
def sim_journals(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    for seed, faults in SIM:
        assert main(["sim", "--seed", str(seed), "--steps", "80", "--faults", faults, "--journal", "--out", str(out)]) == 0
    return sorted(out.glob("*.sqlite"))


def test_every_simulated_daemons_journal_passes_the_check(sim_journals):
    assert len(sim_journals) > len(SIM), "the second daemons' journals too"
    for path in sim_journals:
        result = replay(iter_records(str(path), projected=True), check=True)
        assert result.divergence is None, f"{path.name}: {result.divergence.describe()}"


def test_a_standbys_journal_has_decisions_in_flight_and_no_divergence(sim_journals):
    standbys = []
    for path in sim_journals:
        records = list(iter_records(str(path), projected=True))
        if not any(r.rec == "effect" for r in records):
            result = replay(records, check=True)
            assert result.divergence is None
            standbys.append((path.name, result.in_flight))
    assert standbys, "a second daemon that only stood by (journaled observations, no EffectIssued)"
    assert any(flight for _, flight in standbys), standbys


def test_trace_marks_the_never_issued_effect_on_its_object(tmp_path, capsys):
    event = next(r for r in RECORDS if r["rec"] == "effect" and r["effect"]["type"] == "post_event")
    path = write(tmp_path / "cut.jsonl", without(RECORDS, {event["seq"]}))
    code = main(["trace", path, event["effect"]["key"].split("#")[0]])   # the Session its Events are about
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "DIVERGENCE: divergence at record" in out and f"effect {event['effect']['id']} post_event" in out, out
