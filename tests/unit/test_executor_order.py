"""In order per object, even while an effect waits for its retry (and across a restart).

A tiny test machine emits a label PATCH on one object key per command; the fake apiserver
answers the first PATCH with 429 + Retry-After. The second PATCH on that key must reach the
apiserver only after the first one's retry succeeded — while it waits in-process, and when the
wait is found in the journal after a restart. Time is controlled: the server clock's and the
daemon's monotonic clocks are test-driven.
"""
from __future__ import annotations

import asyncio
from typing import Any

from engine.core import Machines, Pending, State
from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Backoff, Executor
from engine.effects.io.fake import T2030, Fault, FakeApiServer, FakeTransport
from engine.effects.models import CreateObject, PatchObject, effect_to_dict
from engine.effects.timers import MAX_SLEEP_S, Ticker, ready_to_issue
from engine.machines.base import Decision, Machine
from immutables import Map
from journal.records import Command, EffectIssued, Outcome
from kfold.daemon.loop import Daemon
from tests.journals import TestJournal as MemoryJournal

KEY = "local/work/p"
REF = dict(api_version="v1", kind="Pod", namespace="work", name="p")
THROTTLED = dict(status=429, reason="TooManyRequests", message="slow down",
                 headers={"Retry-After": "1"}, method="PATCH")


class Steps(Decision):
    results: tuple[str, ...] = ()


class Stepper(Machine):
    name = "stepper"
    decision = Steps
    commands = frozenset({"step.patch", "step.create"})

    def on_command(self, ctx: Any, rec: Command) -> None:
        step = str(rec.args["step"])
        if rec.name == "step.create":
            ctx.emit(CreateObject, KEY, **{**REF, "name": "q"}, manifest={"metadata": {"name": "q"}})
        else:
            ctx.emit(PatchObject, KEY, **REF, patch={"metadata": {"labels": {"step": step}}})

    def on_in_doubt(self, ctx: Any, effect: Any) -> None:  # pragma: no cover - not used here
        pass

    def on_outcome(self, ctx: Any, rec: Outcome, effect: Any) -> None:
        seen = ctx.get(effect.key) or Steps()
        step = effect.patch["metadata"]["labels"]["step"] if effect.type == "patch" else effect.type
        ctx.put(effect.key, seen.but(results=seen.results + (f"{step}:{rec.result}",)))


MACHINES = Machines([Stepper()])


class Mono:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def world(server_ms: int | None = T2030, journal: MemoryJournal | None = None) -> tuple[Daemon, FakeApiServer, Mono]:
    server = FakeApiServer(server_ms=server_ms)
    server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}})
    server.seed({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "work"}})
    mono = Mono()
    clock = ServerClock(monotonic=mono)
    backoff = Backoff(base_ms=10, cap_ms=50)
    d = Daemon(journal or MemoryJournal(),
               lambda sink: Executor(FakeTransport(server), clock, sink, env={}, backoff=backoff), clock,
               machines=MACHINES, monotonic=mono)
    return d, server, mono


def patches(server: FakeApiServer) -> list[str]:
    """The ``step`` label of every PATCH the apiserver received, in order."""
    return [b["metadata"]["labels"]["step"] for (m, _), b in zip(server.requests, server.bodies) if m == "PATCH"]


async def until(cond: Any, timeout: float = 3.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def idle(d: Daemon) -> None:
    def quiet() -> bool:  # the journal's group commit takes turns of the loop: wait for it too
        return not d.executor._workers and d._inbox.empty() and all(t is None or t.done() for t in (d._committing, d._sending))
    await until(quiet)
    await asyncio.sleep(0.02)
    await until(quiet)


def waiting_retry(d: Daemon) -> Pending | None:
    return next((p for p in d.state.pending.values() if p.attempt and not p.issued), None)


def results(d: Daemon) -> tuple[str, ...]:
    return d.state.table("stepper")[KEY].results


def issued_seq(d: Daemon, effect_id: str) -> int:
    return next(r.seq for r in d.journal.records if r.rec == "effect" and r.effect["id"] == effect_id)


def final_outcome_seq(d: Daemon, effect_id: str) -> int:
    return next(r.seq for r in d.journal.records
                if r.rec == "outcome" and r.effect_id == effect_id and r.retry_after_ms is None)


async def test_a_later_patch_waits_behind_a_patch_waiting_for_its_retry():
    d, server, mono = world()
    server.faults.append(Fault(**THROTTLED))
    d.start_loops()
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 1})])
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 2})])  # right after
    await until(lambda: waiting_retry(d) is not None)
    await idle(d)
    first, second = sorted(d.state.pending, key=lambda i: int(i.split(".")[0]))
    assert d.state.pending[first].not_before == T2030 + 1_000      # Retry-After: 1
    assert not d.state.pending[second].issued, "held behind its key's retry: not even issued"
    assert patches(server) == ["1"], "the second PATCH must not overtake the waiting retry"

    mono.t += 2.0          # the server clock passes not_before
    d._changed.set()
    await until(lambda: len(results(d) if KEY in d.state.table("stepper") else ()) == 2)
    await idle(d)
    assert patches(server) == ["1", "1", "2"]
    assert results(d) == ("1:ok", "2:ok")
    assert server.get("v1", "Pod", "work", "p")["metadata"]["labels"] == {"step": "2"}
    assert issued_seq(d, second) > final_outcome_seq(d, first), "issued only after the retry's outcome"
    assert not d.state.pending
    await d.stop()


