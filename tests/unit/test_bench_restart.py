"""scripts/bench_restart.py's kopf comparison: the apiserver counts the peer's requests by verb and
resource through FlowSchemas (API Priority and Fairness), and the N=300 command line still works."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_restart.py"
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _load():
    spec = importlib.util.spec_from_file_location("bench_restart", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _matches(rule: dict, verb: str, resource: str) -> bool:
    """APF's resourceRule match for a namespaced request: verb and resource (``name/subresource``
    for a subresource) listed or ``*``."""
    return ((verb in rule["verbs"] or "*" in rule["verbs"]) and (resource in rule["resources"] or "*" in rule["resources"])
            and "*" in rule["namespaces"])


def test_every_verb_and_resource_of_the_peer_lands_in_exactly_one_flow_schema_named_after_it():
    mod = _load()
    docs, names = mod.verb_flow_schemas("kopf")
    for doc in docs:
        name = doc["metadata"]["name"]
        assert len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name), name
        spec = doc["spec"]
        assert spec["matchingPrecedence"] < 200   # before bench_peer's per-identity FlowSchema
        assert [s["serviceAccount"] for r in spec["rules"] for s in r["subjects"]] == [{"name": "kopf", "namespace": "kfold-bench"}]
    assert len({d["metadata"]["name"] for d in docs}) == len(docs)
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
        for resource in ("sessions", "sessions/status", "pods", "services", "events"):
            hit = [d["metadata"]["name"] for d in docs
                   if any(_matches(rr, verb, resource) for r in d["spec"]["rules"] for rr in r["resourceRules"])]
            assert len(hit) == 1, (verb, resource, hit)
            assert names[hit[0]] == f"{verb} {resource}"
    assert names["kfold-bench-kopf"] == "other"


def test_dispatched_counts_become_verb_resource_counts_and_other_schemas_are_ignored():
    mod = _load()
    _, names = mod.verb_flow_schemas("kopf")
    dispatched = {"kfold-bench-kopf-patch-sessions.status": 3.0, "kfold-bench-kopf-create-pods": 2.0,
                  "kfold-bench-kopf": 5.0, "kfold-bench-kfold": 7.0, "global-default": 11.0,
                  "kfold-bench-kopf-get-pods": 0.0}
    assert mod.by_verb(dispatched, names) == {"patch sessions/status": 3.0, "create pods": 2.0, "other": 5.0}
    assert mod.writes_of(mod.by_verb(dispatched, names)) == 5.0


def test_the_peers_are_an_option_and_off_by_default():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=True).stdout
    assert "--peers" in out and "kopf-async" in out
    mod = _load()
    assert mod.PEERS == ("kopf-async",)
