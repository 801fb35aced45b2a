"""Session spec validation, port routing and pod shape."""
from __future__ import annotations

import pytest

from engine.machines.session.views import pod_view, provisioning_message
from engine.machines.session.spec import Port, Spec, SpecError, route_ports, shape, validate

GOOD = {"image": "ws:1", "apps": [{"name": "web", "ports": [{"port": 8080}]}]}


def check(raw, clusters=("local", "edge")):
    return validate(raw, "local", clusters, "demo")


WS = {"image": "ws"}
# (id, spec, Session name, field, words of the reason): every spec kfold refuses. The reason names
# the offending value; tests/e2e/test_session_rules.py applies each one to the real apiserver.
REFUSED = [
    ("no-image", {}, "demo", "spec.image", ["sessions.default_image"]),
    ("blank-image", {"image": "  "}, "demo", "spec.image", ["spec.image"]),
    ("long-name", WS, "s" * 51, "metadata.name", ["not 51"]),
    ("not-an-object", ["ws"], "demo", "spec", ["an object"]),
    ("bad-app-name", {**WS, "apps": [{"name": "Web"}]}, "demo", "spec.apps[0].name", ["'Web'", "DNS label"]),
    ("app-name-with-newline", {**WS, "apps": [{"name": "web\n"}]}, "demo", "spec.apps[0].name", ["'web\\n'"]),
    ("app-without-name", {**WS, "apps": [{"io": "tty"}]}, "demo", "spec.apps[0].name", ["required"]),
    ("duplicate-app", {**WS, "apps": [{"name": "a"}, {"name": "a"}]}, "demo", "spec.apps", ["'a'", "more than once"]),
    ("too-many-apps", {**WS, "apps": [{"name": f"a{i}"} for i in range(17)]}, "demo", "spec.apps", ["16", "17"]),
    ("port-zero", {**WS, "apps": [{"name": "a", "ports": [{"port": 0}]}]}, "demo", "spec.apps[0].ports[0].port", ["0"]),
    ("port-string", {**WS, "apps": [{"name": "a", "ports": [{"port": "80"}]}]}, "demo", "spec.apps[0].ports[0].port",
     ["'80'", "integer"]),
    ("bare-port", {**WS, "apps": [{"name": "a", "ports": [80]}]}, "demo", "spec.apps[0].ports[0]", ["80", "object"]),
    ("bad-protocol", {**WS, "apps": [{"name": "a", "ports": [{"port": 80, "protocol": "SCTP"}]}]}, "demo",
     "spec.apps[0].ports[0].protocol", ["'SCTP'", "TCP, UDP"]),
    ("lower-case-protocol", {**WS, "apps": [{"name": "a", "ports": [{"port": 80, "protocol": "tcp"}]}]}, "demo",
     "spec.apps[0].ports[0].protocol", ["'tcp'"]),
    ("bad-io", {**WS, "apps": [{"name": "a", "io": "telepathy"}]}, "demo", "spec.apps[0].io", ["'telepathy'"]),
    ("bad-pull-policy", {**WS, "imagePullPolicy": "Sometimes"}, "demo", "spec.imagePullPolicy",
     ["'Sometimes'", "Always, IfNotPresent, Never"]),
    ("lower-case-pull-policy", {**WS, "imagePullPolicy": "always"}, "demo", "spec.imagePullPolicy", ["'always'"]),
    ("unknown-cluster", {**WS, "cluster": "mars"}, "demo", "spec.cluster", ["'mars'"]),
    ("literal-env", {**WS, "env": [{"name": "X", "value": "literal"}]}, "demo", "spec.env[0].value", ["secretRef"]),
    ("literal-env-beside-ref", {**WS, "env": [{"name": "X", "value": "v", "secretRef": {"name": "s", "key": "k"}}]},
     "demo", "spec.env[0].value", ["secretRef"]),
    ("env-value-from", {**WS, "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
     "demo", "spec.env[0].valueFrom", ["secretRef"]),
    ("env-without-ref", {**WS, "env": [{"name": "X"}]}, "demo", "spec.env[0].secretRef", ["{name, key}"]),
    ("env-ref-not-a-name", {**WS, "env": [{"name": "X", "secretRef": {"name": "Not_A_Name", "key": "k"}}]}, "demo",
     "spec.env[0].secretRef.name", ["'Not_A_Name'"]),
    ("env-ref-without-key", {**WS, "env": [{"name": "X", "secretRef": {"name": "s"}}]}, "demo",
     "spec.env[0].secretRef.key", ["required"]),
    ("bad-repo", {**WS, "repositories": [{"url": "not a url"}]}, "demo", "spec.repositories[0].url", ["whitespace"]),
    ("repo-without-url", {**WS, "repositories": [{}]}, "demo", "spec.repositories[0].url", ["required"]),
    ("bad-quantity", {**WS, "resources": {"limits": {"cpu": "lots"}}}, "demo", "spec.resources.limits[cpu]",
     ["'lots'", "quantity"]),
    ("negative-quantity", {**WS, "resources": {"requests": {"memory": "-1Gi"}}}, "demo",
     "spec.resources.requests[memory]", ["'-1Gi'"]),
    ("bad-resource-name", {**WS, "resources": {"limits": {"bad name!": "1"}}}, "demo", "spec.resources.limits",
     ["'bad name!'"]),
    ("bad-seed", {**WS, "workspace": {"seedConfigMap": "Not/A/Name"}}, "demo", "spec.workspace.seedConfigMap",
     ["'Not/A/Name'"]),
    ("flag-not-bool", {**WS, "suspended": "yes"}, "demo", "spec.suspended", ["'yes'", "true or false"]),
]


@pytest.mark.parametrize("raw, name, field, words", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_bad_input_names_the_field_and_the_reason(raw, name, field, words):
    got = validate(raw, "local", ("local", "edge"), name)
    assert isinstance(got, SpecError) and got.field == field, got
    assert all(w in got.reason for w in words), got.reason


def test_a_good_spec_defaults_the_cluster_to_home_and_the_protocol_to_tcp():
    got = check(GOOD)
    assert isinstance(got, Spec)
    assert got.cluster == "local" and got.apps[0].ports == (Port(8080, "TCP"),)
    assert isinstance(check({**GOOD, "cluster": "edge"}), Spec)


def test_the_first_app_to_declare_a_port_keeps_it_and_the_later_one_is_rejected():
    spec = check({"image": "ws", "apps": [{"name": "a", "ports": [{"port": 80}]},
                                          {"name": "b", "ports": [{"port": 80}, {"port": 81}]}]})
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


@pytest.mark.parametrize("policy", ["Always", "IfNotPresent", "Never"])
def test_image_pull_policy_is_set_on_every_container_and_is_part_of_the_pods_shape(policy):
    from engine.machines.session import manifests as mf
    spec = check({**GOOD, "imagePullPolicy": policy, "workspace": {"seedConfigMap": "files"}})
    pod = mf.pod("demo", "team", 1, spec, seed=spec.seed)["spec"]
    assert [c["imagePullPolicy"] for c in pod["containers"] + pod["initContainers"]] == [policy] * 3
    assert spec.digest != check(GOOD).digest, "a changed policy makes a new pod (the container list is fixed)"


def test_a_spec_without_image_pull_policy_makes_the_pod_it_made_before_the_field():
    from engine.machines.session import manifests as mf
    spec = check({**GOOD, "workspace": {"seedConfigMap": "files"}})
    pod = mf.pod("demo", "team", 1, spec, seed=spec.seed)["spec"]
    assert not any("imagePullPolicy" in c for c in pod["containers"] + pod["initContainers"])
    assert spec.digest == shape(Spec(image="ws:1", apps=spec.apps, env=(), repositories=(), cluster="local",
                                     limits=(), suspended=False, stopped=False, seed="files"))
