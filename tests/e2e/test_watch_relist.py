"""kfold's Observer against the real apiserver: a watch resumed from a compacted resourceVersion
gets a real 410, the observer relists, and the fold infers the deletion it missed.

The Observer has no pause hook (``run()`` always lists first), so "not watching" is modelled as
the daemon would live it: a first Observer runs and is cancelled (a stop), the pod is deleted
while nobody watches, etcd is compacted, and a second Observer resumes from the first one's
resourceVersion. The resume is the only thing patched: the second Observer's FIRST
``_list_and_relist`` is replaced by "take the saved resourceVersion" (what a restart with a
persisted watermark would do); everything after, the 410 and the real relist included, is
``Observer.run`` unchanged.
"""
from __future__ import annotations

import asyncio

from engine.effects.io.clock import ServerClock
from engine.effects.io.observer import Observer
from engine.machines.base import object_key
from journal.records import Observed, Relist
from tests.e2e.conftest import wait_for
from tests.e2e.controlplane import compact_etcd
from tests.e2e.driver import Driver, get, ok, pod_manifest, pod_path, running

MANAGED = "app.kubernetes.io/managed-by=kfold"


def _observer(admin, ns: str, sink) -> Observer:
    return Observer(lambda: admin, "local", "v1", "Pod", "pods", ns, sink, ServerClock(),
                    idle_timeout_s=20, server_timeout_s=60, label_selector=MANAGED)


async def _until(pred, timeout: float = 30.0, what: str = "condition"):
    """Poll without blocking the loop (the observer runs on it)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (got := pred()):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)
    return got


async def _stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_watch_from_compacted_rv_gets_410_relists_and_fold_infers_deletion(admin, namespace):
    names = ("keep-a", "doomed", "keep-c")
    for n in names[:2]:
        ok(admin, "POST", pod_path(namespace, ""), pod_manifest(n))
    first: list = []

    async def sink1(drafts):
        first.extend(drafts)

    obs1 = _observer(admin, namespace, sink1)
    task1 = asyncio.create_task(obs1.run())
    d = Driver(admin)
    try:
        await _until(lambda: obs1.synced, what="first list")
        ok(admin, "POST", pod_path(namespace, ""), pod_manifest(names[2]))  # seen by the watch only
        latest = {n: wait_for(lambda n=n: running(admin, namespace, n), what=f"{n} running") for n in names}
        want = {n: p["metadata"]["resourceVersion"] for n, p in latest.items()}

        def seen() -> dict:
            return {r.name: r.rv for r in first if isinstance(r, Observed)}

        def caught_up(n: str, rv: str) -> bool:
            # kwok may write the pod again after our read: a newer version seen counts too
            # (etcd's resourceVersions are integers; the test may compare what kfold may not).
            return seen().get(n) is not None and int(seen()[n]) >= int(rv)
        await _until(lambda: all(caught_up(n, rv) for n, rv in want.items()), what="watch caught up")
        await _stop(task1)
        saved_rv = obs1.rv
        assert obs1.relists == 1 and obs1.restarts == {} and obs1.events >= 1
        assert all(r.at is not None for r in first)  # stamped with the server clock

        # fold what the first observer saw; then kfold deletes `doomed` (fenced) while not watching
        for r in first:
            assert await d.feed(r) == []
        doomed = object_key("local", namespace, "doomed")
        assert set(d.state.table("pod")) >= {object_key("local", namespace, n) for n in names}
        done = await d.tell("pod", doomed, "delete", reason="e2e")
        assert [(e.type, o.result) for e, o in done] == [("delete", "ok")]
        assert d.state.table("pod")[doomed].phase == "terminating"
        wait_for(lambda: get(admin, pod_path(namespace, "doomed")) is None, what="doomed deleted")
        rev = compact_etcd()
        assert rev > int(saved_rv)

        second: list = []

        async def sink2(drafts):
            second.extend(drafts)

        obs2 = _observer(admin, namespace, sink2)

        async def resume() -> None:  # the first "list" of a restart that persisted its watermark
            del obs2._list_and_relist   # later lists are the real method again
            obs2.rv, obs2.synced = saved_rv, True

        obs2._list_and_relist = resume
        task2 = asyncio.create_task(obs2.run())
        try:
            relist = await _until(lambda: next((r for r in second if isinstance(r, Relist)), None),
                                  what="relist after 410")
        finally:
            await _stop(task2)
        assert obs2.restarts.get("gone") == 1, obs2.restarts
        assert obs2.relists == 1 and obs2.failures == 0 and obs2.watch_requests >= 1
        assert int(relist.rv) >= rev
        assert sorted(k.name for k in relist.keys) == ["keep-a", "keep-c"]
        listed = [r for r in second[:second.index(relist)] if isinstance(r, Observed)]
        assert sorted((r.name, r.event) for r in listed) == [("keep-a", "ADDED"), ("keep-c", "ADDED")]

        # the fold: the relist lacks `doomed`, so its delete is answered; the others stay tracked
        for r in second:
            await d.feed(r)
        assert [m for m, a in d.replies()] == ["pod_gone"] and d.replies()[0][1]["pod"] == doomed
        table = d.state.table("pod")
        assert doomed not in table
        assert {object_key("local", namespace, n) for n in ("keep-a", "keep-c")} <= set(table)
    finally:
        await _stop(task1)
        await d.close()
