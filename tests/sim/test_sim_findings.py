"""Regression tests for what the simulator (kfold sim) found while it was built."""
from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from pathlib import Path


from immutables import Map

from engine.core import Pending, State
from engine.effects.models import GetObject
from engine.effects.timers import Ticker

ROOT = Path(__file__).resolve().parents[2]


def _retry(eid: str) -> Pending:
    effect = GetObject(id=eid, machine="session", key=f"local/team/s{eid}", api_version="v1", kind="Secret",
                       namespace="team", name="x")
    return Pending(effect, issued=False, attempt=1, not_before=1000)


def test_due_retries_are_journaled_in_effect_id_order_whatever_the_map_order():
    """Found by seed 9: the ticker issued due retries in the pending map's order, which follows
    string hashes, so the same inputs wrote a different journal under another PYTHONHASHSEED."""
    ids = [f"{n}.{i}" for n in range(1, 40) for i in range(2)]
    state = State(seq=100, at=2000, pending=Map({i: _retry(i) for i in ids}))
    issued = [d.effect["id"] for d in Ticker().due(state, 2000, 0)]
    assert issued == ids


@pytest.mark.parametrize("seed, steps, sessions", [(9, 120, 3), (1, 200, 6)])
def test_the_journal_does_not_depend_on_the_string_hash_seed(seed, steps, sessions):
    """Seed 1 with six Sessions: a restart with a fresh journal relists Pods, and each resumed
    Session is decided again in the session table's order, which followed string hashes."""
    script = ("import logging; logging.disable(logging.CRITICAL)\n"
              "from kfold.sim.world import simulate, Options\n"
              f"print(simulate(Options(seed={seed}, steps={steps}, sessions={sessions})).digest)\n")
    digests = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT,
                              env={"PYTHONHASHSEED": str(h), "PATH": ""}).stdout.strip() for h in (0, 1, 2)}
    assert len(digests) == 1, digests


def test_twenty_seeds_write_the_same_journals_under_two_hash_seeds():
    """Beyond the seeds that found an order bug: 20 runs of six Sessions with every fault, each
    journal's digest the same whatever ``PYTHONHASHSEED`` the process has."""
    script = ("import logging; logging.disable(logging.CRITICAL)\n"
              "from kfold.sim.world import simulate, Options\n"
              "for seed in range(600, 620):\n"
              "    print(seed, simulate(Options(seed=seed, steps=150, sessions=6)).digest)\n")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT,
                           env={"PYTHONHASHSEED": h, "PATH": ""}).stdout.splitlines() for h in ("5", "6")]
    assert len(runs[0]) == 20 and runs[0] == runs[1], [a for a, b in zip(*runs) if a != b]


