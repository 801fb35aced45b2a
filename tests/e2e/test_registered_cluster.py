"""Sessions on a registered cluster, per tenant, on the real apiserver.

The control plane is registered a second time, as cluster "edge" of tenant "acme", bounded to one
namespace, through ``kfold cluster register`` (the probe lists pods in the bound with the
credential). ``kfold run`` maps Session namespaces to tenants: acme's Session naming "edge" gets its
pod in the bound namespace through the registry's client; another tenant's Session naming "edge" is
refused exactly like a cluster that does not exist."""
from __future__ import annotations

import subprocess
import sys

from kubernetes import client

from engine.repo_names import rfc3339
from tests.e2e.conftest import REPO, wait_for
from tests.e2e.driver import server_date_ms

GVP = ("kfold.dev", "v1alpha1")


def register(registry_dir, cp, tenant, name, bound):
    proc = subprocess.run([sys.executable, "-m", "kfold", "cluster", "register", name, "--tenant", tenant,
                           "--kubeconfig", cp["kubeconfig"], "--namespace-bound", bound,
                           "--registry-dir", str(registry_dir)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def session(ns, cluster):
    return {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": {"name": "demo", "namespace": ns},
            "spec": {"image": "registry.example/sandbox:1", "cluster": cluster,
                     "apps": [{"name": "web", "ports": [{"port": 8080}]}]}}


def status(co, ns):
    return co.get_namespaced_custom_object(*GVP, ns, "sessions", "demo").get("status", {})


def test_a_tenants_session_runs_on_its_registered_cluster_and_another_org_cannot_see_it(
        admin, cp, crds, namespaces, daemon_factory, tmp_path):
    core, co = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    acme_ns, other_ns, bound = (namespaces(p) for p in ("acme", "other", "edge-sb"))
    registry_dir = tmp_path / "registry"
    register(registry_dir, cp, "acme", "edge", bound)

    daemon = daemon_factory(cp["kubeconfig"], [acme_ns, other_ns], extra={
        "registry": {"dir": str(registry_dir)}, "tenants": {acme_ns: "acme", other_ns: "other"}}).start()

    co.create_namespaced_custom_object(*GVP, acme_ns, "sessions", session(acme_ns, "edge"))
    co.create_namespaced_custom_object(*GVP, other_ns, "sessions", session(other_ns, "edge"))

    st = wait_for(lambda: (s := status(co, acme_ns)).get("phase") == "Ready" and s, 45, what="acme session Ready on edge")
    assert st["podName"] == "demo-g1"
    pods = core.list_namespaced_pod(bound, label_selector="kfold.dev/session=demo").items
    assert [p.metadata.name for p in pods] == ["demo-g1"]
    assert core.list_namespaced_pod(acme_ns).items == []

    refused = wait_for(lambda: (s := status(co, other_ns)).get("phase") == "Failed" and s, 30, what="the other tenant refused")
    messages = " ".join(c.get("message", "") for c in refused.get("conditions", []))
    assert "no cluster named 'edge' is registered for this tenant" in messages
    assert core.list_namespaced_pod(other_ns).items == []

    co.patch_namespaced_custom_object(*GVP, acme_ns, "sessions", "demo", {"spec": {"stopped": True}})
    wait_for(lambda: status(co, acme_ns).get("phase") == "Stopped", 45, what="acme session Stopped")
    wait_for(lambda: core.list_namespaced_pod(bound, label_selector="kfold.dev/session=demo").items == [], 30,
             what="pod deleted on the registered cluster")
    assert daemon.stop() == 0


def deregister(registry_dir, tenant, name):
    proc = subprocess.run([sys.executable, "-m", "kfold", "cluster", "deregister", name, "--tenant", tenant,
                           "--registry-dir", str(registry_dir)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def metric(daemon, name):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.port}/metrics", timeout=2) as r:
        return [line for line in r.read().decode().splitlines() if line.startswith(name)]


def test_a_cluster_registered_while_kfold_runs_is_used_without_a_restart(
        admin, cp, crds, namespaces, daemon_factory, tmp_path):
    """kfold starts with no registration; ``kfold cluster register`` while it runs: the next Session
    naming the cluster runs there, watched from a fresh list; a deregistration stops that watch.
    Both changes are journaled as session.configure, and the journal replays with --check."""
    core, co = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    acme_ns, bound = (namespaces(p) for p in ("acme", "edge-sb"))
    registry_dir = tmp_path / "registry"
    daemon = daemon_factory(cp["kubeconfig"], [acme_ns], extra={
        "registry": {"dir": str(registry_dir), "rescan_seconds": 1}, "tenants": {acme_ns: "acme"}}).start()
    early = session(acme_ns, "edge") | {"metadata": {"name": "early", "namespace": acme_ns}}
    co.create_namespaced_custom_object(*GVP, acme_ns, "sessions", early)
    refused = wait_for(lambda: (s := co.get_namespaced_custom_object(*GVP, acme_ns, "sessions", "early")
                                .get("status", {})).get("phase") == "Failed" and s, 30, what="refused before registering")
    assert "no cluster named 'edge' is registered for this tenant" in " ".join(
        c.get("message", "") for c in refused.get("conditions", []))

    register(registry_dir, cp, "acme", "edge", bound)
    wait_for(lambda: any('cluster="edge@acme"' in line and float(line.rsplit(" ", 1)[1]) == 1
                         for line in metric(daemon, "kfold_watch_synced")), 20,
             what="a watch of kfold's pods on edge@acme, listed")
    co.create_namespaced_custom_object(*GVP, acme_ns, "sessions", session(acme_ns, "edge"))
    st = wait_for(lambda: (s := status(co, acme_ns)).get("phase") == "Ready" and s, 45, what="session Ready on edge")
    assert st["podName"] == "demo-g1"
    assert [p.metadata.name for p in core.list_namespaced_pod(bound, label_selector="kfold.dev/session=demo").items] == ["demo-g1"]

    co.delete_namespaced_custom_object(*GVP, acme_ns, "sessions", "demo")
    wait_for(lambda: core.list_namespaced_pod(bound, label_selector="kfold.dev/session=demo").items == [], 30,
             what="pod deleted on the registered cluster")
    deregister(registry_dir, "acme", "edge")
    wait_for(lambda: not any('cluster="edge@acme"' in line for line in metric(daemon, "kfold_watch_synced")), 20,
             what="the watch on edge@acme stopped")
    assert daemon.stop() == 0

    from tests.e2e.driver import replay_check
    journal_text = subprocess.run([sys.executable, "-m", "kfold", "export", str(daemon.journal)], cwd=REPO,
                                  capture_output=True, text=True, check=True).stdout
    configures = [line for line in journal_text.splitlines() if '"session.configure"' in line]
    assert len(configures) == 3, "boot, registered, deregistered"
    assert '"edge@acme"' in configures[1] and '"edge@acme"' not in configures[2]
    assert "every journaled effect matches" in replay_check(daemon.journal)


def repo(ns, name, last_attached):
    return {"apiVersion": "kfold.dev/v1alpha1", "kind": "Repo",
            "metadata": {"name": name, "namespace": ns, "annotations": {"kfold.dev/last-attached": last_attached}},
            "spec": {"url": f"https://github.com/org/{name}"}}


def test_repos_on_a_registered_cluster_are_evicted_on_its_server_clock(admin, cp, crds, namespaces, daemon_factory,
                                                                        tmp_path):
    """Issue 33 item 6: ``repo.gc`` runs in a registered cluster's namespaces too (its first run is
    ``repos.gc_interval_seconds`` after start, 60 s at least). An unbound Repo last attached long
    before the TTL on that cluster's clock goes; one attached just now stays."""
    co = client.CustomObjectsApi(admin)
    acme_ns, bound = (namespaces(p) for p in ("acme", "edge-sb"))
    registry_dir = tmp_path / "registry"
    register(registry_dir, cp, "acme", "edge", bound)
    co.create_namespaced_custom_object(*GVP, bound, "repos", repo(bound, "stale", "2000-01-01T00:00:00Z"))
    co.create_namespaced_custom_object(*GVP, bound, "repos", repo(bound, "fresh", rfc3339(server_date_ms(cp))))
    daemon = daemon_factory(cp["kubeconfig"], [acme_ns], extra={
        "registry": {"dir": str(registry_dir)}, "tenants": {acme_ns: "acme"},
        "repos": {"gc_interval_seconds": 60}}).start()

    def names():
        return sorted(r["metadata"]["name"] for r in co.list_namespaced_custom_object(*GVP, bound, "repos")["items"])
    wait_for(lambda: names() == ["fresh"], 100, interval=1, what="the stale Repo on edge evicted, the fresh one kept")
    assert daemon.stop() == 0


def counter(daemon, cluster, verb="", resource=""):
    """The sum of ``kfold_client_requests_total`` for ``cluster`` (and ``verb``/``resource`` if given)."""
    want = [f'cluster="{cluster}"'] + ([f'verb="{verb}"'] if verb else []) + ([f'resource="{resource}"'] if resource else [])
    return sum(float(line.rsplit(" ", 1)[1]) for line in metric(daemon, "kfold_client_requests_total")
               if all(w in line for w in want))


def test_with_secret_credentials_requests_to_a_registered_cluster_do_not_each_read_the_secret(
        admin, cp, crds, namespaces, daemon_factory, tmp_path):
    """Issue 33 item 7, through ``kfold run``: the kubeconfig of ``edge`` is a Secret in kfold's
    namespace (``registry.credentials: secrets``). A Session brought up and stopped on edge sends
    many requests there; the Secret is read once (``registry.credential_refresh_seconds``: 60 s),
    through the home client, as /metrics counts it."""
    import base64
    core, co = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    acme_ns, bound, creds_ns = (namespaces(p) for p in ("acme", "edge-sb", "kfold-creds"))
    registry_dir = tmp_path / "registry"
    register(registry_dir, cp, "acme", "edge", bound)   # the record; the credential kfold reads is the Secret
    kubeconfig = open(cp["kubeconfig"]).read()
    core.create_namespaced_secret(creds_ns, {"metadata": {"name": "kfold-cluster.acme.edge"},
                                             "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}})
    daemon = daemon_factory(cp["kubeconfig"], [acme_ns], extra={
        "registry": {"dir": str(registry_dir), "credentials": "secrets", "secrets_namespace": creds_ns},
        "tenants": {acme_ns: "acme"}}).start()
    co.create_namespaced_custom_object(*GVP, acme_ns, "sessions", session(acme_ns, "edge"))
    wait_for(lambda: status(co, acme_ns).get("phase") == "Ready", 45, what="session Ready on edge")
    co.patch_namespaced_custom_object(*GVP, acme_ns, "sessions", "demo", {"spec": {"stopped": True}})
    wait_for(lambda: status(co, acme_ns).get("phase") == "Stopped", 45, what="session Stopped")
    sent, reads = counter(daemon, "acme/edge"), counter(daemon, "local", "get", "secrets")
    assert sent >= 5, f"requests to edge: {sent}"
    assert 1 <= reads <= 2, f"{reads} Secret GETs for {sent} requests to edge"
    assert daemon.stop() == 0
