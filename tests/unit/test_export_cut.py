"""An export of a journal whose head retention cut opens everywhere (DESIGN.md invariant 14): it
carries the snapshot its records continue, every offline command folds from it, and its seal still
finds a record altered, missing or cut off within what it holds. Format: ``journal.jsonl``."""
from __future__ import annotations

import asyncio
import base64
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from engine import snapshot
from engine.core import fold, initial_state
from journal.retention import Retention
from journal.sqlite import SqliteJournal
from kfold.cli import main
from kfold.offline.render import state_of
from kfold.offline.ui.index import build
from kfold.offline.ui.server import Store
from tests.harness import Scenario
from tests.unit.test_replay_cli import scenario as replay_cli_scenario, session_obj


def read_start(path: Path) -> tuple[int, bytes | None]:
    """(first seq, snapshot line or None) of an export, read as docs/journal.md describes it."""
    lines = path.read_bytes().splitlines()
    header = orjson.loads(lines[0])
    return header["first_seq"], lines[1] if header.get("snapshot") else None


def _edit(path: Path, seq: int, edit) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    i = next(i for i, l in enumerate(lines) if l.startswith(b'{"seq":%d,' % seq))
    lines[i:i + 1] = edit(lines[i])
    path.write_bytes(b"".join(lines))


