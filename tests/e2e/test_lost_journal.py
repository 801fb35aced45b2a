"""Issue 12 item 2 on the real control plane: a lost journal costs history, never a healthy object.

Sessions Ready on a quiet cluster; ``kfold run`` stopped; the journal (with -wal and -shm) deleted;
``kfold run`` started on a fresh journal. Watched throughout: no Session's status phase ever leaves
Ready, kfold journals no delete, every pod/Service/Ingress/Secret keeps its uid, and stop still
works afterwards.

Issue 38 item 3: nothing already right is written. Like a controller that waits for its caches,
kfold decides about each Session once its first Pod, Service and Ingress lists are folded: no pod
create, no Service or Ingress create or replace, no status patch, no pod or endpoint read. (An env
Secret, which kfold does not watch, is still met by a create its AlreadyExists answers, and read.)
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


LISTED = {"Session", "Pod", "Service", "Ingress"}   # what kfold run lists first


def settled(path: Path, quiet_s: float = 3.0) -> bool:
    """The first lists are journaled, every effect has its outcome, and nothing was journaled for
    ``quiet_s``: every Session has been decided on what the lists showed."""
    import time
    recs = journal(path)
    if not LISTED <= {r.get("kind") for r in recs if r["rec"] == "relist"}:
        return False
    answered = {r["effect_id"] for r in recs if r["rec"] == "outcome"}
    if any(r["effect"]["id"] not in answered for r in recs if r["rec"] == "effect"):
        return False
    time.sleep(quiet_s)
    return len(journal(path)) == len(recs)


def unneeded(effects: list[dict]) -> list[str]:
    """Requests a lost journal does not need: any write (but an env Secret's create, which its
    AlreadyExists answers: kfold does not watch Secrets) and any read of one object."""
    out = []
    for e in effects:
        kind = e.get("kind", "")
        if e["type"] in ("create", "replace", "patch", "delete", "event", "post_event") and not (
                kind == "Secret" and e["type"] == "create"):
            out.append(f"{e['type']} {kind} {e.get('name', '')}".strip())
        elif e["type"] == "get" and kind != "Secret":
            out.append(f"get {kind} {e.get('name', '')}")
    return out


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
    wait_for(lambda: settled(d2.journal), timeout=90, interval=0.5, what="every Session decided")
    watch.stop()

    effects = journal_effects(d2.journal)
    deletes = [e for e in effects if e["type"] == "delete"]
    assert deletes == [], f"kfold deleted healthy objects after a lost journal: {deletes}"
    assert unneeded(effects) == [], "a lost journal needs no write of what is right, nor a read of it"
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

