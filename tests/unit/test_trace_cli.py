"""``kfold trace`` reads like a debugging session: human server times, one line per record, a
field-level diff of what changed (no "Pending -> Pending" repeats without a change), effects one
line each, outcomes linked to the effect they answer, and the closest keys when a key matches
nothing."""
from __future__ import annotations

import re
from pathlib import Path

from kfold.cli import main
from kfold.timeline import effect_line, field_diff, iso

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_session.jsonl"
KEY = "local/golden-f728c6/demo"


def trace(capsys, key=KEY, path=GOLDEN):
    code = main(["trace", str(path), key])
    out, err = capsys.readouterr()
    return code, out, err


def test_each_record_is_one_header_line_with_its_iso_server_time(capsys):
    code, out, _ = trace(capsys)
    assert code == 0
    headers = [l for l in out.splitlines() if l.startswith("#")]
    assert headers[0] == "#9 2026-11-29T20:05:17.155Z observed ADDED Session golden-f728c6/demo rv=2566"
    assert all(re.match(r"#\d+ (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z|\(no server time yet\)) ", h) for h in headers)
    assert "1795982717" not in out  # no epoch milliseconds


def test_a_change_is_shown_field_by_field_and_a_no_change_record_is_left_out(capsys):
    _, out, _ = trace(capsys)
    block = out.split("#19 ", 1)[1].split("\n#", 1)[0]
    assert "session: Pending -> Creating" in block
    assert '    secret_step: "sent" -> "done"' in block
    assert '    pod.name: "" -> "demo-g1"' in block
    assert "{'" not in out  # no Python dict reprs
    for header, body in re.findall(r"^(#\d+ .*)\n((?:  .*\n?)*)", out, re.M):
        assert body.strip(), f"{header} printed with nothing under it"
        for m in re.finditer(r"  session: (\w+) -> (\w+)\n(?!    )", body):
            raise AssertionError(f"{header}: a state line with no field changed")


def test_effects_are_one_line_each_and_outcomes_name_the_effect_they_answer(capsys):
    _, out, _ = trace(capsys)
    assert "  effect 28.0 create Service golden-f728c6/demo\n" in out
    assert "  effect 28.1 create Ingress golden-f728c6/demo\n" in out
    assert "  answers 17.0: create Secret golden-f728c6/demo-env" in out


def test_a_key_that_matches_nothing_names_the_closest_keys_that_exist(capsys):
    code, out, err = trace(capsys, "local/default/demo")
    assert code == 1 and out == ""
    assert "no record touched local/default/demo" in err
    assert "closest keys in this journal: local/golden-f728c6/demo" in err


def test_field_diff_descends_into_nested_records_lists_and_json_text():
    old = {"pod": {"name": "", "ready": False}, "runs": [{"reason": "a"}], "status": '{"phase":"Pending"}'}
    new = {"pod": {"name": "demo-g1", "ready": False}, "runs": [{"reason": "b"}], "status": '{"phase":"Ready"}'}
    assert field_diff(old, new) == [("pod.name", "", "demo-g1"), ("runs[0].reason", "a", "b"),
                                    ("status~.phase", "Pending", "Ready")]
    assert field_diff(None, {"a": 1, "b": "", "c": {"d": 0, "e": "x"}}) == [("a", None, 1), ("c.e", None, "x")]


def test_words_for_times_and_effects():
    assert iso(0) == "1970-01-01T00:00:00.000Z" and iso(None) == "(no server time yet)"
    assert effect_line({"type": "create", "kind": "Service", "namespace": "kfold-demo", "name": "demo",
                        "cluster": "local"}) == "create Service kfold-demo/demo"
    assert effect_line({"type": "delete", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "0123456789",
                        "rv": "7", "cluster": "edge@acme"}) == "delete Pod ns/p (fenced uid=01234567 rv=7) on edge@acme"


def test_a_record_the_fold_refuses_is_shown_and_the_walk_goes_on(tmp_path, capsys):
    """``kfold replay`` stops at a record the fold refuses; trace and the UI show it and carry on."""
    from journal.records import Command
    from kfold.sources import iter_records
    from kfold.timeline import walk
    lines = GOLDEN.read_text().splitlines()
    bad = Command(seq=10, at=1795982717156, name="session.nonsense", cluster="local").model_dump_json()
    path = tmp_path / "refused.jsonl"
    path.write_text("\n".join(lines[:9] + [bad] + lines[10:]) + "\n")
    steps = list(walk(iter_records(str(path))))
    assert "unknown command 'session.nonsense'" in steps[9].error
    assert len(steps) == 107 and any(s.changes for s in steps[10:])
    assert main(["replay", str(path)]) == 2
    capsys.readouterr()


def test_the_walk_decides_exactly_what_the_fold_decides():
    """Watching the machines' writes changes nothing: the same effects, record by record."""
    from engine.core import fold, initial_state
    from journal.jsonl import read_jsonl
    from kfold.timeline import walk
    records = list(read_jsonl(GOLDEN))
    state, folded = initial_state(), []
    for rec in records:
        state, effects = fold(state, rec)
        folded.append(effects)
    steps = list(walk(records))
    assert [s.effects for s in steps] == folded
    assert not any(s.error or s.divergence for s in steps)
    changed = {(c.machine, c.key) for s in steps for c in s.changes}
    assert ("session", KEY) in changed and ("pod", "local/golden-f728c6/demo-g1") in changed


def deadline_journal(tmp_path):
    """The golden journal up to the pod's creation (#24 arms the Session's start timer), then that
    timer's deadline twice: the first fires, the second is stale (its timer is gone)."""
    from journal.records import Deadline
    lines = GOLDEN.read_text().splitlines()[:24]
    due = 1795982897184
    fire = dict(timer=f"session:{KEY}:start", machine="session", key=KEY, name="start", due=due)
    extra = [Deadline(seq=25, at=due, **fire).model_dump_json(), Deadline(seq=26, at=due + 5, **fire).model_dump_json()]
    path = tmp_path / "deadline.jsonl"
    path.write_text("\n".join(lines + extra) + "\n")
    return path


def test_a_deadline_that_fires_and_a_stale_one_are_told_apart(tmp_path, capsys):
    code, out, _ = trace(capsys, path=deadline_journal(tmp_path))
    assert code == 0
    assert "#24 " in out and "  timer start due 2026-11-29T20:08:17.184Z" in out
    fired = out.split("#25 ", 1)[1].split("\n#", 1)[0]
    assert fired.startswith("2026-11-29T20:08:17.184Z deadline session local/golden-f728c6/demo start")
    assert "\n  fired\n" in fired and "session: Provisioning -> Failed" in fired
    stale = out.split("#26 ", 1)[1]
    assert "stale: the timer was cancelled or moved since" in stale
