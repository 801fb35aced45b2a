"""A Session's whole life on a real apiserver, with ``kfold run`` as its least-privilege
ServiceAccount: create -> Ready (pod, Service, Ingress), suspend, resume (new generation, old pod
gone), set-apps (new generation), stop (everything kfold created is deleted), stop again."""
from __future__ import annotations

import sqlite3

import pytest
from kubernetes import client

from tests.e2e.conftest import install_rbac, service_account_kubeconfig, wait_for

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"


def session_manifest(ns: str, apps: list[dict]) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Session",
            "metadata": {"name": "demo", "namespace": ns},
            "spec": {"image": "registry.example/sandbox:1", "apps": apps}}


WEB = {"name": "web", "ports": [{"port": 8080, "protocol": "TCP"}]}
API = {"name": "api", "ports": [{"port": 9090, "protocol": "TCP"}]}


@pytest.fixture
def sa_daemon(admin, cp, namespace, daemon_factory, tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    return daemon_factory(str(kubeconfig), [namespace]).start()


class World:
    def __init__(self, admin, ns):
        self.ns = ns
        self.co = client.CustomObjectsApi(admin)
        self.core = client.CoreV1Api(admin)
        self.net = client.NetworkingV1Api(admin)

    def status(self) -> dict:
        return self.co.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "demo").get("status", {})

    def phase_is(self, phase: str, generation: int | None = None):
        def check():
            st = self.status()
            ok = st.get("phase") == phase and (generation is None or st.get("generation") == generation)
            return st if ok else None
        return wait_for(check, 45, what=f"phase {phase} generation {generation}")

    def patch_spec(self, **spec) -> None:
        self.co.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "demo", {"spec": spec})

    def pods(self) -> list[str]:
        return sorted(p.metadata.name for p in self.core.list_namespaced_pod(self.ns).items
                      if p.metadata.deletion_timestamp is None)

    def all_pods(self) -> list[str]:
        return sorted(p.metadata.name for p in self.core.list_namespaced_pod(self.ns).items)

    def managed(self, lister) -> list[str]:
        return sorted(o.metadata.name for o in lister(self.ns, label_selector="app.kubernetes.io/managed-by=kfold").items)


def test_a_session_lives_and_ends_on_a_real_apiserver(admin, namespace, sa_daemon):
    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))

    st = w.phase_is("Ready", 1)
    assert st["podName"] == "demo-g1"
    assert w.pods() == ["demo-g1"]
    pod = w.core.read_namespaced_pod("demo-g1", namespace)
    assert pod.metadata.labels["kfold.dev/session"] == "demo"
    assert pod.metadata.labels["kfold.dev/generation"] == "1"
    svc = w.core.read_namespaced_service("demo", namespace)
    assert [p.port for p in svc.spec.ports] == [8080]
    assert svc.metadata.owner_references[0].uid == pod.metadata.uid
    ing = w.net.read_namespaced_ingress("demo", namespace)
    assert [r.host for r in ing.spec.rules] == ["8080-demo.sessions.test"]

    w.patch_spec(suspended=True)
    w.phase_is("Suspended")
    wait_for(lambda: w.all_pods() == [], 30, what="pod demo-g1 deleted on suspend")

    w.patch_spec(suspended=False)
    st = w.phase_is("Ready", 2)
    assert st["podName"] == "demo-g2" and w.pods() == ["demo-g2"]

    w.patch_spec(apps=[WEB, API])
    st = w.phase_is("Ready", 3)
    assert st["podName"] == "demo-g3"
    wait_for(lambda: w.all_pods() == ["demo-g3"], 30, what="only demo-g3 left after set-apps")
    wait_for(lambda: sorted(p.port for p in w.core.read_namespaced_service("demo", namespace).spec.ports) == [8080, 9090],
             30, what="Service routes both apps' ports")

    w.patch_spec(stopped=True)
    w.phase_is("Stopped")
    wait_for(lambda: w.all_pods() == [], 30, what="pods deleted on stop")
    wait_for(lambda: w.managed(w.core.list_namespaced_service) == [], 30, what="Service deleted on stop")
    wait_for(lambda: w.managed(w.net.list_namespaced_ingress) == [], 30, what="Ingress deleted on stop")
    wait_for(lambda: w.managed(w.core.list_namespaced_secret) == [], 30, what="Secret deleted on stop")

    before = w.status()
    w.patch_spec(stopped=True)  # a repeated stop changes nothing
    assert w.phase_is("Stopped")["generation"] == before["generation"]
    assert w.all_pods() == []


def test_an_invalid_session_fails_with_the_field_named_and_no_pod(admin, namespace, sa_daemon):
    """What admission cannot judge (a cluster the registry does not hold: config-dependent, kept by
    kfold; the CRD refuses quantities and duplicate names itself, tests/e2e/test_session_rules.py)
    kfold fails, naming the field."""
    w = World(admin, namespace)
    bad = session_manifest(namespace, [WEB])
    bad["spec"]["cluster"] = "mars"
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, bad)
    st = w.phase_is("Failed")
    text = " ".join(c.get("message", "") for c in st.get("conditions", []))
    assert "spec.cluster" in text and "'mars'" in text
    assert w.all_pods() == []