def test_a_journal_written_under_one_hash_seed_replays_under_others(tmp_path):
    """``kfold replay --check`` runs in another process than the daemon that wrote the journal, so
    with another ``PYTHONHASHSEED``: the fold must not visit a table in its hash order (found in CI:
    a fresh-journal restart over four Sessions, whose journal diverged at its first Pod relist)."""
    env = {"PYTHONHASHSEED": "1", "PATH": ""}
    subprocess.run([sys.executable, "-m", "kfold", "sim", "--seed", "1", "--steps", "200", "--sessions", "6",
                    "--journal", "--out", str(tmp_path)], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    journals = sorted(tmp_path.glob("*.sqlite"))
    assert len(journals) == 2, journals   # this seed runs a second daemon, whose journal restarts fresh
    for journal in journals:
        for h in ("2", "3"):
            proc = subprocess.run([sys.executable, "-m", "kfold", "replay", str(journal), "--check"],
                                  capture_output=True, text=True, cwd=ROOT, env={"PYTHONHASHSEED": h, "PATH": ""})
            assert proc.returncode == 0, f"{journal.name} under PYTHONHASHSEED={h}:\n{proc.stdout[-1500:]}"


def test_a_retry_superseded_by_a_takeovers_in_doubt_is_not_journaled_as_issued():
    """Found by the ``replays`` invariant, ``kfold sim --seed 2 --steps 200 --sessions 6``: the ticker
    read a pod GET waiting for its retry; in the same commit a takeover put it in doubt (a fresh
    read replaced it), and the retry was journaled as issued anyway: an effect no replay holds."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=2, steps=200, sessions=6))
    assert r.failure is None, str(r.failure)


SHRUNK_11372 = ("conflict,already_exists,throttle,server_error,reset_before,reset_after,watch_delay,watch_drop,"
                "stale_list,compact,date_skew,kill,foreign_objects,user_edits,user_deletes")


def test_a_late_session_list_does_not_resurrect_a_deleted_session():
    """Found by the soak: ``kfold sim --seed 11372 --steps 180 --sessions 4 --faults <SHRUNK_11372>``: a
    Session list answered before the Session's deletion and folded after it brought the Session
    back (kfold re-created its Secret and pod). The session machine now remembers deleted uids."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=11372, steps=180, sessions=4, faults=tuple(SHRUNK_11372.split(","))))
    assert r.failure is None, str(r.failure)


SHRUNK_40322 = ("conflict,throttle,server_error,reset_before,watch_delay,watch_drop,compact,date_skew,kill,"
                "kill_lost_journal,foreign_objects,user_edits,user_deletes,batch,second_daemon,leader_pause,cluster_skew")


def test_a_secret_created_for_a_session_deleted_meanwhile_is_swept():
    """Found by the soak (two daemons): ``kfold sim --seed 40322 --steps 200 --sessions 4 --faults
    <SHRUNK_40322>``: one daemon tore a Session down and let it go; the other, standby meanwhile
    (its reads held), took over and re-sent the Secret create it had in doubt before its read of the
    Session answered 404: the Secret outlived the Session. kfold run's orphan Secret sweep
    (``pod.sweep_secrets``) is what removes it; the simulator now runs it too, where and when
    ``kfold.daemon.sweeps`` makes it due (after a takeover, a lost journal or a Secret write).
    (Since the sweep runs only when due, this seed's run no longer re-sends that create, and 300
    steps reach the sweep's due time past its grace; the schedule's rules are stated in tests/unit/test_sweep_schedule.py.)"""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=40322, steps=300, sessions=4, faults=tuple(SHRUNK_40322.split(","))))
    assert r.failure is None, str(r.failure)
    assert r.fired.get("sweep_secrets", 0) >= 1    # the takeover and the lost journal made it due, past its grace


def test_a_takeover_does_not_fail_a_session_its_status_reports_ready():
    """Found by the soak on main (two daemons): ``kfold sim --seed 70039 --steps 400 --sessions 4``.
    A standby's record of Session s3 was still Provisioning (its Service/Ingress creates decided,
    never issued) while the leader brought s3 up and wrote Ready. On takeover the ready deadline,
    long passed, was judged while the in-doubt creates were in flight: s3 was written Failed with
    its pod Running and Ready. A bring-up deadline of a generation the Session's status reports
    Ready is now judged again after the takeover's requests answer."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=70039, steps=400, sessions=4))
    assert r.failure is None, str(r.failure)


# -- found by the soak on main (seeds 71000-72979) ---------------------------------------------

SHRUNK_71590 = ("throttle,server_error,reset_before,reset_after,watch_delay,watch_drop,date_skew,"
                "kill_lost_journal,foreign_objects,user_deletes,second_daemon,cluster_skew")


def test_a_remote_pod_created_across_a_lost_journal_is_not_left_behind():
    """``kfold sim --seed 71590 --steps 21 --sessions 4 --faults <SHRUNK_71590>``: the journal was
    lost with ``team/s2-g1``'s create on cluster east in flight; the fresh record met Session s2
    with its finalizer and no status (generation 1, Pending: its create never sent by this life)
    and saw the pod on east; the user deleted s2, the record went to Stopped with no pod to
    release, and the pod lived on (no ownerReference crosses clusters). A Session stopped while
    Pending now releases the pod of its generation that kfold has seen
    (tests/scenario/test_session_sim_findings.py); the orphan-pod sweep is the backstop for a pod
    that shows up after its Session is gone (next test)."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=71590, steps=21, sessions=4, faults=tuple(SHRUNK_71590.split(","))))
    assert r.failure is None, str(r.failure)


