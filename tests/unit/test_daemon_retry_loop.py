"""One loop per request, through the real daemon, executor and ticker: a read that keeps failing
is the same effect sent again and again (one ``EffectIssued`` per attempt, one id), its count going
on from the executor's attempts into the handler's (``Ctx.retry``), its waits on the server clock
never starting over; when the apiserver answers again, the handler hears the answer once."""
from __future__ import annotations

import asyncio
from typing import Any

from engine import backoff
from engine.core import Machines
from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Backoff, Executor
from engine.effects.io.fake import T2030, Fault, FakeApiServer, FakeTransport
from engine.effects.models import GetObject
from engine.machines.base import Decision, Machine
from journal.records import Command, EffectIssued, Outcome
from kfold.daemon.loop import Daemon
from tests.journals import TestJournal as MemoryJournal
from tests.unit.test_daemon_recovery import NS, REF, settle

ATTEMPTS = 3          # the executor's, small to keep the test short
FAILURES = 7          # 503s before the apiserver answers
TURN_MS = 1_000       # the server's clock moves this much between two turns of the test


class Seen(Decision):
    results: tuple[str, ...] = ()


class Reader(Machine):
    name = "probe"
    decision = Seen
    commands = frozenset({"probe.get"})

    def on_command(self, ctx: Any, rec: Command) -> None:
        ctx.emit(GetObject, "local/work/p", **REF)

    def on_outcome(self, ctx: Any, rec: Outcome, effect: Any) -> None:
        seen = ctx.get(effect.key) or Seen()
        ctx.put(effect.key, seen.but(results=seen.results + (rec.result,)))
        if rec.result == "transient":
            ctx.retry(backoff.POD_READ)


def _http_date(ms: int) -> str:
    import email.utils
    return email.utils.formatdate(ms / 1000, usegmt=True)


async def test_a_failing_read_is_one_effect_retried_on_one_schedule():
    server = FakeApiServer()
    server.seed(NS)
    server.faults = [Fault(status=503, reason="ServiceUnavailable", method="GET") for _ in range(FAILURES)]
    journal = MemoryJournal()
    clock = ServerClock()
    d = Daemon(journal, lambda sink: Executor(FakeTransport(server), clock, sink, env={},
                                              backoff=Backoff(max_attempts=ATTEMPTS)),
               clock, machines=Machines([Reader()]), snapshot_every=1000)
    d.start_loops()
    await d.recover()
    await d.submit([Command(at=T2030, name="probe.get")])
    for _ in range(400):   # the server's clock moves TURN_MS a turn; the ticker judges dues by it
        await settle(d)
        if d.state.table("probe").get("local/work/p") and d.state.table("probe")["local/work/p"].results[-1:] == ("not_found",):
            break
        server.server_ms += TURN_MS
        d.clock.for_cluster().observe(_http_date(server.server_ms))
        d._changed.set()
    await d.stop()
    records = list(journal.records)
    sent = [r for r in records if isinstance(r, EffectIssued)]
    assert {r.effect["id"] for r in sent} == {"1.0"} and len(sent) == FAILURES + 1, "one effect, one issue per attempt"
    assert [m for m, _ in server.requests] == ["GET"] * (FAILURES + 1)
    heard = d.state.table("probe")["local/work/p"].results
    assert heard == ("transient",) * (FAILURES - ATTEMPTS + 1) + ("not_found",), \
        "the handler hears the answers after the executor's attempts, and the last"
    outs = [r for r in records if isinstance(r, Outcome)]
    waits = [b.at - a.at for a, b in zip(outs, outs[1:])]
    # Failure n waits delay_ms(n - 1) of server time: never less, and at most one turn of this
    # test's server clock more (the ServerClock adds the few local ms since the last Date).
    schedule = [backoff.delay_ms(n) for n in range(FAILURES)]
    assert all(d <= w <= d + TURN_MS + 250 for d, w in zip(schedule, waits)) and len(waits) == FAILURES, \
        f"the waits follow one schedule and never start over: {waits} against {schedule}"
