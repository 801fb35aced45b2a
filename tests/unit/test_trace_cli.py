"""``kfold trace`` reads like a debugging session: human server times, one line per record, a
field-level diff of what changed (no "Pending -> Pending" repeats without a change), effects one
line each, outcomes linked to the effect they answer, and the closest keys when a key matches
nothing."""
from __future__ import annotations

import re

from kfold.cli import main
from kfold.offline.render import effect_line, field_diff, iso
from tests.golden_facts import GOLDEN, golden, iso_ms

G = golden()
KEY = G.session


def trace(capsys, key=KEY, path=GOLDEN):
    code = main(["trace", str(path), key])
    out, err = capsys.readouterr()
    return code, out, err


def test_each_record_is_one_header_line_with_its_iso_server_time(capsys):
    code, out, _ = trace(capsys)
    assert code == 0
    headers = [l for l in out.splitlines() if l.startswith("#")]
    first = G.session_observed
    assert headers[0] == (f"#{first['seq']} {iso_ms(first['at'])} observed ADDED Session "
                          f"{first['namespace']}/{first['name']} rv={first['rv']}")
    assert all(re.match(r"#\d+ (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z|\(no server time yet\)) ", h) for h in headers)
    assert str(first["at"])[:10] not in out  # no epoch milliseconds


def test_a_change_is_shown_field_by_field_and_a_no_change_record_is_left_out(capsys):
    _, out, _ = trace(capsys)
    pod = G.first("create", "Pod")   # emitted by the record that moves the Session to Creating
    block = out.split(f"#{pod.cause} ", 1)[1].split("\n#", 1)[0]
    assert "session: Pending -> Creating" in block
    assert '    secret.step: "sent" -> "done"' in block
    assert f'    pod.name: "" -> "{pod.body["name"]}"' in block
    assert "{'" not in out  # no Python dict reprs
    for header, body in re.findall(r"^(#\d+ .*)\n((?:  .*\n?)*)", out, re.M):
        assert body.strip(), f"{header} printed with nothing under it"
        for m in re.finditer(r"  session: (\w+) -> (\w+)\n(?!    )", body):
            raise AssertionError(f"{header}: a state line with no field changed")


def test_effects_are_one_line_each_and_outcomes_name_the_effect_they_answer(capsys):
    _, out, _ = trace(capsys)
    service, ingress, secret = G.first("create", "Service"), G.first("create", "Ingress"), G.first("create", "Secret")
    assert f"  effect {service.id} create Service {service.where}\n" in out
    assert f"  effect {ingress.id} create Ingress {ingress.where}\n" in out
    assert f"  answers {secret.id}: create Secret {secret.where}" in out


def test_a_key_that_matches_nothing_names_the_closest_keys_that_exist(capsys):
    code, out, err = trace(capsys, "local/default/demo")
    assert code == 1 and out == ""
    assert "no record touched local/default/demo" in err
    assert f"closest keys in this journal: {KEY}" in err


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
    """``kfold replay`` stops at a record the fold refuses (here a repeated seq); trace and the UI
    show it and carry on."""
    from kfold.offline.sources import iter_records
    from kfold.offline.timeline import walk
    i = G.index(G.session_observed["seq"] + 1)   # right after the Session is first seen
    path = tmp_path / "refused.jsonl"
    path.write_text("\n".join(G.lines[:i + 1] + [G.lines[i]] + G.lines[i + 1:]) + "\n")
    steps = list(walk(iter_records(str(path))))
    assert "cannot follow seq" in steps[i + 1].error
    assert not any(s.error for s in steps[:i + 1] + steps[i + 2:])
    assert len(steps) == len(G) + 1 and any(s.changes for s in steps[i + 2:])
    assert main(["replay", str(path)]) == 2
    capsys.readouterr()


def test_a_record_a_machine_cannot_fold_is_shown_quarantined_and_the_walk_goes_on(tmp_path, capsys):
    """An unknown command is quarantined (issue 12): the walk shows the quarantine on that record
    and goes on; ``kfold replay`` completes and reports it."""
    from journal.records import Command
    from kfold.offline.sources import iter_records
    from kfold.offline.timeline import walk
    seq = G.session_observed["seq"] + 1
    bad = Command(seq=seq, at=G.record(seq)["at"], name="session.nonsense", cluster="local").model_dump_json()
    path = tmp_path / "poison.jsonl"
    path.write_text(G.with_record(seq, bad))
    steps = list(walk(iter_records(str(path))))
    i = G.index(seq)
    assert [(k, q.seq) for k, q in steps[i].quarantined.items()] == [("local//#session.nonsense", seq)]
    assert "unknown command 'session.nonsense'" in steps[i].quarantined["local//#session.nonsense"].error
    assert not any(s.error or s.quarantined for s in steps[:i] + steps[i + 1:])
    assert len(steps) == len(G) and any(s.changes for s in steps[i + 1:])
    assert main(["replay", str(path)]) == 0
    assert f"quarantined local//#session.nonsense at seq {seq}" in capsys.readouterr().out