def _kfold(session: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": session}


def _pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    from kfold.sim.world import NS
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "workspace", "image": "registry.example/ws:1"}]}}


@pytest.mark.parametrize("sweep", [True, False], ids=["swept", "without-the-sweep"])
def test_a_pod_on_east_whose_session_is_gone_is_swept_and_a_foreign_one_is_kept(sweep, monkeypatch):
    """A create answered after its Session was gone (its record with it: nothing of kfold's knows
    the pod) leaves a pod on east that no ownerReference can reach. kfold's periodic orphan-pod
    sweep (``pod.sweep_orphans``) lists kfold's pods there, reads the Session (404) and deletes the
    pod fenced by uid; its Service and Ingress (owner-referenced to it) go with it, and its env
    Secret, podless then, goes at the orphan Secret sweep; a pod of a similar name without kfold's
    labels is never touched. Without the sweep the run breaks ``no_leak``: the test shows the sweep
    is what removes them."""
    import asyncio
    from kfold.sim.world import EAST, NS, T0, Options, Simulation
    if not sweep:
        from journal.records import Command
        real_commit = Simulation.commit

        async def commit(self: Any, drafts: list[Any], *rest: Any) -> Any:
            drafts = [d for d in drafts if not (isinstance(d, Command) and d.name == "pod.sweep_orphans")]
            return await real_commit(self, drafts, *rest)
        monkeypatch.setattr(Simulation, "commit", commit)
    sim = Simulation(Options(seed=1, steps=40, sessions=2, faults=("cluster_skew",)))
    east = sim.apis[EAST]
    east.set_time(T0)   # on east's own clock, so the objects' creationTimestamps are east's
    labels = _kfold("ghost")
    ghost = east.seed(_pod("ghost-g1", {**labels, "kfold.dev/generation": "1", "kfold.dev/session-namespace": NS}))
    east.seed(_pod("ghost-g1x", {"kfold.dev/session": "ghost", "kfold.dev/session-namespace": NS}))
    # what kfold makes beside such a pod: its Service and Ingress (owner-referenced to it), its env Secret
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": "ghost-g1", "uid": ghost["metadata"]["uid"]}]
    for api_version, kind in (("v1", "Service"), ("networking.k8s.io/v1", "Ingress")):
        east.seed({"apiVersion": api_version, "kind": kind,
                   "metadata": {"name": "ghost", "namespace": NS, "labels": labels, "ownerReferences": owner}})
    east.seed({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "ghost-env", "namespace": NS, "labels": labels}})
    failure = asyncio.run(sim.run())
    assert east.get("v1", "Pod", NS, "ghost-g1x") is not None, "a pod without kfold's labels is never touched"
    if sweep:
        assert failure is None, str(failure)
        left = [(k, n) for v, k, n in (("v1", "Pod", "ghost-g1"), ("v1", "Service", "ghost"),
                                      ("networking.k8s.io/v1", "Ingress", "ghost"), ("v1", "Secret", "ghost-env"))
                if east.get(v, k, NS, n) is not None]
        assert left == [], "the pod is swept, its Service and Ingress go with it, its env Secret is swept after it"
    else:
        assert failure is not None and failure.invariant == "no_leak" and "ghost-g1" in failure.detail


@pytest.mark.parametrize("seed", [71590, 72011, 72638])
def test_no_remote_pod_outlives_its_session_in_the_soak_seeds_that_found_it(seed):
    """``kfold sim --seed N --steps 400 --sessions 4`` (every fault): each left a pod (and its
    Service, Ingress) on east behind a Session deleted across a lost journal."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=seed, steps=400, sessions=4))
    assert r.failure is None, str(r.failure)


def test_a_request_never_outlives_its_term_with_server_clocks_within_a_second():
    """Found by the soak on main: ``kfold sim --seed 71643 --steps 400 --sessions 4``: daemon b's GET
    of the namespace's Secrets (the orphan sweep) arrived 100 ms after its term expired on a server
    clock that had stepped from -1 s to +1 s. The renewal had written renewTime from the server
    clock's reading, 400 ms behind the server (the Date header's truncation), so the term expired
    on the server 400 ms earlier than the fence (lease - 2 s margin) assumed. renewTime is now the
    latest time the server can be at (``Elector._stamp``; tests/unit/test_leader.py)."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=71643, steps=400, sessions=4))
    assert r.failure is None, str(r.failure)


