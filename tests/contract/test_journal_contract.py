"""One contract, two journals: SqliteJournal (a real file) and MemoryJournal behave the same."""
from __future__ import annotations

import asyncio
import sqlite3

import pytest

from journal import projection, store
from journal.memory import MemoryJournal, MemoryStore
from journal.records import SCHEMA_VERSION, Command, Observed, Outcome
from journal.redact import PREFIX
from journal.sqlite import SqliteJournal
from journal.jsonl import read_jsonl
from journal.retention import Retention
from journal.store import DuplicateSeq, JournalCorrupt, JournalCut, JournalError


class SqliteBackend:
    """Opens journals on one file; tampers with the file through sqlite3 directly."""

    name = "sqlite"

    def __init__(self, tmp_path):
        self.path = tmp_path / "journal.sqlite"

    def journal(self):
        return SqliteJournal(self.path)

    def _sql(self, sql, *args):
        with sqlite3.connect(self.path) as db:
            db.execute(sql, args)

    def flip_byte(self, seq, index=10):
        with sqlite3.connect(self.path) as db:
            (payload,) = db.execute("SELECT payload FROM journal WHERE seq = ?", (seq,)).fetchone()
        flipped = bytearray(payload)
        flipped[index] ^= 0x01
        self._sql("UPDATE journal SET payload = ? WHERE seq = ?", bytes(flipped), seq)

    def delete(self, seq):
        self._sql("DELETE FROM journal WHERE seq = ?", seq)

    def views(self):
        with sqlite3.connect(self.path) as db:
            return dict(db.execute("SELECT seq, view FROM journal"))

    def set_view(self, seq, view):
        self._sql("UPDATE journal SET view = ? WHERE seq = ?", view, seq)

    def truncate(self, after):
        self._sql("DELETE FROM journal WHERE seq > ?", after)

    def corrupt_snapshot(self, seq):
        self._sql("UPDATE snapshots SET data = ? WHERE seq = ?", b"tampered", seq)

    def set_meta(self, key, value):
        self._sql("UPDATE meta SET value = ? WHERE key = ?", value, key)


class MemoryBackend:
    """Opens journals on one shared MemoryStore; tampers through its test hooks."""

    name = "memory"

    def __init__(self, tmp_path):
        self.store = MemoryStore()

    def journal(self):
        return MemoryJournal(self.store)

    def flip_byte(self, seq, index=10):
        payload = bytearray(self.store.rows[seq][3])
        payload[index] ^= 0x01
        self.store.tamper(seq, payload=bytes(payload))

    def delete(self, seq):
        self.store.delete(seq)

    def views(self):
        return {seq: row[5] for seq, row in self.store.rows.items()}

    def set_view(self, seq, view):
        self.store.tamper_view(seq, view)

    def truncate(self, after):
        self.store.truncate(after)

    def corrupt_snapshot(self, seq):
        s, _, chk = self.store.snapshots[seq]
        self.store.snapshots[seq] = (s, b"tampered", chk)

    def set_meta(self, key, value):
        self.store.meta[key] = value


@pytest.fixture(params=[SqliteBackend, MemoryBackend], ids=["sqlite", "memory"])
def backend(request, tmp_path):
    return request.param(tmp_path)


def commands(n, prefix="c"):
    return [Command(name=f"{prefix}{i}", at=1_000 + i) for i in range(n)]


async def read_all(journal, **kw):
    return [r async for r in journal.read(**kw)]


async def filled(backend, n):
    async with backend.journal() as j:
        await j.append(commands(n))


