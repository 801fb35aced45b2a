"""``kfold run`` behind a view-perturbation proxy (tests/e2e/perturb.py) on the real control plane.

The proxy injects only what the API contract allows: cached reads answered from older snapshots,
watches ended with 410 or left silent, writes whose answer is late or lost after they were applied,
and a crash right after the K-th write of a kind (restarted on its journal, or on a fresh one).
The oracles read the test's own watches of the apiserver: never two live pods of a Session, no
pod deleted unless its Session asked, no phase shown going backwards under one spec, never Failed,
every Session at its end state within a bound, nothing left after delete, and ``kfold replay
--check`` clean on every journal. CI runs these fixed seeds; more with ``python scripts/perturbed.py``.
"""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import yaml
from kubernetes import client

from tests.contract import tls_material
from tests.e2e.conftest import Daemon, install_rbac, service_account_token, wait_for
from tests.e2e.driver import replay_check
from tests.e2e.perturb import Faults, Proxy, Recorder, healthy_pods_deleted, phase_regressions, two_live_pods

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
SESSIONS = 4
BOUND_S = 90
pytestmark = pytest.mark.timeout(600)


def _spec(apps: list[str]) -> dict[str, Any]:
    return {"image": "registry.example/sandbox:1",
            "apps": [{"name": a, "ports": [{"port": 8080 + i, "protocol": "TCP"}]} for i, a in enumerate(apps)]}


