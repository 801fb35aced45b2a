"""Endpoints: Service and Ingress upserted for the declared ports, re-routed without a new pod."""
from __future__ import annotations

import pytest

from tests.scenario.test_session_support import SPEC, World, pod_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

EXISTING_SERVICE = {"metadata": {"name": "demo", "resourceVersion": "77", "uid": "service-uid",
                                 "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "demo"}},
                    "spec": {"clusterIP": "10.96.0.12", "clusterIPs": ["10.96.0.12"]}}


def test_one_service_and_one_ingress_owned_by_the_pod_route_every_port():
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    service = w.pending("create", "Service")[0].manifest
    ingress = w.pending("create", "Ingress")[0].manifest
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": "demo-g1", "uid": "pod-uid-1"}]
    assert service["metadata"]["ownerReferences"] == owner == ingress["metadata"]["ownerReferences"]
    assert [p["port"] for p in service["spec"]["ports"]] == [8080]
    assert [r["host"] for r in ingress["spec"]["rules"]] == ["8080-demo.sessions.example.test"]


def test_without_a_base_domain_a_session_is_ready_with_its_service_alone_and_cluster_dns_endpoints():
    """``base_domain`` left out of the config (cluster-internal sessions): no Ingress is made or
    waited for; the status names the Service's cluster DNS name.
    Seed table: seed 002:478."""
    w = World(base_domain="").to_provisioning(when=1)
    w.run_pod(5)
    assert w.pending("create", "Service") and not w.pending("create", "Ingress")
    w.publish_endpoints(6)
    assert w.phase == "Ready" and not w.effects("create", "Ingress")
    assert w.status()["endpoints"] == [{"app": "web", "port": 8080, "host": "demo.team.svc",
                                        "url": "tcp://demo.team.svc:8080"}]


def test_an_existing_service_is_read_then_replaced_keeping_its_cluster_ip_and_resource_version():
    """Seed 002:486-506: a Service replace carries its clusterIP and resourceVersion, read first."""
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    w.answer("create", "Service", "already_exists", when=6)
    w.answer("get", "Service", when=7, obj=EXISTING_SERVICE)
    replace = w.pending("replace", "Service")[0].manifest
    assert replace["metadata"]["resourceVersion"] == "77"
    assert (replace["spec"]["clusterIP"], replace["spec"]["clusterIPs"]) == ("10.96.0.12", ["10.96.0.12"])
    w.answer("replace", "Service", when=8, obj={})
    w.answer("create", "Ingress", when=8, obj={})
    assert w.status()["endpoints"], "endpoints are reported once routed"


def test_a_port_declared_by_two_apps_is_rejected_for_the_later_app_with_a_reason():
    """Seed 002:328-336: a port another app declares is rejected for the later app, with a reason."""
    spec = {**SPEC, "apps": [{"name": "web", "ports": [{"port": 8080}]}, {"name": "api", "ports": [{"port": 8080}]}]}
    w = World().to_provisioning(spec, when=1)
    w.run_pod(5)
    assert [p["port"] for p in w.pending("create", "Service")[0].manifest["spec"]["ports"]] == [8080]
    cond = w.condition("PortsRouted")
    assert cond["status"] == "False" and cond["reason"] == "PortConflict"
    assert "app 'api' TCP port 8080 rejected: app 'web' already declares TCP port 8080" in cond["message"]


def test_a_ports_only_change_re_routes_without_a_new_pod():
    """Seed 002:312-313: a port change re-routes without a new pod."""
    w = World().to_ready()
    w.submit({**SPEC, "apps": [{"name": "web", "ports": [{"port": 8080}, {"port": 3000}], "io": "tty"}]}, 20)
    w.answer("get", "Service", when=21, obj=EXISTING_SERVICE)
    ports = [p["port"] for p in w.pending("replace", "Service")[0].manifest["spec"]["ports"]]
    assert ports == [8080, 3000]
    assert w.pod_creates() == ["demo-g1"] and not w.effects("delete", "Pod")
    assert w.phase == "Ready"


def test_no_ports_means_no_endpoints_and_an_unchanged_port_set_sends_nothing():
    """Seed 002:480: no ports: no endpoints."""
    w = World().to_provisioning({**SPEC, "apps": [{"name": "cli"}]}, when=1)
    w.run_pod(5)
    assert not w.effects("create", "Service") and not w.effects("create", "Ingress")
    assert w.phase == "Ready"


def test_an_endpoint_that_keeps_failing_does_not_hold_ready_for_ever_and_says_why():
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    w.answer("create", "Service", when=6, obj={})
    for attempt in range(4):
        assert w.phase == "Provisioning", f"Ready waits while the Ingress is still being tried (attempt {attempt})"
        w.answer("create", "Ingress", "invalid", when=7 + attempt, message="spec.rules: Invalid value")
    assert not w.pending("create", "Ingress"), "its tries are spent"
    assert w.phase == "Ready"
    cond = w.condition("EndpointsPublished")
    assert cond["status"] == "False" and "Ingress: invalid" in cond["message"]


def test_a_service_answer_after_the_pod_was_let_go_sends_nothing_more():
    w = World().to_provisioning(when=1)
    w.run_pod(2)
    w.submit({**SPEC, "suspended": True}, 3)
    before = len(w.s.effects)
    w.answer("create", "Service", "already_exists", when=4)
    assert len(w.s.effects) == before, "no read, no replace: the Service goes with the pod it names"


def test_a_service_create_answered_after_the_pod_was_let_go_is_known_to_exist_at_the_next_generation():
    """The Session is suspended while its Service and Ingress creates are in flight; both answer
    201. What the apiserver accepted is kept (``Upsert.have``): the garbage collector deletes them
    with the pod in the background, so they may still exist when the Session resumes, and the next
    generation re-routes them by read-then-replace instead of creating them blind."""
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    w.submit({**SPEC, "suspended": True}, 10)
    assert w.phase == "Suspended"
    w.answer("create", "Service", when=11, obj={})
    w.answer("create", "Ingress", when=11, obj={})
    w.answer("delete", "Pod", when=11)
    w.observe_pod(12, gen=1, event="DELETED")
    before = len(w.s.effects)
    w.submit(SPEC, 20)
    w.answer("create", "Pod", when=21, obj=pod_obj(2))
    w.observe_pod(22, gen=2, phase="Running", ip="10.0.0.9", node="node-a", ready=True)
    sent = [(e.type, e.kind) for e in w.s.effects[before:] if getattr(e, "kind", "") in ("Service", "Ingress")]
    assert sent == [("get", "Service"), ("get", "Ingress")]
