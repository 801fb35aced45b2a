"""Seed 002's operator defaults for every Session: ``clampLimits(config.appLimits, ...)`` and
``spec.image || config.defaultImage``; seed 004's trimmed cluster names.

The oracles are written from the seed text, not from kfold's code: a quantity is converted here
by hand (``_value``), the default image is the seed's ``||`` (a falsy image takes the default)."""
from __future__ import annotations

from fractions import Fraction

import pytest

from engine.machines.session import manifests
from engine.machines.session.spec import clamp, quantity
from engine.machines.session.spec import Spec, SpecError, validate
from kfold.daemon.config import ConfigError, parse_config

_UNIT = {"m": Fraction(1, 1000), "": 1, "k": 1000, "Mi": 2 ** 20, "Gi": 2 ** 30, "M": 10 ** 6, "G": 10 ** 9}


def _value(text: str) -> Fraction:
    for suffix in ("Mi", "Gi", "m", "k", "M", "G"):
        if text.endswith(suffix):
            return Fraction(text[: -len(suffix)]) * _UNIT[suffix]
    return Fraction(text)


def seed_clamp(ceiling: dict[str, str], asked: dict[str, str] | None) -> dict[str, str]:
    """clampLimits(ceiling, asked): no ask -> the ceiling; an ask above the ceiling -> the ceiling."""
    asked = asked or {}
    out = dict(asked)
    for name, bound in ceiling.items():
        out[name] = bound if name not in asked or _value(asked[name]) > _value(bound) else asked[name]
    return out


@pytest.mark.parametrize("text, value", [
    ("2", 2), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)), ("1Gi", 2 ** 30), ("512Mi", 2 ** 29),
    ("1k", 1000), ("1e3", 1000), ("1E-3", Fraction(1, 1000)), ("100n", Fraction(1, 10 ** 7)), (".5", Fraction(1, 2)),
])
def test_a_quantity_has_its_exact_value(text, value):
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "2 Gi", "1Gb", "Gi", "1ki"])
def test_a_non_quantity_is_refused(text):
    assert quantity(text) is None


CEILING = {"cpu": "2", "memory": "4Gi"}


@pytest.mark.parametrize("asked", [
    None,                                        # the seed's clampLimits(config.appLimits, undefined)
    {"cpu": "3", "memory": "8Gi"},               # both above
    {"cpu": "500m", "memory": "8Gi"},            # one below, one above
    {"cpu": "2000m"},                            # equal (another spelling), the other unasked
    {"cpu": "1", "nvidia.com/gpu": "1"},         # a resource with no ceiling is kept as asked
])
def test_limits_are_clamped_to_the_ceilings_and_an_unasked_resource_gets_the_ceiling(asked):
    """Seed 002:73: container limits are clamped to the configured ceilings."""
    limits, _ = clamp(tuple(CEILING.items()), tuple((asked or {}).items()), ())
    want = seed_clamp(CEILING, asked)
    assert {k: _value(v) for k, v in limits} == {k: _value(v) for k, v in want.items()}


def test_no_ceiling_keeps_what_the_session_asks_and_asks_nothing_by_itself():
    assert clamp((), (("cpu", "3"),), (("memory", "1Gi"),)) == ((("cpu", "3"),), (("memory", "1Gi"),))
    assert clamp((), (), ()) == ((), ())


def test_a_request_never_exceeds_the_ceiling():
    _, requests = clamp(tuple(CEILING.items()), (), (("cpu", "3"), ("memory", "1Gi")))
    assert dict(requests) == {"cpu": "2", "memory": "1Gi"}


def _spec(raw, **config) -> Spec | SpecError:
    return validate(raw, "local", ("local",), "demo", **config)


def test_every_container_gets_the_clamped_resources():
    spec = _spec({"image": "i:1", "apps": [{"name": "web"}, {"name": "cli", "io": "tty"}],
                  "resources": {"limits": {"cpu": "8", "memory": "1Gi"}, "requests": {"cpu": "4"}}},
                 ceilings=tuple(CEILING.items()))
    assert isinstance(spec, Spec)
    pod = manifests.pod("demo", "team", 1, spec)
    want_limits = seed_clamp(CEILING, {"cpu": "8", "memory": "1Gi"})
    for c in pod["spec"]["containers"]:
        got = c.get("resources", {})
        assert {k: _value(v) for k, v in got["limits"].items()} == {k: _value(v) for k, v in want_limits.items()}, c["name"]
        assert _value(got["requests"]["cpu"]) == _value(CEILING["cpu"]), c["name"]


def test_a_session_asking_nothing_gets_the_ceilings_as_its_limits_on_every_container():
    spec = _spec({"image": "i:1", "apps": [{"name": "web"}]}, ceilings=tuple(CEILING.items()))
    pod = manifests.pod("demo", "team", 1, spec)
    assert [c["resources"] for c in pod["spec"]["containers"]] == [{"limits": CEILING}] * 2


