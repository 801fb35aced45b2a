"""The Session CRD as an API on the real apiserver: what ``kubectl apply`` refuses at admission
(OpenAPI schema and CEL rules), with the message a user reads, what it accepts (the examples and
the shapes the other e2e tests use), and ``kubectl explain`` / ``kubectl get`` as a user runs them.

The oracle is the apiserver's own validation (a 422 naming the field), through the real kubectl.
"""
from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import REPO

KUBECTL = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin" / "kubectl"
GOOD = {"image": "registry.example/sandbox:1",
        "apps": [{"name": "web", "io": "tty", "ports": [{"port": 8080}, {"port": 8080, "protocol": "UDP"}]},
                 {"name": "api", "ports": [{"port": 9090, "protocol": "TCP"}]}],
        "env": [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}}],
        "repositories": [{"url": "https://github.com/kfold-e2e/nothing.git"}],
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "500m"}},
        "workspace": {"seedConfigMap": "seed"}, "suspended": False, "stopped": False}


@pytest.fixture(autouse=True)
def this_checkouts_crds(admin, crds):
    """The CRDs are shared by every branch testing on this apiserver: put this checkout's back
    before each test (another run may have applied its own meanwhile)."""
    import time
    from tests.e2e.conftest import install_crds
    install_crds(admin)
    time.sleep(0.5)


@pytest.fixture
def kubectl(cp):
    if not os.access(KUBECTL, os.X_OK):
        pytest.fail(f"{KUBECTL} is missing (bash scripts/build_controlplane.sh builds it)")

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(KUBECTL), "--kubeconfig", cp["kubeconfig"], *args], input=stdin,
                              capture_output=True, text=True, timeout=60)
    return run


def session(ns: str, spec: dict, name: str = "s") -> str:
    return yaml.safe_dump({"apiVersion": "kfold.dev/v1alpha1", "kind": "Session",
                           "metadata": {"name": name, "namespace": ns}, "spec": spec})


def with_(change) -> dict:
    spec = copy.deepcopy(GOOD)
    change(spec)
    return spec


BAD = [
    ("port above 65535", lambda s: s["apps"][0]["ports"].append({"port": 99999}),
     ["spec.apps[0].ports[2].port", "should be less than or equal to 65535"]),
    ("port 0", lambda s: s["apps"][1]["ports"].__setitem__(0, {"port": 0}),
     ["spec.apps[1].ports[0].port", "should be greater than or equal to 1"]),
    ("lower-case protocol", lambda s: s["apps"][1]["ports"][0].__setitem__("protocol", "tcp"),
     ["spec.apps[1].ports[0].protocol", 'supported values: "TCP", "UDP"']),
    ("app name not a DNS label", lambda s: s["apps"][0].__setitem__("name", "Web_1"),
     ["spec.apps[0].name", "should match"]),
    ("app without a name", lambda s: s["apps"][0].pop("name"), ["spec.apps[0].name", "Required value"]),
    ("unknown io", lambda s: s["apps"][0].__setitem__("io", "telnet"),
     ["spec.apps[0].io", 'supported values: "tty", "pipe", "streams", "none"']),
    ("duplicate app names", lambda s: s["apps"][1].__setitem__("name", "web"),
     ["spec.apps: Invalid value", "app name 'web' is declared more than once"]),
    ("one port declared by two apps", lambda s: s["apps"][1]["ports"].append({"port": 8080}),
     ["spec.apps: Invalid value", 'apps ["web", "api"] declare the same port and protocol']),
    ("one port twice in one app", lambda s: s["apps"][1]["ports"].append({"port": 9090, "protocol": "TCP"}),
     ["spec.apps[1].ports: Invalid value", "TCP port 9090 is declared more than once in this app"]),
    ("env without a secretRef", lambda s: s["env"][0].pop("secretRef"), ["spec.env[0].secretRef", "Required value"]),
    ("a literal env value", lambda s: s["env"][0].__setitem__("value", "hunter2"),
     ["spec.env[0].value: Forbidden", "secretRef {name, key}"]),
    ("a cpu limit that is no quantity", lambda s: s["resources"]["limits"].__setitem__("cpu", "lots"),
     ["spec.resources.limits[cpu]", "'lots' is not a Kubernetes quantity"]),
    ("repository without a url", lambda s: s["repositories"].append({}), ["spec.repositories[1].url", "Required value"]),
    ("seed ConfigMap not a name", lambda s: s["workspace"].__setitem__("seedConfigMap", "Not/A/Name"),
     ["spec.workspace.seedConfigMap", "should match"]),
    ("suspended not a boolean", lambda s: s.__setitem__("suspended", "yes"), ["spec.suspended", "expected boolean"]),
]


@pytest.mark.parametrize("what, change, words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_session_is_refused_at_admission_with_the_field_named(kubectl, crds, namespace, what, change, words):
    r = kubectl("apply", "--server-side", "-f", "-", stdin=session(namespace, with_(change)))
    assert r.returncode != 0, f"{what}: accepted:\n{r.stdout}"
    for w in words:
        assert w in r.stderr, f"{what}: {w!r} not in:\n{r.stderr}"
    assert kubectl("get", "sessions", "-n", namespace, "-o", "name").stdout == ""


def test_a_name_too_long_for_kfolds_pod_names_is_refused(kubectl, crds, namespace):
    r = kubectl("apply", "--server-side", "-f", "-", stdin=session(namespace, GOOD, name="s" * 51))
    assert r.returncode != 0 and "metadata.name: Invalid value" in r.stderr, r.stderr
    assert "at most 50 characters, not 51" in r.stderr, r.stderr


def test_good_sessions_are_accepted_with_defaults_and_read_back(kubectl, crds, namespace):
    for name, spec in (("full", GOOD), ("bare", {}), ("image-only", {"image": "x:1"})):
        r = kubectl("apply", "--server-side", "-f", "-", stdin=session(namespace, spec, name))
        assert r.returncode == 0, f"{name}: {r.stderr}"
    back = yaml.safe_load(kubectl("get", "session", "full", "-n", namespace, "-o", "yaml").stdout)["spec"]
    assert back["apps"][1]["io"] == "none" and back["apps"][1]["ports"][0]["protocol"] == "TCP"
    heads = kubectl("get", "kfold", "-n", namespace).stdout.splitlines()[0].split()  # the category
    assert heads == ["NAME", "READY", "PHASE", "REASON", "POD", "URL", "AGE"], heads


def test_the_example_and_the_specs_other_e2e_tests_use_are_accepted(kubectl, crds, namespace):
    docs = [d for d in yaml.safe_load_all((REPO / "examples" / "session.yaml").read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        r = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(doc))
        assert r.returncode == 0, r.stderr
    from tests.e2e.test_session_lifecycle import API, WEB, session_manifest
    r = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-",
                stdin=yaml.safe_dump(session_manifest(namespace, [WEB, API])))
    assert r.returncode == 0, r.stderr


def test_kubectl_explain_describes_every_level(kubectl, crds):
    for path, words in (("session.spec.apps.ports", ["routed", "port", "protocol"]),
                        ("session.spec.apps.ports.port", ["1-65535"]),
                        ("session.status.conditions.reason", ["CamelCase"]),
                        ("repo.spec.url", ["clone url"])):
        from tests.e2e.conftest import wait_for   # the apiserver publishes a CRD's OpenAPI a few seconds late
        wait_for(lambda: (lambda r: r.returncode == 0 and all(w in r.stdout for w in words))(kubectl("explain", path)),
                 30, interval=1.0, what=f"kubectl explain {path} naming {words}")
    assert kubectl("get", "kfr", "-A").returncode == 0  # the Repo short name
