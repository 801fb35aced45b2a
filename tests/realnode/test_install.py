"""kfold in its own pod on the real node: deploy/install.yaml as released (only the journal's volume,
a `local` PersistentVolume, is added here), a Session applied with kubectl whose apps answer through
its Service ClusterIP, and a deleted kfold pod whose successor resumes on the same journal."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.realnode.conftest import REPO
from tests.realnode.test_node import apply, in_node, kubectl


def _get(node, url: str, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while True:
        got = in_node(node, "curl", "-sS", "-m", "2", url)
        if got.returncode == 0 or time.monotonic() > deadline:
            return got.stdout
        time.sleep(0.5)


@pytest.fixture(scope="module")
def kfold(node):
    cache = Path(node["env"].get("KFOLD_CACHE", Path.home() / ".cache/kfold"))
    if not (cache / "image" / "kfold.oci.tar").exists():
        pytest.fail(f"kfold's image is not built in {cache / 'image'}: run bash scripts/build_image.sh "
                    "before the real-node set (scripts/test.sh does)")
    journal = cache / "node-pv"
    journal.mkdir(exist_ok=True)
    for p in journal.iterdir():
        p.unlink()
    import os
    os.chown(journal, 65532, 65532)
    apply(node, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "kfold-journal"},
                 "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                          "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                          "local": {"path": str(journal)},
                          "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                              {"key": "kubernetes.io/hostname", "operator": "In",
                               "values": [node["KFOLD_NODE_NAME"]]}]}]}}}})
    kubectl(node, "apply", "-f", str(REPO / "deploy" / "install.yaml"))
    kubectl(node, "rollout", "status", "-n", "kfold", "deployment/kfold", "--timeout=120s")
    return node


def _pods(node, ns: str) -> dict[str, str]:
    items = json.loads(kubectl(node, "get", "pods", "-n", ns, "-o", "json"))["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items}


def test_a_session_applied_with_kubectl_answers_and_survives_kfolds_pod_deletion(kfold):
    node = kfold
    ns = "kfold-sessions"
    kubectl(node, "get", "ns", ns)
    apply(node, {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session",
                 "metadata": {"name": "demo", "namespace": ns},
                 "spec": {"image": node["KFOLD_NODE_TESTAPP_IMAGE"],
                          "apps": [{"name": "web", "ports": [{"port": 8080}]},
                                   {"name": "api", "ports": [{"port": 9090}]}]}})
    kubectl(node, "wait", "-n", ns, "--for=condition=Ready", "session/demo", "--timeout=120s")
    ip = kubectl(node, "get", "svc", "demo", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
    # each app of one image listens on its own declared port, by the identity kfold gave it
    assert _get(node, f"http://{ip}:8080/") == "app-web 8080\n"
    assert _get(node, f"http://{ip}:9090/") == "app-api 9090\n"
    assert "app-api listening on 9090" in kubectl(node, "logs", "-n", ns, "demo-g1", "-c", "app-api")
    before = _pods(node, ns)
    (old,) = _pods(node, "kfold")
    kubectl(node, "delete", "pod", "-n", "kfold", old)
    kubectl(node, "rollout", "status", "-n", "kfold", "deployment/kfold", "--timeout=120s")
    (new,) = _pods(node, "kfold")
    assert new != old
    logs = kubectl(node, "logs", "-n", "kfold", new)
    assert "recovered at seq 0" not in logs, "the new pod started on an empty journal"
    time.sleep(5)  # a resumed kfold that wanted to change the Session's pod would have by now
    assert _pods(node, ns) == before
    assert kubectl(node, "get", "session", "demo", "-n", ns,
                   "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}") == "True"
    assert _get(node, f"http://{ip}:8080/") == "app-web 8080\n"
