"""A bounded journal through the daemon's own path: the real machines, the SQLite journal with a
retention policy, snapshots by bytes. Cuts happen, the file shrinks, ``kfold replay --check``
starts from the oldest kept snapshot and says where history begins, /metrics shows it all.
(The 5M-event soak is ``scripts/soak_journal.py``; this is its small, fast sibling.)"""
from __future__ import annotations

import asyncio

from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.fake import T2030, FakeApiServer, FakeTransport
from journal.records import Command, Observed
from journal.retention import Retention, SnapshotPolicy
from journal.sqlite import SqliteJournal
from kfold.cli import main
from kfold.daemon.loop import Daemon
from kfold.daemon.http import Metrics, routes_for


def session(name: str) -> dict:
    return {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1", "generation": 1},
            "spec": {"image": "img:1", "apps": [{"name": "web", "ports": [{"port": 8080}]}]}}


def pod_event(n: int) -> Observed:
    name = f"p{n % 40}"
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(100 + n),
                        "labels": {"app": "x"}, "annotations": {"note": "y" * 600}},
           "status": {"phase": "Running"}}
    return Observed(at=T2030 + n, cluster="local", api_version="v1", kind="Pod", namespace="ns", name=name,
                    uid=f"uid-{name}", rv=str(100 + n), event="MODIFIED", obj=obj)


async def run_daemon(path: str, sizes: list[int]) -> tuple[SqliteJournal, str]:
    server = FakeApiServer()
    server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    clock, metrics = ServerClock(), Metrics()
    journal = SqliteJournal(path)
    journal.retention = Retention(keep_snapshots=2)
    await journal.open()
    d = Daemon(journal, lambda sink: Executor(FakeTransport(server), clock, sink, env={}), clock, metrics=metrics,
               snapshots=SnapshotPolicy(ratio=20, min_bytes=60_000))
    d.start_loops()
    await d.recover()
    await d.submit([Command(at=T2030, name="session.configure", cluster="local",
                            args={"clusters": ["local"], "base_domain": "example.test"})])
    await d.submit([Observed(at=T2030 + 1, cluster="local", api_version="kfold.dev/v1alpha1", kind="Session",
                             namespace="ns", name=f"s{i}", uid=f"uid-s{i}", rv="1", event="ADDED", obj=session(f"s{i}"))
                    for i in range(3)])
    for first in range(0, 3000, 100):
        await d.submit([pod_event(n) for n in range(first, first + 100)])
        sizes.append(journal.size_bytes())
    for _ in range(100):  # let the executor's outcomes land
        await asyncio.sleep(0.01)
        if not d.executor._workers and d._inbox.empty():
            break
    page = routes_for(d, [], metrics)["/metrics"]()[2]
    await d.stop()
    return journal, page


def test_the_journal_stays_bounded_and_replays_from_its_oldest_kept_snapshot(tmp_path, capsys):
    path = str(tmp_path / "journal.db")
    sizes: list[int] = []
    journal, page = asyncio.run(run_daemon(path, sizes))
    stats = journal.stats()
    assert stats.first_seq > 1 and stats.snapshots == 2, stats       # cuts happened
    assert max(sizes[len(sizes) // 2:]) < 1.6 * max(sizes[:len(sizes) // 2])  # flat, not growing
    assert any(b < a for a, b in zip(sizes, sizes[1:]))              # the file shrank after a cut
    for name in ("kfold_journal_bytes", "kfold_journal_records", "kfold_journal_snapshots", "kfold_journal_first_seq"):
        assert f"\n{name} " in page, name
    assert main(["replay", path, "--check"]) == 0
    out = capsys.readouterr().out
    assert f"history begins at seq {stats.first_seq}" in out
    assert "check: every journaled effect matches" in out
    assert main(["replay", path, "--until", "3"]) == 2
    assert f"kept history, which begins at seq {stats.first_seq}" in capsys.readouterr().err
