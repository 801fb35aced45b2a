"""Journal rules the mutation run (scripts/mutation.py, journal) found unpinned, each stated from
its contract: the JSONL reader's errors, the SQLite store's refusals and sizes,
retention's archives, and redaction (effects, outcome objects and kind-less items, last-applied
annotations, the prefilter). Each test reads a real SQLite file in tmp_path at most."""
from __future__ import annotations

import sqlite3
from collections import OrderedDict
from pathlib import Path

import orjson
import pytest

from journal import store as store_mod
from journal.chain import DuplicateSeq, JournalCorrupt, JournalError
from journal.jsonl import (CHAIN_EVERY, ExportTruncated, ExportWriter, JsonlError, Start, parse_line, positioned,
                           read_jsonl, read_start)
from journal.records import (SCHEMA_VERSION, Command, EffectIssued, Observed, Outcome, RecordError, dump_record,
                             observed_draft, parse_record)
from journal.redact import LAST_APPLIED, PREFIX, Redactor, _scan, is_credential_key, suspicious
from journal.retention import Retention
from journal.sqlite import SqliteJournal, _is_full, _text
from tests.harness import T0


def commands(first: int, n: int) -> list[Command]:
    return [Command(seq=s, at=T0 + s, name="noop", args={"i": s}) for s in range(first, first + n)]


def write(path: Path, records, start: Start, end: bool = True) -> Path:
    with open(path, "wb") as f:
        w = ExportWriter(f, start)
        w.rows((r.seq, r.at, r.rec, dump_record(r)) for r in records)
        if end:
            w.end()
    return path


def header(first_seq, snapshot, chain) -> bytes:
    return orjson.dumps({"kfold_export": 1, "first_seq": first_seq, "snapshot": snapshot, "chain": chain})


# -- JSONL: the reader names what is wrong, and where ------------------------------------------
def test_parse_line_reads_one_record_and_names_its_line_number_on_error():
    rec = commands(3, 1)[0]
    assert parse_line(dump_record(rec), 9) == rec
    assert parse_line(dump_record(rec).decode(), 9) == rec
    with pytest.raises(JsonlError, match=r"^line 9: field command\.at: Input should be a valid integer") as err:
        parse_line(b'{"rec":"command","seq":3,"name":"x","at":"soon"}', 9)
    assert err.value.line == 9
    with pytest.raises(JsonlError, match=r"^line 4: not JSON") as err:
        parse_line(b'{"rec":', 4)
    assert err.value.line == 4


def test_a_gap_in_what_an_export_is_given_is_refused_naming_both_records(tmp_path):
    with open(tmp_path / "x.jsonl", "wb") as f:
        w = ExportWriter(f, Start(1, None, 0))
        rows = [(r.seq, r.at, r.rec, dump_record(r)) for r in commands(1, 5)]
        with pytest.raises(JournalError, match=r"^record 5 cannot follow record 3: a gap in the source"):
            w.rows(rows[:3] + rows[4:])


def test_a_record_missing_before_a_chain_line_is_named_exactly(tmp_path):
    path = write(tmp_path / "x.jsonl", commands(1, CHAIN_EVERY + 5), Start(1, None, 0))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(l for l in lines if not l.startswith(b'{"seq":%d,' % CHAIN_EVERY)))
    with pytest.raises(JournalCorrupt, match="records are missing or out of order") as err:
        list(positioned(path))
    assert err.value.seq == CHAIN_EVERY


def test_an_altered_record_in_a_sealed_export_from_seq_1_is_found(tmp_path):
    path = write(tmp_path / "x.jsonl", commands(1, 5), Start(1, None, 0))
    assert read_start(path) == Start(1, None, 0), "sealed onto chk 0 before seq 1"
    path.write_bytes(path.read_bytes().replace(b'"i":3', b'"i":4', 1))
    altered = r"checksum mismatch in records 1\.\.5 \(line 7\): a record there was altered"
    with pytest.raises(JournalCorrupt, match=altered) as err:
        list(positioned(path))
    assert err.value.seq == 1