def test_a_session_stopped_while_pending_does_not_leave_the_leaders_pod_behind():
    """Found by the soak on this branch (seeds 73000-): ``kfold sim --seed 73426 --steps 400 --sessions 4``:
    a standby's record resumed s2 to generation 3 while the leader created ``s2-g3`` on east; the
    standby took over and the user stopped s2, still Pending in its record: Stopped, the pod lived on
    (tests/scenario/test_session_sim_findings.py)."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=73426, steps=400, sessions=4))
    assert r.failure is None, str(r.failure)


def test_a_stale_suspended_record_does_not_release_a_newer_generations_pod():
    """Found by the soak on main after the merges of this session (seeds 76000-78545, one failure):
    ``kfold sim --seed 77898 --steps 400 --sessions 4`` (every fault): daemon b, paused while the
    user resumed s2, came back with s2 Suspended in its record; its pod watch delivered ``s2-g2``
    (made by daemon a for the resume) before its Session watch delivered the resume, and
    ``session.machine.release_stale`` (a podless Session releases any pod under its labels, seed 240)
    released it; a's Ready Session failed PodGone. A pod of a generation newer than the record
    knows now waits for the record to catch up (``session.ahead``): the resume, seen next, begins
    generation 2, whose create adopts the pod."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=77898, steps=400, sessions=4))
    assert r.failure is None, str(r.failure)