async def test_without_a_server_clock_the_retry_waits_in_process_and_still_holds_its_key():
    d, server, mono = world(server_ms=None)           # no Date header, ever
    server.faults.append(Fault(**THROTTLED))
    calls = 0
    due = d.ticker.due

    def counting(*args: Any) -> list[Any]:
        nonlocal calls
        calls += 1
        return due(*args)

    d.ticker.due = counting  # type: ignore[method-assign]
    d.start_loops()
    await d.submit([Command(at=None, name="step.patch", args={"step": 1})])
    await d.submit([Command(at=None, name="step.patch", args={"step": 2})])
    await until(lambda: waiting_retry(d) is not None)
    assert waiting_retry(d).not_before is None
    calls = 0
    await asyncio.sleep(0.3)
    assert calls <= 3, f"the ticker spins without a server clock ({calls} ticks in 0.3 s)"
    assert patches(server) == ["1"]

    mono.t += 0.5          # not yet: Retry-After is 1 s
    d._changed.set()
    await asyncio.sleep(0.05)
    assert patches(server) == ["1"]
    mono.t += 1.0
    d._changed.set()
    await until(lambda: KEY in d.state.table("stepper") and len(results(d)) == 2)
    assert patches(server) == ["1", "1", "2"] and results(d) == ("1:ok", "2:ok")
    await d.stop()


async def test_after_a_restart_a_journaled_retry_still_holds_its_key():
    first = PatchObject(id="1.0", machine="stepper", key=KEY, **REF, patch={"metadata": {"labels": {"step": "1"}}})
    journal = MemoryJournal()
    await journal.append([
        Command(at=T2030, name="step.patch", args={"step": 1}),
        EffectIssued(at=T2030, effect=effect_to_dict(first)),
        Outcome(at=T2030, effect_id="1.0", machine="stepper", key=KEY, result="transient",
                code=503, retry_after_ms=5_000),
        Command(at=T2030, name="step.patch", args={"step": 2}),   # emitted 4.0, never issued
    ])
    d, server, mono = world(server_ms=T2030 + 1_000, journal=journal)
    d.start_loops()
    summary = await d.recover()
    assert summary["in_doubt"] == 0 and summary["unissued"] == 1
    assert d.state.pending["1.0"].not_before == T2030 + 5_000 and not d.state.pending["4.0"].issued
    d.clock.for_cluster().observe("Tue, 01 Jan 2030 00:00:01 GMT")
    d._changed.set()
    await asyncio.sleep(0.1)
    assert server.requests == [], "neither the retry before not_before nor the effect behind it"
    assert not d.state.pending["4.0"].issued

    d.clock.for_cluster().observe("Tue, 01 Jan 2030 00:00:06 GMT")
    d._changed.set()
    await until(lambda: KEY in d.state.table("stepper") and len(results(d)) == 2)
    assert patches(server) == ["1", "2"] and results(d) == ("1:ok", "2:ok")
    assert issued_seq(d, "4.0") > final_outcome_seq(d, "1.0")
    await d.stop()


