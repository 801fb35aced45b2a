"""Issue 14 items 1-3 on the real control plane: two ``kfold run`` processes, each with its own
journal, one Lease; only the leader issues effects, and a takeover converges without duplicates,
deletes or phase regressions.

- SIGKILL: the leader dies mid-bring-up of 10 Sessions; the standby takes over within about the
  lease time; every Session Ready with exactly one live pod.
- SIGSTOP longer than the lease (the classic GC pause), then SIGCONT: the standby has taken over;
  the woken one journals no ``EffectIssued`` after its pause (its term was fenced on its monotonic
  clock) and no conflict is caused by two leaders. Its status writes wait 2 s on the wire
  (``KFOLD_TEST_SLOW_STATUS``), so some land after the new leader wrote: each is restated by the
  new leader and every Session ends Ready.

Both run as the kfold ServiceAccount with the RBAC of ``kfold manifests`` (leases included).
Figures (takeover time, time to the first effect of the new term) are printed for the report.
"""
from __future__ import annotations

import signal
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import Daemon, install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.drills import Cluster
from tests.e2e.test_kill9 import journal, replay_check
from tests.e2e.test_lost_journal import PhaseWatch

SESSIONS = [f"s{i}" for i in range(10)]
KFOLD_NS = "kfold-e2e"
LEASE = {"lease_seconds": 8, "renew_seconds": 5, "retry_seconds": 1, "margin_seconds": 2}
RANK = {"": 0, "Pending": 0, "Creating": 1, "Provisioning": 2, "Ready": 3}


def readyz(d: Daemon) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/readyz", timeout=2) as r:
            return r.read().decode()
    except Exception as exc:
        return f"unreachable: {exc}"


def metrics(d: Daemon) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/metrics", timeout=2) as r:
        return r.read().decode()


def leading(d: Daemon) -> bool:
    return "leader of lease" in readyz(d)


def issued(path: Path, after_seq: int = 0) -> list[dict]:
    return [r for r in journal(path) if r["rec"] == "effect" and r["seq"] > after_seq]


def conflicts(path: Path, after_seq: int = 0) -> list[dict]:
    return [r for r in journal(path) if r["rec"] == "outcome" and r["result"] == "conflict" and r["seq"] > after_seq]


def unresolved_conflicts(path: Path) -> list[dict]:
    """Conflicts not followed by a successful write of the same kind to the same object. (A takeover
    re-observes what the standby held; a Session's finalizer patch built from that read can meet the
    new leader's own status write first, and is re-read and re-sent: that is one replica's order,
    not two leaders.)"""
    recs = journal(path)
    effects = {r["effect"]["id"]: r["effect"] for r in recs if r["rec"] == "effect"}
    ok = [(r["seq"], effects[r["effect_id"]]) for r in recs if r["rec"] == "outcome" and r["result"] == "ok"
          and r["effect_id"] in effects]
    out = []
    for c in conflicts(path):
        e = effects[c["effect_id"]]
        if not any(s > c["seq"] and o["key"] == e["key"] and o["type"] == e["type"] for s, o in ok):
            out.append(c)
    return out


def regressions(seen: dict[str, list[str]]) -> dict[str, list[str]]:
    """A Session whose bring-up phase went backwards (Ready -> Provisioning, Provisioning -> Creating)."""
    out = {}
    for name, phases in seen.items():
        ranks = [RANK[p] for p in phases if p in RANK]
        if any(b < a for a, b in zip(ranks, ranks[1:])):
            out[name] = phases
    return out


