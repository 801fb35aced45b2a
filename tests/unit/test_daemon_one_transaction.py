"""One transaction per commit, and the fold running ahead of the disk (``Daemon._fold_ahead``).

A batch's records and the ``EffectIssued`` its fold decided are one transaction (one fsync before an
effect leaves); nothing is handed to the executor before that transaction is durable; the committer
folds the next batch while a transaction commits; a failed transaction stops the committer and
sends nothing of what was folded after it."""
from __future__ import annotations

import asyncio

import pytest

from journal.records import Command, EffectIssued
from kfold.daemon.loop import Daemon
from tests.journals import TestJournal
from tests.unit.test_daemon_recovery import T2030, daemon_on, fresh_server


class GatedJournal(TestJournal):
    """Each transaction waits for ``gate`` before it reaches the store; records what each held."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.committed: list[list[str]] = []
        self.fail_next: Exception | None = None

    async def _commit(self, rows, snaps, head):
        await self.gate.wait()
        if self.fail_next is not None and rows:
            exc, self.fail_next = self.fail_next, None
            raise exc
        if rows:
            self.committed.append([r[2] for r in rows])
        return await super()._commit(rows, snaps, head)


def sent(daemon: Daemon, server) -> list[str]:
    return [m for m, _ in server.requests]


async def gated_daemon() -> tuple[GatedJournal, object, Daemon]:
    """A recovered daemon whose next transactions wait for ``journal.gate``."""
    journal, server = GatedJournal(), fresh_server()
    d = daemon_on(journal, server)
    d.start_loops()
    await d.recover()
    journal.gate.clear()
    return journal, server, d


async def until(cond, timeout: float = 3.0) -> None:
    for _ in range(int(timeout / 0.005)):
        if cond():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


async def test_a_batch_and_the_effects_it_issued_are_one_transaction_and_sent_only_once_durable():
    journal, server, d = await gated_daemon()
    waiter = asyncio.ensure_future(d.submit([Command(at=T2030, name="probe.create")]))
    await until(lambda: d.state.pending)            # folded, its EffectIssued sealed and folded too ...
    await asyncio.sleep(0.05)
    assert next(iter(d.state.pending.values())).issued
    assert sent(d, server) == [] and not waiter.done()  # ... but nothing left before the transaction
    journal.gate.set()
    await waiter
    await until(lambda: sent(d, server) == ["POST"])
    assert journal.committed[0] == ["command", "effect"], "the command and its EffectIssued: one transaction"
    await d.stop()


async def test_the_committer_folds_the_next_batch_while_a_transaction_commits_and_sends_in_order():
    journal, server, d = await gated_daemon()
    first = asyncio.ensure_future(d.submit([Command(at=T2030, name="probe.get")]))
    await until(lambda: d.state.seq == 2)          # command + EffectIssued folded, not durable
    durable_head = journal.last_seq
    second = asyncio.ensure_future(d.submit([Command(at=T2030 + 1, name="probe.create")]))
    await asyncio.sleep(0.05)
    assert d.state.seq == 3 and journal.last_seq == durable_head   # folded ahead of the disk
    assert sent(d, server) == [] and not first.done() and not second.done()
    journal.gate.set()
    await asyncio.gather(first, second)
    await until(lambda: sent(d, server) == ["GET", "POST"])   # one key: the create waited for the get's outcome
    await d.stop()
    assert [r.seq for r in journal.records] == list(range(1, len(journal.records) + 1))


async def test_a_failed_transaction_sends_nothing_folded_after_it_and_stops_the_committer():
    journal, server, d = await gated_daemon()
    journal.fail_next = OSError("the volume went read-only")
    first = asyncio.ensure_future(d.submit([Command(at=T2030, name="probe.create")]))
    await until(lambda: d.state.seq >= 2)
    second = asyncio.ensure_future(d.submit([Command(at=T2030 + 1, name="probe.get")]))
    await asyncio.sleep(0.02)
    journal.gate.set()
    for fut in (first, second):
        with pytest.raises(OSError, match="read-only"):
            await fut
    committer = next(t for t in d._tasks if t.get_name() == "committer")
    await until(committer.done)
    assert isinstance(committer.exception(), OSError)
    assert sent(d, server) == [] and journal.records == []
    await d.stop()
