"""The observer against a local stub apiserver: each fault recovers the way the contract says."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

from engine.effects.io.clock import ServerClock
from engine.effects.io import observer as observer_module
from engine.effects.io.observer import WatchBackoff, Observer
from engine.effects.io.watch import LinePump
from engine.machines.base import missing_after_relist, object_key
from journal.records import Observed, Relist
from tests.contract.watch_stub import (
    DEFAULT_DATE, DEFAULT_DATE_MS, ListReply, StatusReply, StubApiserver, WatchReply, bookmark,
    event, gone_event, pod,
)

LATER_DATE = "Tue, 01 Jan 2030 00:10:00 GMT"
LATER_DATE_MS = DEFAULT_DATE_MS + 600_000
STOP_GRACE_S = 2.0


class Harness:
    """One stub, one observer, the drafts it sank, the sleeps it asked for, the timeouts it sent."""

    def __init__(self, stub: StubApiserver, **overrides: Any):
        self.stub = stub
        self.drafts: list[Any] = []
        self.sleeps: list[float] = []
        self.request_timeouts: list[Any] = []
        self.apis: list[Any] = []
        self.clock = ServerClock()
        self.fail_sink_once = False
        options = dict(idle_timeout_s=0.3, server_timeout_s=7, read_timeout_s=1.0,
                       rng=lambda: 0.5, sleep=self._sleep)
        api_version, kind, plural = overrides.pop("resource", ("v1", "Pod", "pods"))
        options.update(overrides)
        self.observer = Observer(self._client, "c1", api_version, kind, plural, "", self._sink,
                                 self.clock, **options)

    def _client(self) -> Any:
        api = self.stub.api_client()
        self.apis.append(api)
        pool = api.rest_client.pool_manager
        real = pool.request

        def recording_request(*args: Any, **kwargs: Any) -> Any:
            timeout = kwargs.get("timeout")
            self.request_timeouts.append((timeout.connect_timeout, timeout.read_timeout))
            return real(*args, **kwargs)

        pool.request = recording_request
        return api

    async def _sink(self, drafts: list[Any]) -> None:
        if self.fail_sink_once and any(isinstance(d, Observed) for d in drafts):
            self.fail_sink_once = False
            raise OSError("journal full")
        self.drafts.extend(drafts)

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(0)

    async def run_until(self, done: Callable[[], bool], timeout: float = 1.5) -> None:
        """Run the observer until ``done()``; fail (never hang) if that takes over ``timeout``
        seconds or if the observer does not stop within ``STOP_GRACE_S`` of being cancelled."""
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(self.observer.run())
        deadline = loop.time() + timeout
        try:
            while not done():
                if task.done():
                    task.result()
                    pytest.fail(f"observer.run() returned on its own; {self.state()}")
                if loop.time() > deadline:
                    pytest.fail(f"condition not met within {timeout}s; {self.state()}")
                await asyncio.sleep(0.005)
        finally:
            await self.stop(task)

    async def stop(self, task: asyncio.Task) -> None:
        task.cancel()
        finished, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
        try:
            if not finished:
                pytest.fail(f"observer still running {STOP_GRACE_S}s after cancel() (cancellation "
                            f"swallowed?); {self.state()}")
            if not task.cancelled():
                task.result()
                pytest.fail(f"observer.run() swallowed cancel() and returned; {self.state()}")
        finally:
            for api in self.apis:
                api.close()

    def state(self) -> str:
        o = self.observer
        return (f"observed={self.observed()} relists={len(self.relists())} "
                f"lists={len(self.stub.of_kind('list'))} watches={len(self.watches())} "
                f"restarts={o.restarts} sleeps={self.sleeps} rv={o.rv!r}")

    def observed(self) -> list[tuple[str, str]]:
        return [(d.event, d.name) for d in self.drafts if isinstance(d, Observed)]

    def relists(self) -> list[Relist]:
        return [d for d in self.drafts if isinstance(d, Relist)]

    def watches(self) -> list[dict[str, str]]:
        return [r.query for r in self.stub.of_kind("watch")]


@pytest.fixture
def stub():
    with StubApiserver() as s:
        yield s


def watches_at_least(h: Harness, n: int) -> Callable[[], bool]:
    return lambda: len(h.stub.of_kind("watch")) >= n


async def test_the_list_is_a_quorum_read_and_ends_with_a_relist_of_every_key(stub, frozen_world):
    stub.lists = [ListReply([pod("a", "5"), pod("b", "6")], rv="10")]
    h = Harness(stub)
    await h.run_until(watches_at_least(h, 1))
    assert "resourceVersion" not in stub.of_kind("list")[0].query
    assert h.observed() == [("ADDED", "a"), ("ADDED", "b")]
    (relist,) = h.relists()
    assert h.drafts[-1] is relist
    assert [(k.namespace, k.name, k.uid, k.rv) for k in relist.keys] == [
        ("ns", "a", "uid-a", "5"), ("ns", "b", "uid-b", "6")]
    assert relist.rv == "10" and h.observer.synced


async def test_records_are_stamped_with_the_server_date_not_the_wall_clock(stub, frozen_world):
    stub.lists = [ListReply([pod("a", "5")], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11"))], date=LATER_DATE)]
    h = Harness(stub)
    await h.run_until(lambda: len(h.observed()) == 2)
    listed, modified = [d.at for d in h.drafts if isinstance(d, Observed)]
    assert DEFAULT_DATE_MS <= listed < DEFAULT_DATE_MS + 1000
    assert LATER_DATE_MS <= modified < LATER_DATE_MS + 1000


async def test_records_carry_no_time_before_any_date_was_seen(stub):
    stub.lists = [ListReply([pod("a", "5")], rv="10", date=None)]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11"))], date=None)]
    h = Harness(stub)
    await h.run_until(lambda: len(h.observed()) == 2)
    assert [d.at for d in h.drafts] == [None, None, None]


async def test_a_garbage_date_is_ignored_and_the_clock_keeps_its_reading(stub):
    stub.lists = [ListReply([pod("a", "5")], rv="10", date=DEFAULT_DATE)]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11"))], date="Funday, 99 Smarch 20x0")]
    h = Harness(stub)
    await h.run_until(lambda: len(h.observed()) == 2)
    assert DEFAULT_DATE_MS <= h.drafts[-1].at < DEFAULT_DATE_MS + 1000
    assert h.clock.rejected >= 1


async def test_every_watch_sets_bookmarks_server_timeout_and_resumes_from_the_last_rv(stub):
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("ADDED", pod("a", "11"))]),
                    WatchReply([bookmark("15")]),
                    WatchReply([])]
    h = Harness(stub)
    await h.run_until(watches_at_least(h, 4))
    assert [q["resourceVersion"] for q in h.watches()[:4]] == ["10", "11", "15", "15"]
    assert all(q["allowWatchBookmarks"] == "true" and q["timeoutSeconds"] == "7" for q in h.watches())
    assert h.observed() == [("ADDED", "a")]        # a bookmark is never a record
    assert h.observer.restarts["timeout"] >= 3 and h.observer.bookmarks == 1


async def test_every_request_carries_a_connect_and_a_read_timeout(stub):
    stub.watches = [WatchReply([]), StatusReply(500, "InternalError")]
    h = Harness(stub)
    await h.run_until(watches_at_least(h, 3))
    assert h.request_timeouts and all(t == (10.0, 1.0) for t in h.request_timeouts)


@pytest.mark.parametrize("gone", [
    pytest.param(lambda: WatchReply([gone_event()], end="stall"), id="error-event"),
    pytest.param(lambda: StatusReply(410, "Expired", "too old resource version"), id="http-status"),
])
async def test_a_410_relists_and_the_relist_reveals_the_missed_deletion(stub, gone):
    stub.lists = [ListReply([pod("a", "5"), pod("b", "6")], rv="10"),
                  ListReply([pod("a", "5")], rv="20")]
    stub.watches = [gone()]
    h = Harness(stub)
    await h.run_until(lambda: len(h.relists()) == 2 and len(stub.of_kind("watch")) >= 2)
    assert all("resourceVersion" not in r.query for r in stub.of_kind("list"))
    tracked = [object_key("c1", "ns", "a"), object_key("c1", "ns", "b")]
    assert missing_after_relist(tracked, h.relists()[-1]) == [object_key("c1", "ns", "b")]
    assert h.watches()[1]["resourceVersion"] == "20"
    assert h.observer.restarts["gone"] == 1 and h.observer.relists == 2


def journaled_before_relist(h: Harness, n: int) -> list[tuple[str, str, str]]:
    """(event, name, rv) of the observations journaled after Relist ``n - 1`` and before Relist ``n``
    (the watch events in between, then the ``n``-th list's items)."""
    cuts = [-1] + [i for i, d in enumerate(h.drafts) if isinstance(d, Relist)]
    return [(d.event, d.name, d.rv) for d in h.drafts[cuts[n - 1] + 1:cuts[n]] if isinstance(d, Observed)]


async def test_a_relist_journals_only_what_changed_since_the_observer_journaled_it(stub):
    # Kubernetes: a resourceVersion names one version of one object; the same (uid, rv) is the same object
    stub.lists = [ListReply([pod("a", "5"), pod("b", "6"), pod("c", "7"), pod("r", "8"), pod("e", "")], rv="10"),
                  ListReply([pod("a", "5"), pod("b", "11"), pod("c", "12"), pod("r", "8", uid="uid-r2"),
                             pod("d", "13"), pod("e", "")], rv="20")]
    stub.watches = [WatchReply([event("MODIFIED", pod("b", "11")), gone_event()], end="stall")]
    h = Harness(stub)
    await h.run_until(lambda: len(h.relists()) == 2)
    # a unchanged and b as watched: not again; c changed, r recreated (new uid), d new, e without rv: journaled
    assert journaled_before_relist(h, 2) == [("MODIFIED", "b", "11"), ("ADDED", "c", "12"), ("ADDED", "r", "8"),
                                             ("ADDED", "d", "13"), ("ADDED", "e", "")]
    assert [(k.name, k.uid, k.rv) for k in h.relists()[1].keys] == [
        ("a", "uid-a", "5"), ("b", "uid-b", "11"), ("c", "uid-c", "12"), ("r", "uid-r2", "8"),
        ("d", "uid-d", "13"), ("e", "uid-e", "")]
    assert h.observer.unchanged == 2


async def test_a_relist_without_a_change_journals_the_relist_alone(stub):
    items = [pod("a", "5"), pod("b", "6")]
    stub.lists = [ListReply(items, rv="10"), ListReply(items, rv="30")]
    stub.watches = [WatchReply([gone_event()], end="stall")]
    h = Harness(stub)
    await h.run_until(lambda: len(h.relists()) == 2)
    assert h.drafts[3:] == [h.relists()[1]] and h.relists()[1].rv == "30"
    assert [k.name for k in h.relists()[1].keys] == ["a", "b"]   # the fold still judges every absence


async def test_an_object_deleted_on_the_watch_or_missing_from_a_list_is_journaled_when_it_is_listed_again(stub):
    stub.lists = [ListReply([pod("a", "5"), pod("b", "6")], rv="10"),
                  ListReply([pod("a", "5")], rv="20"),
                  ListReply([pod("a", "5"), pod("b", "6")], rv="30")]
    stub.watches = [WatchReply([event("DELETED", pod("a", "5")), gone_event()], end="stall"),
                    WatchReply([gone_event()], end="stall")]
    h = Harness(stub)
    await h.run_until(lambda: len(h.relists()) == 3)
    assert journaled_before_relist(h, 2) == [("DELETED", "a", "5"), ("ADDED", "a", "5")]   # after its DELETED
    assert journaled_before_relist(h, 3) == [("ADDED", "b", "6")]     # after a list that lacked it


async def test_a_list_whose_sink_failed_is_journaled_whole_by_the_next(stub):
    stub.lists = [ListReply([pod("a", "5")], rv="10"), ListReply([pod("a", "5")], rv="20")]
    h = Harness(stub)
    h.fail_sink_once = True
    await h.run_until(lambda: len(h.relists()) == 1)
    assert h.observed() == [("ADDED", "a")] and h.relists()[0].rv == "20"


async def test_a_watch_that_keeps_going_never_relists(stub):
    # bookmarks, server timeouts, idle restarts and plain renewals resume from the last rv: no list
    stub.lists = [ListReply([pod("a", "5")], rv="10")]
    stub.watches = [WatchReply([bookmark("15")]), WatchReply([], end="stall"), WatchReply([bookmark("16")]),
                    WatchReply([event("MODIFIED", pod("a", "17"))]), WatchReply([])]
    h = Harness(stub, idle_timeout_s=0.1, read_timeout_s=5.0)
    await h.run_until(watches_at_least(h, 6), timeout=3.0)
    assert len(stub.of_kind("list")) == 1 and len(h.relists()) == 1
    assert [q["resourceVersion"] for q in h.watches()[:6]] == ["10", "15", "15", "16", "17", "17"]


async def test_a_stalled_watch_is_restarted_after_the_idle_timeout_from_the_same_rv(stub):
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("ADDED", pod("a", "11"))], end="stall")]
    h = Harness(stub, idle_timeout_s=0.2, read_timeout_s=5.0)
    await h.run_until(watches_at_least(h, 2))
    assert h.observer.restarts == {"idle": 1}
    assert h.watches()[1]["resourceVersion"] == "11"
    assert len(stub.of_kind("list")) == 1 and h.sleeps == []


