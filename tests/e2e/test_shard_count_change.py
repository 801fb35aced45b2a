"""Issue 38 item 5 on the real control plane: ``leader.shards`` changed with replicas running.

3 replicas at ``shards: 4`` with 12 Sessions Ready, then restarted one at a time (SIGTERM, a clean
stop, as a StatefulSet rolling update does) with ``shards: 6``; and from 6 to 4. The shard Leases
are read every 0.2 s; a Lease ``<lease>-shard-<i>`` held and unexpired under count N (its ``kfold.dev/shards``
annotation) covers the Sessions with ``sha256(ns/name) mod N == i``. Checked:
- at no poll is a Session covered by the terms of two replicas (from the Leases), and per Session the
  issue times of one replica's term never overlap another replica's term (from the journals);
- per Session the longest time without a holder is at most one lease (+ the polling slack);
- every Session Ready with exactly one pod, no pod deleted, ``kfold replay --check`` clean on every journal.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Daemon, install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.drills import Cluster
from tests.e2e.shard_drill import held, lease_rbac
from tests.e2e.test_kill9 import journal, replay_check
from tests.e2e.test_leader import KFOLD_NS, LEASE

POLL_S = 0.2


class LeasePoll(threading.Thread):
    """Every ``POLL_S``: (wall time, [(holder, count, shard)] of the shard Leases held and unexpired)."""

    def __init__(self, admin: Any, lease_name: str):
        super().__init__(daemon=True)
        from kubernetes import client
        self.api, self.prefix = client.CoordinationV1Api(admin), f"{lease_name}-shard-"
        self.seen: list[tuple[float, list[tuple[str, int, int]]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            items = self.api.list_namespaced_lease(KFOLD_NS).items
            now = time.time()
            live = []
            for x in items:
                name = x.metadata.name
                if not name.startswith(self.prefix) or not x.spec.holder_identity or x.spec.renew_time is None:
                    continue
                if now <= x.spec.renew_time.timestamp() + x.spec.lease_duration_seconds:
                    count = int((x.metadata.annotations or {}).get("kfold.dev/shards", "0"))
                    live.append((x.spec.holder_identity, count, int(name[len(self.prefix):])))
            self.seen.append((now, live))
            self.done.wait(POLL_S)


def coverage(seen: list[tuple[float, list[tuple[str, int, int]]]], ns: str, sessions: list[str]) -> dict[str, float]:
    """Asserts no Session covered by two holders at one poll; returns each Session's longest gap (s)."""
    from kfold.daemon.shards import shard_of
    since: dict[str, float] = {}
    longest = {s: 0.0 for s in sessions}
    for at, live in seen:
        for s in sessions:
            by = {h for h, n, i in live if n and shard_of(ns, s, n) == i}
            assert len(by) <= 1, f"at {at:.1f} Session {s} covered by {sorted(by)}: {live}"
            if by:
                longest[s] = max(longest[s], at - since.pop(s, at))
            else:
                since.setdefault(s, at)
    assert not since, f"Sessions without a holder at the end: {sorted(since)}"
    return longest


def session_of(effect: dict, ns: str) -> str | None:
    from kfold.daemon.shards import session_of_pod
    _c, kns, kname = effect["key"].split("/", 2)
    if kns != ns or not kname or kname.startswith("#") or effect["machine"] not in ("session", "pod"):
        return None
    return kname.partition("#")[0] if effect["machine"] == "session" else session_of_pod(kname)


def check_journal_terms(paths: dict[str, Path], ns: str) -> int:
    """Per Session: the issue times (server clock) of two replicas' terms never interleave."""
    spans: dict[str, dict[tuple[str, int, int], list[int]]] = defaultdict(lambda: defaultdict(list))
    for name, path in paths.items():
        for r in journal(path):
            if r["rec"] == "effect" and r.get("term") is not None and (s := session_of(r["effect"], ns)):
                spans[s][(name, r["shard"], r["term"])].append(r["at"])
    for s, terms in spans.items():
        rows = sorted((min(a), max(a), who) for (who, _sh, _t), a in terms.items())
        for (_f1, last1, w1), (first2, _l2, w2) in zip(rows, rows[1:]):
            assert w1 == w2 or last1 < first2, f"Session {s}: {w1} issued at {last1} after {w2} began at {first2}"
    return sum(len(a) for t in spans.values() for a in t.values())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("before,after", [(4, 6), (6, 4)])
