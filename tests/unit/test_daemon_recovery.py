"""Crash recovery: a restarted daemon resolves what a kill -9 left behind, journal first.

A tiny test machine stands in for the real ones (their behaviour is tested elsewhere): it emits
a create or a get on command and, for an effect in doubt, re-observes with a quorum GET.
"""
from __future__ import annotations

import asyncio
from typing import Any

from engine import snapshot
from engine.core import Machines, fold_all, initial_state
from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.fake import T2030, FakeApiServer, FakeTransport
from engine.effects.models import CreateObject, GetObject, effect_to_dict
from engine.machines.base import Decision, Machine
from journal.records import Command, EffectIssued, Outcome
from kfold.daemon.loop import Daemon
from tests.journals import TestJournal as MemoryJournal

NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}}
REF = dict(api_version="v1", kind="Pod", namespace="work", name="p")


class Seen(Decision):
    results: tuple[str, ...] = ()


class Probe(Machine):
    name = "probe"
    decision = Seen
    commands = frozenset({"probe.create", "probe.get"})

    def on_command(self, ctx: Any, rec: Command) -> None:
        kind = CreateObject if rec.name == "probe.create" else GetObject
        extra = {"manifest": {"metadata": {}}} if kind is CreateObject else {}
        ctx.emit(kind, "local/work/p", **REF, **extra)

    def on_in_doubt(self, ctx: Any, effect: Any) -> None:
        ctx.emit(GetObject, effect.key, **REF)

    def on_outcome(self, ctx: Any, rec: Outcome, effect: Any) -> None:
        seen = ctx.get(effect.key) or Seen()
        ctx.put(effect.key, seen.but(results=seen.results + (f"{effect.type}:{rec.result}",)))


MACHINES = Machines([Probe()])


def daemon_on(journal: MemoryJournal, server: FakeApiServer) -> Daemon:
    clock = ServerClock()
    return Daemon(journal, lambda sink: Executor(FakeTransport(server), clock, sink, env={}), clock,
                  machines=MACHINES, snapshot_every=1000)


async def settle(daemon: Daemon, timeout: float = 3.0) -> None:
    """Until the executor is idle, nothing waits to be committed and no commit is under way (the
    journal's group commit takes turns of the loop)."""
    for _ in range(int(timeout / 0.01)):
        await asyncio.sleep(0.01)
        committing = any(t is not None and not t.done() for t in (daemon._committing, daemon._sending))
        if not daemon.executor._workers and daemon._inbox.empty() and not committing:
            return
    raise AssertionError("daemon did not settle")


def fresh_server() -> FakeApiServer:
    server = FakeApiServer()
    server.seed(NS)
    return server


async def journal_with(*records: Any) -> MemoryJournal:
    j = MemoryJournal()
    await j.append(list(records))
    return j


def issued(effect_id: str, effect_type: type, **extra: Any) -> EffectIssued:
    e = effect_type(id=effect_id, machine="probe", key="local/work/p", **REF, **extra)
    return EffectIssued(at=T2030, effect=effect_to_dict(e))


async def test_an_in_doubt_effect_is_resolved_by_re_observation_before_anything_else():
    journal = await journal_with(Command(at=T2030, name="probe.create"),
                                 issued("1.0", CreateObject, manifest={"metadata": {}}))
    server = fresh_server()
    d = daemon_on(journal, server)
    d.start_loops()
    await d.recover()
    await settle(d)
    after_crash = journal.records[2:]
    assert after_crash[0].rec == "command" and after_crash[0].name == "effect.in_doubt"
    assert after_crash[0].args == {"effect_id": "1.0"}
    assert [m for m, _ in server.requests] == ["GET"], "the create in doubt must not be sent again"
    assert d.state.table("probe")["local/work/p"].results == ("get:not_found",)
    await d.stop()


async def test_an_effect_never_journaled_as_issued_is_sent_once_at_start():
    journal = await journal_with(Command(at=T2030, name="probe.create"))
    server = fresh_server()
    d = daemon_on(journal, server)
    d.start_loops()
    summary = await d.recover()
    await settle(d)
    assert summary["in_doubt"] == 0 and summary["unissued"] == 1
    assert [r.rec for r in journal.records[1:]] == ["effect", "outcome"]
    assert [m for m, _ in server.requests] == ["POST"]
    assert len(d.state.pending) == 0 and d.state.table("probe")["local/work/p"].results == ("create:ok",)
    await d.stop()


async def test_a_restart_after_the_outcome_repeats_nothing():
    server = fresh_server()
    first = daemon_on(MemoryJournal(), server)
    first.start_loops()
    await first.submit([Command(at=T2030, name="probe.create")])
    await settle(first)
    await first.stop()
    journal = first.journal.crash()
    second = daemon_on(journal, server)
    second.start_loops()
    summary = await second.recover()
    await settle(second)
    assert summary == {"seq": 3, "in_doubt": 0, "unissued": 0}
    assert [m for m, _ in server.requests] == ["POST"]
    await second.stop()


