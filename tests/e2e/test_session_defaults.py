"""The config's default image and resource ceilings on a real apiserver, through ``kfold run``
with a config file (seed 002: ``spec.image || config.defaultImage``,
``clampLimits(config.appLimits, ...)``): the live pods' containers carry what the seed gives."""
from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import yaml
from kubernetes import client

from tests.e2e.conftest import REPO, install_rbac, service_account_kubeconfig, wait_for

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
SESSIONS = {"default_image": "registry.example/default:7", "limits": {"cpu": "1500m", "memory": "1Gi"}}
UNITS = {"m": Fraction(1, 1000), "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30}


def value(text) -> Fraction:
    """A quantity's value (the apiserver answers in its canonical spelling, e.g. 1536Mi as 1.5Gi)."""
    text = str(text)
    for suffix, unit in UNITS.items():
        if text.endswith(suffix):
            return Fraction(text[: -len(suffix)]) * unit
    return Fraction(text)


def seed_limits(ceiling: dict, asked: dict) -> dict:
    """clampLimits(ceiling, asked): each ceiling resource gets min(asked, ceiling), or the ceiling."""
    out = {k: value(v) for k, v in asked.items()}
    for name, bound in ceiling.items():
        out[name] = min(out.get(name, value(bound)), value(bound))
    return out


def session(ns: str, name: str, spec: dict) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Session",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def ready_pod(core, co, ns: str, name: str):
    def check():
        st = co.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name).get("status", {})
        return st if st.get("phase") == "Ready" else None
    st = wait_for(check, 45, what=f"{name} Ready")
    return core.read_namespaced_pod(st["podName"], ns)


def test_default_image_and_ceilings_reach_every_live_container(admin, cp, namespace, daemon_factory, tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon_factory(str(kubeconfig), [namespace], {"sessions": SESSIONS}).start()
    co, core = client.CustomObjectsApi(admin), client.CoreV1Api(admin)
    apps = [{"name": "web", "ports": [{"port": 8080}]}, {"name": "sh", "io": "tty"}]
    big = {"limits": {"cpu": "3", "memory": "512Mi"}, "requests": {"cpu": "2", "memory": "256Mi"}}
    co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session(namespace, "plain", {"apps": apps}))
    co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session(
        namespace, "big", {"image": "registry.example/own:1", "apps": apps, "resources": big}))

    plain = ready_pod(core, co, namespace, "plain")
    assert [c.name for c in plain.spec.containers] == ["workspace", "app-web", "app-sh"]
    for c in plain.spec.containers:
        assert c.image == SESSIONS["default_image"], c.name
        assert {k: value(v) for k, v in c.resources.limits.items()} == seed_limits(SESSIONS["limits"], {}), c.name
    sh = plain.spec.containers[2]
    assert sh.stdin and sh.tty, "an io: tty app can be reached with kubectl attach -it"

    clamped = ready_pod(core, co, namespace, "big")
    want = seed_limits(SESSIONS["limits"], big["limits"])
    for c in clamped.spec.containers:
        assert c.image == "registry.example/own:1", c.name
        assert {k: value(v) for k, v in c.resources.limits.items()} == want, c.name
        requests = {k: value(v) for k, v in c.resources.requests.items()}
        assert requests == {k: min(value(v), want[k]) for k, v in big["requests"].items()}, c.name


def test_no_image_and_no_default_fails_with_the_fix(admin, cp, namespace, daemon_factory, tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon_factory(str(kubeconfig), [namespace]).start()
    co = client.CustomObjectsApi(admin)
    co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session(namespace, "bare", {"apps": []}))

    def failed():
        st = co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "bare").get("status", {})
        return st if st.get("phase") == "Failed" else None
    st = wait_for(failed, 30, what="bare Failed")
    cond = next(c for c in st["conditions"] if c["type"] == "SpecValid")
    assert cond["status"] == "False" and "spec.image" in cond["message"] and "sessions.default_image" in cond["message"]
    assert not client.CoreV1Api(admin).list_namespaced_pod(namespace, label_selector="kfold.dev/session=bare").items


def test_a_bad_ceiling_is_one_config_error_naming_the_field_exit_2(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"namespaces": ["team"], "journal": {"path": str(tmp_path / "j.db")},
                                      "sessions": {"limits": {"cpu": "two"}}}))
    proc = subprocess.run([sys.executable, "-m", "kfold", "run", "--config", str(config)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "field sessions.limits.cpu:" in proc.stderr, proc.stderr
