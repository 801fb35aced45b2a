"""The simulator in CI: a fixed set of seeds, each a short run with every fault; and the
properties the simulator itself promises (determinism, failing runs leave a journal that
``kfold replay`` and ``kfold trace`` open, the shrinker shortens a failing run).

A longer soak is ``scripts/sim_soak.py`` (not run here)."""
from __future__ import annotations

import asyncio
import functools
import logging

import pytest

from kfold.cli import main
from kfold.sim import invariants
from kfold.sim.apiserver import SimApiServer
from kfold.sim.report import shrink
from kfold.sim.world import FAULTS, T0, Options, SimFailure, Simulation, simulate

SEEDS = range(300)
STEPS, SESSIONS = 80, 3
# Failures the simulator found that are not fixed yet, {seed: why} (docs/simulation.md):
# reproduce with ``kfold sim --seed N --steps 80``. They stay in the set as non-strict xfails, so a
# fix shows up as XPASS. Empty: every seed of the set passes.
KNOWN_OPEN: dict[int, str] = {}


@functools.cache
def _run(seed: int):
    logging.disable(logging.CRITICAL)
    try:
        return simulate(Options(seed=seed, steps=STEPS, sessions=SESSIONS))
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.xfail(reason=KNOWN_OPEN[s], strict=False))
                                  if s in KNOWN_OPEN else s for s in SEEDS])
def test_every_invariant_holds_for_the_ci_seeds(seed):
    r = _run(seed)
    assert r.failure is None, f"kfold sim --seed {seed} --steps {STEPS}: {r.failure}"


def test_the_ci_seeds_fire_every_fault():
    fired = set()
    for seed in SEEDS:
        fired |= set(_run(seed).fired)
    assert set(FAULTS) <= fired, f"never fired: {sorted(set(FAULTS) - fired)}"


def test_the_same_seed_writes_the_same_journal_bytes():
    a, b = (simulate(Options(seed=7, steps=120, sessions=3)) for _ in range(2))
    assert a.records > 50
    assert a.digest == b.digest
    assert simulate(Options(seed=8, steps=120, sessions=3)).digest != a.digest


def test_the_apiserver_model_flags_an_unfenced_delete_and_a_write_to_a_foreign_object():
    api = SimApiServer(T0)
    api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    api.seed({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "namespace": "team"}})
    api.handle("DELETE", "/api/v1/namespaces/team/services/x", {}, {})
    assert [v[0] for v in api.violations] == ["delete_has_uid_precondition", "no_write_to_foreign_object"]


def test_finalizers_hold_a_delete_and_the_garbage_collector_follows_owners():
    api = SimApiServer(T0)
    api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    owner = api.seed({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"}})
    api.seed({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team", "finalizers": ["f"],
                                                                  "ownerReferences": [{"uid": owner["metadata"]["uid"]}]}})
    api.user("DELETE", "/api/v1/namespaces/team/secrets/s")
    assert api.get("v1", "Secret", "team", "s")["metadata"]["deletionTimestamp"]
    api.user("PATCH", "/api/v1/namespaces/team/secrets/s", {"metadata": {"finalizers": None}})
    assert api.get("v1", "Secret", "team", "s") is None
    assert [e[1] for e in api.events_after("Secret", "team", 0, False)] == ["ADDED", "MODIFIED", "DELETED"]
    api.seed({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t", "namespace": "team",
                                                                  "ownerReferences": [{"uid": owner["metadata"]["uid"]}]}})
    api.user("DELETE", "/api/v1/namespaces/team/pods/p")
    api.tick()
    assert api.get("v1", "Pod", "team", "p")["metadata"]["deletionTimestamp"], "a pod terminates first"
    api.set_time(T0 + api.terminate_ms)
    api.tick()
    assert api.get("v1", "Pod", "team", "p") is None and api.get("v1", "Secret", "team", "t") is None
    api.compact()
    assert api.events_after("Secret", "team", 0, False) is None, "410 after compaction"


def _fail_at_step_5(sim):
    if sim.step >= 5:
        raise SimFailure("planted", "a planted failure", sim.step)


def _fail_at_step_12(sim):
    if sim.step >= 12:
        raise SimFailure("planted", "a planted failure", sim.step)


