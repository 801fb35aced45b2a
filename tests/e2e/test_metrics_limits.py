"""``kfold run`` on the real apiserver: the config's client pacing reaches the home client at boot,
and /metrics shows the latency inside kfold and what its client sent, for one Session's bring-up."""
from __future__ import annotations

import re
import urllib.request

from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, session_manifest


def metrics(daemon) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.port}/metrics", timeout=5) as r:
        return r.read().decode()


def sample(text: str, name: str, labels: str = "") -> float | None:
    """The value of sample ``name`` whose labels are exactly ``labels`` (``{k="v",...}``, any order)."""
    want = dict(re.findall(r'(\w+)="([^"]*)"', labels))
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and s.labels == want:
                return s.value
    return None


def test_configured_pacing_and_latency_histograms_on_metrics(admin, cp, namespace, daemon_factory, tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon = daemon_factory(str(kubeconfig), [namespace], extra={
        "cluster": {"name": "local", "kubeconfig": str(kubeconfig), "qps": 20, "burst": 7}}).start()
    text = metrics(daemon)
    assert sample(text, "kfold_client_qps", '{cluster="local"}') == 20
    assert sample(text, "kfold_client_burst", '{cluster="local"}') == 7
    assert sample(text, "kfold_client_limiter_wait_seconds_total", '{cluster="local"}') is not None

    co = client.CustomObjectsApi(admin)
    co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    wait_for(lambda: co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")
             .get("status", {}).get("phase") == "Ready", 45, what="Session demo Ready")

    text = metrics(daemon)
    assert sample(text, 'kfold_client_requests_total', '{cluster="local",verb="create",resource="pods",code="201"}') == 1
    assert sample(text, 'kfold_client_requests_total', '{cluster="local",verb="watch",resource="pods",code="200"}') >= 1
    issued = sample(text, "kfold_event_to_effect_issued_seconds_count", '{held="false"}')
    assert issued is not None and issued >= 3, "finalizer, pod create, Service, status... each issued after an event"
    assert sample(text, "kfold_event_to_effect_issued_seconds_bucket", '{held="false",le="+Inf"}') == issued
    assert sample(text, "kfold_fold_to_effect_issued_seconds_count", '{held="false"}') == issued
    assert sample(text, "kfold_effect_round_trip_seconds_count", '{type="create"}') >= 1
    assert sample(text, "kfold_event_to_fold_seconds_count") > 0
