"""``kfold.daemon.follow.Follower``: registrations re-read while running.

A change journals ``session.configure`` before any watch starts; an unchanged registry journals
nothing; an unreadable one keeps what was read before; a deregistered target's watch is stopped."""
from __future__ import annotations

import asyncio

import pytest

from journal.records import Command
from kfold.daemon.follow import Follower


class FakeDaemon:
    def __init__(self):
        self.submitted: list[Command] = []
        self.log: list[str] = []

    async def submit(self, drafts):
        self.submitted += drafts
        self.log.append("submit")

    def spawn(self, coro, name):
        self.log.append(f"spawn {name}")
        return asyncio.get_running_loop().create_task(coro, name=name)


class FakeObserver:
    kind, synced, optional = "Pod", False, False

    def __init__(self, handle, ns):
        self.cluster, self.namespace = handle, ns

    async def run(self):
        await asyncio.Event().wait()


class Registry:
    def __init__(self, targets):
        self.targets, self.broken = list(targets), False


def read(registry):
    if registry.broken:
        raise OSError("index/acme.json: truncated")
    regs = sorted({(h, t) for h, t, _n, _ns in registry.targets})
    return {"registered": [{"handle": h, "tenant": t} for h, t in regs]}, list(registry.targets)


def follower(daemon, registry, observers):
    return Follower(daemon, registry, 0.01, read=read,
                    configure=lambda args: Command(name="session.configure", args=args),
                    observe=lambda targets: [FakeObserver(h, ns) for h, _t, _n, ns in targets],
                    observers=observers)


EDGE = ("edge@acme", "acme", "edge", "sb-acme")
CORE = ("core@acme", "acme", "core", "sb-acme")


@pytest.mark.asyncio
async def test_a_registration_journals_configure_first_then_watches_it():
    daemon, registry, observers = FakeDaemon(), Registry([]), []
    f = follower(daemon, registry, observers)
    assert await f.check() is False and daemon.submitted == [], "nothing changed: nothing journaled"
    registry.targets.append(EDGE)
    assert await f.check() is True
    assert [c.args["registered"] for c in daemon.submitted] == [[{"handle": "edge@acme", "tenant": "acme"}]]
    assert daemon.log == ["submit", "spawn observe:edge@acme:Pod:sb-acme"], "configure before the watch"
    assert [(o.cluster, o.namespace) for o in observers] == [("edge@acme", "sb-acme")]
    assert await f.check() is False and len(daemon.submitted) == 1


@pytest.mark.asyncio
async def test_a_deregistration_stops_only_that_clusters_watch():
    daemon, registry, observers = FakeDaemon(), Registry([EDGE, CORE]), []
    f = follower(daemon, registry, observers)
    f.start()  # boot: both registered targets watched
    assert sorted(o.cluster for o in observers) == ["core@acme", "edge@acme"] and daemon.submitted == []
    tasks = {t.get_name().split(":")[1]: t for t in asyncio.all_tasks() if t.get_name().startswith("observe:")}
    registry.targets.remove(EDGE)
    assert await f.check() is True
    await asyncio.sleep(0)
    assert tasks["edge@acme"].cancelled() and not tasks["core@acme"].done()
    assert [o.cluster for o in observers] == ["core@acme"]
    assert daemon.submitted[-1].args["registered"] == [{"handle": "core@acme", "tenant": "acme"}]
    tasks["core@acme"].cancel()


@pytest.mark.asyncio
async def test_an_unreadable_registry_keeps_the_registrations_read_before(caplog):
    daemon, registry, observers = FakeDaemon(), Registry([EDGE]), []
    f = follower(daemon, registry, observers)
    registry.broken = True
    assert await f.check() is False
    assert daemon.submitted == [] and f.remote == [EDGE]
    assert "cannot re-read the cluster registry (index/acme.json: truncated)" in caplog.text
    registry.broken = False
    assert await f.check() is False, "readable again and unchanged: still nothing to do"


@pytest.mark.asyncio
async def test_run_rescans_on_its_interval():
    daemon, registry, observers = FakeDaemon(), Registry([]), []
    f = follower(daemon, registry, observers)
    task = asyncio.create_task(f.run())
    registry.targets.append(EDGE)
    for _ in range(100):
        await asyncio.sleep(0.01)
        if f.changes:
            break
    task.cancel()
    assert f.changes == 1 and observers
    for t in asyncio.all_tasks():
        if t.get_name().startswith("observe:"):
            t.cancel()


@pytest.mark.asyncio
async def test_a_new_target_gets_its_repo_statements_with_the_configure_that_announces_it():
    daemon, registry, observers = FakeDaemon(), Registry([EDGE]), []
    f = Follower(daemon, registry, 0.01, read=read,
                 configure=lambda args: Command(name="session.configure", args=args),
                 bind=lambda targets: [Command(name="repo.bind", cluster=h, namespace=ns) for h, _t, _n, ns in targets],
                 observe=lambda targets: [FakeObserver(h, ns) for h, _t, _n, ns in targets], observers=observers)
    registry.targets.append(CORE)
    assert await f.check() is True
    assert [(c.name, c.cluster) for c in daemon.submitted] == [("session.configure", ""), ("repo.bind", "core@acme")]
    assert daemon.log[0] == "submit", "statements journaled before the watch starts"
