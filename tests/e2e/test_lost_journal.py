"""Issue 12 item 2 on the real control plane: a lost journal costs history, never a healthy object.

Sessions Ready on a quiet cluster; ``kfold run`` stopped; the journal (with -wal and -shm) deleted;
``kfold run`` started on a fresh journal. Watched throughout: no Session's status phase ever leaves
Ready, kfold journals no delete, every pod/Service/Ingress/Secret keeps its uid, and stop still
works afterwards.
"""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.drills import ENV, GROUP, PLURAL, VERSION, Cluster
from tests.e2e.test_kill9 import journal, replay_check

SESSIONS = [f"s{i}" for i in range(10)]
WITH_ENV = SESSIONS[::2]   # these have env references, so a Secret each (the rest: pod, Service, Ingress)
OBJECTS = 3 * len(SESSIONS) + len(WITH_ENV)


class PhaseWatch:
    """Every status phase each Session shows, from a real watch (not polling, which could miss one)."""

    def __init__(self, admin, ns: str):
        from kubernetes import client, watch
        self.seen: dict[str, list[str]] = {}
        self._w = watch.Watch()
        self._co, self._ns = client.CustomObjectsApi(admin), ns
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        try:
            for ev in self._w.stream(self._co.list_namespaced_custom_object, GROUP, VERSION, self._ns, PLURAL,
                                     timeout_seconds=600):
                obj = ev["object"]
                phase = (obj.get("status") or {}).get("phase", "")
                self.seen.setdefault(obj["metadata"]["name"], []).append(phase)
        except Exception:  # stopped
            pass

    def stop(self) -> None:
        self._w.stop()


def uids(cluster: Cluster) -> dict[str, str]:
    out = {f"Pod/{p.metadata.name}": p.metadata.uid for p in cluster.pods()}
    out.update({f"Service/{s.metadata.name}": s.metadata.uid for s in cluster.core.list_namespaced_service(cluster.ns).items})
    out.update({f"Ingress/{i.metadata.name}": i.metadata.uid for i in cluster.net.list_namespaced_ingress(cluster.ns).items})
    out.update({f"Secret/{s.metadata.name}": s.metadata.uid for s in cluster.core.list_namespaced_secret(cluster.ns).items
                if s.metadata.name.endswith("-env")})
    return out


def journal_effects(path: Path) -> list[dict]:
    return [r["effect"] for r in journal(path) if r["rec"] == "effect"]


def adopted_all(path: Path) -> bool:
    """The session machine read every Session's adopted pod (its answer decides the rest)."""
    reads = {e["name"] for e in journal_effects(path) if e["type"] == "get" and e.get("kind") == "Pod"
             and e["machine"] == "session"}
    return {f"{s}-g1" for s in SESSIONS} <= reads


def endpoints_settled(path: Path) -> bool:
    """Every Service and Ingress was re-stated (create, AlreadyExists, read, replace) and answered."""
    recs = journal(path)
    sent = [r["effect"] for r in recs if r["rec"] == "effect" and r["effect"].get("kind") in ("Service", "Ingress")]
    answered = {r["effect_id"] for r in recs if r["rec"] == "outcome"}
    replaced = [e for e in sent if e["type"] == "replace"]
    return len(replaced) >= 2 * len(SESSIONS) and {e["id"] for e in sent} <= answered


@pytest.mark.timeout(600)
def test_a_fresh_journal_on_a_populated_cluster_deletes_nothing_and_shows_no_regression(
        cp, admin, namespace, daemon_factory):
    cluster = Cluster(admin, namespace)
    d = daemon_factory(cp["kubeconfig"], [namespace]).start()
    for s in SESSIONS:
        cluster.create_session(s, env=ENV if s in WITH_ENV else None)
    wait_for(lambda: set(cluster.phases().values()) == {"Ready"} and len(cluster.phases()) == len(SESSIONS),
             timeout=120, interval=0.5, what="all Sessions Ready")
    wait_for(lambda: len(uids(cluster)) == OBJECTS, timeout=30, what="pods, Services, Ingresses, Secrets")
    before = uids(cluster)
    assert d.stop() == 0
    for suffix in ("", "-wal", "-shm"):
        Path(str(d.journal) + suffix).unlink(missing_ok=True)

    watch = PhaseWatch(admin, namespace)
    d2 = daemon_factory(cp["kubeconfig"], [namespace]).start()
    wait_for(lambda: adopted_all(d2.journal), timeout=60, what="every pod adopted and read")
    wait_for(lambda: endpoints_settled(d2.journal), timeout=60, what="every endpoint re-stated")
    watch.stop()

    deletes = [e for e in journal_effects(d2.journal) if e["type"] == "delete"]
    assert deletes == [], f"kfold deleted healthy objects after a lost journal: {deletes}"
    assert uids(cluster) == before, "an object was replaced (uid changed)"
    regressed = {s: p for s, p in watch.seen.items() if set(p) != {"Ready"}}
    assert not regressed, f"a Session showed a phase other than Ready: {regressed}"
    assert set(cluster.phases().values()) == {"Ready"}

    cluster.patch_spec("s0", stopped=True)   # stop still works afterwards
    wait_for(lambda: cluster.phases().get("s0") == "Stopped", timeout=60, what="s0 Stopped")
    left = {k for k in uids(cluster) if k.split("/")[1] in ("s0", "s0-g1", "s0-env")}
    wait_for(lambda: not {k for k in uids(cluster) if k.split("/")[1] in ("s0", "s0-g1", "s0-env")},
             timeout=60, what=f"s0's objects deleted (left: {left})")
    assert d2.stop() == 0
    res = replay_check(d2.journal)
    assert res.returncode == 0 and "divergence" not in res.stdout + res.stderr, res.stdout + res.stderr