async def test_after_a_restart_an_unclocked_retry_goes_first_then_the_effect_behind_it():
    first = PatchObject(id="1.0", machine="stepper", key=KEY, **REF, patch={"metadata": {"labels": {"step": "1"}}})
    journal = MemoryJournal()
    await journal.append([
        Command(at=None, name="step.patch", args={"step": 1}),
        EffectIssued(at=None, effect=effect_to_dict(first)),
        Outcome(at=None, effect_id="1.0", machine="stepper", key=KEY, result="transient", retry_after_ms=900),
        Command(at=None, name="step.patch", args={"step": 2}),
    ])
    d, server, mono = world(journal=journal)
    server.faults.append(Fault(**THROTTLED))   # the retry is throttled once more: still first
    d.start_loops()
    await d.recover()
    await until(lambda: waiting_retry(d) is not None and d.state.pending["1.0"].attempt == 2)
    await idle(d)
    assert patches(server) == ["1"] and not d.state.pending["4.0"].issued
    mono.t += 2.0
    d._changed.set()
    await until(lambda: KEY in d.state.table("stepper") and len(results(d)) == 2)
    assert patches(server) == ["1", "1", "2"] and results(d) == ("1:ok", "2:ok")
    await d.stop()


async def test_an_unsafe_effect_is_never_retried_and_the_key_moves_on_after_its_outcome():
    d, server, _ = world()
    server.faults.append(Fault(**{**THROTTLED, "method": "POST"}))
    d.start_loops()
    await d.submit([Command(at=T2030, name="step.create", args={"step": 0})])
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 1})])
    await until(lambda: KEY in d.state.table("stepper") and len(results(d)) == 2)
    await idle(d)
    assert results(d) == ("create:transient", "1:ok"), "the machine hears the create's failure, then the patch runs"
    assert [m for m, _ in server.requests] == ["POST", "PATCH"], "the create is not sent again"
    await d.stop()


# -- the rule, pure ---------------------------------------------------------------------------

def _patch(eid: str, key: str = KEY) -> PatchObject:
    return PatchObject(id=eid, machine="stepper", key=key, **REF, patch={})


def test_only_the_oldest_pending_effect_of_a_key_is_issued():
    pending = Map({"12.0": Pending(_patch("12.0")), "3.1": Pending(_patch("3.1")),
                   "3.0": Pending(_patch("3.0"), attempt=1, not_before=T2030),
                   "5.0": Pending(_patch("5.0", key="other"))})
    state = State(pending=pending)
    assert [e.id for e in ready_to_issue(state)] == ["5.0"], "3.0 waits for its retry and holds 3.1, 12.0"
    state = State(pending=pending.delete("3.0"))
    assert [e.id for e in ready_to_issue(state)] == ["3.1", "5.0"]
    assert ready_to_issue(state, {"other"})[0].id == "5.0"


def test_the_ticker_re_issues_only_a_head_and_never_spins_on_what_it_cannot_issue():
    t = Ticker()
    pending = Map({"3.0": Pending(_patch("3.0"), issued=True),                       # in flight
                   "4.0": Pending(_patch("4.0"), attempt=1, not_before=T2030)})      # legacy: behind it
    state = State(pending=pending)
    assert t.due(state, T2030 + 10, 0) == []
    assert t.sleep_s(state, T2030 + 10, 0) == MAX_SLEEP_S
    assert t.sleep_s(state, None, 0) == MAX_SLEEP_S
    state = State(pending=pending.delete("3.0"))
    assert [r.effect["id"] for r in t.due(state, T2030 + 10, 0)] == ["4.0"]
    assert t.due(state, T2030 + 10, 0) == [] and t.sleep_s(state, T2030 + 10, 0) == MAX_SLEEP_S
    unclocked = State(pending=Map({"7.0": Pending(_patch("7.0"), attempt=1)}))
    t.wait_locally("7.0", 1, 5_000)
    assert t.due(unclocked, None, 4_000) == [] and t.sleep_s(unclocked, None, 4_000) == 1.0
    assert t.sleep_s(unclocked, None, 4_700) == 0.3
    assert [r.effect["id"] for r in t.due(unclocked, None, 5_000)] == ["7.0"]


def test_a_fresh_read_is_issued_first_and_a_later_write_waits_for_it():
    """In-doubt resolution: the quorum read goes before an older queued write of the same key;
    once the read is issued, writes emitted after it wait for its answer."""
    from immutables import Map

    from engine.core import Pending, State
    from engine.effects.models import GetObject, PatchObject
    from engine.effects.timers import ready_to_issue

    ref = dict(machine="session", key="local/ns/demo", cluster="local", api_version="kfold.dev/v1alpha1",
               kind="Session", namespace="ns", name="demo")
    older_patch = PatchObject(id="9.1", patch={"status": {}}, subresource="status", **ref)
    reread = GetObject(id="40.0", **ref)
    later_patch = PatchObject(id="41.0", patch={"metadata": {}}, **ref)
    state = State(pending=Map({"9.1": Pending(older_patch), "40.0": Pending(reread)}))
    assert [e.id for e in ready_to_issue(state)] == ["40.0", "9.1"]

    state = State(pending=Map({"40.0": Pending(reread, issued=True), "41.0": Pending(later_patch)}))
    assert ready_to_issue(state) == []


