"""Each container of a Session's pod knows what it is: its role, and in an app its name and declared
ports, as plain env after the spec's own (docs/session-api.md "Container identity")."""
from __future__ import annotations

from engine.machines.session import manifests
from engine.machines.session.spec import Spec, validate


def _pod(raw) -> dict:
    spec = validate(raw, "local", ("local",), "demo")
    assert isinstance(spec, Spec), spec
    return manifests.pod("demo", "team", 1, spec)


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_every_container_is_told_its_role_app_and_ports():
    pod = _pod({"image": "i:1", "apps": [
        {"name": "web", "ports": [{"port": 8080}, {"port": 9000, "protocol": "UDP"}]},
        {"name": "api", "ports": [{"port": 8081}]},
        {"name": "cli", "io": "tty"}]})
    by_name = {c["name"]: _env(c) for c in pod["spec"]["containers"]}
    assert by_name == {
        "workspace": {"KFOLD_CONTAINER": "workspace"},
        "app-web": {"KFOLD_CONTAINER": "app-web", "KFOLD_APP": "web", "KFOLD_APP_PORTS": "8080/TCP,9000/UDP"},
        "app-api": {"KFOLD_CONTAINER": "app-api", "KFOLD_APP": "api", "KFOLD_APP_PORTS": "8081/TCP"},
        "app-cli": {"KFOLD_CONTAINER": "app-cli", "KFOLD_APP": "cli", "KFOLD_APP_PORTS": ""},
    }


def test_the_identity_follows_the_specs_env_so_a_same_named_secret_cannot_hide_it():
    pod = _pod({"image": "i:1", "apps": [{"name": "web", "ports": [{"port": 80}]}],
                "env": [{"name": "KFOLD_CONTAINER", "secretRef": {"name": "s", "key": "k"}}]})
    for c in pod["spec"]["containers"]:
        names = [e["name"] for e in c["env"]]
        # Kubernetes takes the last of duplicate names: the identity wins
        assert names[0] == "KFOLD_CONTAINER" and "valueFrom" in c["env"][0]
        assert c["env"][names.index("KFOLD_CONTAINER", 1)]["value"] == c["name"]
        assert all("valueFrom" not in e for e in c["env"][1:]), "the identity carries no secret reference"