def test_a_failing_run_prints_its_seed_and_writes_a_journal_replay_and_trace_open(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(invariants, "one_live_pod_per_generation", _fail_at_step_12)
    assert main(["sim", "--seed", "3", "--steps", "40", "--out", str(tmp_path), "--no-shrink"]) == 1
    out = capsys.readouterr().out
    assert "seed 3: FAILED invariant planted at step 12" in out
    journal = tmp_path / "seed-3.sqlite"
    assert main(["replay", str(journal)]) == 0
    assert main(["trace", str(journal), "local/team/s0"]) in (0, 1)
    assert "step" in (tmp_path / "seed-3.world.txt").read_text()


def test_the_shrinker_finds_a_shorter_run_failing_the_same_invariant(monkeypatch):
    monkeypatch.setattr(invariants, "one_live_pod_per_generation", _fail_at_step_5)
    small, result = shrink(Options(seed=3, steps=64, sessions=3), "planted")
    assert result is not None and result.failure.invariant == "planted"
    assert small.steps < 64 and small.sessions == 1 and len(small.faults) < len(FAULTS)


def _sim(seed: int, faults: tuple[str, ...], steps: int = STEPS) -> Simulation:
    sim = Simulation(Options(seed=seed, steps=steps, sessions=SESSIONS, faults=faults))
    sim.failure = asyncio.run(sim.run())
    return sim


# Seed 92 pauses daemon a (SIGSTOP) while it leads with an effect in flight (chosen for that, and
# chosen again whenever the runs' timing moves): a seed that pauses an idle leader fences nothing,
# so the tests below first check that the run still exercises the fence.
FENCE_SEED = 92


def test_a_paused_leader_is_fenced_and_the_second_daemon_takes_over():
    """Daemon a leads, the second daemon starts with a journal of its own, a is paused (SIGSTOP)
    for longer than the lease with an effect in flight; b takes the Lease in a later term; a wakes
    up fenced (its in-flight effect is refused before it leaves) and every invariant holds."""
    sim = _sim(FENCE_SEED, ("second_daemon", "leader_pause", "kill"))
    assert sim.failure is None, str(sim.failure)
    assert any("daemon a paused (SIGSTOP)" in line and "while leading" in line for line in sim.world_log)
    holders = [holder for _, (holder, _, _) in sorted(sim.api.terms.items())]
    assert holders[0].startswith("kfold-a-"), holders
    assert any(h.startswith("kfold-b-") for h in holders[1:]), f"the second daemon never took over: {holders}"
    a, b = sim.replicas
    assert sum(f.fenced for f in a.fences) >= 1, "the paused leader's in-flight effects were fenced"
    assert b.store.rows and b.store is not a.store, "the second daemon has a journal of its own"


def test_without_the_fence_the_simulator_sees_a_request_outside_its_term(monkeypatch):
    """The leader invariants are live: with kfold.daemon.leader's fence switched off, the paused leader's
    in-flight effect (the one the test above sees fenced) reaches the apiserver after its term ended."""
    monkeypatch.setattr("kfold.daemon.leader.Fence.check", lambda self, req=None: None)
    sim = _sim(FENCE_SEED, ("second_daemon", "leader_pause"))
    assert sim.failure is not None and sim.failure.invariant == "effect_in_a_live_term", str(sim.failure)


def test_without_the_gate_the_simulator_sees_an_effect_issued_outside_a_term(monkeypatch):
    monkeypatch.setattr(Simulation, "leader_gate", staticmethod(lambda elector: lambda: 1))
    sim = _sim(7, ("second_daemon",))
    assert sim.failure is not None and sim.failure.invariant in ("issued_in_own_term", "effect_in_a_live_term")


def test_a_session_on_a_skewed_cluster_is_judged_on_that_clusters_clock():
    """cluster_skew: the registered cluster east runs an hour (or 90 s, 20 s) off local's clock, or
    sends no Date; Sessions placed there come up, suspend, stop and go like the others."""
    offsets, placed = set(), 0
    for seed in range(6):
        sim = _sim(seed, ("cluster_skew", "user_edits", "user_deletes"))
        assert sim.failure is None, f"seed {seed}: {sim.failure}"
        offsets.add(sim.apis["east"].skew_ms)
        placed += sum(1 for s in sim.sessions.values() if s and s.get("cluster") == "east")
    assert len(offsets) > 1 and placed >= 3


def test_the_batch_fault_commits_several_inputs_as_one_group(monkeypatch):
    """The run drives the daemon's real committer task: with ``batch``, a step's inputs queue at
    once and ``run_committer`` takes them as one group commit; without it, one input at a time."""
    from kfold.daemon.loop import Daemon
    groups: list[int] = []
    real = Daemon._commit_batch

    async def counted(self, batch):
        groups.append(sum(1 for drafts, _, _ in batch if drafts))
        await real(self, batch)

    monkeypatch.setattr(Daemon, "_commit_batch", counted)
    assert _sim(0, ("user_edits",)).failure is None
    assert max(groups) == 1
    groups.clear()
    assert _sim(0, ("batch", "user_edits")).failure is None
    assert max(groups) > 1
