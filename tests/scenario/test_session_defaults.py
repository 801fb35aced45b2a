"""The config's default image and resource ceilings, through the full engine from session.configure
(seed 002: ``spec.image || config.defaultImage``, ``clampLimits(config.appLimits, ...)``)."""
from __future__ import annotations

import pytest

from tests.scenario.test_session_support import BASE, SPEC, World, at

pytestmark = pytest.mark.usefixtures("frozen_world")

CEILING = {"cpu": "1", "memory": "1Gi"}
NO_IMAGE = {k: v for k, v in SPEC.items() if k != "image"}


def test_a_session_without_an_image_runs_the_default_image_with_the_ceilings_on_every_container():
    w = World(default_image="registry.example/default:3", limits=CEILING)
    w.to_creating(NO_IMAGE)
    containers = w.pending("create", "Pod")[0].manifest["spec"]["containers"]
    assert [c["name"] for c in containers] == ["workspace", "app-web"]
    assert {c["image"] for c in containers} == {"registry.example/default:3"}
    assert [c["resources"] for c in containers] == [{"limits": CEILING}] * 2


def test_limits_above_the_ceilings_are_clamped_and_below_them_kept():
    w = World(limits=CEILING)
    w.to_creating({**SPEC, "resources": {"limits": {"cpu": "4", "memory": "256Mi"}, "requests": {"cpu": "2"}}})
    for c in w.pending("create", "Pod")[0].manifest["spec"]["containers"]:
        assert c["resources"] == {"limits": {"cpu": "1", "memory": "256Mi"}, "requests": {"cpu": "1"}}, c["name"]


def test_no_image_and_no_default_fails_the_session_with_the_fix():
    w = World()
    w.submit(NO_IMAGE)
    assert w.phase == "Failed"
    cond = w.condition("SpecValid")
    assert cond["status"] == "False" and "sessions.default_image" in cond["message"]
    assert not w.effects("create", "Pod")


def test_a_repeated_configure_keeps_the_configuration_and_a_changed_one_replaces_it():
    from engine.machines.session.model import CONFIG_KEY
    w = World(limits=CEILING)
    first = w.s.decision("session", CONFIG_KEY)
    w.s.command("session.configure", at(1), clusters=["local"], base_domain=BASE, limits=CEILING)
    assert w.s.decision("session", CONFIG_KEY) is first     # equal: kept, not parsed into a new one
    w.s.command("session.configure", at(2), clusters=["local"], base_domain=BASE, limits={"cpu": "2"})
    w.to_creating({**SPEC, "resources": {"limits": {"cpu": "4", "memory": "256Mi"}}}, when=3)
    for c in w.pending("create", "Pod")[0].manifest["spec"]["containers"]:
        assert c["resources"] == {"limits": {"cpu": "2", "memory": "256Mi"}}, c["name"]


def _identity_env(w: World) -> dict[str, list[str]]:
    containers = w.pending("create", "Pod")[0].manifest["spec"]["containers"]
    return {c["name"]: [e["name"] for e in c["env"] if e["name"].startswith("KFOLD_")] for c in containers}


def test_the_daemons_configure_tells_each_container_what_it_is():
    from kfold.daemon.boot import configure_command
    from kfold.daemon.config import Config
    cmd = configure_command(Config.model_validate({"namespaces": ["team"]}), None)
    assert cmd.args["container_identity"] is True
    w = World(container_identity=True)
    w.to_creating(SPEC)
    assert _identity_env(w) == {"workspace": ["KFOLD_CONTAINER"],
                                "app-web": ["KFOLD_CONTAINER", "KFOLD_APP", "KFOLD_APP_PORTS"]}


def test_a_journal_whose_configure_states_no_identity_refolds_its_pods_without_it():
    """A journal kfold wrote before it told containers their identity replays as it was decided."""
    w = World()
    w.to_creating(SPEC)
    assert _identity_env(w) == {"workspace": [], "app-web": []}
