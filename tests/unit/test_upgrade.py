"""Upgrades (docs/journal.md "Upgrades"): a journal an older kfold wrote, its head cut by retention,
boots and replays ``--check`` on this code; a journal a newer kfold wrote is refused, untouched.

The fixture ``tests/data/upgrade/ae4b05a.sqlite`` is what kfold at ae4b05a wrote on a real control
plane (``scripts/make_upgrade_fixture.py``): 4 Sessions over three lives of the daemon, a Repo bound
by the config and one attached, the first two lives' records cut, a snapshot at 153 and at 230.
Its snapshots hold records in the shape of snapshot format 1; ``format-1.json`` records that shape
(``scripts/snapshot_shapes.py``), so a change of a persisted field fails here twice: the shape
differs from the recorded format's, and the fixture's snapshots no longer load.
"""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import migrations, snapshot
from engine.core import fold_many
from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.fake import FakeApiServer, FakeTransport
from engine.migrations import Add, Drop, EachEntry, Migration, Rename, SnapshotFormatError, Whole
from journal.chain import JournalError, snapshot_chk
from journal.records import Command
from journal.sqlite import SqliteJournal
from kfold.daemon.loop import Daemon
from scripts.snapshot_shapes import diff, recorded

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "upgrade"
FIXTURES = sorted(DATA.glob("*.sqlite"))
FIRST, SNAPSHOTS = 154, [153, 230]   # ae4b05a.sqlite: where its kept history begins, its snapshots


def kfold(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfold", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def rows(path: Path) -> dict[str, list]:
    """Everything a journal holds (records, snapshots, meta): what an upgrade must not rewrite."""
    with sqlite3.connect(path) as db:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                for t in ("journal", "snapshots", "meta")}


