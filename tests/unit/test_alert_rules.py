"""The alert rules, checked and unit-tested by Prometheus' own promtool (built by
scripts/build_promtool.sh from the prometheus Go module; setup and CI build it), and the
PrometheusRule for the Operator carries exactly the same groups as the plain rule file."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus"


def promtool() -> str:
    cache = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache/kfold")) / "bin/promtool"
    found = str(cache) if cache.is_file() else shutil.which("promtool")
    if found is None:
        pytest.skip(f"promtool is not built: run `bash scripts/build_promtool.sh` (needs Go; it installs {cache})")
    return found


def run(*args: str) -> str:
    out = subprocess.run([promtool(), *args], cwd=RULES, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_promtool_checks_the_rule_file():
    assert "SUCCESS: 7 rules found" in run("check", "rules", "kfold-rules.yaml")


def test_promtool_unit_tests_every_alert():
    tests = yaml.safe_load((RULES / "kfold-rules.test.yaml").read_text())["tests"]
    alerts = {r["alert"] for g in yaml.safe_load((RULES / "kfold-rules.yaml").read_text())["groups"] for r in g["rules"]}
    tested = {t["alertname"] for case in tests for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert tested == alerts, f"every alert has a case where it fires: {sorted(alerts - tested)}"
    assert "SUCCESS" in run("test", "rules", "kfold-rules.test.yaml")


def test_the_prometheusrule_holds_the_same_groups_as_the_rule_file():
    crd = yaml.safe_load((RULES / "kfold-prometheusrule.yaml").read_text())
    plain = yaml.safe_load((RULES / "kfold-rules.yaml").read_text())
    assert crd["apiVersion"] == "monitoring.coreos.com/v1" and crd["kind"] == "PrometheusRule"
    assert crd["spec"] == plain