async def test_watch_progress_is_stamped_by_the_list_and_by_each_answered_watch(stub):
    """``progressed_at`` (/metrics' watch lag): when the watch last heard from the apiserver."""
    now = [7.0]
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("ADDED", pod("a", "11"))], end="stall")]
    h = Harness(stub, idle_timeout_s=0.2, read_timeout_s=5.0, monotonic=lambda: now[0])
    assert h.observer.progressed_at is None
    await h.run_until(lambda: h.observer.events == 1)
    assert h.observer.progressed_at == 7.0
    now[0] = 30.0
    await h.run_until(watches_at_least(h, 2))   # the stalled one ended idle; the next was answered
    assert h.observer.progressed_at == 30.0


async def test_the_client_read_timeout_also_ends_a_silent_stream_as_idle(stub):
    stub.watches = [WatchReply([], end="stall")]
    h = Harness(stub, idle_timeout_s=5.0, read_timeout_s=0.2)
    await h.run_until(watches_at_least(h, 2))
    assert h.observer.restarts == {"idle": 1}


async def test_a_429_waits_exactly_its_retry_after(stub):
    stub.watches = [StatusReply(429, "TooManyRequests", retry_after="3")]
    h = Harness(stub)
    await h.run_until(watches_at_least(h, 2))
    assert h.sleeps == [3.0] and h.observer.restarts == {"throttled": 1}