def test_a_header_past_seq_1_without_its_snapshot_is_refused(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(header(5, None, None) + b"\n" + dump_record(commands(5, 1)[0]) + b"\n")
    no_snapshot = "line 1: the export header begins at seq 5 without the snapshot before it"
    with pytest.raises(JsonlError, match=no_snapshot) as err:
        read_start(path)
    assert err.value.line == 1


def test_a_header_with_a_snapshot_for_another_seq_is_refused_on_its_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n" + header(5, {"seq": 3, "chk": 1}, 0) + b"\n{}\n")
    wrong_seq = r'line 2: the export header: snapshot must be \{"seq": 4, "chk": <int>\}'
    with pytest.raises(JsonlError, match=wrong_seq) as err:
        read_start(path)
    assert err.value.line == 2


def test_the_snapshot_is_carried_verbatim_trailing_blanks_included(tmp_path):
    snap = (40, b'{"format":1,"seq":40} \t')
    path = write(tmp_path / "x.jsonl", commands(41, 2), Start(41, snap, 7))
    assert read_start(path) == Start(41, snap, 7)


def test_a_sealed_export_cut_short_names_the_last_record_it_holds(tmp_path):
    path = write(tmp_path / "x.jsonl", commands(41, 30), Start(41, (40, b"{}"), 7), end=False)
    with pytest.raises(ExportTruncated, match=r"the export ends after seq 70 without its end line"):
        list(positioned(path))
    path = write(tmp_path / "y.jsonl", [], Start(1, None, 0), end=False)
    with pytest.raises(ExportTruncated, match=r"the export ends after its header without its end line"):
        list(positioned(path))


# -- records --------------------------------------------------------------------------------
def test_parse_record_names_record_by_default():
    with pytest.raises(RecordError, match=r"^record: field command\.name: Field required"):
        parse_record(b'{"rec":"command","seq":1}')


def draft_args(**over):
    args = dict(at=T0, cluster="c", api_version="v1", kind="Pod", namespace="ns", name="p", uid="u", rv="1",
                event="ADDED", obj={"metadata": {"name": "p"}})
    return {**args, **over}


def test_an_observed_draft_with_a_bad_value_raises_as_observed_does():
    with pytest.raises(ValueError):
        Observed(**draft_args(name=5))
    with pytest.raises(ValueError):
        observed_draft(**draft_args(name=5))


def test_an_observed_draft_of_another_mapping_type_equals_the_validated_record():
    obj = OrderedDict(metadata={"name": "p"})
    assert observed_draft(**draft_args(obj=obj)) == Observed(**draft_args(obj=obj))
    assert observed_draft(**draft_args(obj=obj)).name == "p"


# -- the SQLite store ---------------------------------------------------------------------------


def full_error(message: str, code: int | None) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(message)
    if code is not None:
        exc.sqlite_errorcode = code
    return exc


def test_a_full_volume_is_known_by_its_error_code_or_its_message_and_nothing_else_is():
    assert _is_full(full_error("no room here", sqlite3.SQLITE_FULL))
    assert _is_full(full_error("database or disk is full", None))
    assert not _is_full(full_error("database is locked", sqlite3.SQLITE_BUSY))
    assert not _is_full(full_error("database is locked", None))
    assert not _is_full(ValueError("disk is full"))


def test_a_meta_value_reads_as_text_whether_stored_as_text_or_as_a_blob():
    assert _text(b"12 34") == "12 34" and _text("12 34") == "12 34" and _text(None) == ""


def test_an_unknown_synchronous_mode_is_refused_naming_the_two_allowed(tmp_path):
    with pytest.raises(ValueError, match=r"^synchronous must be FULL or NORMAL$"):
        SqliteJournal(tmp_path / "j.db", synchronous="OFF")


async def _stamp_schema(path: Path, version: int, written_by: str) -> None:
    async with SqliteJournal(path):
        pass
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        db.execute("UPDATE meta SET value = ? WHERE key = 'written_by'", (written_by,))


@pytest.mark.asyncio
@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "reader"])
async def test_a_journal_of_a_newer_schema_is_refused_naming_the_file_and_the_kfold_that_wrote_it(tmp_path, readonly):
    path = tmp_path / "j.db"
    await _stamp_schema(path, SCHEMA_VERSION + 1, "9.9.9")
    with pytest.raises(JournalError, match=rf"^{path} was written with journal schema version "
                                           rf"{SCHEMA_VERSION + 1} by kfold 9\.9\.9; .* use kfold 9\.9\.9 or later"):
        await SqliteJournal(path, readonly=readonly).open()


