"""Crash recovery against the real control plane: ``kfold run`` killed at effect boundaries.

Each crash test runs the real daemon on a fresh namespace, makes it die (``os._exit(137)``, as a
SIGKILL leaves it) at one boundary through the test-only ``KFOLD_CRASH_AFTER`` hook in
kfold/daemon/loop.py (or a real SIGKILL), restarts it on the same journal and checks:

- it converges (Session Ready / Suspended) with exactly one pod for the generation, same name;
- nothing journaled was lost: the journal before the crash is an exact prefix of the journal after;
- the in-doubt effect was resolved by re-observation: an ``effect.in_doubt`` Command after the
  restart, followed on that key by a quorum ``GetObject``, never by a blind repeat of the effect;
- ``kfold replay JOURNAL --check`` exits 0.

Boundaries covered (``<point>:<effect type>:<kind>:<n>``):
  issued:patch:Session:1     right after the Session is created (finalizer patch durable, unsent)
  issued:create:Pod:1        the pod create journaled, never sent
  performed:create:Pod:1     the pod exists on the server, its outcome never journaled
  issued:delete:Pod:1        suspend: the fenced pod delete journaled, never sent
  performed:delete:Pod:1     suspend: the pod delete performed, its outcome never journaled
plus a real SIGKILL the moment the pod appears, and a SIGTERM (exit 0, journal closed cleanly).
"""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, wait_for

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
NAME = "demo"


# -- helpers ----------------------------------------------------------------------------------------