def test_a_stale_replay_of_a_session_does_not_spend_the_generation_of_its_next_resume():
    """Found by the soak on main after seed 77898's fix (seeds 78600-): ``kfold sim --seed 81862
    --steps 400 --sessions 4`` (every fault): daemon b's Session list came back stale (before s0
    existed) and its watch replayed s0 from there: ADDED at its first resourceVersion (not yet
    suspended) resumed b's Suspended record to generation 2, the replayed suspend then spent it. The
    user's resume was generation 2 for daemon a, which made ``s0-g2`` on east, and generation 3 for
    b, which released ``s0-g2`` as spent (``session.machine.release_stale``); a's Ready Session
    failed PodGone. An observation of a Session older than the one folded (same uid, earlier
    resourceVersion) is now ignored (tests/scenario/test_session_ahead.py)."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=81862, steps=400, sessions=4))
    assert r.failure is None, str(r.failure)


SHRUNK_82541 = ("conflict,throttle,reset_before,reset_after,watch_delay,watch_drop,stale_list,compact,date_skew,"
                "foreign_objects,user_edits,batch,second_daemon,leader_pause,cluster_skew")


def test_a_failed_record_that_missed_a_spec_change_does_not_fail_the_retry():
    """Found by the soak on main (seeds 81225-): ``kfold sim --seed 82541 --steps 121 --sessions 4
    --faults <SHRUNK_82541>``: daemon b started with a fresh journal after the user changed s3's
    spec; the status still said Failed (generation 1, the old spec's), so b's record resumed Failed
    with the new spec taken for the failed one. Daemon a retried the new spec as generation 2
    (``s3-g2`` on east, status Provisioning, then Ready); b's Failed record, seeing that status,
    released ``s3-g2`` as spent and, taking over after a's pause, wrote Failed over the Ready pod.
    A Failed record overtaken by the status now resumes from it, as a live one does
    (tests/scenario/test_session_sim_findings.py)."""
    from kfold.sim.world import Options, simulate
    r = simulate(Options(seed=82541, steps=121, sessions=4, faults=tuple(SHRUNK_82541.split(","))))
    assert r.failure is None, str(r.failure)


@pytest.mark.parametrize("seed, left_out", [
    (731012, ("already_exists", "watch_duplicate", "date_missing")),
    (731264, ("watch_duplicate", "date_missing", "foreign_objects")),
])
def test_a_takeover_long_after_a_held_pod_operation_does_not_spend_its_budget_on_standing_by(seed, left_out):
    """Found by the soak on main (seeds 731000-, 600 steps, 6 Sessions, every fault but ``left_out``):
    a standby decides a pod operation and holds it while the leader acts; at its takeover the
    operation is in doubt and its confirming read goes out, but the operation's 600 s budget, spent
    on standing by, fired first. Seed 731012: daemon b held s5's pod create for 11 minutes while the
    leader made ``s5-g1``; s5 was written Failed while its pod ran Ready, and b then deleted the pod
    as a spent generation. Seed 731264: b held the delete of ``s3-g1``; the over-budget delete left
    s3 blocked in Stopping for good though its read then found the pod gone. An operation resolving
    a doubt now gets its whole budget from then (tests/scenario/test_pod_create.py)."""
    from kfold.sim.world import FAULTS, Options, simulate
    faults = tuple(f for f in FAULTS if f not in left_out)
    r = simulate(Options(seed=seed, steps=600, sessions=6, faults=faults))
    assert r.failure is None, str(r.failure)


def test_a_start_deadline_after_two_pauses_does_not_fail_a_session_whose_pod_runs():
    """Found by the soak on main (seeds 740000-, 900 steps, 8 Sessions): ``kfold sim --seed 741061
    --steps 75 --sessions 8`` (shrunk; every fault but stale_list, watch_duplicate, date_missing):
    daemon a, paused twice (SIGSTOP) while its pod watch had to relist after a compaction, resumed
    past s7's start deadline with s7-g1 last seen Pending and failed s7 while the pod had been
    Running and Ready for a minute. A bring-up deadline now fails a Session only on a quorum read of
    its pod made after the deadline (tests/scenario/test_session_bringup.py)."""
    from kfold.sim.world import FAULTS, Options, simulate
    faults = tuple(f for f in FAULTS if f not in ("stale_list", "watch_duplicate", "date_missing"))
    r = simulate(Options(seed=741061, steps=75, sessions=8, faults=faults))
    assert r.failure is None, str(r.failure)


def test_a_fresh_record_does_not_take_a_changed_spec_for_the_one_that_failed():
    """Found by the soak on main (seeds 770000-, 400 steps, 4 Sessions): ``kfold sim --seed 770254
    --steps 90 --sessions 4`` (shrunk; every fault but reset_before, watch_duplicate, date_missing):
    s3 failed on its first spec and the user changed its apps; daemon a retried it as generation 2.
    A second daemon, with a journal of its own, rebuilt s3 from its status (Failed, generation 1)
    and the changed spec, took that spec for the one that failed, and wrote Failed over ``s3-g2``
    Running and Ready. The Failed condition now names the spec that failed (``observedGeneration``,
    the Session's ``metadata.generation``), and a fresh record retries a failure of an earlier spec
    (tests/scenario/test_lost_journal.py)."""
    from kfold.sim.world import FAULTS, Options, simulate
    faults = tuple(f for f in FAULTS if f not in ("reset_before", "watch_duplicate", "date_missing"))
    r = simulate(Options(seed=770254, steps=90, sessions=4, faults=faults))
    assert r.failure is None, str(r.failure)


def test_a_takeovers_held_create_is_not_judged_on_another_pods_facts():
    """Found by the soak on main (seeds 830000-, 600 steps, 6 Sessions): ``kfold sim --seed 830708
    --steps 450 --sessions 6`` (the faults below): a second daemon with its own journal, standing
    by, held s0's generation-3 pod create while daemon a made s0-g3, moved s0 to generation 4 and
    deleted s0-g3; at its takeover the held create made s0-g3 again, and the old pod's facts still on
    the record (Running, then gone) failed s0 as "disappeared before serving" while s0-g4 ran Ready.
    A created pod of another uid now starts with fresh facts
    (tests/scenario/test_session_sim_findings.py)."""
    from kfold.sim.world import Options, simulate
    faults = ("conflict", "already_exists", "throttle", "server_error", "reset_before", "reset_after",
              "watch_delay", "watch_drop", "date_skew", "kill", "kill_lost_journal", "foreign_objects",
              "user_edits", "user_deletes", "batch", "second_daemon", "leader_pause", "cluster_skew")
    r = simulate(Options(seed=830708, steps=450, sessions=6, faults=faults))
    assert r.failure is None, str(r.failure)