class Run:
    """One namespace, kfold behind the proxy, the test's recorder; restarts keep the same proxy."""

    def __init__(self, admin: Any, cp: dict[str, str], ns: str, tmp: Path, faults: Faults, seed: int):
        self.admin, self.ns, self.tmp = admin, ns, tmp
        self.co = client.CustomObjectsApi(admin)
        self.core = client.CoreV1Api(admin)
        tls = tls_material.make(tmp / "tls")
        self.daemons: list[Daemon] = []
        self.proxy = Proxy(cp["server"], cp["ca"], str(tls.server_cert), str(tls.server_key), faults, seed,
                           on_kill=lambda: self.daemons[-1].kill9())
        port = self.proxy.start()
        install_rbac(admin, "kfold-e2e", [ns])
        self.kubeconfig = tmp / "proxied.kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "kfold",
            "clusters": [{"name": "proxied", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                         "certificate-authority-data": base64.b64encode(
                                                             tls.ca.read_bytes()).decode()}}],
            "users": [{"name": "kfold", "user": {"token": service_account_token(admin, "kfold-e2e")}}],
            "contexts": [{"name": "kfold", "context": {"cluster": "proxied", "user": "kfold"}}]}))
        self.recorder = Recorder(admin, ns).start()

    def start(self, fresh_journal: bool = False) -> Daemon:
        home = self.tmp / f"life-{len(self.daemons)}"
        home.mkdir()
        d = Daemon(home, str(self.kubeconfig), [self.ns], {"deadlines": {"watch_idle_seconds": 8}})
        if self.daemons and not fresh_journal:
            d.journal = self.daemons[-1].journal
            cfg = yaml.safe_load(d.config.read_text())
            cfg["journal"]["path"] = str(d.journal)
            d.config.write_text(yaml.safe_dump(cfg))
        self.daemons.append(d)
        return d.start()

    def phases(self) -> dict[str, tuple[str | None, int | None, str | None]]:
        items = self.co.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)["items"]
        return {i["metadata"]["name"]: ((i.get("status") or {}).get("phase"), (i.get("status") or {}).get("generation"),
                                        (i.get("status") or {}).get("podName")) for i in items}

    def live_pods(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for p in self.core.list_namespaced_pod(self.ns).items:
            if p.metadata.deletion_timestamp is None:
                out.setdefault((p.metadata.labels or {}).get("kfold.dev/session", ""), []).append(p.metadata.name)
        return out

    def settle(self, want: dict[str, str], what: str) -> None:
        """Every Session at its wanted phase; a Ready one with exactly the pod its status names."""
        def ok():
            phases, pods = self.phases(), self.live_pods()
            for name, phase in want.items():
                got = phases.get(name)
                if not got or got[0] != phase:
                    return None
                if phase == "Ready" and pods.get(name) != [got[2]]:
                    return None
                if phase != "Ready" and pods.get(name):
                    return None
            return True
        wait_for(ok, BOUND_S, 0.5, what=lambda: f"{what}: {want}; at the timeout {self.phases()}, pods "
                                                f"{self.live_pods()}; injected {self.proxy.injected[-15:]}")

    def patch(self, name: str, spec: dict[str, Any]) -> None:
        self.co.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, {"spec": spec})

    def finish(self) -> None:
        """Delete every Session; nothing of theirs may be left; then the oracles and replay."""
        for name in self.phases():
            self.co.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

        def empty():
            left = [p.metadata.name for p in self.core.list_namespaced_pod(self.ns).items
                    if (p.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "kfold"]
            left += [s.metadata.name for s in self.core.list_namespaced_service(self.ns).items
                     if (s.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "kfold"]
            return not self.phases() and not left or None
        wait_for(empty, BOUND_S, 0.5, what=lambda: f"nothing left after delete; at the timeout {self.phases()}, "
                                                   f"pods {self.live_pods()}")
        self.recorder.stop()
        for d in self.daemons:
            d.stop()
        self.proxy.stop()
        events = self.recorder.events
        problems = two_live_pods(events) + healthy_pods_deleted(events) + phase_regressions(events)
        assert not problems, f"{problems}\ninjected: {self.proxy.injected}"
        for journal in dict.fromkeys(d.journal for d in self.daemons):
            replay_check(journal)

    def close(self) -> None:
        self.recorder.stop()
        for d in self.daemons:
            d.stop()
        self.proxy.stop()


@pytest.fixture
def run_factory(admin, cp, namespace, tmp_path):
    made: list[Run] = []

    def make(faults: Faults, seed: int) -> Run:
        made.append(Run(admin, cp, namespace, tmp_path, faults, seed))
        return made[-1]
    yield make
    for r in made:
        r.close()


def _create_all(r: Run) -> list[str]:
    names = [f"s{i}" for i in range(SESSIONS)]
    for name in names:
        r.co.create_namespaced_custom_object(GROUP, VERSION, r.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session", "metadata": {"name": name}, "spec": _spec(["web"])})
    return names


def _life(r: Run, names: list[str]) -> None:
    """Bring-up, suspend two, set-apps one, resume, stop one: each step settled within the bound."""
    r.settle({n: "Ready" for n in names}, "all Ready")
    r.patch(names[0], {"suspended": True})
    r.patch(names[1], {"suspended": True})
    r.patch(names[2], _spec(["web", "api"]))
    r.settle({names[0]: "Suspended", names[1]: "Suspended", names[2]: "Ready", names[3]: "Ready"}, "suspend, set-apps")
    r.patch(names[0], {"suspended": False})
    r.patch(names[3], {"stopped": True})
    r.settle({names[0]: "Ready", names[1]: "Suspended", names[2]: "Ready", names[3]: "Stopped"}, "resume, stop")


@pytest.mark.parametrize("seed", [1, 2])
def test_stale_reads_expired_watches_and_late_or_lost_write_answers(run_factory, seed):
    r = run_factory(Faults(stale_reads=0.5, watch_expire=0.3, watch_expire_after=4, watch_stall=0.1, stall_s=12,
                           watch_lag_s=0.4, hold_write=0.15, hold_s=1.5, drop_write=0.05), seed)
    r.start()
    names = _create_all(r)
    _life(r, names)
    r.finish()
    assert r.proxy.injected, "the run was not perturbed"
    # Every read kfold makes is a quorum read and every watch resumes from an exact resourceVersion
    # (docs/architecture.md, "Reads"): no answer from a cache or an older snapshot can reach a decision.
    for method, path, query in r.proxy.requests:
        q = parse_qs(query)
        if method != "GET":
            continue
        if q.get("watch", [""])[0] in ("true", "1"):
            assert q.get("resourceVersion", [""])[0] not in ("", "0"), (path, query)
        else:
            assert "resourceVersion" not in q and "resourceVersionMatch" not in q, (path, query)


@pytest.mark.parametrize("resource, k, fresh", [("pods", 2, False), ("services", 3, False), ("pods", 3, True)],
                         ids=["pod-create-2-journal", "service-create-3-journal", "pod-create-3-fresh-journal"])
def test_a_crash_right_after_the_kth_write_then_a_restart(run_factory, resource, k, fresh):
    r = run_factory(Faults(kill_after=(resource, k)), seed=k)
    r.start()
    names = _create_all(r)
    wait_for(lambda: r.proxy.killed.is_set() or None, 60, what=f"the {k}th write of {resource}")
    wait_for(lambda: r.daemons[-1].proc.poll() is not None or None, 20, what="kfold run killed")
    r.proxy.revive()
    r.start(fresh_journal=fresh)
    _life(r, names)
    r.finish()