async def test_a_429_without_retry_after_backs_off(stub):
    stub.watches = [StatusReply(429, "TooManyRequests")]
    h = Harness(stub, rng=lambda: 0.0)
    await h.run_until(watches_at_least(h, 2))
    assert h.sleeps == [0.8]


async def test_a_500_backs_off_with_jitter_then_watches_again_from_the_same_rv(stub):
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [StatusReply(500, "InternalError"), StatusReply(500, "InternalError")]
    h = Harness(stub, rng=lambda: 1.0)
    await h.run_until(watches_at_least(h, 3))
    assert h.sleeps == [1.6, 3.2]
    assert [q["resourceVersion"] for q in h.watches()[:3]] == ["10", "10", "10"]
    assert h.observer.restarts == {"error": 2}


async def test_a_connection_reset_mid_stream_keeps_what_arrived_and_resumes_after_it(stub):
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("ADDED", pod("a", "11")), 0.05], end="reset")]
    h = Harness(stub)
    await h.run_until(watches_at_least(h, 2))
    assert h.observed() == [("ADDED", "a")]
    assert h.watches()[1]["resourceVersion"] == "11"
    assert h.observer.restarts == {"error": 1} and len(h.sleeps) == 1


async def test_a_failed_sink_redelivers_the_events_instead_of_skipping_them(stub):
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11"))]),
                    WatchReply([event("MODIFIED", pod("a", "11"))])]
    h = Harness(stub)
    h.fail_sink_once = True
    await h.run_until(lambda: len(h.observed()) == 1)
    assert h.watches()[1]["resourceVersion"] == "10"


