"""``kfold replay`` / ``export`` / ``trace`` on real journal files: check passes on an untouched
journal, a changed decision is a named divergence, corruption is refused at its exact seq, bad
JSONL names its line."""
import asyncio
import json
import sqlite3

import pytest

from engine import snapshot
from engine.core import fold, initial_state
from journal.sqlite import SqliteJournal
from kfold.cli import main
from tests.harness import T0, Scenario


def session_obj(name="demo", rv="1"):
    return {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv, "generation": 1},
            "spec": {"image": "img:1", "apps": [{"name": "web", "ports": [{"port": 8080}]}]}}


def scenario(first: tuple[dict, ...] = ()) -> Scenario:
    """A session brought up as far as its answers allow: every effect answered ok (after the
    objects ``first``, observed before it)."""
    sc = Scenario()
    sc.command("session.configure", T0, clusters=["local"], base_domain="example.test")
    for obj in first:
        sc.observe(obj, T0 + 500, event="ADDED")
    sc.observe(session_obj(), T0 + 1000, event="ADDED")
    sc.observe(session_obj("other"), T0 + 1500, event="ADDED")
    for step in range(6):
        for eff in list(sc.pending()):
            if sc.state.pending.get(eff.id) is not None and sc.state.pending[eff.id].issued:
                sc.outcome(eff, "ok", T0 + 2000 + step, obj={"metadata": {"uid": "u1", "resourceVersion": "5"}})
    return sc


def write_journal(path, records):
    async def go():
        j = SqliteJournal(str(path))
        await j.open()
        await j.append(list(records))
        await j.close()
    asyncio.run(go())


@pytest.fixture
def journal(tmp_path):
    sc = scenario()
    path = tmp_path / "j.sqlite"
    write_journal(path, sc.records)
    return path, sc


