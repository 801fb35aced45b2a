"""``kfold run`` on the real apiserver, scraped as Prometheus would: the page parses with
prometheus_client's own parser, every family has HELP and TYPE, and the Session families agree
with what the apiserver says about the Sessions (their status.phase), not with kfold's own code."""
from __future__ import annotations

import json
import re
import time
import urllib.request
from collections import Counter
from pathlib import Path

import yaml
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, session_manifest

ROOT = Path(__file__).resolve().parents[2]


def scrape(daemon) -> tuple[str, dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.port}/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return text, {f.name: f for f in text_string_to_metric_families(text)}


def value(families: dict, name: str, sample: str | None = None, **labels: str) -> float | None:
    fam = families.get(name)
    for s in fam.samples if fam else ():
        if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def test_a_real_run_is_scraped_with_help_build_info_sessions_and_time_to_ready(admin, cp, namespace, daemon_factory,
                                                                                tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon = daemon_factory(str(kubeconfig), [namespace]).start()
    text, fams = scrape(daemon)

    for name, fam in fams.items():   # HELP and TYPE on every family, as the text says them
        assert fam.documentation, f"{name} has no HELP"
        exposed = name + "_total" if fam.type == "counter" else name
        assert re.search(rf"^# HELP {re.escape(exposed)} \S", text, re.M), f"no # HELP line for {exposed}"
        assert re.search(rf"^# TYPE {re.escape(exposed)} {fam.type}$", text, re.M), f"no # TYPE line for {exposed}"
    build = fams["kfold_build_info"].samples
    assert len(build) == 1 and build[0].value == 1 and build[0].labels["python"].startswith("3.")
    assert value(fams, "process_resident_memory_bytes") > 0 and "python_info" in fams
    assert value(fams, "kfold_ready") == 1
    assert value(fams, "kfold_journal_filesystem_size_bytes") >= value(fams, "kfold_journal_filesystem_avail_bytes") > 0
    assert all(s.value == 1 for s in fams["kfold_watch_synced"].samples)
    assert all(0 <= s.value < 120 for s in fams["kfold_watch_last_progress_age_seconds"].samples)
    assert sum(s.value for s in fams["kfold_sessions"].samples) == 0
    assert value(fams, "kfold_session_time_to_ready_seconds", "kfold_session_time_to_ready_seconds_count") in (None, 0)

    co = client.CustomObjectsApi(admin)
    took = []
    for i, name in enumerate(("demo", "demo-two")):
        body = session_manifest(namespace, [WEB])
        body["metadata"]["name"] = name
        t0 = time.monotonic()
        co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        wait_for(lambda: co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
                 .get("status", {}).get("phase") == "Ready", 45, what=f"Session {name} Ready")
        took.append(time.monotonic() - t0)
        _, fams = scrape(daemon)
        count = value(fams, "kfold_session_time_to_ready_seconds", "kfold_session_time_to_ready_seconds_count")
        assert count == i + 1, f"one more bring-up observed after {name} became Ready"

    # at rest: every effect answered (the status echo and endpoints settle after Ready)
    wait_for(lambda: value(scrape(daemon)[1], "kfold_effects_in_flight") == 0, 20, what="no effect in flight")
    _, fams = scrape(daemon)
    phases = Counter(s.get("status", {}).get("phase", "") for s in
                     co.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"])
    by_phase = {s.labels["phase"]: s.value for s in fams["kfold_sessions"].samples}
    assert {p: n for p, n in by_phase.items() if n} == dict(phases) == {"Ready": 2}
    assert set(by_phase) >= {"Pending", "Creating", "Provisioning", "Ready", "Failed"}, "every phase, 0 included"
    total = value(fams, "kfold_session_time_to_ready_seconds", "kfold_session_time_to_ready_seconds_sum")
    assert 0 < total <= sum(took) + 2, (total, took)   # server clock (1 s resolution) vs the test's own
    assert value(fams, "kfold_effects_waiting") == 0
    assert not fams["kfold_session_failures"].samples


def test_every_metric_the_dashboard_and_the_alerts_name_is_exposed(admin, cp, namespace, daemon_factory, tmp_path):
    """A dashboard panel or an alert on a name kfold does not expose would stay silent forever."""
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    text, _ = scrape(daemon_factory(str(kubeconfig), [namespace]).start())
    exposed = set(re.findall(r"^# TYPE (\S+)", text, re.M))
    histograms = set(re.findall(r"^# TYPE (\S+) histogram", text, re.M))
    exposed |= {h + s for h in histograms for s in ("_bucket", "_sum", "_count")}
    exposed |= {"kfold_leader"}   # only with leader election (tests/e2e/test_leader.py scrapes it)
    dashboard = json.loads((ROOT / "deploy/grafana/kfold.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    rules = yaml.safe_load((ROOT / "deploy/prometheus/kfold-rules.yaml").read_text())
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    named = {m for e in exprs for m in re.findall(r"\b((?:kfold|process)_[a-z_]+)", e)}
    assert named and named <= exposed, sorted(named - exposed)