def test_the_walk_decides_exactly_what_the_fold_decides():
    """Watching the machines' writes changes nothing: the same effects, record by record."""
    from engine.core import fold, initial_state
    from journal.jsonl import read_jsonl
    from kfold.offline.timeline import walk
    records = list(read_jsonl(GOLDEN))
    state, folded = initial_state(), []
    for rec in records:
        state, effects = fold(state, rec)
        folded.append(effects)
    steps = list(walk(records))
    assert [s.effects for s in steps] == folded
    assert not any(s.error or s.divergence for s in steps)
    changed = {(c.machine, c.key) for s in steps for c in s.changes}
    assert ("session", KEY) in changed and ("pod", G.first("create", "Pod").body["key"]) in changed


def deadline_journal(tmp_path):
    """The golden journal up to the pod's creation (the outcome that arms the Session's start
    timer, ``G.start_timer``), then that timer's deadline twice: the first fires, the second is
    stale (its timer is gone)."""
    from journal.records import Deadline
    arms, due = G.start_timer
    lines = G.lines[:G.index(arms) + 1]
    fire = dict(timer=f"session:{KEY}:start", machine="session", key=KEY, name="start", due=due)
    extra = [Deadline(seq=arms + 1, at=due, **fire).model_dump_json(),
             Deadline(seq=arms + 2, at=due + 5, **fire).model_dump_json()]
    path = tmp_path / "deadline.jsonl"
    path.write_text("\n".join(lines + extra) + "\n")
    return path


def test_a_deadline_that_fires_and_a_stale_one_are_told_apart(tmp_path, capsys):
    code, out, _ = trace(capsys, path=deadline_journal(tmp_path))
    assert code == 0
    arms, due = G.start_timer
    armed = out.split(f"#{arms} ", 1)[1].split("\n#", 1)[0]
    assert f"  timer start due {iso_ms(due)}" in armed
    fired = out.split(f"#{arms + 1} ", 1)[1].split("\n#", 1)[0]
    assert fired.startswith(f"{iso_ms(due)} deadline session {KEY} start")
    assert "\n  fired\n" in fired and "session (still Provisioning):" in fired
    assert "Provisioning -> Provisioning" not in out
    assert "get Pod" in fired, "the deadline reads the pod before judging the Session"
    stale = out.split(f"#{arms + 2} ", 1)[1]
    assert "stale: the timer was cancelled or moved since" in stale


# -- --brief ------------------------------------------------------------------------------------
NAME_TAKEN = GOLDEN.with_name("golden_name_taken.jsonl")


def _records(path) -> list[dict]:
    import json
    return [json.loads(line) for line in path.read_text().splitlines() if '"rec"' in line]


def test_brief_puts_the_failure_reason_on_the_first_line(capsys):
    from tests.unit.test_ui_explain import failed_writes
    records = _records(NAME_TAKEN)
    cause, reason, message = failed_writes(records)["demo"]
    assert main(["trace", str(NAME_TAKEN), "demo", "--brief"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Session ") and out[0].endswith(f"Ready False {reason}: {message} (#{cause})")
    assert main(["trace", str(NAME_TAKEN), "demo"]) == 0
    full = capsys.readouterr().out.splitlines()
    assert len(out) * 3 < len(full), (len(out), len(full))   # brief: a few lines, not the whole story


def test_brief_keeps_phases_effects_outcomes_not_ok_and_reasons(capsys):
    from tests.unit.test_ui_explain import expected_answers
    records = _records(NAME_TAKEN)
    key = next(f"{r['cluster']}/{r['namespace']}/{r['name']}" for r in records
               if r["rec"] == "observed" and r["kind"] == "Session" and r["name"] == "demo")
    assert main(["trace", str(NAME_TAKEN), key, "--brief"]) == 0
    out = capsys.readouterr().out
    emitted = [r["effect"] for r in records if r["rec"] == "effect" and r["effect"]["key"] == key]
    assert emitted and all(f"effect {e['id']} {effect_line(e)}" in out for e in emitted)
    mine = {e["id"] for e in emitted}
    expected = expected_answers(records)
    for r in records:
        if r["rec"] == "outcome" and r["effect_id"] in mine and r["result"] != "ok":
            line = next(l for l in out.splitlines() if l.strip().startswith(f"outcome {r['effect_id']} "))
            assert r["result"] in line and r["message"] in line
            assert ("(expected, " in line) == (r["seq"] in expected)
    phases = [p for p in re.findall(r"session: (\S+) -> (\S+)", out)]
    assert phases[0][0] == "(absent)" and ("Provisioning", "Failed") in phases
    items = [l.strip() for l in out.splitlines() if l.startswith("  ")]
    assert not [i for i in items if i.startswith("outcome") and ": ok" in i]   # no ok outcome
    assert not [i for i in items if ": " in i and i.split(":")[0] in ("pod.name", "secret_step", "evented")]   # no diffs