def test_deleting_the_session_tears_everything_down_first(admin, namespace, sa_daemon):
    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    w.phase_is("Ready", 1)
    w.co.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")

    def gone():
        items = w.co.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
        return not items and w.all_pods() == []
    wait_for(gone, 45, what="Session finalized after its pod was deleted")
    # The Service and Ingress name the pod as their owner: the garbage collector takes them with it.
    wait_for(lambda: w.managed(w.core.list_namespaced_service) == [], 30, what="Service collected with its pod")
    wait_for(lambda: w.managed(w.net.list_namespaced_ingress) == [], 30, what="Ingress collected with its pod")
    assert w.managed(w.core.list_namespaced_secret) == []


def _get(daemon, path):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{daemon.port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_health_readiness_and_metrics_describe_the_running_daemon(admin, namespace, sa_daemon):
    w = World(admin, namespace)
    assert _get(sa_daemon, "/healthz") == (200, "ok\n")
    assert _get(sa_daemon, "/readyz") == (200, "ready\n")
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    w.phase_is("Ready", 1)
    status, text = _get(sa_daemon, "/metrics")
    assert status == 200

    from prometheus_client.parser import text_string_to_metric_families
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def value(name, **labels):
        """The sample ``name`` with exactly these labels (in any order, as the exposition allows)."""
        found = [s.value for s in samples if s.name == name and s.labels == labels]
        assert found, f"{name}{labels or ''} missing from /metrics"
        return found[0]
    assert value("kfold_effects_total", type="create", result="ok") >= 2      # Secret and pod
    assert value("kfold_records_ingested_total", rec="observed") >= 1
    assert value("kfold_fold_seconds_count") >= value("kfold_records_ingested_total", rec="observed")
    assert value("kfold_journal_bytes") > 0
    assert abs(value("kfold_server_clock_skew_seconds")) < 5  # same machine: Date vs local clock


def test_without_a_base_domain_a_session_is_ready_on_its_service_alone(admin, cp, namespace, daemon_factory, tmp_path):
    """``base_domain`` left out of kfold's config: cluster-internal sessions. Ready with a Service
    and its cluster DNS name in the status; no Ingress is ever made in the namespace."""
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon = daemon_factory(str(kubeconfig), [namespace], extra={"base_domain": None}).start()
    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    st = w.phase_is("Ready", 1)
    assert st["endpoints"] == [{"app": "web", "port": 8080, "host": f"demo.{namespace}.svc",
                                "url": f"tcp://demo.{namespace}.svc:8080"}]
    assert [p.port for p in w.core.read_namespaced_service("demo", namespace).spec.ports] == [8080]
    assert w.net.list_namespaced_ingress(namespace).items == []
    # What the apiserver keeps (managedFields) kfold does not journal: observed nor reply objects.
    assert w.core.read_namespaced_pod("demo-g1", namespace).metadata.managed_fields
    with sqlite3.connect(f"file:{daemon.journal}?mode=ro", uri=True) as db:
        kinds = dict(db.execute("SELECT kind, count(*) FROM journal GROUP BY kind").fetchall())
        (kept,) = db.execute("SELECT count(*) FROM journal WHERE instr(payload, 'managedFields') > 0").fetchone()
    assert kinds.get("observed") and kinds.get("outcome") and kept == 0


def test_a_new_generation_pod_is_created_only_after_the_old_one_is_gone(admin, namespace, sa_daemon):
    """Seed 002 (setApps, resume): the old pod is torn down before the next generation is brought
    up, so one Session never has two pods at once. The oracle is the apiserver's own pod watch,
    read by the test from before the change: generation 2's ADDED follows generation 1's DELETED."""
    import threading

    from kubernetes import watch

    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    w.phase_is("Ready", 1)
    rv = w.core.list_namespaced_pod(namespace).metadata.resource_version
    events: list[tuple[str, str]] = []
    watcher = watch.Watch()

    def follow():
        for ev in watcher.stream(w.core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=60,
                                 _request_timeout=70):
            events.append((ev["type"], ev["object"].metadata.name))
            if ev["type"] == "ADDED" and ev["object"].metadata.name == "demo-g2":
                return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    w.patch_spec(apps=[WEB, API])
    w.phase_is("Ready", 2)
    reader.join(30)
    watcher.stop()
    assert ("ADDED", "demo-g2") in events, events
    assert ("DELETED", "demo-g1") in events, events
    assert events.index(("DELETED", "demo-g1")) < events.index(("ADDED", "demo-g2")), events


def test_a_finalizer_removed_with_kubectl_is_added_back_and_deleting_still_tears_down(admin, cp, namespace, sa_daemon):
    """A user (or a script) strips kfold's finalizer with ``kubectl patch --type=json``: kfold, like
    every controller that owns a finalizer, puts it back on the live Session, so a later delete
    still waits for the teardown."""
    import os
    import subprocess
    from pathlib import Path
    kubectl = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin" / "kubectl"
    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    w.phase_is("Ready", 1)

    def finalizers():
        return w.co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")["metadata"].get("finalizers")
    assert finalizers() == ["kfold.dev/teardown"]
    r = subprocess.run([str(kubectl), "--kubeconfig", cp["kubeconfig"], "-n", namespace, "patch", "session", "demo",
                        "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers/0"}]'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(lambda: finalizers() == ["kfold.dev/teardown"] or None, 30, what="the finalizer added back")
    assert w.status()["phase"] == "Ready" and w.pods() == ["demo-g1"], "nothing else moved"
    w.co.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")
    wait_for(lambda: (not w.co.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
                      and w.all_pods() == []) or None, 45, what="Session finalized after its pod was deleted")
