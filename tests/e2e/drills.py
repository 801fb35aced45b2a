"""Operator's-bad-day drills on the real control plane (issue 12), shared by the e2e tests and
``scripts/drill_kill9.py`` (which runs the burst drill over many seeds).

``burst_kill9``: N Sessions created at once, ``kfold run`` killed with SIGKILL at a moment drawn
from the seed, restarted on the same journal. Checked: every Session Ready, none Failed, exactly
one live pod per Session (its current generation's); after the Sessions are deleted, no pod,
Service, Ingress or Secret kfold made is left behind, and ``kfold replay --check`` of the journal
finds no divergence.
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Callable

from tests.e2e.conftest import wait_for

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
MANAGED = "app.kubernetes.io/managed-by=kfold"
WEB = {"name": "web", "ports": [{"port": 8080, "protocol": "TCP"}]}
ENV = [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}}]   # a Session with env gets its Secret


class Cluster:
    """Admin-side reads and writes of one namespace."""

    def __init__(self, admin: Any, ns: str):
        from kubernetes import client
        self.ns = ns
        self.co = client.CustomObjectsApi(admin)
        self.core = client.CoreV1Api(admin)
        self.net = client.NetworkingV1Api(admin)

    def create_session(self, name: str, apps: list[dict] | None = None, env: list[dict] | None = None) -> None:
        spec: dict[str, Any] = {"image": "registry.example/sandbox:1", "apps": apps if apps is not None else [WEB]}
        if env:
            spec["env"] = env
        self.co.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session", "metadata": {"name": name, "namespace": self.ns},
            "spec": spec})

    def sessions(self) -> list[dict]:
        return self.co.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)["items"]

    def phases(self) -> dict[str, str]:
        return {s["metadata"]["name"]: (s.get("status") or {}).get("phase", "") for s in self.sessions()}

    def delete_session(self, name: str) -> None:
        self.co.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

    def patch_spec(self, name: str, **spec: Any) -> None:
        self.co.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, {"spec": spec})

    def read_or_none(self, read: Callable[[str, str], Any], name: str) -> Any:
        """``read(name, namespace)`` (a client's ``read_namespaced_*``), or None on a 404."""
        from kubernetes.client.exceptions import ApiException
        try:
            return read(name, self.ns)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def pods(self) -> list[Any]:
        return self.core.list_namespaced_pod(self.ns).items

    def live_pods_by_session(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for p in self.pods():
            if p.metadata.deletion_timestamp is None:
                out.setdefault((p.metadata.labels or {}).get("kfold.dev/session", ""), []).append(p.metadata.name)
        return {k: sorted(v) for k, v in out.items()}

    def managed_leftovers(self) -> list[str]:
        found = [f"Pod/{o.metadata.name}" for o in self.core.list_namespaced_pod(self.ns, label_selector=MANAGED).items]
        found += [f"Service/{o.metadata.name}" for o in
                  self.core.list_namespaced_service(self.ns, label_selector=MANAGED).items]
        found += [f"Ingress/{o.metadata.name}" for o in
                  self.net.list_namespaced_ingress(self.ns, label_selector=MANAGED).items]
        found += [f"Secret/{o.metadata.name}" for o in
                  self.core.list_namespaced_secret(self.ns, label_selector=MANAGED).items]
        return sorted(found)


LATE_POD_LIST = {"KFOLD_TEST_LATE_LIST": "Pod:2"}


def keep_failed(keep: Any, seed: int, daemons: list[Any]) -> Any:
    """Copy each ``kfold run`` life's journal and log of a failed seed into ``keep/seed-N`` (a
    script's temporary directory goes with it) and return that directory."""
    import shutil
    where = keep / f"seed-{seed}"
    where.mkdir(parents=True, exist_ok=True)
    for i, d in enumerate(daemons):
        # a journal in WAL mode is its file, its -wal and its -shm together (a running kfold's
        # recent records are in the -wal alone)
        for f in (d.journal, Path(f"{d.journal}-wal"), Path(f"{d.journal}-shm"), d.log):
            if f.exists():
                shutil.copy(f, where / f"life{i}-{f.name}")
    return where


def drill_admin() -> tuple[dict[str, str], Any]:
    """For a drill script: the local control plane (started if need be, never built), an admin
    client on it, kfold's CRDs applied."""
    from kubernetes import client, config
    from kfold.daemon.manifests import crds
    from tests.e2e.conftest import apply
    from tests.e2e.controlplane import ensure_controlplane

    cp = ensure_controlplane(build=False)
    cfg = client.Configuration()
    config.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
    admin = client.ApiClient(cfg)
    apply(admin, crds())
    return cp, admin


def burst_kill9(cluster: Cluster, start_daemon: Callable[[dict[str, str]], Any], seed: int, sessions: int = 20,
                kill_window_s: float = 3.0, ready_timeout_s: float = 180.0,
                restart_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the drill once; raises AssertionError naming what broke. Returns measured figures.

    ``start_daemon(env)`` starts ``kfold run`` on the drill's journal with ``env`` added. The
    restart runs with ``restart_env`` (default ``LATE_POD_LIST``: the restarted daemon journals its
    pod lists 2 s after the apiserver answered them, so the creates that resume the interrupted
    bring-ups land before a list that cannot hold them: the race of issue 12 item 1, made likely
    rather than left to a loaded machine's timing)."""
    rng = random.Random(seed)
    names = [f"s{i:02d}" for i in range(sessions)]
    d = start_daemon({})
    t0 = time.monotonic()
    for n in names:
        cluster.create_session(n)
    kill_at = rng.uniform(0.0, kill_window_s)
    time.sleep(max(0.0, kill_at - (time.monotonic() - t0)))
    d.kill9()
    killed_after = time.monotonic() - t0
    d2 = start_daemon(LATE_POD_LIST if restart_env is None else restart_env)

    def all_ready() -> bool:
        phases = cluster.phases()
        failed = {n: p for n, p in phases.items() if p == "Failed"}
        assert not failed, f"seed {seed}: Sessions failed: {_failures(cluster, failed)}"
        return len(phases) == sessions and all(p == "Ready" for p in phases.values())

    wait_for(all_ready, timeout=ready_timeout_s, interval=0.5, what=f"seed {seed}: all {sessions} Sessions Ready")
    ready_after = time.monotonic() - t0
    by_session = cluster.live_pods_by_session()
    wrong = {n: by_session.get(n, []) for n in names if len(by_session.get(n, [])) != 1}
    assert not wrong, f"seed {seed}: Sessions without exactly one live pod: {wrong}"
    strays = sorted(set(by_session) - set(names))
    assert not strays, f"seed {seed}: pods of no Session: {strays}"

    for n in names:
        cluster.delete_session(n)
    wait_for(lambda: not cluster.sessions(), timeout=120, interval=0.5, what=f"seed {seed}: Sessions deleted")
    wait_for(lambda: not cluster.managed_leftovers(), timeout=60, interval=0.5,
             what=f"seed {seed}: nothing kfold made left behind")
    assert d2.stop() == 0
    from tests.e2e.test_kill9 import replay_check
    res = replay_check(d2.journal)
    assert res.returncode == 0 and "divergence" not in res.stdout + res.stderr, \
        f"seed {seed}: kfold replay --check: {res.stdout + res.stderr}"
    return {"seed": seed, "killed_after_s": round(killed_after, 2), "all_ready_after_s": round(ready_after, 2)}


def _failures(cluster: Cluster, failed: dict[str, str]) -> dict[str, str]:
    out = {}
    for s in cluster.sessions():
        if s["metadata"]["name"] in failed:
            conds = (s.get("status") or {}).get("conditions") or []
            out[s["metadata"]["name"]] = next((c.get("message", "") for c in conds if c.get("type") == "Ready"), "")
    return out