@pytest.fixture
def pair(cp, admin, namespace, tmp_path):
    install_rbac(admin, KFOLD_NS, [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, KFOLD_NS, tmp_path / "sa.kubeconfig")
    leader = {"enabled": True, "namespace": KFOLD_NS, "lease_name": f"kfold-{namespace}", **LEASE}
    made = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        made.append(Daemon(tmp_path / name, str(kubeconfig), [namespace], {"leader": leader}))
    cluster = Cluster(admin, namespace)
    yield made, cluster
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.send_signal(signal.SIGCONT)
        d.stop()


def start_pair(made: list[Daemon], env: dict | None = None) -> tuple[Daemon, Daemon]:
    a, b = made
    a.start(env=env)
    wait_for(lambda: leading(a), timeout=30, what="the first replica leading")
    b.start()
    assert "standby for lease" in readyz(b), readyz(b)
    return a, b


def converged(cluster: Cluster) -> bool:
    phases = cluster.phases()
    return len(phases) == len(SESSIONS) and set(phases.values()) == {"Ready"}


def assert_one_pod_each(cluster: Cluster) -> None:
    pods = cluster.live_pods_by_session()
    assert {s: len(p) for s, p in pods.items()} == {s: 1 for s in SESSIONS}, f"duplicate or missing pods: {pods}"


def first_effect_after(path: Path, term_of: str, since_wall: float) -> float:
    """Seconds from ``since_wall`` to the first effect journaled under a term other than the old
    one (``at`` is the apiserver's clock; the control plane runs on this machine)."""
    first = min(r["at"] for r in issued(path) if r.get("term") is not None and str(r["term"]) != term_of)
    return first / 1000 - since_wall


def assert_no_overlap(old: Path, new: Path) -> None:
    """The old leader's last effect precedes the new leader's first (server clock): two terms never overlap."""
    last_old = max(r["at"] for r in issued(old))
    first_new = min(r["at"] for r in issued(new))
    assert last_old < first_new, f"terms overlapped: old leader issued at {last_old}, new leader from {first_new}"
    print(f"gap between the old term's last effect and the new term's first: {(first_new - last_old) / 1000:.1f}s")


def mid_send(path: Path, paused_seq: int, paused_at: float) -> dict[str, str]:
    """Session status writes the paused leader issued before its pause whose answer it received
    after it (its server-clock reading at the reply is past the pause): requests it was sending
    when it froze (name -> phase written)."""
    recs = journal(path)
    before = {r["effect"]["id"]: r["effect"] for r in recs if r["rec"] == "effect" and r["seq"] <= paused_seq}
    out = {}
    for r in recs:
        e = before.get(r.get("effect_id")) if r["rec"] == "outcome" and r["seq"] > paused_seq else None
        if e and e.get("subresource") == "status" and r["result"] == "ok" and r["at"] > paused_at * 1000 + 1000:
            out[e["name"]] = e["patch"]["status"].get("phase", "")
    return out


def term_of(d: Daemon) -> str:
    text = readyz(d)
    return text.split("term ")[1].split(",")[0] if "term " in text else ""


def mid_bring_up(pair, admin, namespace, env: dict | None = None) -> tuple:
    """Two daemons (a leads, b stands by), every Session created, and the leader caught mid-way
    (a pod made): ``(a, b, cluster, the leader's term, a phase watch, the phases then)``."""
    made, cluster = pair
    a, b = start_pair(made, env)
    old_term = term_of(a)
    watch = PhaseWatch(admin, namespace)
    for s in SESSIONS:
        cluster.create_session(s)
    wait_for(lambda: len(cluster.pods()) >= 1, timeout=120, interval=0.1, what="the leader mid-way (a pod made)")
    return a, b, cluster, old_term, watch, cluster.phases()


@pytest.mark.timeout(600)
def test_the_standby_takes_over_a_killed_leader_without_duplicates_or_regressions(pair, admin, namespace):
    a, b, cluster, old_term, watch, mid = mid_bring_up(pair, admin, namespace)
    assert not issued(b.journal), "the standby issued effects while the leader was alive"
    killed_at, killed_mono = time.time(), time.monotonic()
    a.kill9()
    wait_for(lambda: leading(b), timeout=3 * LEASE["lease_seconds"], interval=0.1, what="the standby leading")
    takeover = time.monotonic() - killed_mono
    wait_for(lambda: converged(cluster), timeout=180, interval=0.5, what="every Session Ready")
    watch.stop()
    first = first_effect_after(b.journal, old_term, killed_at)
    print(f"\nSIGKILL at {sorted(mid.values())}: takeover {takeover:.1f}s, first effect of the new term {first:.1f}s after the kill "
          f"(lease {LEASE['lease_seconds']}s)")
    assert takeover < LEASE["lease_seconds"] + 4 * LEASE["retry_seconds"] + 2
    assert_one_pod_each(cluster)
    assert_no_overlap(a.journal, b.journal)
    assert not [e for e in issued(b.journal) if e["effect"]["type"] == "delete"], "a healthy object was deleted"
    assert not regressions(watch.seen), f"phase regressions: {regressions(watch.seen)}"
    print(f"conflicts: {len(conflicts(b.journal))} in the new leader's journal, all resolved by a re-read")
    assert unresolved_conflicts(b.journal) == [], "conflicts after the takeover"
    assert 'kfold_leader{holder=' in metrics(b) and '} 1' in [ln for ln in metrics(b).splitlines()
                                                              if ln.startswith("kfold_leader{")][0]
    assert b.stop() == 0
    from kubernetes import client
    lease = client.CoordinationV1Api(admin).read_namespaced_lease(f"kfold-{namespace}", KFOLD_NS)
    assert not lease.spec.holder_identity, "a clean stop releases the Lease (a standby need not wait it out)"
    assert lease.spec.lease_transitions == int(old_term) + 1
    res = replay_check(b.journal)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.timeout(600)
def test_a_leader_paused_past_its_lease_issues_nothing_when_it_wakes(pair, admin, namespace):
    # The leader's status writes wait 2 s on the wire (after the fence): the pause catches some
    # mid-send every run, and they land when it wakes, after the new leader wrote.
    a, b, cluster, old_term, watch, mid = mid_bring_up(pair, admin, namespace, env={"KFOLD_TEST_SLOW_STATUS": "2"})
    paused_at = time.time()
    a.proc.send_signal(signal.SIGSTOP)
    last_seq = max(r["seq"] for r in journal(a.journal))
    wait_for(lambda: leading(b), timeout=3 * LEASE["lease_seconds"], interval=0.1, what="the standby leading")
    time.sleep(2)   # paused longer than the lease
    a.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: "standby for lease" in readyz(a), timeout=20, what="the woken one standing by")
    time.sleep(3)   # the woken one keeps observing; give it time to (wrongly) act
    caught = mid_send(a.journal, last_seq, paused_at)
    # A status write caught mid-send lands late; the new leader sees a phase it did not write, newer
    # than its own write, and writes its status again (session._overwritten): every Session Ready.
    wait_for(lambda: converged(cluster), timeout=180, interval=0.5, what="every Session Ready (a late status restated)")
    watch.stop()
    first = first_effect_after(b.journal, old_term, paused_at)
    fenced = [ln for ln in metrics(a).splitlines() if ln.startswith("kfold_leader_fenced_requests_total")]
    print(f"\nSIGSTOP at {sorted(mid.values())}: first effect of the new term {first:.1f}s after the pause "
          f"(lease {LEASE['lease_seconds']}s); the woken one: {fenced}; writes caught mid-send by the pause, "
          f"landing after it: {sorted(caught.items())}; phase regressions: {regressions(watch.seen)}")
    # Journaled after the pause, if at all, only what was decided before it (a commit frozen half-way)
    # and then never sent: the fence answered each one (in doubt, re-observed under a valid term).
    late = issued(a.journal, last_seq)
    decided_after = [r for r in late if r["at"] > paused_at * 1000 + 1000]
    assert decided_after == [], f"the paused leader issued effects after it woke: {decided_after[:3]}"
    answers = {r["effect_id"]: r for r in journal(a.journal) if r["rec"] == "outcome"}
    sent = [r["effect"]["id"] for r in late if "fenced" not in answers.get(r["effect"]["id"], {}).get("message", "fenced")]
    assert sent == [], f"effects journaled after the pause were sent: {sent}"
    assert_no_overlap(a.journal, b.journal)
    assert_one_pod_each(cluster)
    # A conflict answered to the woken one after its pause is a second leader's write only if it
    # was decided after the pause (there are none: asserted above). One decided before it is a
    # request caught mid-send by the pause, landing after the new leader wrote: refused by its
    # resourceVersion precondition, which is that precondition doing its job.
    decided_before = {r["effect"]["id"] for r in journal(a.journal) if r["rec"] == "effect" and r["seq"] <= last_seq}
    woken = conflicts(a.journal, last_seq)
    refused_mid_send = [c for c in woken if c["effect_id"] in decided_before]
    print(f"conflicts: {len(conflicts(b.journal))} in the new leader's journal, all resolved by a re-read; "
          f"{len(woken)} in the woken one's after its pause, {len(refused_mid_send)} of them writes decided "
          f"before it and caught mid-send (refused by their precondition)")
    assert [c for c in woken if c not in refused_mid_send] == [], "the woken one's writes conflicted: two leaders"
    assert unresolved_conflicts(b.journal) == [], "conflicts caused by two leaders"
    # The one window no client-side fence closes: a request already being sent when the process
    # froze reaches the apiserver when it wakes. A Session status write caught so can show an old
    # phase for a moment (status writes carry no resourceVersion precondition; docs/ha.md),
    # until the new leader restates its own (waited for above).
    unexplained = {n: p for n, p in regressions(watch.seen).items() if n not in caught}
    assert not unexplained, f"phase regressions not caused by a write caught mid-send: {unexplained}"
    restated = {r["effect"]["name"] for r in issued(b.journal) if r["at"] > paused_at * 1000
                and r["effect"].get("subresource") == "status" and r["effect"]["name"] in caught}
    print(f"late writes restated by the new leader: {sorted(restated)} of {sorted(caught)}")
    assert restated == set(caught), "a late status write was left standing (session._overwritten)"
    assert "leader: lost lease" in a.log.read_text()
    for d in (a, b):
        assert d.stop() == 0