class GatedSink:
    """A sink whose first call with an observation waits for ``release`` (a commit in flight); it
    then raises when ``fail`` is set. Notes which batches were handed over while it waited."""

    def __init__(self, fail: bool = False):
        self.release, self.fail = asyncio.Event(), fail
        self.batches: list[list[str]] = []
        self.handed_while_waiting: list[list[str]] = []
        self.waiting = False
        self.sunk: list[Any] = []

    async def __call__(self, drafts: list[Any]) -> None:
        names = [d.rv for d in drafts if isinstance(d, Observed)]
        self.batches.append(names)
        if self.waiting:
            self.handed_while_waiting.append(names)
        if names and len(self.batches) == 2:   # the first watch batch (the list's Relist came first)
            self.waiting = True
            await self.release.wait()
            self.waiting = False
            if self.fail:
                raise OSError("transaction failed")
        self.sunk.extend(drafts)


async def test_the_next_batch_is_handed_over_while_the_one_before_commits_and_the_rv_follows_in_order(
        stub, monkeypatch):
    monkeypatch.setattr(observer_module, "PIPELINE_FROM", 1)   # every batch counts as a backlog
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11")), 0.05, event("MODIFIED", pod("b", "12")),
                                0.05, bookmark("13")], end="stall")]
    sink = GatedSink()
    h = Harness(stub, idle_timeout_s=5.0, read_timeout_s=6.0)
    h.observer.sink = sink
    task = asyncio.create_task(h.observer.run())
    try:
        for _ in range(300):
            if sink.handed_while_waiting:
                break
            await asyncio.sleep(0.01)
        assert sink.handed_while_waiting == [["12"]]   # decoded and handed over while "11" commits
        assert h.observer.rv == "10" and h.observer.events == 0   # nothing moves past an unfinished batch
        sink.release.set()
        for _ in range(300):
            if h.observer.rv == "13":
                break
            await asyncio.sleep(0.01)
        assert h.observer.rv == "13" and h.observer.events == 2   # in order, then the bookmark
        assert [b for b in sink.batches if b] == [["11"], ["12"]]   # handed over in order
    finally:
        await h.stop(task)


