"""The alert rules, checked and unit-tested by Prometheus' own promtool (built by
scripts/build_promtool.sh from the prometheus Go module; setup and CI build it), and the
PrometheusRule for the Operator carries exactly the same groups as the plain rule file. Every
alert's runbook_url is a section of docs/operations.md that exists, named after the alert."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.test_docs_links import _anchors

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus"
RUNBOOKS = "https://kfold.dev/docs/operations.md#"


def alerts() -> list[dict]:
    return [r for g in yaml.safe_load((RULES / "kfold-rules.yaml").read_text())["groups"] for r in g["rules"]]


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
    assert f"SUCCESS: {len(alerts())} rules found" in run("check", "rules", "kfold-rules.yaml")


def test_promtool_unit_tests_every_alert():
    tests = yaml.safe_load((RULES / "kfold-rules.test.yaml").read_text())["tests"]
    names = {r["alert"] for r in alerts()}
    tested = {t["alertname"] for case in tests for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert tested == names, f"every alert has a case where it fires: {sorted(names - tested)}"
    assert "SUCCESS" in run("test", "rules", "kfold-rules.test.yaml")


def test_the_prometheusrule_holds_the_same_groups_as_the_rule_file():
    crd = yaml.safe_load((RULES / "kfold-prometheusrule.yaml").read_text())
    plain = yaml.safe_load((RULES / "kfold-rules.yaml").read_text())
    assert crd["apiVersion"] == "monitoring.coreos.com/v1" and crd["kind"] == "PrometheusRule"
    assert crd["spec"] == plain


def test_every_alert_links_its_runbook_a_section_of_operations_md_named_after_it():
    sections = _anchors(ROOT / "docs" / "operations.md")
    for rule in alerts():
        url = rule["annotations"].get("runbook_url", "")
        assert url == RUNBOOKS + rule["alert"].lower(), f"{rule['alert']}: runbook_url {url!r}"
        assert rule["alert"].lower() in sections, f"docs/operations.md has no section ### {rule['alert']}"