def test_a_bad_quantity_in_the_spec_is_a_spec_error_naming_the_field():
    spec = _spec({"image": "i:1", "resources": {"limits": {"cpu": "lots"}}})
    assert isinstance(spec, SpecError) and spec.field == "spec.resources.limits[cpu]"


@pytest.mark.parametrize("image", [None, "", "own:2"])
def test_the_image_is_the_specs_or_else_the_configured_default(image):
    """Seed 002:115: the image is the spec's, else the configured default."""
    raw = {} if image is None else {"image": image}
    spec = _spec(raw, default_image="default:1")
    assert isinstance(spec, Spec)
    assert spec.image == (raw.get("image") or "default:1")   # the seed's spec.image || config.defaultImage
    assert {c["image"] for c in manifests.pod("demo", "team", 1, spec)["spec"]["containers"]} == {spec.image}


def test_no_image_and_no_default_fails_naming_both_fixes():
    spec = _spec({"apps": []})
    assert isinstance(spec, SpecError) and spec.field == "spec.image"
    assert "spec.image" in spec.reason and "sessions.default_image" in spec.reason


@pytest.mark.parametrize("given", [" edge ", "edge\t", "\nedge"])
def test_spec_cluster_is_trimmed_before_it_is_looked_up(given):
    spec = validate({"image": "i:1", "cluster": given}, "local", ("local", "edge"), "demo")
    assert isinstance(spec, Spec) and spec.cluster == "edge"


@pytest.mark.parametrize("given", ["  ", " local "])
def test_a_blank_or_padded_home_name_is_the_home_cluster(given):
    spec = validate({"image": "i:1", "cluster": given}, "local", ("local",), "demo")
    assert isinstance(spec, Spec) and spec.cluster == "local"


@pytest.mark.parametrize("sessions, field", [
    ({"limits": {"cpu": "lots"}}, "sessions.limits.cpu"),
    ({"limits": {"memory": 0}}, "sessions.limits.memory"),
    ({"limits": {"memory": True}}, "sessions.limits.memory"),
    ({"limits": {"bad name!": "1"}}, "sessions.limits"),
    ({"default_image": ""}, "sessions.default_image"),
    ({"default_image": "a b"}, "sessions.default_image"),
])
def test_a_bad_sessions_field_is_one_config_error_naming_it(sessions, field):
    with pytest.raises(ConfigError) as err:
        parse_config({"namespaces": ["team"], "sessions": sessions})
    text = str(err.value)
    assert "\n" not in text and f"field {field}:" in text


def test_the_sessions_fields_reach_the_session_machine_through_session_configure():
    from kfold.daemon.boot import configure_command
    cfg = parse_config({"namespaces": ["team"], "sessions": {"default_image": "d:1", "limits": {"cpu": 2}}})
    args = configure_command(cfg, 0).args
    assert args["default_image"] == "d:1" and args["limits"] == {"cpu": "2"}


def _tenancy_config():
    from engine.machines.session import tenancy
    from engine.machines.session.model import SessionConfig
    from engine.seams import SessionConfigure
    return tenancy, SessionConfig(**tenancy.configure(SessionConfigure.model_validate({
        "home": "local", "tenants": {"team": "acme"},
        "registered": [{"name": "edge", "tenant": "acme", "namespaces": [" team ", "team", "  "]}]})))


@pytest.mark.parametrize("given", ["edge", " edge", "edge \n"])
def test_a_padded_spec_cluster_places_on_the_registered_cluster(given):
    tenancy, cfg = _tenancy_config()
    placed = tenancy.place(cfg, "local", "team", given)
    assert placed.handle == "edge@acme" and placed.namespace == ""


def test_a_blank_spec_cluster_is_the_home_cluster_and_a_registered_bound_is_trimmed():
    tenancy, cfg = _tenancy_config()
    assert tenancy.place(cfg, "local", "team", "   ").handle == "local"
    assert cfg.registered[0].namespaces == ("team",)


@pytest.mark.parametrize("io, stdin, tty", [("tty", True, True), ("pipe", True, False), ("streams", True, False),
                                            ("none", False, False)])
def test_an_app_container_allows_the_attach_its_io_names(io, stdin, tty):
    """Seed 002 attaches each app with stdin and a TTY exactly when ``io`` is tty (``kubectl attach -it``)."""
    spec = _spec({"image": "i:1", "apps": [{"name": "a", "io": io}]})
    app = manifests.pod("demo", "team", 1, spec)["spec"]["containers"][1]
    assert (app["name"], app["stdin"], app["tty"]) == ("app-a", stdin, tty)