@pytest.mark.asyncio
async def test_a_second_writer_is_refused_naming_the_seqs_the_store_refused(tmp_path):
    path = tmp_path / "j.db"
    async with SqliteJournal(path) as first, SqliteJournal(path) as second:
        await first.append([Command(name=f"a{i}", at=T0) for i in range(3)])
        with pytest.raises(DuplicateSeq, match=r"seq 1\.\.2 refused by the store"):
            await second.append([Command(name=f"b{i}", at=T0) for i in range(2)])


@pytest.mark.asyncio
async def test_a_journal_another_writer_failed_hands_each_draft_back_as_given(tmp_path):
    path = tmp_path / "j.db"
    async with SqliteJournal(path) as first, SqliteJournal(path) as second:
        await first.append([Command(name="a", at=T0)])
        with pytest.raises(DuplicateSeq):
            await second.append([Command(name="b", at=T0)])
        draft = pod(1)
        assert second.prepare_one(draft) is draft, "a failed journal prepares nothing"
        assert second.prepare([draft]) == [draft]
        assert first.prepare_one(draft) is not draft, "(a sound one prepares it: a Pod draft comes back projected)"


@pytest.mark.asyncio
async def test_the_size_of_a_journal_is_its_file_plus_its_wal(tmp_path):
    path = tmp_path / "j.db"
    async with SqliteJournal(path) as j:
        await j.append([Command(name="c", at=T0)])
        wal = Path(str(path) + "-wal")
        assert j.size_bytes() == path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@pytest.mark.asyncio
async def test_a_reopened_journal_knows_its_newest_snapshots_size(tmp_path):
    path = tmp_path / "j.db"
    async with SqliteJournal(path) as j:
        await j.append([Command(name=f"c{i}", at=T0) for i in range(3)])
        await j.put_snapshot(2, b"x" * 10)
        await j.put_snapshot(3, b"y" * 25)
    async with SqliteJournal(path) as j:
        assert j.last_snapshot_bytes == 25


@pytest.mark.asyncio
async def test_a_snapshot_before_the_first_record_is_refused(tmp_path):
    async with SqliteJournal(tmp_path / "j.db") as j:
        await j.append([Command(name="c", at=T0)])
        with pytest.raises(JournalError, match="snapshot at seq 0: the journal ends at 1"):
            await j.put_snapshot(0, b"{}")


def pod(seq_hint: int) -> Observed:
    return Observed(at=T0 + seq_hint, cluster="c", api_version="v1", kind="Pod", namespace="ns", name=f"p{seq_hint}",
                    uid=f"u{seq_hint}", rv=str(seq_hint), event="ADDED",
                    obj={"metadata": {"name": f"p{seq_hint}", "namespace": "ns"}, "junk": {"unread": seq_hint}})


@pytest.mark.asyncio
async def test_a_read_longer_than_a_batch_gives_every_record_and_projected_objects_throughout(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "READ_BATCH", 4)
    async with SqliteJournal(tmp_path / "j.db") as j:
        await j.append([pod(i) for i in range(11)])
        whole = [r async for batch in j.read_batches() for r in batch]
        assert [r.seq for r in whole] == list(range(1, 12))
        assert all("junk" in r.obj for r in whole)
        slim = [r async for batch in j.read_batches(projected=True) for r in batch]
        assert [r.seq for r in slim] == list(range(1, 12))
        assert not any("junk" in r.obj for r in slim), "a projected read folds projections in every batch"
        assert [r.name for r in slim] == [r.name for r in whole]