def journal_rows(path: Path) -> list[tuple[int, bytes]]:
    """(seq, payload) of every journaled record, read-only (safe while the daemon runs)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(db.execute("SELECT seq, payload FROM journal ORDER BY seq"))
    finally:
        db.close()


def journal(path: Path) -> list[dict]:
    return [json.loads(p) for _, p in journal_rows(path)]


def replay_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfold", "replay", str(path), "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


class World:
    def __init__(self, admin, ns: str):
        from kubernetes import client
        self.ns = ns
        self.co = client.CustomObjectsApi(admin)
        self.core = client.CoreV1Api(admin)

    def create_session(self) -> None:
        self.co.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session",
            "metadata": {"name": NAME, "namespace": self.ns},
            "spec": {"image": "registry.example/sandbox:1",
                     "apps": [{"name": "web", "ports": [{"port": 8080, "protocol": "TCP"}]}]}})

    def patch_spec(self, **spec) -> None:
        self.co.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, NAME, {"spec": spec})

    def phase(self) -> str:
        s = self.co.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, NAME)
        return (s.get("status") or {}).get("phase", "")

    def wait_phase(self, phase: str, timeout: float = 30.0) -> None:
        wait_for(lambda: self.phase() == phase, timeout=timeout, interval=0.2, what=f"Session {phase}")

    def pods(self) -> list[str]:
        """Pods that are not terminating."""
        return sorted(p.metadata.name for p in self.core.list_namespaced_pod(self.ns).items
                      if p.metadata.deletion_timestamp is None)

    def all_pods(self) -> list[str]:
        return sorted(p.metadata.name for p in self.core.list_namespaced_pod(self.ns).items)

@pytest.fixture
def world(admin, namespace):
    return World(admin, namespace)


def crash_run(daemon_factory, cp, ns: str, spec: str):
    """A daemon that will exit 137 at ``spec``; returns it, started and ready."""
    d = daemon_factory(cp["kubeconfig"], [ns])
    return d.start(env={"KFOLD_CRASH_AFTER": spec})


def wait_crashed(d, timeout: float = 30.0) -> None:
    wait_for(lambda: d.proc.poll() is not None, timeout=timeout, interval=0.1, what="the crash hook")
    assert d.proc.returncode == 137, f"exited {d.proc.returncode}:\n{d.log.read_text()[-2000:]}"


def restart(daemon_factory, cp, ns: str):
    return daemon_factory(cp["kubeconfig"], [ns]).start()


def assert_prefix(before: list[tuple[int, bytes]], after: list[tuple[int, bytes]]) -> None:
    """Nothing journaled was lost or rewritten; seq only grows, without gaps."""
    assert after[:len(before)] == before
    assert len(after) > len(before)
    assert [s for s, _ in after] == list(range(1, len(after) + 1))


def in_doubt_resolved(recs: list[dict], crash_seq: int, eff_type: str, kind: str) -> dict:
    """The in-doubt ``eff_type`` on ``kind`` got an ``effect.in_doubt`` after the restart, and the
    next effect on its key is a quorum GetObject; a later repeat of the same request on that object
    only ever follows that read's answer (for a create: ``not_found``). Returns the in-doubt effect."""
    issued = {r["effect"]["id"]: (r["seq"], r["effect"]) for r in recs if r["rec"] == "effect"}
    answered = {r["effect_id"] for r in recs if r["rec"] == "outcome" and r["seq"] <= crash_seq}
    doubts = [r for r in recs if r["rec"] == "command" and r["name"] == "effect.in_doubt" and r["seq"] > crash_seq]
    assert doubts, "no effect.in_doubt command after the restart"
    mine = [issued[c["args"]["effect_id"]] for c in doubts
            if issued[c["args"]["effect_id"]][1]["type"] == eff_type
            and issued[c["args"]["effect_id"]][1].get("kind") == kind]
    assert mine, f"no {eff_type} {kind} in doubt; in doubt: {[c['args'] for c in doubts]}"
    seq, eff = mine[0]
    assert seq <= crash_seq and eff["id"] not in answered
    doubt_seq = next(c["seq"] for c in doubts if c["args"]["effect_id"] == eff["id"])
    later = [r for r in recs if r["seq"] > doubt_seq and r["rec"] in ("effect", "outcome")]
    on_key = [r for r in later if r["rec"] == "effect" and r["effect"]["key"] == eff["key"]
              and r["effect"].get("kind") == kind]
    if not on_key and eff_type == "delete" and any(
            r["rec"] == "observed" and r["seq"] < doubt_seq and r.get("event") == "DELETED"
            and r.get("kind") == kind and r.get("name") == eff.get("name") for r in recs):
        return eff   # the watch's DELETED (proof of absence) was journaled before the crash: nothing to re-read
    assert on_key and on_key[0]["effect"]["type"] == "get", \
        f"after the in-doubt {eff_type} the next effect on {eff['key']} is " \
        f"{on_key[0]['effect']['type'] if on_key else 'nothing'}, not a quorum GetObject"
    outcomes = {r["effect_id"]: r for r in later if r["rec"] == "outcome"}
    read = outcomes.get(on_key[0]["effect"]["id"])
    for nxt in on_key[1:]:
        e = nxt["effect"]
        if (e["type"], e.get("name"), e.get("subresource", "")) != (eff_type, eff.get("name"), eff.get("subresource", "")):
            continue
        assert read is not None and read["seq"] < nxt["seq"], \
            f"{eff_type} {eff.get('name')} repeated before the quorum read answered"
        if eff_type == "create":
            assert read["result"] == "not_found", f"create {eff.get('name')} repeated though the read found it"
    return eff


def finish(d, path: Path) -> None:
    assert d.stop() == 0
    res = replay_check(path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "divergence" not in (res.stdout + res.stderr)


# -- bring-up -------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,eff_type,kind", [
    ("issued:patch:Session:1", "patch", "Session"),
    ("issued:create:Pod:1", "create", "Pod"),
    ("performed:create:Pod:1", "create", "Pod"),
])
def test_crash_during_bringup(cp, world, daemon_factory, spec, eff_type, kind):
    d = crash_run(daemon_factory, cp, world.ns, spec)
    world.create_session()
    wait_crashed(d)
    before = journal_rows(d.journal)
    if spec.startswith("performed:create:Pod"):
        assert world.all_pods() == [f"{NAME}-g1"]   # the create landed; its outcome did not

    d2 = restart(daemon_factory, cp, world.ns)
    world.wait_phase("Ready")
    assert world.all_pods() == [f"{NAME}-g1"]
    wait_for(lambda: len(journal_rows(d2.journal)) > len(before), what="journal growth")
    after = journal_rows(d2.journal)
    assert_prefix(before, after)
    recs = journal(d2.journal)
    eff = in_doubt_resolved(recs, len(before), eff_type, kind)
    if spec == "performed:create:Pod:1":  # adopted by the quorum read, never created twice
        creates = [r for r in recs if r["rec"] == "effect" and r["effect"]["type"] == "create"
                   and r["effect"].get("kind") == "Pod"]
        assert [c["effect"]["id"] for c in creates] == [eff["id"]]
    finish(d2, d2.journal)
    assert world.all_pods() == [f"{NAME}-g1"]