async def test_recovery_from_a_snapshot_plus_tail_equals_a_full_refold():
    records = [Command(at=T2030, name="probe.get"), issued("1.0", GetObject),
               Outcome(at=T2030, effect_id="1.0", machine="probe", key="local/work/p", result="not_found"),
               Command(at=T2030 + 1, name="probe.get")]
    journal = await journal_with(*records)
    full = fold_all(initial_state(), journal.records, MACHINES).state
    head = fold_all(initial_state(), journal.records[:3], MACHINES).state
    await journal.put_snapshot(3, snapshot.dump(head))
    d = daemon_on(journal, fresh_server())
    await d._load()
    assert snapshot.dump(d.state) == snapshot.dump(full)


async def test_a_journaled_retry_is_not_in_doubt_and_waits_for_the_server_clock():
    journal = await journal_with(
        Command(at=T2030, name="probe.get"), issued("1.0", GetObject),
        Outcome(at=T2030, effect_id="1.0", machine="probe", key="local/work/p", result="transient", retry_after_ms=5_000))
    server = fresh_server()
    server.server_ms = T2030 + 1_000
    d = daemon_on(journal, server)
    d.start_loops()
    summary = await d.recover()
    assert summary["in_doubt"] == 0 and summary["unissued"] == 0
    assert d.state.pending["1.0"].attempt == 1 and d.state.pending["1.0"].not_before == T2030 + 5_000
    d.clock.for_cluster().observe("Tue, 01 Jan 2030 00:00:01 GMT")
    await asyncio.sleep(0.05)
    assert server.requests == [], "not before the server clock passes not_before"
    d.clock.for_cluster().observe("Tue, 01 Jan 2030 00:00:06 GMT")
    d._changed.set()
    await settle(d)
    await asyncio.sleep(0.05)
    await settle(d)
    assert [m for m, _ in server.requests] == ["GET"]
    assert d.state.table("probe")["local/work/p"].results == ("get:not_found",)
    await d.stop()


async def test_stop_commits_in_flight_outcomes_snapshots_and_closes_the_journal():
    server = fresh_server()
    d = daemon_on(MemoryJournal(), server)
    d.start_loops()
    await d.submit([Command(at=T2030, name="probe.get")])
    await d.stop()
    assert d.journal.closed
    assert d.journal.records[-1].rec == "outcome"
    assert d.journal.snapshots[-1][0] == d.state.seq


async def test_with_the_sqlite_journal_an_in_doubt_create_is_re_observed_not_resent(tmp_path):
    from kfold.daemon.journal import open_journal
    path = str(tmp_path / "journal.db")
    journal = open_journal(path)
    await journal.open()
    await journal.append([Command(at=T2030, name="probe.create"), issued("1.0", CreateObject, manifest={"metadata": {}})])
    await journal.close()  # the process died here: issued, no outcome
    reopened = open_journal(path)
    await reopened.open()
    server = fresh_server()
    d = daemon_on(reopened, server)
    d.start_loops()
    assert (await d.recover())["in_doubt"] == 1
    await settle(d)
    await d.stop()
    assert [m for m, _ in server.requests] == ["GET"]
    again = open_journal(path)
    await again.open()
    kinds = [r.rec async for r in again.read(3)]
    await again.close()
    assert kinds[:3] == ["command", "effect", "outcome"] and again.size_bytes() > 0


async def test_an_in_doubt_command_is_stamped_on_its_effects_clusters_clock():
    """kfold sim (soak seed 30138): recovery stamped ``effect.in_doubt`` on the home cluster's
    clock while a takeover stamps it on the effect's; a cluster an hour ahead then had a deadline
    armed from home time. Both stamp it on the effect's cluster's clock."""
    from email.utils import formatdate
    from engine.effects.io.clock import ServerClocks
    class EastProbe(Probe):
        def on_command(self, ctx: Any, rec: Command) -> None:
            ctx.emit(GetObject, "east/work/p", cluster="east", **REF)

    e = GetObject(id="1.0", machine="probe", key="east/work/p", cluster="east", **REF)
    journal = await journal_with(Command(at=T2030, name="probe.get"),
                                 EffectIssued(at=T2030, effect=effect_to_dict(e)))
    clocks = ServerClocks(home="local", monotonic=lambda: 0.0)
    clocks.for_cluster("local").observe(formatdate(T2030 / 1000, usegmt=True))
    clocks.for_cluster("east").observe(formatdate(T2030 / 1000 + 3600, usegmt=True))
    d = Daemon(journal, lambda sink: Executor(FakeTransport(fresh_server()), clocks.for_cluster, sink, env={}),
               clocks, machines=Machines([EastProbe()]), snapshot_every=1000)
    d.start_loops()
    await d.recover()
    doubt = [r for r in journal.records if r.rec == "command" and r.name == "effect.in_doubt"]
    assert [r.at for r in doubt] == [T2030 + 3_600_000]
    await d.stop()