class TestJournalContract:
    async def test_appended_records_come_back_stamped_and_read_back_equal(self, backend):
        async with backend.journal() as j:
            committed = await j.append(commands(3))
            assert [r.seq for r in committed] == [1, 2, 3]
            assert [r.name for r in committed] == ["c0", "c1", "c2"]
            assert await read_all(j) == committed

    async def test_sequence_numbers_continue_across_batches_and_reopen(self, backend):
        async with backend.journal() as j:
            await j.append(commands(2))
            assert [r.seq for r in await j.append(commands(3))] == [3, 4, 5]
        async with backend.journal() as j:
            assert j.last_seq == 5
            assert [r.seq for r in await j.append(commands(1))] == [6]
            assert [r.seq for r in await read_all(j)] == [1, 2, 3, 4, 5, 6]

    async def test_concurrent_appenders_share_few_transactions_and_all_commit(self, backend):
        async with backend.journal() as j:
            results = await asyncio.gather(*(j.append(commands(5, f"t{t}-")) for t in range(20)))
            assert j.transactions <= 3
            for batch in results:  # each caller's records stay contiguous and in order
                assert [r.seq for r in batch] == list(range(batch[0].seq, batch[0].seq + 5))
            assert sorted(r.seq for b in results for r in b) == list(range(1, 101))
        async with backend.journal() as again:
            assert len(await read_all(again)) == 100

    async def test_append_returns_only_after_the_batch_is_visible_to_another_reader(self, backend):
        async with backend.journal() as writer:
            await writer.append(commands(4))
            async with backend.journal() as reader:
                assert [r.seq for r in await read_all(reader)] == [1, 2, 3, 4]

    async def test_a_seq_already_journaled_is_refused_and_the_others_in_the_group_commit(self, backend):
        async with backend.journal() as j:
            await j.append(commands(2))
            dup = j.append([Command(name="again", seq=2)])
            fine = j.append(commands(1))
            outcomes = await asyncio.gather(dup, fine, return_exceptions=True)
            assert isinstance(outcomes[0], DuplicateSeq)
            assert [r.seq for r in outcomes[1]] == [3]

    async def test_a_gap_in_given_seqs_is_refused(self, backend):
        async with backend.journal() as j:
            with pytest.raises(JournalError, match="gap"):
                await j.append([Command(name="far", seq=7)])

    async def test_a_second_writer_on_the_same_journal_is_refused_by_the_store(self, backend):
        async with backend.journal() as first, backend.journal() as second:
            await first.append(commands(1))
            with pytest.raises(DuplicateSeq, match="seq 1"):
                await second.append(commands(1))
            with pytest.raises(DuplicateSeq, match="another writer"):
                await second.append(commands(1))
            assert [r.name for r in await read_all(first)] == ["c0"]

    async def test_a_flipped_byte_is_detected_at_its_exact_seq(self, backend):
        await filled(backend, 10)
        backend.flip_byte(7)
        async with backend.journal() as j:
            assert await j.verify() == 7
            got = []
            with pytest.raises(JournalCorrupt) as err:
                async for rec in j.read():
                    got.append(rec.seq)
            assert err.value.seq == 7 and "checksum" in err.value.reason
            assert got == [1, 2, 3, 4, 5, 6]

    async def test_a_deleted_record_is_detected_at_its_exact_seq(self, backend):
        await filled(backend, 10)
        backend.delete(4)
        async with backend.journal() as j:
            assert await j.verify() == 4
            with pytest.raises(JournalCorrupt, match="seq 4: record 4 is missing"):
                await read_all(j)

    async def test_a_truncated_tail_is_detected_at_the_first_missing_seq(self, backend):
        await filled(backend, 10)
        backend.truncate(after=6)
        async with backend.journal() as j:
            assert await j.verify() == 7
            with pytest.raises(JournalCorrupt, match="seq 7: journal truncated"):
                await read_all(j)

    async def test_reading_a_range_stops_at_until_and_verifies_from_the_previous_link(self, backend):
        await filled(backend, 10)
        backend.flip_byte(9)
        async with backend.journal() as j:
            assert [r.seq for r in await read_all(j, from_seq=3, until=8)] == [3, 4, 5, 6, 7, 8]

    async def test_a_journal_from_a_newer_schema_is_refused_naming_versions(self, backend):
        await filled(backend, 1)
        backend.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        backend.set_meta("written_by", "9.9.9")
        with pytest.raises(JournalError, match=rf"schema version {SCHEMA_VERSION + 1} by kfold 9.9.9.*use kfold 9.9.9"):
            await backend.journal().open()

    async def test_snapshots_are_stored_and_the_latest_at_or_before_is_returned(self, backend):
        async with backend.journal() as j:
            await j.append(commands(10))
            assert await j.latest_snapshot() is None
            await j.put_snapshot(4, b"state-4")
            await j.put_snapshot(8, b"state-8")
            await j.put_snapshot(8, b"state-8")  # the same bytes again: a no-op
            assert await j.latest_snapshot() == (8, b"state-8")
            assert await j.latest_snapshot(max_seq=7) == (4, b"state-4")
            with pytest.raises(JournalError, match="different snapshot"):
                await j.put_snapshot(8, b"other")
            with pytest.raises(JournalError, match="ends at 10"):
                await j.put_snapshot(11, b"future")

    async def test_a_corrupted_snapshot_is_reported_not_used(self, backend):
        async with backend.journal() as j:
            await j.append(commands(5))
            await j.put_snapshot(5, b"state-5")
        backend.corrupt_snapshot(5)
        async with backend.journal() as j:
            with pytest.raises(JournalCorrupt, match="seq 5: snapshot checksum"):
                await j.latest_snapshot()

    async def test_observed_and_outcome_objects_are_redacted_on_append(self, backend):
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "git"},
                  "data": {"password": "aHVudGVyMg=="}}
        async with backend.journal() as j:
            committed = await j.append([
                Observed(cluster="c", api_version="v1", kind="Secret", name="git", event="ADDED", obj=secret),
                Outcome(effect_id="1.0", machine="repo", key="c/ns/git", result="ok", obj=secret,
                        items=(secret,)),
            ])
            stored = await read_all(j)
        assert stored == committed
        observed, outcome = stored
        for obj in (observed.obj, outcome.obj, outcome.items[0]):
            assert obj["data"]["password"].startswith(PREFIX)
            assert obj["metadata"] == {"name": "git"}
        assert secret["data"]["password"] == "aHVudGVyMg=="  # the caller's object is untouched