@pytest.mark.asyncio
async def test_a_projected_row_whose_records_seq_is_not_its_rows_is_corrupt(tmp_path):
    async with SqliteJournal(tmp_path / "j.db") as j:
        await j.append([pod(i) for i in range(2)])
        rows = [r async for batch in j.read_rows(views=True) for r in batch]
        assert rows[1][5] is not None, "a Pod row carries its projection"
        moved = [(2,) + tuple(rows[0][1:])]   # record 1's row, stored as seq 2
        with pytest.raises(JournalCorrupt, match="payload says seq 1") as err:
            j.parse(moved, projected=True)
        assert err.value.seq == 2


# -- retention ----------------------------------------------------------------------------------


def stored_chk(path: Path, seq: int) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT chk FROM journal WHERE seq = ?", (seq,)).fetchone()[0]


@pytest.mark.asyncio
async def test_the_chain_an_export_is_sealed_onto_is_the_stored_chk_before_it(tmp_path):
    path = tmp_path / "j.db"
    async with SqliteJournal(path) as j:
        await j.append([Command(name=f"c{i}", at=T0) for i in range(4)])
        assert await j.chain_before(1) == 0
        assert await j.chain_before(3) == stored_chk(path, 2)


@pytest.mark.asyncio
async def test_each_archive_is_sealed_and_replays_alone_from_the_snapshot_it_carries(tmp_path):
    path, archive_dir = tmp_path / "j.db", tmp_path / "archive"
    async with SqliteJournal(path) as j:
        await j.append(commands(1, 4))
        await j.put_snapshot(2, b'{"at":2}')
        await j.put_snapshot(4, b'{"at":4}')
        chk_of_4 = stored_chk(path, 4)
        j.retention = Retention(keep_snapshots=1, archive_dir=str(archive_dir))
        assert (await j.cut())["first_seq"] == 5       # records 1..4 archived, the snapshot at 4 kept
        await j.append(commands(5, 3))
        await j.put_snapshot(7, b'{"at":7}')           # and 5..7, from the snapshot at 4
        assert j.first_seq == 8
    archives = sorted(archive_dir.glob("*.jsonl"))
    assert len(archives) == 2
    assert read_start(archives[0]) == Start(1, None, 0)
    assert read_start(archives[1]) == Start(5, (4, b'{"at":4}'), chk_of_4)
    assert [r.seq for r in read_jsonl(archives[0])] == [1, 2, 3, 4]
    assert [r.seq for r in read_jsonl(archives[1])] == [5, 6, 7]


@pytest.mark.asyncio
async def test_a_record_missing_from_what_a_cut_archives_stops_the_cut_at_that_seq(tmp_path):
    path = tmp_path / "j.db"
    async with SqliteJournal(path) as j:
        await j.append(commands(1, 4))
        await j.put_snapshot(2, b"{}")
        await j.put_snapshot(4, b"{}")
        with sqlite3.connect(path) as db:
            db.execute("DELETE FROM journal WHERE seq = 4")
        j.retention = Retention(keep_snapshots=1, archive_dir=str(tmp_path / "archive"))
        with pytest.raises(JournalCorrupt, match="record 4 is missing") as err:
            await j.cut()
        assert err.value.seq == 4
        assert j.first_seq == 1, "nothing was cut"
        assert not list((tmp_path / "archive").iterdir()), "nor archived"


# -- redaction ------------------------------------------------------------------------------------
# The redaction memos (by payload shape, by key) are per process: ``fresh_memos`` empties them, so a
# verdict remembered from another test never answers in place of the rule under test.

SALT = b"0123456789abcdef"


@pytest.fixture(autouse=True)
def fresh_memos():
    """Each test meets the rules, not a verdict remembered from an earlier test in this process:
    the memos are emptied (as they are whenever one is full)."""
    from journal import redact
    for memo in (redact._CLEAN_SCANS, redact._WALKS, redact._KEY_CACHE):
        memo.clear()
    yield


def redactor() -> Redactor:
    return Redactor(SALT)


def digested(value) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def outcome(obj=None, items=None) -> Outcome:
    return Outcome(at=T0, effect_id="e1", machine="pod", key="c/ns/p", result="ok", obj=obj, items=items)


