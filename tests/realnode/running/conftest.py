"""``kfold run`` as a host process on the real node's control plane (the admin kubeconfig; the
install's own pod is tests/realnode/test_install.py), watching one namespace, with a short start
deadline so a pod that never starts fails within the set's budget."""
from __future__ import annotations

import json
import time

import pytest

from tests.e2e.conftest import Daemon
from tests.realnode.conftest import REPO
from tests.realnode.test_node import kubectl, namespace

START_SECONDS = 25


@pytest.fixture(scope="package")
def kfold(node, tmp_path_factory):
    """{'ns': the watched namespace, 'node': the node fixture, 'daemon': the Daemon}."""
    for crd in sorted((REPO / "kfold" / "data" / "crds").glob("*.yaml")):
        kubectl(node, "apply", "--server-side", "--force-conflicts", "-f", str(crd))
    kubectl(node, "wait", "--for=condition=Established", "crd/sessions.kfold.dev", "--timeout=30s")
    ns = namespace(node, "rn-running")
    daemon = Daemon(tmp_path_factory.mktemp("kfold"), node["env"]["KUBECONFIG"], [ns],
                    {"deadlines": {"start_seconds": START_SECONDS, "ready_seconds": 60}})
    daemon.start(env={"KUBECONFIG": node["env"]["KUBECONFIG"]})
    yield {"ns": ns, "node": node, "daemon": daemon}
    daemon.stop()


def session(kfold, name: str, spec: dict) -> None:
    doc = {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": {"name": name, "namespace": kfold["ns"]},
           "spec": {"image": kfold["node"]["KFOLD_NODE_TESTAPP_IMAGE"], **spec}}
    kubectl(kfold["node"], "apply", "-f", "-", stdin=json.dumps(doc))


def get(kfold, kind: str, name: str) -> dict:
    out = kubectl(kfold["node"], "get", kind, name, "-n", kfold["ns"], "-o", "json", check=False)
    return json.loads(out) if out else {}


def ready(obj: dict) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == "Ready"), {})


def until(what: str, fn, timeout: float = 60, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def events(kfold, name: str) -> list[dict]:
    """events.k8s.io Events kfold posted about Session ``name``, oldest first."""
    out = json.loads(kubectl(kfold["node"], "get", "events.events.k8s.io", "-n", kfold["ns"], "-o", "json"))
    return sorted((e for e in out["items"] if (e.get("regarding") or {}).get("kind") == "Session"
                   and e["regarding"]["name"] == name), key=lambda e: e.get("eventTime") or "")