async def with_snapshots(j, every=10, n=50, size=200):
    """``n`` records with a snapshot after every ``every``; bulky payloads so a cut is visible."""
    for first in range(1, n + 1, every):
        await j.append([Command(name="x" * size, at=first + i) for i in range(every)])
        await j.put_snapshot(j.last_seq, f"state-{j.last_seq}".encode() * 20)


class TestRetentionContract:
    async def test_a_cut_keeps_the_last_snapshots_and_the_records_after_the_oldest_kept(self, backend):
        async with backend.journal() as j:
            await with_snapshots(j)
            full = j.stats()
            j.retention = Retention(keep_snapshots=2)
            report = await j.cut()
            assert report["first_seq"] == 41 and report["records_cut"] == 40
            stats = j.stats()
            assert (stats.first_seq, stats.records, stats.snapshots, stats.last_seq) == (41, 10, 2, 50)
            assert stats.bytes < full.bytes and report["bytes_after"] < report["bytes_before"]
            assert await j.latest_snapshot(max_seq=45) == (40, b"state-40" * 20)
            assert [r.seq for r in await read_all(j, from_seq=41)] == list(range(41, 51))
            assert await j.verify(from_seq=41) is None
            assert await j.cut() is None  # nothing more is due

    async def test_reading_from_before_the_cut_names_where_history_begins(self, backend):
        async with backend.journal() as j:
            await with_snapshots(j)
            j.retention = Retention(keep_snapshots=1)
            await j.cut()
            with pytest.raises(JournalCut, match="history begins at seq 51.*snapshot at seq 50") as err:
                await read_all(j)
            assert err.value.first_seq == 51
            with pytest.raises(JournalCut):
                await j.verify(from_seq=3)

    async def test_each_snapshot_applies_the_policy_and_the_chain_continues_across_reopen(self, backend):
        async with backend.journal() as j:
            j.retention = Retention(keep_snapshots=3)
            await with_snapshots(j, n=100)
            assert (j.first_seq, j.stats().snapshots) == (81, 3)
            await j.append(commands(5))
        async with backend.journal() as j:
            assert (j.first_seq, j.last_seq, j.stats().snapshots) == (81, 105, 3)
            assert [r.seq for r in await j.append(commands(1))] == [106]
            assert [r.seq for r in await read_all(j, from_seq=81)][-1] == 106
            assert await j.verify(from_seq=81) is None

    async def test_a_record_altered_after_a_cut_is_still_caught(self, backend):
        async with backend.journal() as j:
            j.retention = Retention(keep_snapshots=2)
            await with_snapshots(j)
        backend.flip_byte(45)
        async with backend.journal() as j:
            assert await j.verify(from_seq=41) == 45

    async def test_what_is_cut_is_archived_first_as_jsonl_that_replays(self, backend, tmp_path):
        async with backend.journal() as j:
            await with_snapshots(j)
            before = await read_all(j, until=30)
            j.retention = Retention(keep_snapshots=2, archive_dir=str(tmp_path / "archive"))
            await j.cut()
            report = await j.cut()
            assert report is None
        files = sorted((tmp_path / "archive").iterdir())
        assert [f.name for f in files] == ["journal-000000000001-000000000040.jsonl"]
        archived = list(read_jsonl(files[0]))
        assert [r.seq for r in archived] == list(range(1, 41)) and archived[:30] == before

    async def test_a_broken_chain_in_what_would_be_archived_cuts_nothing(self, backend, tmp_path):
        async with backend.journal() as j:
            await with_snapshots(j)
        backend.flip_byte(7)
        async with backend.journal() as j:
            j.retention = Retention(keep_snapshots=2, archive_dir=str(tmp_path / "archive"))
            with pytest.raises(JournalCorrupt, match="seq 7"):
                await j.cut()
            assert j.first_seq == 1 and j.stats().snapshots == 5
        assert list((tmp_path / "archive").iterdir()) == []