@pytest.mark.parametrize("payload", [
    b"secretKeyRef:wombatqx", b"serviceAccountToken/quokkazz", b'"key":"numbatvv"', b"secretname-bilbyyy",
    b"xsecretKeyRef:wombatqx", b"secretKeyRef wombat secret", b"passphrase-dugongg",
])
def test_the_prefilter_is_exactly_the_marker_count_scan_where_a_context_opens_the_payload(payload):
    assert suspicious(payload) is _scan(payload.lower())


@pytest.mark.parametrize("spelling", ["zq-passphrase-pa-th", "zq_passphrase_pa_th", "zq.passphrase.pa.th",
                                      "zqpassphrasepath"])
def test_separators_in_a_key_never_change_whether_it_names_or_refers_to_a_credential(spelling):
    assert is_credential_key(spelling) is False, "a ...path key refers to a credential"


def test_a_key_naming_a_credential_is_one_first_time_asked():
    assert is_credential_key("wallaby-passphrase-xyzzy") is True


def test_a_secret_manifest_in_an_effect_is_redacted_and_no_other_manifest_is():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"emuvalue": "aHVudGVyMg=="}}
    red = redactor().record(EffectIssued(at=T0, effect={"type": "ApplySecret", "manifest": secret}))
    assert digested(red.effect["manifest"]["data"]["emuvalue"])
    assert red.effect["type"] == "ApplySecret"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"emuvalue": "plain"}}
    rec = EffectIssued(at=T0, effect={"type": "Apply", "manifest": cm})
    assert redactor().record(rec) is rec


def test_an_outcomes_secret_object_is_redacted():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"koalaval": "aHVudGVyMg=="}}
    red = redactor().record(outcome(obj=secret))
    assert digested(red.obj["data"]["koalaval"]) and red.obj["metadata"] == {"name": "s"}


@pytest.mark.parametrize("item, secret", [
    ({"type": "Opaque", "data": {"v": "cGxhaW4="}}, True),
    ({"type": "Opaque", "stringData": {"v": "plain"}}, True),
    ({"type": "Opaque", "data": {"v": "cGxhaW4="}, "spec": {}}, False),   # a typed object with a spec
    ({"data": {"v": "plain"}}, False),                                     # a ConfigMap's shape
    ({"type": "Opaque", "metadata": {"annotations": {LAST_APPLIED: '{"kind":"ConfigMap","data":{"v":"plain"}}'}}},
     False),                                                               # type alone is no Secret
], ids=["type-data", "type-stringData", "with-spec", "no-type", "type-only"])
def test_a_list_item_without_kind_is_a_secret_when_it_has_type_and_data_or_stringdata_and_no_spec(item, secret):
    red = redactor().record(outcome(items=(item,))).items[0]
    values = {**red.get("data", {}), **red.get("stringData", {})}
    assert all(digested(v) for v in values.values()) is secret or not values
    if "metadata" in item:
        kept = red["metadata"]["annotations"][LAST_APPLIED]
        assert kept == item["metadata"]["annotations"][LAST_APPLIED], "a non-Secret's clean last-applied is kept"
    if not secret:
        assert red == item


def test_an_observed_secret_is_redacted_by_its_records_kind_even_when_its_object_names_none():
    rec = Observed(at=T0, cluster="c", api_version="v1", kind="Secret", namespace="ns", name="s", uid="u", rv="1",
                   event="ADDED", obj={"metadata": {"name": "s"}, "data": {"platypusv": "cGxhaW4="}})
    assert digested(redactor().record(rec).obj["data"]["platypusv"])


def test_a_record_with_nothing_to_redact_comes_back_itself_with_its_payload():
    rec = Observed(at=T0, cluster="c", api_version="v1", kind="Pod", namespace="ns", name="auth-proxy-gecko",
                   uid="u", rv="1", event="ADDED", obj={"metadata": {"name": "auth-proxy-gecko"}, "spec": {}})
    assert redactor().record(rec) is rec
    payload = dump_record(rec)
    got = redactor().sealed(rec, payload, lambda r: pytest.fail("nothing changed: not serialized again"))
    assert got[0] is rec and got[1] is payload


