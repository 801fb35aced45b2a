"""Session spec validation, port routing and pod shape."""
from __future__ import annotations

import pytest

from engine.machines.session.views import pod_view, provisioning_message
from engine.machines.session.spec import Port, Spec, SpecError, route_ports, shape, validate

GOOD = {"image": "ws:1", "apps": [{"name": "web", "ports": [{"port": 8080, "protocol": "tcp"}]}]}


def check(raw, clusters=("local", "edge")):
    return validate(raw, "local", clusters, "demo")


@pytest.mark.parametrize("raw, field", [
    ({}, "spec.image"),
    ({"image": "  "}, "spec.image"),
    ({"image": "ws", "apps": [{"name": "Web"}]}, "spec.apps[0].name"),
    ({"image": "ws", "apps": [{"name": "a"}, {"name": "a"}]}, "spec.apps[1].name"),
    ({"image": "ws", "apps": [{"name": "a", "ports": [{"port": 0}]}]}, "spec.apps[0].ports[0].port"),
    ({"image": "ws", "apps": [{"name": "a", "ports": [{"port": "80"}]}]}, "spec.apps[0].ports[0].port"),
    ({"image": "ws", "apps": [{"name": "a", "ports": [{"port": 80, "protocol": "SCTP"}]}]}, "spec.apps[0].ports[0].protocol"),
    ({"image": "ws", "apps": [{"name": "a", "io": "telepathy"}]}, "spec.apps[0].io"),
    ({"image": "ws", "cluster": "mars"}, "spec.cluster"),
    ({"image": "ws", "env": [{"name": "X", "value": "literal"}]}, "spec.env[0]"),
    ({"image": "ws", "repositories": [{"url": "not a url"}]}, "spec.repositories[0].url"),
    ({"image": "ws", "suspended": "yes"}, "spec.suspended"),
], ids=["no-image", "blank-image", "bad-app-name", "duplicate-app", "port-zero", "port-string",
        "bad-protocol", "bad-io", "unknown-cluster", "literal-env", "bad-repo", "flag-not-bool"])
def test_bad_input_names_the_field_and_the_reason(raw, field):
    got = check(raw)
    assert isinstance(got, SpecError) and got.field == field and got.reason


def test_a_good_spec_defaults_the_cluster_to_home_and_upper_cases_the_protocol():
    got = check(GOOD)
    assert isinstance(got, Spec)
    assert got.cluster == "local" and got.apps[0].ports == (Port(8080, "TCP"),)
    assert isinstance(check({**GOOD, "cluster": "edge"}), Spec)


def test_the_first_app_to_declare_a_port_keeps_it_and_the_later_one_is_rejected():
    spec = check({"image": "ws", "apps": [{"name": "a", "ports": [80]}, {"name": "b", "ports": [80, 81]}]})
    routed, rejected = route_ports(spec.apps)
    assert routed == (("a", Port(80)), ("b", Port(81)))
    assert [(r.app, r.port.port) for r in rejected] == [("b", 80)]


def test_ports_are_not_part_of_the_pod_shape_but_apps_are():
    base = check(GOOD)
    ports = check({**GOOD, "apps": [{"name": "web", "ports": [{"port": 9000}]}]})
    apps = check({**GOOD, "apps": [{"name": "web"}, {"name": "api"}]})
    assert shape(base) == shape(ports) != shape(apps)


def test_provisioning_message_prefers_scheduling_then_container_waiting_reasons():
    status = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              "message": "0/1 nodes"}],
              "containerStatuses": [{"name": "workspace", "state": {"waiting": {"reason": "ErrImagePull"}}}]}
    assert provisioning_message(status) == "Unschedulable: 0/1 nodes"
    del status["conditions"]
    assert provisioning_message(status) == "container workspace: ErrImagePull"
    assert provisioning_message({}) is None


def test_a_malformed_pod_reduces_without_raising():
    v = pod_view({"metadata": {"labels": {"kfold.dev/generation": "x"}}, "status": {"containerStatuses": "oops"}})
    assert v.generation is None and v.ended == () and not v.ready


def test_an_unknown_cluster_is_refused_without_revealing_which_clusters_exist():
    err = check({"image": "ws", "cluster": "mars"}, clusters=("local", "secret-edge"))
    assert isinstance(err, SpecError)
    assert "no cluster named 'mars' is registered for this tenant" in str(err)
    assert "secret-edge" not in str(err) and "local" not in str(err)