async def test_a_journal_created_before_auto_vacuum_is_converted_at_its_first_cut(tmp_path):
    path = tmp_path / "old.sqlite"
    async with SqliteJournal(path) as j:
        await with_snapshots(j, n=200, size=2000)
    with sqlite3.connect(path) as db:  # as a journal written by an older kfold: no auto_vacuum
        db.execute("PRAGMA auto_vacuum=NONE")
        db.execute("VACUUM")
        assert db.execute("PRAGMA auto_vacuum").fetchone() == (0,)
    async with SqliteJournal(path) as j:
        j.retention = Retention(keep_snapshots=2)
        report = await j.cut()
        assert report["bytes_after"] < report["bytes_before"] / 3
        await j.append(commands(3))
        assert [r.seq for r in await read_all(j, from_seq=report["first_seq"])][-1] == 203
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA auto_vacuum").fetchone() == (2,)


class TestFlushContract:
    async def test_sealed_records_come_back_stamped_and_become_durable_once_flushed(self, backend):
        async with backend.journal() as j:
            records = j.seal(commands(3))
            assert [r.seq for r in records] == [1, 2, 3]
            assert j.last_seq == 0, "sealed is not durable"
            await j.flush()
            assert j.last_seq == 3
            assert await read_all(j) == records

    async def test_a_sealed_batch_whose_transaction_fails_raises_on_its_flush(self, backend):
        async with backend.journal() as first, backend.journal() as second:
            await first.append(commands(1))
            records = second.seal(commands(1))  # sealed as seq 1, which is taken
            assert records[0].seq == 1
            with pytest.raises(DuplicateSeq):
                await second.flush()
            assert [r.name for r in await read_all(first)] == ["c0"]


class TestSealContract:
    async def test_records_and_what_folding_them_decided_commit_in_one_transaction(self, backend):
        async with backend.journal() as j:
            first = j.seal(commands(2))
            second = j.seal(commands(1, "decided-"))
            assert [r.seq for r in first + second] == [1, 2, 3] and j.last_seq == 0
            before = j.transactions
            await j.flush()
            assert j.transactions == before + 1 and j.last_seq == 3
            assert await read_all(j) == first + second

    async def test_sealing_runs_ahead_while_a_transaction_commits_and_order_holds(self, backend):
        async with backend.journal() as j:
            futures, sealed = [], []
            for n in range(5):   # no await between: each flush queues behind the one committing
                sealed += j.seal(commands(2, f"b{n}-"))
                futures.append(j.flush())
            await asyncio.gather(*futures)
            assert [r.seq for r in sealed] == list(range(1, 11))
            assert await read_all(j) == sealed
        async with backend.journal() as again:
            assert await again.verify() is None and again.last_seq == 10

    async def test_a_failed_transaction_voids_what_was_sealed_onto_it_and_the_next_starts_afresh(self, backend):
        async with backend.journal() as j:
            await j.append(commands(2))
            real_commit, calls, gate = j._commit, [], asyncio.Event()

            async def failing(rows, snaps, head):
                calls.append([r[0] for r in rows])
                if len(calls) == 1:
                    await gate.wait()
                    raise OSError("disk went away")
                return await real_commit(rows, snaps, head)
            j._commit = failing
            j.seal([Command(name="doomed", args={"x": 1})])
            doomed = j.flush()
            await asyncio.sleep(0.01)             # the writer took it and is committing
            j.seal(commands(1, "chained-"))      # sealed onto the doomed transaction's head
            chained = j.flush()
            gate.set()
            for fut in (doomed, chained):
                with pytest.raises(OSError, match="disk went away"):
                    await fut
            assert j.last_seq == 2 and calls == [[3]], "the chained rows never reached the store"
            after = await j.append(commands(1, "after-"))
            assert [r.seq for r in after] == [3]
            assert [r.name for r in await read_all(j)] == ["c0", "c1", "after-0"]
            assert await j.verify() is None

    async def test_a_draft_that_cannot_be_sealed_raises_at_once_and_seals_nothing(self, backend):
        async with backend.journal() as j:
            with pytest.raises(DuplicateSeq):
                j.seal(commands(1) + [Command(name="dup", seq=1)])
            assert [r.seq for r in j.seal(commands(1))] == [1]
            await j.flush()
            assert [r.name for r in await read_all(j)] == ["c0"]