def test_the_shard_count_changes_with_replicas_restarted_one_at_a_time(cp, admin, namespace, tmp_path, before, after):
    install_rbac(admin, KFOLD_NS, [namespace])
    lease_rbac(admin)
    kubeconfig = service_account_kubeconfig(admin, cp, KFOLD_NS, tmp_path / "sa.kubeconfig")
    lease_name = f"kfold-{namespace}"
    names, sessions = ["a", "b", "c"], [f"s{i}" for i in range(12)]
    made: dict[str, Daemon] = {}

    def start(n: str, shards: int) -> Daemon:
        (tmp_path / n).mkdir(exist_ok=True)
        leader = {"enabled": True, "namespace": KFOLD_NS, "lease_name": lease_name, "shards": shards, **LEASE}
        made[n] = Daemon(tmp_path / n, str(kubeconfig), [namespace],
                         {"leader": leader, "log": {"format": "plain", "level": "info"},
                          "journal": {"path": str(tmp_path / n / "journal.db"), "retention": {"keep_snapshots": 0}}})
        return made[n].start(env={"POD_NAME": f"replica-{n}"})

    def spread(shards: int) -> bool:
        counts = [len(held(made[n])) for n in names]
        return sum(counts) == shards and max(counts) <= -(-shards // len(names))
    cluster = Cluster(admin, namespace)
    poll = LeasePoll(admin, lease_name)

    def all_ready() -> bool:
        phases = cluster.phases()
        return len(phases) == len(sessions) and set(phases.values()) == {"Ready"}
    try:
        for n in names:
            start(n, before)
        wait_for(lambda: spread(before), timeout=60, interval=0.5, what=f"{before} shards spread over 3 replicas")
        for s in sessions:
            cluster.create_session(s)
        wait_for(all_ready, timeout=300, interval=1, what=f"every Session Ready at shards={before}")
        poll.start()
        time.sleep(2)
        t0 = time.monotonic()
        for n in reversed(names):   # a StatefulSet's order: the highest ordinal first, each once the last is up
            assert made[n].stop() == 0
            start(n, after)
            time.sleep(2 * LEASE["retry_seconds"])
        wait_for(lambda: spread(after), timeout=6 * LEASE["lease_seconds"], interval=0.2,
                 what=f"{after} shards spread over 3 replicas after the roll")
        rolled = time.monotonic() - t0
        time.sleep(3 * LEASE["retry_seconds"])   # the takeover re-reads settle
        wait_for(all_ready, timeout=120, interval=1, what="every Session still Ready after the roll")
        poll.done.set()
        poll.join(timeout=10)
        longest = coverage(poll.seen, namespace, sessions)
        worst = max(longest.values())
        print(f"\nshard count {before} -> {after}: rolled in {rolled:.1f}s, {len(poll.seen)} polls, longest gap per Session "
              f"{worst:.1f}s (lease {LEASE['lease_seconds']}s)")
        assert worst <= LEASE["lease_seconds"] + 1 + 2 * POLL_S, longest
        assert {n for _t, live in poll.seen for _h, n, _i in live} == {before, after}, "both counts seen holding"
        pods = cluster.live_pods_by_session()
        assert {s: len(p) for s, p in pods.items()} == {s: 1 for s in sessions}, pods
        paths = {n: made[n].journal for n in names}
        issued = check_journal_terms(paths, namespace)
        assert issued > 0
        deletes = [(n, r["effect"]["key"]) for n in names for r in journal(paths[n])
                   if r["rec"] == "effect" and r["effect"]["type"] == "delete" and r["effect"].get("kind") == "Pod"]
        assert deletes == [], f"pods deleted: {deletes[:5]}"
        for n in names:
            assert made[n].stop() == 0
            res = replay_check(paths[n])
            assert res.returncode == 0, f"{n}: " + res.stdout + res.stderr
    finally:
        poll.done.set()
        for d in made.values():
            d.stop()