def test_the_daemons_pending_index_gives_the_same_answers_as_a_scan_of_the_pending_map():
    """``PendingIndex`` is a cache fed with what each fold emits: over a random history of
    emissions, issues, retries and outcomes, ``ready_to_issue`` and the waiting retries read
    through it equal the full scans, including for keys whose effects all left."""
    import random

    from engine.effects.models import GetObject
    from engine.effects.timers import PendingIndex, heads, seq_key, waiting_retries

    rng = random.Random(7)
    keys = [f"local/work/p{i}" for i in range(6)]
    index, pending, seq = PendingIndex(), Map(), 0
    for _ in range(600):
        seq += 1
        op = rng.random()
        if op < 0.35 or not pending:
            made = [(GetObject(id=f"{seq}.{n}", machine="stepper", key=k, **REF) if rng.random() < 0.2
                     else _patch(f"{seq}.{n}", key=k)) for n, k in enumerate(rng.sample(keys, rng.randint(1, 2)))]
            pending = pending.update({e.id: Pending(e) for e in made})
            index.add(made)
        else:
            eid = rng.choice(sorted(pending))
            p = pending[eid]
            if op < 0.6:
                pending = pending.set(eid, Pending(p.effect, issued=True, attempt=p.attempt))
            elif op < 0.75:
                pending = pending.set(eid, Pending(p.effect, attempt=p.attempt + 1, not_before=T2030))
            else:
                pending = pending.delete(eid)
        state = State(pending=pending)
        touched = set(rng.sample(keys, rng.randint(1, 3)))
        assert ready_to_issue(state, touched, index) == ready_to_issue(state, touched)
        assert waiting_retries(state, index) == waiting_retries(state) == sorted(
            (p for p in heads(state).values() if not p.issued and p.attempt), key=lambda p: seq_key(p.effect.id))
    rebuilt = PendingIndex().rebuild(state)
    for k in keys:
        assert {p.effect.id for p in rebuilt.of(state, k)} == {p.effect.id for p in index.of(state, k)}


async def test_commits_that_change_no_timer_and_leave_no_retry_do_not_wake_the_ticker():
    """The ticker is woken after a commit only if the timers changed or a retry waits: a burst of
    effects and outcomes with neither costs no ticker pass per commit."""
    d, server, mono = world()
    calls = 0
    due = d.ticker.due

    def counting(*args: Any) -> list[Any]:
        nonlocal calls
        calls += 1
        return due(*args)

    d.ticker.due = counting  # type: ignore[method-assign]
    d.start_loops()
    await asyncio.sleep(0.05)
    calls = 0
    for step in range(20):
        await d.submit([Command(at=T2030, name="step.patch", args={"step": step})])
    await until(lambda: KEY in d.state.table("stepper") and len(results(d)) == 20)
    assert d._commits >= 20 and calls <= 2, f"{calls} ticker passes for {d._commits} commits"
    server.faults.append(Fault(**THROTTLED))
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 99})])
    await until(lambda: waiting_retry(d) is not None)
    await asyncio.sleep(0.05)
    before = calls
    mono.t += 2.0   # the retry's not_before passes: the retry wakes the ticker, which re-issues it
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 100})])
    await until(lambda: len(results(d)) == 22)
    assert calls > before
    await d.stop()


async def test_every_effect_handed_to_the_executor_is_told_to_on_send_once_it_is_durable():
    """``Daemon.on_send`` (kfold.daemon.sweeps learns kfold's Secret writes from it) sees each
    effect when it goes to the executor: after its ``EffectIssued`` is journaled, a retry again."""
    d, server, mono = world()
    server.faults.append(Fault(**THROTTLED))
    told: list[tuple[str, bool]] = []
    d.on_send = lambda effect: told.append((effect.id, any(
        r.rec == "effect" and r.effect["id"] == effect.id for r in d.journal.records)))
    d.start_loops()
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 1})])
    await until(lambda: waiting_retry(d) is not None)
    mono.t += 2.0
    d._changed.set()
    await until(lambda: KEY in d.state.table("stepper") and len(results(d)) == 1)
    await idle(d)
    (eid,) = {e for e, _ in told}
    assert told == [(eid, True), (eid, True)]
