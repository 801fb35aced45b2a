"""Scale-out drill on the real control plane (issue 14 item 4), shared by tests/e2e/test_shards.py
(3 replicas x 30 Sessions, in CI) and ``scripts/drill_shards.py`` (3 x 300, by hand).

``shard_drill``: N ``kfold run`` replicas, each with its own journal, ``leader.shards`` Leases, all
as the kfold ServiceAccount with the RBAC of ``kfold manifests``. Once the shards are spread, the
Sessions are created (from a thread); when a share of their pods exists, the replica holding the most
shards is SIGKILLed. Checked:
- the dead replica's shards are held by the survivors within about the lease time;
- every Session Ready, exactly one live pod each, no pod ever deleted;
- no (shard, term) appears in two replicas' journals, and per shard the terms' issue times (server
  clock) never overlap: no Session was reconciled by two replicas at once;
- every Session's (and its pod's) effects were journaled under the Session's own shard;
- every 409 Conflict resolved by a re-read and a later successful write of the same object;
- with ``rejoin``, a fresh replica then joins: the shards spread again over the live replicas (the
  others release their extras cleanly), every Session stays Ready, nothing deleted;
- no Session's phase went backwards (a real watch), ``kfold replay --check`` of every journal.
Returns the figures (for the report).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Daemon, install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.drills import Cluster
from tests.e2e.test_kill9 import journal, replay_check
from tests.e2e.test_leader import KFOLD_NS, LEASE, RANK, readyz, unresolved_conflicts
from tests.e2e.test_lost_journal import PhaseWatch


def held(d: Daemon) -> set[int]:
    """The shards ``d`` leads now, from its /readyz (``shard i: leader of lease ...``)."""
    return {int(ln.split(":")[0].split()[1]) for ln in readyz(d).splitlines()
            if ln.startswith("shard ") and ": leader of lease" in ln}


def regressions(seen: dict[str, list[str]]) -> dict[str, list[str]]:
    out = {}
    for name, phases in seen.items():
        ranks = [RANK[p] for p in phases if p in RANK]
        if any(b < a for a, b in zip(ranks, ranks[1:])):
            out[name] = phases
    return out


def terms_by_replica(paths: dict[str, Path]) -> dict[str, dict[tuple[int, int], list[int]]]:
    """replica -> (shard, term) -> the server times its effects were journaled as issued at."""
    out: dict[str, dict[tuple[int, int], list[int]]] = {}
    for name, path in paths.items():
        got: dict[tuple[int, int], list[int]] = defaultdict(list)
        for r in journal(path):
            if r["rec"] == "effect" and r.get("term") is not None:
                got[(r["shard"], r["term"])].append(r["at"])
        out[name] = dict(got)
    return out


def check_terms(paths: dict[str, Path]) -> dict[str, int]:
    """No (shard, term) in two journals; per shard, one term's effects all precede the next's."""
    by = terms_by_replica(paths)
    owner: dict[tuple[int, int], str] = {}
    for name, terms in by.items():
        for st in terms:
            assert st not in owner, f"shard {st[0]} term {st[1]} issued by two replicas: {owner[st]} and {name}"
            owner[st] = name
    spans: dict[int, list[tuple[int, int, int, str]]] = defaultdict(list)
    for name, terms in by.items():
        for (shard, term), ats in terms.items():
            spans[shard].append((term, min(ats), max(ats), name))
    for shard, rows in spans.items():
        rows.sort()
        for (t1, _a1, last1, n1), (t2, first2, _b2, n2) in zip(rows, rows[1:]):
            if n1 != n2:
                assert last1 < first2, (f"shard {shard}: term {t1} ({n1}) issued at {last1}, after term {t2} ({n2}) "
                                        f"began at {first2}: two replicas at once")
    return {name: sum(len(v) for v in terms.values()) for name, terms in by.items()}


def check_session_shards(paths: dict[str, Path], ns: str, shards: int) -> None:
    from kfold.daemon.shards import session_of_pod, shard_of
    for name, path in paths.items():
        for r in journal(path):
            if r["rec"] != "effect" or r.get("shard") is None:
                continue
            e = r["effect"]
            _c, kns, kname = e["key"].split("/", 2)
            if kns != ns or not kname or kname.startswith("#"):
                continue
            if e["machine"] == "session":
                want = shard_of(kns, kname, shards)
            elif e["machine"] == "pod":
                want = shard_of(kns, session_of_pod(kname), shards)
            else:
                continue
            assert r["shard"] == want, f"{name} issued {e['type']} {e['key']} under shard {r['shard']}, not {want}"


def lease_rbac(admin: Any) -> None:
    """The leases Role as ``kfold manifests`` renders it now (``install_rbac`` keeps an existing one,
    which on a shared control plane may predate list/delete)."""
    from kubernetes import client
    from kfold.daemon.manifests import rbac
    (role,) = [d for d in rbac(KFOLD_NS, []) if d["kind"] == "Role" and d["metadata"]["name"] == "kfold-leader"]
    client.RbacAuthorizationV1Api(admin).replace_namespaced_role("kfold-leader", KFOLD_NS, role)


def conflicts_of(path: Path) -> dict[str, int]:
    """409 Conflicts by what met them (``type kind[/subresource]``)."""
    recs = journal(path)
    effects = {r["effect"]["id"]: r["effect"] for r in recs if r["rec"] == "effect"}
    out: dict[str, int] = defaultdict(int)
    for r in recs:
        if r["rec"] == "outcome" and r["result"] == "conflict":
            e = effects.get(r["effect_id"], {})
            out[f"{e.get('type')} {e.get('kind')}" + (f"/{e['subresource']}" if e.get("subresource") else "")] += 1
    return dict(out)


def shard_drill(admin: Any, cp: dict, namespace: str, tmp: Path, sessions: int = 30, replicas: int = 3,
                shards: int = 6, kill_at_pods: float = 0.3, ready_timeout: float = 300,
                log_level: str = "info", rejoin: bool = False) -> dict[str, Any]:
    install_rbac(admin, KFOLD_NS, [namespace])
    lease_rbac(admin)
    kubeconfig = service_account_kubeconfig(admin, cp, KFOLD_NS, tmp / "sa.kubeconfig")
    leader = {"enabled": True, "namespace": KFOLD_NS, "lease_name": f"kfold-{namespace}", "shards": shards, **LEASE}
    names = [chr(ord("a") + i) for i in range(replicas)]
    made: dict[str, Daemon] = {}

    def replica(n: str) -> Daemon:
        (tmp / n).mkdir()
        store = {"path": str(tmp / n / "journal.db"), "retention": {"keep_snapshots": 0}}   # snapshots as configured by default
        made[n] = Daemon(tmp / n, str(kubeconfig), [namespace],
                         {"leader": leader, "journal": store, "log": {"format": "plain", "level": log_level}})
        return made[n]
    for n in names:
        replica(n)
    cluster = Cluster(admin, namespace)
    watch = None

    def spread(live: list[Daemon]) -> bool:
        counts = [len(held(d)) for d in live]
        return sum(counts) == shards and max(counts) <= -(-shards // len(live))
    try:
        for n in names:
            made[n].start(env={"POD_NAME": f"replica-{n}"})
        wait_for(lambda: spread(list(made.values())), timeout=60, interval=0.5,
                 what=f"{shards} shards spread over {replicas} replicas")
        watch = PhaseWatch(admin, namespace)
        t0 = time.monotonic()
        creating = threading.Thread(target=lambda: [cluster.create_session(f"s{i}") for i in range(sessions)], daemon=True)
        creating.start()   # the kill may come while Sessions are still being created
        wait_for(lambda: len(cluster.pods()) >= max(1, int(sessions * kill_at_pods)), timeout=ready_timeout,
                 interval=0.2, what=f"{kill_at_pods:.0%} of the pods made")
        victim = max(names, key=lambda n: (len(held(made[n])), n))
        lost = held(made[victim])
        pods_then, sessions_then = len(cluster.pods()), len(cluster.sessions())
        killed = time.monotonic()
        made[victim].kill9()
        survivors = [made[n] for n in names if n != victim]
        wait_for(lambda: set().union(*(held(d) for d in survivors)) == set(range(shards)),
                 timeout=4 * LEASE["lease_seconds"], interval=0.1, what=f"shards {sorted(lost)} of {victim} moved")
        moved = time.monotonic() - killed

        def all_ready() -> bool:
            phases = cluster.phases()
            return len(phases) == sessions and set(phases.values()) == {"Ready"}
        wait_for(all_ready, timeout=ready_timeout, interval=1, what="every Session Ready")
        ready = time.monotonic() - t0
        creating.join(timeout=5)
        rebalanced = None
        if rejoin:   # a fresh replica (empty journal) joins: the others release shards to it cleanly
            joined = replica(chr(ord("a") + replicas)).start(env={"POD_NAME": f"replica-{chr(ord('a') + replicas)}"})
            names.append(chr(ord("a") + replicas))
            survivors.append(joined)
            t1 = time.monotonic()
            wait_for(lambda: spread(survivors) and held(joined), timeout=6 * LEASE["lease_seconds"], interval=0.2,
                     what="the shards spread again over the replicas after one joined")
            rebalanced = time.monotonic() - t1
            time.sleep(3 * LEASE["retry_seconds"])   # let the newcomer's takeover re-reads settle
            wait_for(all_ready, timeout=ready_timeout, interval=1, what="every Session still Ready after the join")
        watch.stop()
        pods = cluster.live_pods_by_session()
        assert {s: len(p) for s, p in pods.items()} == {f"s{i}": 1 for i in range(sessions)}, \
            f"duplicate or missing pods: { {s: p for s, p in pods.items() if len(p) != 1} }"
        paths = {n: made[n].journal for n in names}
        per_replica = check_terms(paths)
        check_session_shards(paths, namespace, shards)
        deletes = [(n, r["effect"]["key"]) for n in names for r in journal(paths[n])
                   if r["rec"] == "effect" and r["effect"]["type"] == "delete" and r["effect"].get("kind") == "Pod"]
        assert deletes == [], f"pods deleted: {deletes[:5]}"
        regress = regressions(watch.seen)
        assert not regress, f"phase regressions: {regress}"
        conflicts = {n: conflicts_of(paths[n]) for n in names}
        for n in names:
            assert unresolved_conflicts(paths[n]) == [], f"{n}: conflicts never resolved by a re-read"
        for d in survivors:
            assert d.stop() == 0
        for n in names:   # the killed one's journal too
            res = replay_check(paths[n])
            assert res.returncode == 0, f"{n}: " + res.stdout + res.stderr
        logs = {n: made[n].log.read_text() for n in names}
        return {"logs": logs, "sessions": sessions, "replicas": replicas, "shards": shards, "victim": victim,
                "victim_shards": sorted(lost), "pods_at_kill": pods_then, "sessions_at_kill": sessions_then,
                "shards_moved_s": round(moved, 1), "all_ready_s": round(ready, 1), "rejoin_spread_s": rebalanced and round(rebalanced, 1),
                "effects_per_replica": per_replica, "conflicts_per_replica": conflicts,
                "load_average": os.getloadavg()}
    finally:
        if watch is not None:
            watch.stop()
        for d in made.values():
            if d.proc is not None and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)
            d.stop()