async def test_a_watch_that_keeps_up_lands_each_batch_before_reading_the_next(stub):
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11")), 0.05, event("MODIFIED", pod("b", "12"))],
                               end="stall")]
    sink = GatedSink()
    h = Harness(stub, idle_timeout_s=5.0, read_timeout_s=6.0)
    h.observer.sink = sink
    task = asyncio.create_task(h.observer.run())
    try:
        await asyncio.sleep(0.3)   # "12" has arrived by now, but is not read while "11" commits
        assert sink.waiting and sink.handed_while_waiting == [] and h.observer.rv == "10"
        sink.release.set()
        for _ in range(300):
            if h.observer.rv == "12":
                break
            await asyncio.sleep(0.01)
        assert h.observer.rv == "12" and [b for b in sink.batches if b] == [["11"], ["12"]]
    finally:
        await h.stop(task)


async def test_a_batch_that_fails_under_the_next_one_rewatches_from_before_both(stub, monkeypatch):
    monkeypatch.setattr(observer_module, "PIPELINE_FROM", 1)
    stub.lists = [ListReply([], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11")), 0.05, event("MODIFIED", pod("b", "12")),
                                0.05], end="stall"),
                    WatchReply([event("MODIFIED", pod("a", "11")), event("MODIFIED", pod("b", "12"))])]
    sink = GatedSink(fail=True)
    h = Harness(stub, idle_timeout_s=5.0, read_timeout_s=6.0)
    h.observer.sink = sink

    async def fail_once_both_were_handed() -> None:
        while not sink.handed_while_waiting:
            await asyncio.sleep(0.01)
        sink.release.set()
    gate = asyncio.create_task(fail_once_both_were_handed())
    await h.run_until(lambda: len(h.watches()) >= 2 and h.observer.rv == "12", timeout=4.0)
    await gate
    assert h.watches()[1]["resourceVersion"] == "10"   # re-watched from before the failed batch
    assert h.observer.restarts.get("error") == 1
    # "12" was handed over once already (its batch did not fail) and comes again: the fold tolerates repeats
    assert [rv for b in sink.batches for rv in b] == ["11", "12", "11", "12"]
    assert sorted(d.rv for d in sink.sunk if isinstance(d, Observed)) == ["11", "12", "12"]