def test_sigkill_when_pod_appears(cp, world, daemon_factory):
    d = daemon_factory(cp["kubeconfig"], [world.ns]).start()
    world.create_session()
    wait_for(lambda: world.all_pods(), timeout=30, interval=0.02, what="the pod")
    d.kill9()
    assert d.proc.returncode == -9
    before = journal_rows(d.journal)

    d2 = restart(daemon_factory, cp, world.ns)
    world.wait_phase("Ready")
    assert world.all_pods() == [f"{NAME}-g1"]
    wait_for(lambda: len(journal_rows(d2.journal)) > len(before), what="journal growth")
    assert_prefix(before, journal_rows(d2.journal))
    recs = journal(d2.journal)
    creates = [r for r in recs if r["rec"] == "effect" and r["effect"]["type"] == "create"
               and r["effect"].get("kind") == "Pod"]
    assert len(creates) == 1, "the pod create was repeated"
    doubts = [r for r in recs if r["rec"] == "command" and r["name"] == "effect.in_doubt"]
    assert all(c["seq"] > len(before) for c in doubts)
    if creates[0]["effect"]["id"] in {c["args"]["effect_id"] for c in doubts}:
        in_doubt_resolved(recs, len(before), "create", "Pod")   # killed between create and outcome
    finish(d2, d2.journal)


# -- suspend --------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["issued:delete:Pod:1", "performed:delete:Pod:1"])
def test_crash_during_suspend(cp, world, daemon_factory, spec):
    d = crash_run(daemon_factory, cp, world.ns, spec)
    world.create_session()
    world.wait_phase("Ready")
    world.patch_spec(suspended=True)
    wait_crashed(d)
    before = journal_rows(d.journal)

    d2 = restart(daemon_factory, cp, world.ns)
    world.wait_phase("Suspended")
    wait_for(lambda: world.all_pods() == [], what="the g1 pod gone")
    assert_prefix(before, journal_rows(d2.journal))
    recs = journal(d2.journal)
    eff = in_doubt_resolved(recs, len(before), "delete", "Pod")
    deletes = [r for r in recs if r["rec"] == "effect" and r["effect"]["type"] == "delete"
               and r["effect"].get("kind") == "Pod"]
    if spec.startswith("performed"):
        assert [x["effect"]["id"] for x in deletes] == [eff["id"]], "the performed delete was sent again"

    world.patch_spec(suspended=False)   # resume: generation 2, one pod, a new name
    world.wait_phase("Ready")
    assert world.all_pods() == [f"{NAME}-g2"]
    finish(d2, d2.journal)


# -- SIGTERM --------------------------------------------------------------------------------------

def test_sigterm_exits_0_and_closes_the_journal(cp, world, daemon_factory):
    d = daemon_factory(cp["kubeconfig"], [world.ns]).start()
    world.create_session()
    world.wait_phase("Ready")
    assert d.stop() == 0
    assert "Traceback" not in d.log.read_text()
    # Closed cleanly: the WAL was checkpointed and removed, and stop() snapshotted the last record.
    assert not Path(str(d.journal) + "-wal").exists()
    rows = journal_rows(d.journal)
    db = sqlite3.connect(f"file:{d.journal}?mode=ro", uri=True)
    try:
        assert db.execute("SELECT max(seq) FROM snapshots").fetchone()[0] == len(rows)
    finally:
        db.close()
    res = replay_check(d.journal)
    assert res.returncode == 0, res.stdout + res.stderr
    # Reopened by the daemon: recovery finds nothing in doubt and the journal continues.
    d2 = restart(daemon_factory, cp, world.ns)
    wait_for(lambda: len(journal_rows(d2.journal)) > len(rows), what="journal growth")
    after = journal(d2.journal)
    assert_prefix(rows, journal_rows(d2.journal))
    assert not [r for r in after if r["rec"] == "command" and r["name"] == "effect.in_doubt"]
    assert world.all_pods() == [f"{NAME}-g1"]
    finish(d2, d2.journal)