def stored(path: Path) -> list[tuple[int, bytes]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT seq, data FROM snapshots ORDER BY seq").fetchall()


@pytest.fixture
def old(tmp_path) -> Path:
    """A copy of ae4b05a's journal (a daemon opens it for writing)."""
    path = tmp_path / "journal.db"
    shutil.copyfile(DATA / "ae4b05a.sqlite", path)
    return path


def daemon_on(path: Path) -> Daemon:
    clock = ServerClock()
    return Daemon(SqliteJournal(path), lambda sink: Executor(FakeTransport(FakeApiServer()), clock, sink, env={}),
                  clock, snapshot_every=10**6)


# -- the persisted shape ---------------------------------------------------------------------------
def test_what_snapshots_persist_is_the_shape_recorded_for_the_current_format():
    old = recorded(migrations.FORMAT)
    assert old is not None, f"no tests/data/upgrade/format-{migrations.FORMAT}.json: run scripts/snapshot_shapes.py"
    changed = diff(old, migrations.shapes())
    assert not changed, (
        f"the records a snapshot persists changed, and snapshot format {migrations.FORMAT} says they did not:\n"
        + "\n".join(changed) + f"\nbump engine.migrations.FORMAT to {migrations.FORMAT + 1}, add "
        f"MIGRATIONS[{migrations.FORMAT + 1}] (a Rename, Add, Drop or EachEntry step per change) and run "
        f"scripts/snapshot_shapes.py (docs/journal.md, Upgrades)")


def test_every_format_since_the_oldest_read_has_its_recorded_shape_and_migration():
    migrations.check_chain()
    for fmt in range(migrations.OLDEST, migrations.FORMAT + 1):
        assert recorded(fmt) is not None, f"tests/data/upgrade/format-{fmt}.json is missing"


# -- an older kfold's journal on this code ---------------------------------------------------------
# Decisions changed on purpose since a fixture's kfold: (fixture, the commit, why, the effect field
# paths whose values differ). ``replay --check`` of the fixture compares every other field of every
# effect; a path listed here must name the change that made it differ.
DECIDED_SINCE: dict[str, list[tuple[str, str, Any]]] = {
    "ae4b05a": [],   # none: a decision changed since is gated by what the journal's configure states
}


def replay_check(path: Path, monkeypatch) -> Any:
    """``kfold replay PATH --check`` as the command folds it (from where its history begins), in this
    process, with the fixture's ``DECIDED_SINCE`` differences set aside."""
    from kfold.offline import replay as offline
    from kfold.offline.render import field_diff
    from kfold.offline.sources import iter_records, start_point
    accepted = [pattern for _, _, pattern in DECIDED_SINCE.get(path.stem, DECIDED_SINCE["ae4b05a"])]
    compare = offline.compare_issued

    def compare_but_accepted(rec, expected, state):
        div = compare(rec, expected, state)
        if div is None or div.journaled is None or div.recomputed is None:
            return div
        paths = [p for p, _, _ in field_diff(div.journaled, div.recomputed)]
        return None if all(any(a.search(p) for a in accepted) for p in paths) else div

    monkeypatch.setattr(offline, "compare_issued", compare_but_accepted)
    state, first, _ = start_point(str(path))
    return offline.replay(iter_records(str(path), None, first, projected=True), check=True, state=state)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_an_older_kfolds_cut_journal_replays_check_on_this_code(fixture, monkeypatch):
    done = kfold("replay", str(fixture))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("history begins at seq "), "the fixture's head is cut"
    result = replay_check(fixture, monkeypatch)
    assert result.divergence is None, result.divergence.describe()
    assert result.records == SNAPSHOTS[-1] - SNAPSHOTS[0] and sum(result.effects.values()) > 0
    snap = kfold("replay", str(fixture), "--check", "--from-snapshot")
    assert snap.returncode == 0, snap.stdout + snap.stderr


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_an_older_snapshot_migrated_and_its_tail_folded_is_the_newer_snapshot_migrated(fixture):
    """Each stored snapshot loads on this code, and the oldest one, with the kept records folded on
    this code, is the state the newest one holds: a migration gives what the fold would have."""
    (first, oldest), *_, (last, newest) = stored(fixture)
    assert orjson.loads(oldest)["format"] <= migrations.FORMAT
    with sqlite3.connect(fixture) as db:
        payloads = [r[0] for r in db.execute("SELECT payload FROM journal WHERE seq > ? AND seq <= ? ORDER BY seq",
                                             (first, last))]
    from journal.chain import parse_payloads
    state, _ = fold_many(snapshot.load(oldest), parse_payloads(payloads))
    assert snapshot.dump(state) == snapshot.dump(snapshot.load(newest))


def test_the_fixture_is_a_cut_journal_with_all_three_machines_in_its_snapshots():
    with sqlite3.connect(DATA / "ae4b05a.sqlite") as db:
        assert db.execute("SELECT min(seq) FROM journal").fetchone()[0] == FIRST
    assert [s for s, _ in stored(DATA / "ae4b05a.sqlite")] == SNAPSHOTS
    for _, data in stored(DATA / "ae4b05a.sqlite"):
        tables = orjson.loads(data)["tables"]
        assert all(tables.get(m) for m in ("pod", "repo", "session")), sorted(tables)


def test_an_older_kfolds_journal_boots_goes_on_and_keeps_every_record_it_had(old, monkeypatch):
    before = rows(old)
    last = SNAPSHOTS[-1]

    async def go() -> tuple[int, int]:
        daemon = daemon_on(old)
        await daemon.journal.open()
        daemon.start_loops()
        await daemon.recover()
        recovered = daemon.state.seq
        assert snapshot.dump(daemon.state) == snapshot.dump(snapshot.load(stored(old)[-1][1])), \
            "recovered from the older kfold's last snapshot, nothing to refold"
        configure = next(json.loads(r[3]) for r in reversed(before["journal"])
                         if r[2] == "command" and json.loads(r[3])["name"] == "session.configure")
        now = max(r[1] for r in before["journal"] if r[1] is not None) + 1000
        await daemon.submit([Command(at=now, name="session.configure",
                                     cluster=configure["cluster"], args=configure["args"])])  # as a boot does
        await daemon.stop()
        return recovered, daemon.state.seq

    recovered, end = asyncio.run(go())
    assert recovered == last and end > last, "this code journaled after the older kfold's records"
    after = rows(old)
    assert after["journal"][:len(before["journal"])] == before["journal"], "an older record was rewritten"
    assert after["snapshots"][:len(before["snapshots"])] == before["snapshots"]
    assert orjson.loads(after["snapshots"][-1][1])["format"] == migrations.FORMAT   # the next snapshot: this format
    result = replay_check(old, monkeypatch)   # the older records and what this code appended
    assert result.divergence is None, result.divergence.describe()
    assert result.state.seq == end


# -- a newer kfold's journal on this code ----------------------------------------------------------
def newer(path: Path) -> int:
    """``path``'s last snapshot as a newer kfold would have written it (a format this code does
    not know, a field it has never heard of); returns that format."""
    seq, data = stored(path)[-1]
    raw = orjson.loads(data)
    fmt = migrations.FORMAT + 1
    raw["format"], raw["tables"]["pod"] = fmt, {k: {**e, "fence": {}} for k, e in raw["tables"]["pod"].items()}
    data = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE snapshots SET data = ?, chk = ? WHERE seq = ?", (data, snapshot_chk(seq, data), seq))
    return fmt


def test_a_newer_kfolds_journal_is_refused_at_boot_naming_both_versions_and_left_as_it_was(old):
    fmt = newer(old)
    before = rows(old)

    async def go() -> None:
        daemon = daemon_on(old)
        await daemon.journal.open()
        daemon.start_loops()
        try:
            await daemon.recover()
        finally:
            for t in daemon._tasks:
                t.cancel()
            await daemon.journal.close()

    with pytest.raises(JournalError) as refused:
        asyncio.run(go())
    from kfold.cli.commands.run import _refusal
    from kfold.daemon.config import Config
    cfg = Config.model_validate({"cluster": {"name": "local"}, "namespaces": ["ns"], "journal": {"path": str(old)}})
    line = _refusal(refused.value, cfg)
    assert line == (f"journal {old}: the snapshot at seq {SNAPSHOTS[-1]} has format {fmt}, written by a newer kfold; "
                    f"this kfold ({_version()}) reads snapshot formats {migrations.OLDEST} to {migrations.FORMAT}: "
                    f"run a kfold that reads format {fmt} (docs/journal.md, Upgrades); nothing was written")
    assert rows(old) == before


def test_a_newer_kfolds_journal_is_refused_by_replay_with_exit_2(old):
    fmt = newer(old)
    for argv in ((), ("--from-snapshot",)):
        done = kfold("replay", str(old), "--check", *argv)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"has format {fmt}, written by a newer kfold" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_snapshot_that_no_longer_validates_is_refused_naming_the_missing_migration(old):
    """A field the code does not know, in a snapshot of the current format: what a shape changed
    without its migration looks like to the next kfold."""
    seq, data = stored(old)[-1]
    raw = migrations.upgrade(orjson.loads(data))
    raw["tables"]["pod"] = {k: {**e, "renamed_field": ""} for k, e in raw["tables"]["pod"].items()}
    with pytest.raises(SnapshotFormatError, match=rf"^the snapshot at seq {seq} \(format {migrations.FORMAT}\) does "
                                                  r"not load with this kfold \(x\): 1 error\(s\), the first Extra inputs "
                                                  r"are not permitted at pod.renamed_field: .* without a snapshot "
                                                  r"migration \(engine.migrations\); nothing was written"):
        snapshot.load_stored(seq, orjson.dumps(raw), "", "x")


def _version() -> str:
    from journal.chain import kfold_version
    return kfold_version()


# -- the migrations themselves ---------------------------------------------------------------------
def _snap(fmt: int = 1) -> dict:
    return {"format": fmt, "seq": 7, "at": 1, "timers": {}, "pending": {},
            "tables": {"pod": {"a": {"kind": "pod", "awaiting": "3.0", "op": ""},
                               "b": {"kind": "sweep", "awaiting": ""}},
                       "repo": {"r": {"row": "repo", "url": "u"}}}}


CHAIN = {
    2: Migration("the pod fence's awaiting is waiting_on", (Rename("pod", "awaiting", "waiting_on", {"kind": "pod"}),)),
    3: Migration("repo rows carry a depth", (Add("repo", "depth", [1], {"row": "repo"}), Drop("pod", "op"))),
    4: Migration("a sweep's fields nest", (EachEntry("pod", lambda e: {"kind": "sweep", "run": {"awaiting": e["awaiting"]}},
                                                   {"kind": "sweep"}),
                                           Whole(lambda s: {**s, "timers": {"t": [1, "pod", "a", "x"]}}))),
}


def test_migrations_run_in_order_from_the_snapshots_format_on_a_copy():
    raw = _snap()
    out = migrations.upgrade(raw, CHAIN, oldest=1, current=4)
    assert out["format"] == 4
    assert out["tables"]["pod"] == {"a": {"kind": "pod", "waiting_on": "3.0"},
                                    "b": {"kind": "sweep", "run": {"awaiting": ""}}}
    assert out["tables"]["repo"] == {"r": {"row": "repo", "url": "u", "depth": [1]}}
    assert out["timers"] == {"t": [1, "pod", "a", "x"]}
    assert raw == _snap(), "the stored snapshot's data is not touched"
    assert migrations.upgrade(_snap(3), CHAIN, oldest=1, current=4)["tables"]["pod"]["a"] == \
        {"kind": "pod", "awaiting": "3.0", "op": ""}, "a format-3 snapshot only takes migration 4"


@pytest.mark.parametrize("fmt, newer_, text", [
    (5, True, "snapshot format 5 is newer than this kfold reads (formats 2 to 4)"),
    (1, False, "snapshot format 1 is older than this kfold migrates (formats 2 to 4)"),
    ("1", False, "not a kfold snapshot (its format is '1')"),
])
def test_a_format_outside_the_chain_is_refused(fmt, newer_, text):
    with pytest.raises(SnapshotFormatError) as refused:
        migrations.upgrade({**_snap(), "format": fmt}, CHAIN, oldest=2, current=4)
    assert str(refused.value) == text and refused.value.newer is newer_


def test_a_gap_in_the_chain_is_refused():
    with pytest.raises(ValueError, match=r"formats 2..4 need one each"):
        migrations.check_chain({2: CHAIN[2], 4: CHAIN[4]}, oldest=1, current=4)


def test_format_5_adds_what_an_older_kfold_never_recorded_about_a_workspace_container():
    old = {"format": 4, "tables": {"session": {
        "local/team/demo": {"kind": "session", "name": "demo", "pod": {"name": "demo-g1", "phase": "Running"}}}}}
    table = migrations.upgrade(old)["tables"]["session"]
    assert table["local/team/demo"]["pod"] == {"name": "demo-g1", "phase": "Running", "ended": ""}