async def test_every_object_is_redacted_before_it_becomes_a_record(stub):
    stub.lists = [ListReply([pod("a", "5")], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11"))])]
    seen: list[str] = []

    def redact(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(kind)
        return {"redacted": True}

    h = Harness(stub, redact=redact)
    await h.run_until(lambda: len(h.observed()) == 2)
    assert seen == ["Pod", "Pod"]
    assert all(d.obj == {"redacted": True} for d in h.drafts if isinstance(d, Observed))


async def test_each_draft_is_prepared_as_it_is_made_and_the_prepared_one_is_sunk(stub):
    stub.lists = [ListReply([pod("a", "5")], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", pod("a", "11")), event("MODIFIED", pod("b", "12"))])]
    prepared: list[tuple[str, bool]] = []

    def prepare(rec: Any) -> Any:
        prepared.append((rec.rv, rec.obj == {"redacted": True}))   # after redaction
        return rec.model_copy(update={"uid": f"prepared-{rec.rv}"})

    h = Harness(stub, redact=lambda kind, obj: {"redacted": True}, prepare=prepare)
    await h.run_until(lambda: len(h.observed()) == 3)
    assert prepared == [("5", True), ("11", True), ("12", True)]
    assert [d.uid for d in h.drafts if isinstance(d, Observed)] == ["prepared-5", "prepared-11", "prepared-12"]
    assert [k.uid for k in h.relists()[0].keys] == ["uid-a"]   # the keys are what the apiserver listed


async def test_managed_fields_are_dropped_before_redaction_from_listed_and_watched_objects(stub):
    managed = [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:phase": {}}}}]
    listed, watched = pod("a", "5"), pod("a", "11")
    for obj in (listed, watched):
        obj["metadata"]["managedFields"] = managed
    stub.lists = [ListReply([listed], rv="10")]
    stub.watches = [WatchReply([event("MODIFIED", watched)])]
    redacted: list[dict[str, Any]] = []

    def redact(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        redacted.append(obj)
        return obj

    h = Harness(stub, redact=redact)
    await h.run_until(lambda: len(h.observed()) == 2)
    assert [o["metadata"] for o in redacted] == [
        {"name": "a", "namespace": "ns", "uid": "uid-a", "resourceVersion": rv, "labels": {}} for rv in ("5", "11")]
    assert [d.obj["metadata"]["resourceVersion"] for d in h.drafts if isinstance(d, Observed)] == ["5", "11"]
    assert all("managedFields" not in d.obj["metadata"] for d in h.drafts if isinstance(d, Observed))


async def test_a_cancel_is_never_swallowed_by_a_batch_landing_in_the_same_instant():
    # The interleaving that hung this suite: the last batch (or the StreamEnd) lands and wakes the
    # read, and the owner cancels before the reading task resumes. asyncio.wait_for on 3.11
    # returned the batch and dropped the cancel, so the observer kept watching forever.
    pump = LinePump(resp=None, loop=asyncio.get_running_loop())
    got: list[Any] = []

    async def reader() -> None:
        while True:
            got.append(await pump.next(5.0))

    task = asyncio.create_task(reader())
    await asyncio.sleep(0.01)                  # the reader waits in next()
    pump._queue.put_nowait([b"line"])          # what the pump thread's call_soon_threadsafe does
    await asyncio.sleep(0)                     # the read wakes up ...
    task.cancel()                              # ... and the owner cancels in the same instant
    finished, _ = await asyncio.wait({task}, timeout=1.0)
    assert finished and task.cancelled()
    assert got + [pump._queue.get_nowait() for _ in range(pump._queue.qsize())] == [[b"line"]]


async def test_batches_queued_behind_the_one_taken_come_merged_and_the_end_comes_after_them():
    """Under load the reader queues many small batches; the observer takes them as one (one sink
    call, one journal commit to wait for), in order, and the end of the stream still comes last."""
    from engine.effects.io.watch import StreamEnd
    pump = LinePump(resp=None, loop=asyncio.get_running_loop())
    for batch in ([b"1"], [b"2", b"3"], [b"4"]):
        pump._credits.acquire()
        pump._queue.put_nowait(batch)
    pump._credits.acquire()
    pump._queue.put_nowait(StreamEnd())
    assert await pump.next(1.0) == [b"1", b"2", b"3", b"4"]
    assert await pump.next(1.0) == StreamEnd()
    assert pump._queue.empty() and pump._credits.acquire(blocking=False), "every credit given back"


@pytest.mark.parametrize("draw", [0.0, 0.37, 1.0], ids=["low", "mid", "high"])
def test_backoff_grows_from_the_floor_to_the_cap_and_never_leaves_them(draw):
    """Seed 002:447-451: a watch that ends is armed again."""
    clock = [0.0]
    b = WatchBackoff(0.8, 30.0, 60.0, rng=lambda: draw, monotonic=lambda: clock[0])
    delays = [b.next_delay() for _ in range(10)]
    ceilings = [min(30.0, 0.8 * 2 ** (n + 1)) for n in range(10)]
    assert delays == [pytest.approx(0.8 + draw * (c - 0.8)) for c in ceilings]
    assert all(0.8 <= d <= 30.0 for d in delays)


def test_backoff_is_jittered_by_the_random_source():
    draws = iter([0.1, 0.9])
    b = WatchBackoff(0.8, 30.0, 60.0, rng=lambda: next(draws), monotonic=lambda: 0.0)
    b.attempt = 4
    first = b.next_delay()
    b.attempt = 4
    assert first != b.next_delay()


def test_backoff_resets_after_a_quiet_period():
    clock = [0.0]
    b = WatchBackoff(0.8, 30.0, 60.0, rng=lambda: 1.0, monotonic=lambda: clock[0])
    assert [b.next_delay() for _ in range(3)] == pytest.approx([1.6, 3.2, 6.4])
    clock[0] += 59.9
    assert b.next_delay() == pytest.approx(12.8)
    clock[0] += 60.0
    assert b.next_delay() == pytest.approx(1.6)
