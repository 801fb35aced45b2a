"""Rules of seeds 000 and 002 that one-line mutants broke with every test green (issue 33, item 11).
Each test states the seed's rule; the mutant it kills is named in its docstring."""
from __future__ import annotations

import pytest

from tests.scenario.test_session_bringup import _relay, _with_repository
from tests.scenario.test_session_support import SPEC, World, at, owned_obj, pod_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

UDP_ONLY = {**SPEC, "apps": [{"name": "dns", "ports": [{"port": 5353, "protocol": "UDP"}]}]}
MIXED = {**SPEC, "apps": [{"name": "dns", "ports": [{"port": 5353, "protocol": "UDP"}, {"port": 8080}]}]}


def test_an_existing_ingress_is_replaced_carrying_the_resource_version_it_was_read_at():
    """Seed 002: the Ingress replace, like the Service's, carries ``existing.metadata.resourceVersion``,
    so a write over a changed Ingress conflicts rather than clobbers (mutant: the Ingress replace
    without it).
    Seed table: seed 002:526-536."""
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    w.answer("create", "Service", when=6, obj={})
    w.answer("create", "Ingress", "already_exists", when=6, status_reason="AlreadyExists")
    w.answer("get", "Ingress", when=7, obj=owned_obj("Ingress"))
    (replace,) = w.pending("replace", "Ingress")
    assert replace.manifest["metadata"]["resourceVersion"] == "77"


def test_a_running_pod_without_an_ip_is_not_running_yet():
    """Seed 002 ``waitRunning``: phase Running counts only with ``status.podIP`` (``if (ip) return
    ip``); until then the Session is not Ready, whatever else is (mutant: "Running" without a pod IP).
    Seed table: seed 002:197-199."""
    w = World().to_provisioning(when=1)
    w.observe_pod(5, phase="Running", ip="", node="node-a", ready=True)
    assert w.phase == "Provisioning", "Running without a pod IP is not running"
    assert not w.pending("create"), "nothing is routed to a pod without an address"
    w.run_pod(7)   # the same pod with its IP
    w.publish_endpoints(8)
    assert w.phase == "Ready"


def test_a_running_pod_without_an_ip_at_the_start_deadline_fails_it():
    """Seed 002: a pod Running without an IP at the start deadline (180 s) "did not reach Running"."""
    w = World().to_provisioning(when=1)
    w.observe_pod(5, phase="Running", ip="", node="node-a", ready=True)
    w.s.advance_to(at(1 + 180))
    w.answer("get", "Pod", when=1 + 181, obj=pod_obj(1, phase="Running", ip="", node="node-a", ready=True, rv="12"))
    w.s.advance_to(at(1 + 186))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "StartDeadlineExceeded"


def test_udp_only_ports_get_a_service_and_no_ingress():
    """Seed 002: an Ingress routes HTTP, so only TCP ports get Ingress rules (``p.protocol ===
    "tcp"``); with UDP ports alone no Ingress is made, and Ready does not wait for one (mutant: an
    Ingress made for UDP-only ports).
    Seed table: seed 002:517."""
    w = World().to_provisioning(UDP_ONLY, when=1)
    w.run_pod(5)
    (service,) = w.pending("create", "Service")
    assert [(p["port"], p["protocol"]) for p in service.manifest["spec"]["ports"]] == [(5353, "UDP")]
    assert not w.pending("create", "Ingress")
    w.answer("create", "Service", when=6, obj={})
    assert w.phase == "Ready" and not w.effects("create", "Ingress")


def test_a_mixed_session_routes_only_its_tcp_port_through_the_ingress():
    w = World().to_provisioning(MIXED, when=1)
    w.run_pod(5)
    (ingress,) = w.pending("create", "Ingress")
    assert [r["host"].split("-", 1)[0] for r in ingress.manifest["spec"]["rules"]] == ["8080"]


def test_a_clone_failure_after_ready_does_not_fail_the_session():
    """Seed 000: "only a failed Clone fails a Sandbox *waiting* on that node": once Ready, a later
    failed Clone (the cache re-cloning, say) is no verdict on a Session that serves (mutant: a Clone
    failure after Ready failing the Session)."""
    w = World()
    repo = _with_repository(w)
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"present": True, "synced": True, "attempted": "Clone"}})
    assert w.phase == "Ready"
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"present": False, "synced": False, "attempted": "Clone",
                                                          "lastError": "fatal: could not read from remote"}})
    assert w.phase == "Ready"
    assert w.status()["phase"] == "Ready"