def pods_with_credentials(n: int) -> list[Observed]:
    """Pods as a watch serves them: references only, a credential in env, in an annotation, and in
    an unusual place (a custom key deep in status, a JWT in a container's args)."""
    out = []
    for i in range(n):
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"p{i}", "namespace": "ns", "resourceVersion": str(100 + i), "annotations": {}},
               "spec": {"volumes": [{"name": "kube-api-access", "projected": {"sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
                        "containers": [{"name": "c", "args": ["--verbose"], "env": [
                            {"name": "URL", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}}]}]},
               "status": {"phase": "Running"}}
        if i % 4 == 1:
            obj["spec"]["containers"][0]["env"].append({"name": "DB_PASSWORD", "value": f"hunter{i}-pw"})
        elif i % 4 == 2:
            obj["metadata"]["annotations"]["example.com/upstream"] = f"Bearer abc{i}defghij"
        elif i % 4 == 3:
            obj["status"]["extra"] = {"vendor": {"apiKey": f"key-{i}-material"}}
            obj["spec"]["containers"][0]["args"].append(f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI{i}In0.sig")
        out.append(Observed(cluster="c", api_version="v1", kind="Pod", namespace="ns", name=f"p{i}",
                            rv=str(100 + i), event="MODIFIED", obj=obj))
    return out


class TestPrepareContract:
    async def test_prepared_drafts_are_journaled_exactly_as_unprepared_ones(self, backend):
        drafts = pods_with_credentials(12) + commands(2)
        async with MemoryJournal() as plain:  # its own store: the same seqs
            expected = await plain.append(drafts)
            rows = await plain._fetch(1, plain.last_seq, views=True)
            folded = await read_projected(plain)
        async with backend.journal() as j:
            j.redactor = plain.redactor  # one salt: equal digests
            prepared = j.prepare(drafts)
            assert all(d.seq == -1 for d in prepared) and len(j._ahead) == len(drafts)
            assert j.prepare(prepared) == prepared and len(j._ahead) == len(drafts)  # prepared once
            # what the fold gets: a Pod with its projected object only, as `kfold replay` reads it back
            assert await j.append(prepared) == folded != expected
            assert not j._ahead  # each was journaled from its prepared form
            assert await j._fetch(1, j.last_seq, views=True) == rows  # payloads and projections
            assert await read_all(j) == expected

    async def test_a_prepared_draft_never_carries_a_credential_into_the_journal(self, backend):
        drafts = pods_with_credentials(8)
        async with backend.journal() as j:
            prepared = j.prepare(drafts)
            await j.append(prepared)
            stored = await read_all(j)   # the whole records (the appended ones hold projections)
            payloads = b"".join(r[3] for r in await j._fetch(1, j.last_seq))
        for i, rec in enumerate(stored):
            assert rec.seq == i + 1
        for value in (b"hunter1-pw", b"Bearer abc2", b"key-3-material", b"eyJzdWIiOiI3In0"):
            assert value not in payloads
        assert stored[3].obj["status"]["extra"]["vendor"]["apiKey"].startswith(PREFIX)
        assert stored[3].obj["spec"]["containers"][0]["args"][1].startswith(PREFIX)
        assert drafts[1].obj["spec"]["containers"][0]["env"][1]["value"] == "hunter1-pw"  # the caller's untouched

    async def test_a_prepared_pod_is_appended_once_and_only_where_it_was_prepared(self, backend):
        pods, cmds = pods_with_credentials(2), commands(2)
        async with backend.journal() as j, MemoryJournal() as other:
            prepared = j.prepare(pods + cmds)
            assert all(type(p.obj) is projection.Pruned for p in prepared[:2])
            with pytest.raises(JournalError, match="holds only its projection"):
                await other.append(prepared[:1])   # its payload lives in j: never journal the pruned object
            first = await j.append(prepared)
            with pytest.raises(JournalError, match="append it once"):
                await j.append(prepared[1:2])
            assert j.last_seq == 4 and other.last_seq == 0   # the refused appends sealed nothing
            again = await j.append(prepared[2:])   # any other draft: sealed again, as any draft
            elsewhere = await other.append(prepared[2:])
            whole = await read_all(j)
        assert [r.seq for r in first + again] == [1, 2, 3, 4, 5, 6]
        assert [r.args for r in again] == [r.args for r in first[2:]] == [r.args for r in elsewhere]
        assert whole[1].obj["spec"]["containers"][0]["env"][1]["value"].startswith(PREFIX)  # journaled whole

    async def test_prepared_drafts_nobody_holds_are_forgotten_and_held_ones_kept(self, backend, monkeypatch):
        monkeypatch.setattr(store, "_AHEAD_MAX", 3)
        async with backend.journal() as j:
            kept = j.prepare(pods_with_credentials(2))
            j.prepare(pods_with_credentials(3))   # dropped by their caller (a failed submit)
            later = j.prepare(pods_with_credentials(1))   # over the bound: the dropped ones go
            assert len(j._ahead) == 3
            stored = await j.append(kept + later)
        assert [r.seq for r in stored] == [1, 2, 3]


def flipped(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0x01
    return bytes(out)


async def read_projected(journal, **kw):
    return [r async for batch in journal.read_batches(projected=True, **kw) for r in batch]


class TestProjectionContract:
    """``journal.projection``: what a Pod observation's row carries beside its payload."""

    async def test_a_pod_record_reads_back_projected_and_every_other_record_whole(self, backend):
        drafts = pods_with_credentials(4) + commands(2)
        async with backend.journal() as j:
            stored = await j.append(drafts)
            whole, projected = await read_all(j), await read_projected(j)
        assert whole == stored
        for w, p in zip(whole, projected):
            if w.rec == "observed":
                assert p.obj == projection.prune(w.obj, projection.POD) != w.obj
                assert p.model_copy(update={"obj": {}}) == w.model_copy(update={"obj": {}})
            else:
                assert p == w
        assert [seq for seq, view in sorted(backend.views().items()) if view is not None] == [1, 2, 3, 4]

    async def test_a_damaged_projection_is_not_used_the_payload_is_read_instead(self, backend):
        async with backend.journal() as j:
            stored = await j.append(pods_with_credentials(6))
        views = backend.views()
        backend.set_view(2, flipped(views[2], len(views[2]) - 3))                   # a flipped byte
        backend.set_view(3, views[3][:4] + bytes([projection.VERSION + 1]) + views[3][5:])  # an unknown version
        backend.set_view(4, views[5])                                               # another row's projection
        backend.set_view(5, b"\x00")                                                # cut short
        async with backend.journal() as j:
            assert await j.verify() is None  # the chain covers payloads only
            got = await read_projected(j)
        assert [r.obj for r in got[1:5]] == [r.obj for r in stored[1:5]]  # read whole, from the payload
        for i in (0, 5):  # untouched: read from the projection
            assert got[i].obj == projection.prune(stored[i].obj, projection.POD) != stored[i].obj

    async def test_a_damaged_payload_is_still_refused_when_its_projection_is_sound(self, backend):
        async with backend.journal() as j:
            await j.append(pods_with_credentials(6))
        backend.flip_byte(4, index=40)
        async with backend.journal() as j:
            got = []
            with pytest.raises(JournalCorrupt) as err:
                async for batch in j.read_batches(projected=True):
                    got += [r.seq for r in batch]
        assert err.value.seq == 4 and got == [1, 2, 3]

    async def test_a_projection_holds_no_credential(self, backend):
        drafts = pods_with_credentials(8)
        for i, d in enumerate(drafts):  # credentials in fields the projection keeps, too
            d.obj["status"]["message"] = f"Bearer tok{i}abcdefghij"
            d.obj["metadata"]["labels"] = {"kfold.dev/session": f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI{i}In0.sig"}
        async with backend.journal() as j:
            stored = await j.append(j.prepare(drafts[:4]) + drafts[4:])
            projected = await read_projected(j)
        views = b"".join(v for v in backend.views().values())
        for i in range(8):
            for secret in (f"tok{i}abcdefghij", f"eyJzdWIiOiI{i}In0", f"hunter{i}-pw", f"key-{i}-material"):
                assert secret.encode() not in views
        assert all(p.obj["status"]["message"] == s.obj["status"]["message"] and
                   p.obj["status"]["message"].startswith(PREFIX) for p, s in zip(projected, stored))