REPO = Path(__file__).resolve().parents[2]
SECRET_VALUE = "hunter2-export-secret"
SECRET = {"apiVersion": "v1", "kind": "Secret",
          "metadata": {"name": "demo-env", "namespace": "ns", "uid": "u-s", "resourceVersion": "3",
                       "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "demo"}},
          "data": {"TOKEN": base64.b64encode(SECRET_VALUE.encode()).decode()}, "stringData": {"PASSWORD": SECRET_VALUE}}


def kfold(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfold", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def leaky_session() -> dict:
    """A Session whose spec holds a literal credential: the journal redacts it on append, and the
    session machine keeps the (redacted) spec in its decision, so it lives in every snapshot."""
    obj = session_obj("leaky")
    obj["spec"]["env"] = [{"name": "API_TOKEN", "value": SECRET_VALUE}]
    return obj


def scenario() -> Scenario:
    """A Secret and a Session with a literal credential, then two Sessions brought up as far as
    their answers allow (every effect answered ok)."""
    return replay_cli_scenario((SECRET, leaky_session()))


def cut_journal(path: Path, snapshots_at: tuple[int, ...] = (6, 11), archive: Path | None = None, keep: int = 1) -> int:
    """The scenario journaled through the journal's own retention (keep ``keep`` snapshots, taken
    of the state folded from what the journal holds, as the daemon takes them); returns first_seq."""
    records = scenario().records

    async def go() -> int:
        j = SqliteJournal(str(path))
        j.retention = Retention(keep_snapshots=keep, archive_dir=str(archive) if archive else None)
        await j.open()
        done, state = 0, initial_state()
        for at in (*snapshots_at, len(records)):
            await j.append(records[done:at])
            async for rec in j.read(done + 1, at):   # redacted, as the daemon folds them
                state, _ = fold(state, rec)
            if at != len(records):
                await j.put_snapshot(at, snapshot.dump(state))
            done = at
        first = j.first_seq
        await j.close()
        return first

    return asyncio.run(go())


@pytest.fixture
def cut(tmp_path):
    path = tmp_path / "j.sqlite"
    first = cut_journal(path)
    assert first == 12, "retention cut the head"
    return path, first


def after_note(text: str) -> list[str]:
    """Replay's output without its first line (which says where history begins, and from what)."""
    lines = text.splitlines()
    assert lines[0].startswith("history begins at seq "), lines[0]
    return lines[1:]


# -- (a) a real journal whose head retention cut, through the commands as processes ------------
def test_the_export_of_a_cut_journal_replays_checks_traces_and_indexes_like_the_journal(cut, tmp_path):
    path, first = cut
    out = tmp_path / "x.jsonl"
    exported = kfold("export", str(path), "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    assert f"the export begins at seq {first} (retention cut the records before it)" in exported.stderr
    with sqlite3.connect(path) as db:   # sealed onto the journal's own chain: it ends on the journal's head
        head = db.execute("SELECT value FROM meta WHERE key = 'head'").fetchone()[0]
    end = orjson.loads(out.read_bytes().splitlines()[-1])
    assert f"{end['kfold_end']} {end['chk']}" == (head.decode() if isinstance(head, bytes) else head)

    direct, replayed = kfold("replay", str(path), "--check"), kfold("replay", str(out), "--check")
    assert direct.returncode == 0, direct.stderr
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.splitlines()[0].startswith(f"history begins at seq {first}: ")
    assert after_note(replayed.stdout) == after_note(direct.stdout)   # the same decisions
    assert "check: every journaled effect matches the current code" in replayed.stdout
    assert "machine session: 3 objects" in replayed.stdout

    traced, traced_direct = kfold("trace", str(out), "local/ns/demo"), kfold("trace", str(path), "local/ns/demo")
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == traced_direct.stdout and "session: " in traced.stdout
    headers = [int(line.split()[0][1:]) for line in traced.stdout.splitlines() if line.startswith("#")]
    assert traced.stdout.startswith(f"#{first - 1} snapshot: history continues from here\n  session: ")
    assert headers[0] == first - 1 and all(seq >= first for seq in headers[1:])
    assert f"started from the snapshot at seq {first - 1}" in traced.stderr

    for source in (out, path):   # the UI's loader: the export and the journal give the same index
        index = tmp_path / f"{source.name}.index"
        meta = build(str(source), index)
        assert meta["records"] == len(scenario().records) - first + 1 and meta["first_seq"] == first
        store = Store(index, str(source))
        keys = {o["key"] for o in store.objects()["objects"]}
        assert {"local/ns/demo", "local/ns/other"} <= keys
        assert store.raw(first)["seq"] == first


def test_a_key_no_record_after_the_cut_changes_is_traced_as_the_snapshot_holds_it(cut, tmp_path):
    """Every object the snapshot holds is shown as it stood there, each machine's state derived by
    folding the scenario's records up to the cut here, even one whose later records change nothing."""
    path, first = cut
    out = tmp_path / "x.jsonl"
    assert kfold("export", str(path), "-o", str(out)).returncode == 0
    state = initial_state()
    for rec in scenario().records[:first - 1]:
        state, _ = fold(state, rec)
    keys = {k for t in state.tables.values() for k in t if k.count("/") == 2 and "#" not in k}
    assert len(keys) >= 3
    for key in sorted(keys):
        expected = [f"{m}: {state_of(t[key])}" for m, t in sorted(state.tables.items()) if key in t]
        for source in (out, path):
            traced = kfold("trace", str(source), key)
            assert traced.returncode == 0, traced.stderr
            lines = traced.stdout.splitlines()
            assert lines[0] == f"#{first - 1} snapshot: history continues from here"
            assert [line.strip() for line in lines[1:1 + len(expected)]] == expected


def test_every_view_of_a_cut_export_holds_no_secret_value(cut, tmp_path):
    """Invariant 6 across the cut: the Secret was observed before it, so it lives in the snapshot."""
    path, _ = cut
    out = tmp_path / "x.jsonl"
    assert kfold("export", str(path), "-o", str(out)).returncode == 0
    text = out.read_text()
    snap = read_start(out)[1].decode()
    assert "API_TOKEN" in snap and "redacted:hmac-sha256:" in snap, "the credential's place is in the snapshot"
    for needle in (SECRET_VALUE, base64.b64encode(SECRET_VALUE.encode()).decode()):
        assert needle not in text


def test_the_other_offline_commands_open_a_cut_journal_and_its_export(cut, tmp_path, capsys):
    path, first = cut
    out = tmp_path / "x.jsonl"
    assert main(["export", str(path), "-o", str(out), "--until", str(first - 1)]) == 2
    assert f"--until {first - 1} is before the kept history, which begins at seq {first}" in capsys.readouterr().err
    assert main(["export", str(path), "-o", str(out)]) == 0
    for source in (path, out):
        assert main(["repos", "--journal", str(source)]) == 0
        assert main(["replay", str(source), "--from-snapshot", "--check"]) == 0
    capsys.readouterr()
    again = tmp_path / "again.jsonl"   # an export of the export: the same start, sealed afresh
    assert main(["export", str(out), "-o", str(again)]) == 0
    assert read_start(again) == read_start(out)
    assert main(["replay", str(again), "--check"]) == 0


def test_export_since_begins_at_the_newest_snapshot_before_it_and_replays_to_the_same_end(tmp_path):
    path = tmp_path / "j.sqlite"
    cut_journal(path, snapshots_at=(6, 11), keep=0)   # nothing cut: two snapshots to choose from
    out = tmp_path / "since.jsonl"
    exported = kfold("export", str(path), "-o", str(out), "--since", "11")
    assert exported.returncode == 0, exported.stderr
    assert "the export begins at seq 7 (--since) and carries the snapshot at seq 6" in exported.stderr
    assert read_start(out)[0] == 7
    direct, replayed = kfold("replay", str(path), "--check"), kfold("replay", str(out), "--check")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    ends = lambda text: [l for l in text.splitlines() if l.startswith(("machine ", "pending effects"))]  # noqa: E731
    assert ends(replayed.stdout) == ends(direct.stdout)


def test_a_retention_archive_after_the_first_replays_alone(tmp_path):
    archive = tmp_path / "archive"
    cut_journal(tmp_path / "j.sqlite", snapshots_at=(4, 8, 13), archive=archive)
    files = sorted(p.name for p in archive.iterdir())
    assert files == ["journal-000000000001-000000000008.jsonl", "journal-000000000009-000000000013.jsonl"]
    second = archive / files[1]
    assert read_start(second)[0] == 9
    result = kfold("replay", str(second), "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "records folded: 5 (last seq 13)" in result.stdout


def test_an_unsealed_export_with_a_gap_is_still_refused_by_the_fold(cut, tmp_path, capsys):
    path, first = cut
    out = tmp_path / "x.jsonl"
    assert main(["export", str(path), "-o", str(out), "--unsealed"]) == 0
    _edit(out, first + 3, lambda line: [])
    capsys.readouterr()
    assert main(["replay", str(out), "--check"]) == 2
    err = capsys.readouterr().err
    assert f"seq {first + 4}" in err and "gap" in err
    assert main(["export", str(out), "-o", str(tmp_path / "again.jsonl")]) == 2   # nor sealed into a new export
    assert f"record {first + 4} cannot follow record {first + 2}" in capsys.readouterr().err


# -- the commands' answers to a damaged export: one line, the file, the fix --------------------
COMMANDS = {"replay": ["replay", "--check"], "trace": ["trace", "local/ns/demo"], "export": ["export", "-o", "/dev/null"],
            "ui": ["ui", "--listen", "127.0.0.1:0"], "repos": ["repos", "--journal"]}


def _argv(command: str, path: Path) -> list[str]:
    head, *rest = COMMANDS[command]
    return [head, str(path), *rest] if head != "repos" else [head, *rest, str(path)]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("damage, code, says", [
    ("truncated", 2, "without its end line: it was cut short; export the journal again"),
    ("missing", 3, "is missing"),
    ("altered", 3, "checksum mismatch"),
    ("bad-header", 2, "this kfold reads format 1"),
    ("malformed", 2, "not JSON: unexpected end of data"),
])
def test_every_offline_command_answers_a_damaged_export_in_one_line(cut, tmp_path, capsys, command, damage, code,
                                                                    says):
    path, first = cut
    out = tmp_path / "x.jsonl"
    assert main(["export", str(path), "-o", str(out)]) == 0
    data = out.read_bytes()
    if damage == "truncated":
        out.write_bytes(data[:data.rindex(b'{"kfold_end"')])
    elif damage == "missing":
        _edit(out, first + 2, lambda line: [])
    elif damage == "altered":
        _edit(out, first + 2, lambda line: [line.replace(b'"at":', b'"at": ', 1)])
    elif damage == "malformed":
        _edit(out, first + 2, lambda line: [b'{"seq":\n'])
    else:
        out.write_bytes(data.replace(b'{"kfold_export":1', b'{"kfold_export":2', 1))
    capsys.readouterr()
    if command == "ui":   # a server: in a process, so a ui that wrongly serves it fails at the timeout
        done = kfold(*_argv(command, out), timeout=60)
        returned, stderr = done.returncode, done.stderr
        assert "Traceback" not in stderr
    else:
        returned = main(_argv(command, out))   # a traceback would fail the test
        stderr = capsys.readouterr().err
    assert returned == code, stderr   # the same code from every command, repos included
    said = [line for line in stderr.splitlines() if says in line and "kfold ui: " + str(out) + " at http" not in line]
    assert len(said) == 1 and str(out) in said[0], stderr
    assert damage not in ("truncated", "malformed") or "export the journal again (kfold export JOURNAL -o FILE)" in said[0]


def test_a_simulator_journal_and_its_export_open_in_replay_check_and_the_ui(tmp_path, capsys):
    assert main(["sim", "--seed", "3", "--steps", "40", "--out", str(tmp_path), "--journal"]) == 0
    journal, out = tmp_path / "seed-3.sqlite", tmp_path / "seed-3.jsonl"
    assert main(["export", str(journal), "-o", str(out)]) == 0
    capsys.readouterr()
    for source in (journal, out):
        assert main(["replay", str(source), "--check"]) == 0, capsys.readouterr().err
        assert build(str(source), tmp_path / f"{source.name}.index")["records"] > 0