def test_replay_check_passes_on_an_untouched_journal(journal, capsys):
    path, sc = journal
    assert main(["replay", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert f"records folded: {len(sc.records)}" in out
    assert "check: every journaled effect matches" in out
    session_line = next(l for l in out.splitlines() if l.startswith("machine session: "))
    assert session_line.startswith("machine session: 2 objects (")   # demo and other, not the config row
    assert "bookkeeping: SessionConfig" in session_line


def test_export_then_replay_the_jsonl_gives_the_same_summary(journal, tmp_path, capsys):
    path, _ = journal
    assert main(["replay", str(path)]) == 0
    direct = capsys.readouterr().out
    out = tmp_path / "j.jsonl"
    assert main(["export", str(path), "-o", str(out)]) == 0
    assert main(["replay", str(out), "--check"]) == 0
    assert capsys.readouterr().out.startswith(direct)


def test_a_changed_decision_is_a_named_divergence(journal, tmp_path, capsys):
    path, _ = journal
    out = tmp_path / "j.jsonl"
    main(["export", str(path), "-o", str(out), "--unsealed"])   # for hand edits: trusted as written
    lines = out.read_text().splitlines()
    idx = next(i for i, l in enumerate(lines) if '"rec":"effect"' in l)
    rec = json.loads(lines[idx])
    rec["effect"]["name"] = rec["effect"]["name"] + "-tampered"
    lines[idx] = json.dumps(rec)
    out.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["replay", str(out), "--check"]) == 1
    err = capsys.readouterr().err
    assert f"divergence at record {rec['seq']}: effect {rec['effect']['id']}" in err
    assert "-tampered" in err and "cause:" in err and "name: expected" in err


def test_a_flipped_byte_is_refused_at_its_exact_sequence_number(journal, capsys):
    path, sc = journal
    db = sqlite3.connect(path)
    (payload,) = db.execute("SELECT payload FROM journal WHERE seq = 5").fetchone()
    flipped = bytearray(payload)
    flipped[len(flipped) // 2] ^= 0x01
    db.execute("UPDATE journal SET payload = ? WHERE seq = 5", (bytes(flipped),))
    db.commit()
    db.close()
    assert main(["replay", str(path)]) == 3
    assert "broken at seq 5" in capsys.readouterr().err
    assert main(["replay", str(path), "--up-to-corruption"]) == 3
    assert "records folded: 4 (last seq 4)" in capsys.readouterr().out


def test_a_malformed_jsonl_line_names_its_line_number_and_field(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rec":"command","seq":1,"name":"session.configure","args":{}}\n{"rec":"observed","seq":2}\n')
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "observed.cluster" in err


def test_an_unknown_record_kind_is_an_error_not_skipped(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rec":"gossip","seq":1}\n')
    assert main(["replay", str(bad)]) == 2
    assert "unknown record kind 'gossip'" in capsys.readouterr().err


def test_trace_shows_how_one_objects_decisions_evolved(journal, capsys):
    path, _ = journal
    assert main(["trace", str(path), "local/ns/demo"]) == 0
    out = capsys.readouterr().out
    assert "session: (absent) ->" in out and "effect " in out
    assert "local/ns/other" not in out


def test_trace_of_a_key_nothing_touched_says_so_and_how_keys_look(journal, capsys):
    path, _ = journal
    assert main(["trace", str(path), "local/ns/nobody"]) == 1
    assert "no record touched local/ns/nobody" in capsys.readouterr().err
    assert main(["trace", str(path), "nobody"]) == 1
    assert "a key is <cluster>/<namespace>/<name>" in capsys.readouterr().err


def test_a_snapshot_plus_the_tail_equals_a_full_replay_with_the_real_machines():
    sc = scenario()
    middle = len(sc.records) // 2
    state = initial_state()
    for rec in sc.records[:middle]:
        state, _ = fold(state, rec)
    resumed = snapshot.load(snapshot.dump(state))
    for rec in sc.records[middle:]:
        resumed, _ = fold(resumed, rec)
    assert snapshot.dump(resumed) == snapshot.dump(sc.state)


def test_an_export_and_a_trace_never_show_a_secret_value(tmp_path, capsys):
    """Invariant 6: what the journal redacted on append stays redacted in every view of it."""
    import base64

    from journal.records import Observed
    value = "hunter2-very-secret-value"
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "demo-env", "namespace": "ns", "uid": "u-s", "resourceVersion": "3",
                           "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "demo"}},
              "data": {"TOKEN": base64.b64encode(value.encode()).decode()}, "stringData": {"PASSWORD": value}}
    path = tmp_path / "j.sqlite"
    write_journal(path, [Observed(at=T0, cluster="local", api_version="v1", kind="Secret", namespace="ns",
                                  name="demo-env", uid="u-s", rv="3", event="ADDED", obj=secret)])
    out = tmp_path / "j.jsonl"
    assert main(["export", str(path), "-o", str(out)]) == 0
    main(["trace", str(path), "local/ns/demo-env"])
    shown = out.read_text() + capsys.readouterr().out
    assert value not in shown and base64.b64encode(value.encode()).decode() not in shown
    assert "redacted:hmac-sha256:" in out.read_text()


@pytest.mark.parametrize("command", [["replay"], ["export", "-o", "/dev/null"], ["trace", "_key_"]],
                         ids=["replay", "export", "trace"])
def test_every_offline_command_names_a_malformed_line_instead_of_crashing(command, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rec":"command","seq":1,"name":"session.configure","args":{}}\n{"rec":"observed","seq":2}\n')
    argv = [command[0], str(bad)] + [a for a in command[1:] if a != "_key_"] + (["local/ns/x"] if "_key_" in command else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "observed.cluster" in err and "Traceback" not in err


def _with_snapshot(path, sc, at_seq):
    """The journal of ``sc`` with a snapshot of the state after ``at_seq`` (as the daemon writes)."""
    state = initial_state()
    for rec in sc.records[:at_seq]:
        state, _ = fold(state, rec)

    async def go():
        j = SqliteJournal(str(path))
        await j.open()
        await j.put_snapshot(at_seq, snapshot.dump(state))
        await j.close()
    asyncio.run(go())


def test_replay_from_a_snapshot_folds_only_the_tail_and_ends_where_a_full_replay_does(journal, capsys):
    path, sc = journal
    assert main(["replay", str(path), "--check"]) == 0
    full = capsys.readouterr().out
    cut = len(sc.records) // 2
    _with_snapshot(path, sc, cut)
    assert main(["replay", str(path), "--check", "--from-snapshot"]) == 0
    out = capsys.readouterr().out
    assert f"started from the snapshot at seq {cut}" in out
    assert f"records folded: {len(sc.records) - cut} (last seq {len(sc.records)})" in out
    machines = lambda text: [l for l in text.splitlines() if l.startswith(("machine ", "pending effects"))]  # noqa: E731
    assert machines(out) == machines(full), "the same state as the full replay"
    assert "check: every journaled effect matches" in out


def test_replay_from_a_snapshot_before_until_and_without_any_snapshot(journal, capsys):
    path, sc = journal
    assert main(["replay", str(path), "--from-snapshot", "--until", "3"]) == 0
    assert "no snapshot at or before seq 3: folded from seq 1" in capsys.readouterr().out
    _with_snapshot(path, sc, 5)
    assert main(["replay", str(path), "--from-snapshot", "--until", "4"]) == 0
    assert "records folded: 4 (last seq 4)" in capsys.readouterr().out, "a snapshot after --until is not used"


def test_replay_from_a_snapshot_still_refuses_a_broken_tail_at_its_seq(journal, capsys):
    path, sc = journal
    _with_snapshot(path, sc, 4)
    db = sqlite3.connect(path)
    db.execute("UPDATE journal SET chk = chk + 1 WHERE seq = 6")
    db.commit()
    db.close()
    assert main(["replay", str(path), "--from-snapshot"]) == 3
    assert "checksum chain broken at seq 6" in capsys.readouterr().err


def test_an_export_of_a_whole_journal_carries_no_snapshot_so_from_snapshot_folds_it_whole(journal, tmp_path, capsys):
    path, sc = journal
    out = tmp_path / "j.jsonl"
    assert main(["export", str(path), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["replay", str(out), "--from-snapshot"]) == 0
    text = capsys.readouterr().out
    assert "no snapshot at or before seq the end: folded from seq 1" in text
    assert f"records folded: {len(sc.records)} (last seq {len(sc.records)})" in text