def test_a_secrets_last_applied_annotation_is_digested_whole():
    inner = '{"apiVersion":"v1","kind":"Secret","data":{"wombatk":"cGxhaW4="}}'
    obj = {"kind": "Secret", "metadata": {"name": "s", "annotations": {LAST_APPLIED: inner}}, "type": "Opaque"}
    red = redactor().redact("Secret", obj)
    assert red["metadata"]["annotations"][LAST_APPLIED] == redactor().digest(inner)


def configmap(annotation: str) -> dict:
    # "auth" in the name: a marker outside any benign context, so the object is walked
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "auth-cfg-quoll", "annotations": {LAST_APPLIED: annotation}}, "data": {"a": "b"}}


@pytest.mark.parametrize("inner, expect", [
    # another object's last-applied: parsed and redacted like the object itself
    ('{"kind":"ConfigMap","data":{"password":"hunter2-quoll"}}', {"kind": "ConfigMap", "data": {"password": "D"}}),
    ('{"kind":"Secret","data":{"quoll":"aHVudGVy"}}', {"kind": "Secret", "data": {"quoll": "D"}}),
    ('{"type":"Opaque","data":{"quoll":"aHVudGVy"}}', {"type": "Opaque", "data": {"quoll": "D"}}),
], ids=["credential-key", "inner-secret", "inner-secret-shaped"])
def test_another_objects_last_applied_annotation_is_redacted_like_an_object(inner, expect):
    r = redactor()
    got = orjson.loads(r.redact("ConfigMap", configmap(inner))["metadata"]["annotations"][LAST_APPLIED])
    want = orjson.loads(inner)
    for field, values in expect.get("data", {}).items():
        want["data"][field] = r.digest(want["data"][field])
    assert got == want


@pytest.mark.parametrize("inner", ['{"kind": "ConfigMap", "data": {"a": "b"}}\n', "[1, 2]", "not json, quoll"],
                         ids=["clean-json-kept-verbatim", "json-not-an-object", "not-json"])
def test_a_last_applied_annotation_that_is_clean_is_kept_verbatim_and_one_that_is_no_object_is_digested(inner):
    r = redactor()
    got = r.redact("ConfigMap", configmap(inner))["metadata"]["annotations"][LAST_APPLIED]
    assert got == (inner if inner.startswith("{") else r.digest(inner))


def pod_with_env(value: str, name: str = "web-quoll") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": "u-1"},
            "spec": {"containers": [{"name": "app", "image": "img:1",
                                     "env": [{"name": "DB_PASSWORD", "value": value},
                                             {"name": "MODE", "value": "x"}]}]}}


def test_an_observed_pods_env_credential_is_digested_first_time_and_when_its_shape_comes_again():
    r = redactor()
    for value in ("hunter2-quoll-1", "hunter2-quoll-7"):   # one shape (digits aside), two values
        red = r.redact("Pod", pod_with_env(value))
        env = red["spec"]["containers"][0]["env"]
        assert env == [{"name": "DB_PASSWORD", "value": r.digest(value)}, {"name": "MODE", "value": "x"}]
        assert red["metadata"] == {"name": "web-quoll", "uid": "u-1"}


def test_an_observed_pod_walked_for_a_marker_in_a_name_keeps_every_entry():
    r = redactor()
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "auth-proxy-quoll"}, "spec": {"nodeName": "n"},
           "status": {"phase": "Running"}}
    for _ in range(2):
        assert r.redact("Pod", obj) == obj


def test_a_value_that_merely_contains_eyj_is_no_jwt():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jar-quoll"},
          "data": {"args": "--keyJar=/etc/quoll/jar", "jwt": "eyJhbGciOi.eyJzdWIiOi.sig"}}
    red = redactor().redact("ConfigMap", cm)
    assert red["data"]["args"] == "--keyJar=/etc/quoll/jar"
    assert digested(red["data"]["jwt"]), "a JWT's shape is redacted whatever its key"
