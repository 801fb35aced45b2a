"""A Session's conditions agree with each other and its Events name the pod generation they are
about (issue 52, item 4; docs/session-status.md). The oracle is those words:

- ``PortsRouted`` True (``AllRouted``) only while the Service and the Ingress route every declared
  port to the current pod; a taken Service name is ``PortsRouted`` False with that reason
  (``NameTaken``), never True beside ``Ready`` False ``NameTaken``;
- a failure's Event note names its pod generation; a Ready Event names the pod that serves; no note
  says "generation 0" (a Session that failed before its first bring-up has no pod generation);
- a journal written before kfold stated its status rules (``session.configure`` without
  ``status_rules``) refolds as it was decided.
"""
from __future__ import annotations

import pytest

from tests.scenario.test_session_lifecycle import _pod_gone
from tests.scenario.test_session_owned import OTHER_APP
from tests.scenario.test_session_support import SPEC, World, owned_obj, pod_obj

pytestmark = pytest.mark.usefixtures("frozen_world")



def _daemons_rules() -> int:
    """The status rules ``kfold run`` states in its ``session.configure``."""
    from kfold.daemon.boot import configure_command
    from kfold.daemon.config import Config
    return configure_command(Config.model_validate({"namespaces": ["team"]}), None).args["status_rules"]


NOW = _daemons_rules()


def writes(w: World) -> list[dict]:
    return [e.patch["status"] for e in w.effects("patch", "Session") if e.subresource == "status"]


def cond(status: dict, type_: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == type_)


def notes(w: World, reason: str | None = None) -> list[str]:
    return [e.note for e in w.effects("post_event") if reason in (None, e.reason)]


def _next_generation_ready(w: World, spec: dict, when: float) -> World:
    """A Ready Session's spec changed: the old pod goes, the new one serves, the Service and
    Ingress re-pointed at it (read, then replaced)."""
    w.submit(spec, when)
    gen = w.decision().generation
    _pod_gone(w, gen - 1, when + 1)
    w.answer("create", "Pod", when=when + 2, obj=pod_obj(gen))
    w.run_pod(when + 3, ready=False)
    for kind in ("Service", "Ingress"):   # routed once the pod runs, before it is ready
        w.answer("get", kind, when=when + 3, obj=owned_obj(kind))
        w.answer("replace", kind, when=when + 3, obj={})
    assert w.phase == "Provisioning"
    w.run_pod(when + 4)
    assert w.phase == "Ready" and w.decision().generation == gen
    return w


def _service_taken(w: World) -> World:
    """The Service create finds a same-name Service that is not the Session's."""
    w.to_provisioning(when=1)
    w.run_pod(5)
    w.answer("create", "Service", "already_exists", when=6, status_reason="AlreadyExists")
    w.answer("get", "Service", when=7, obj=owned_obj("Service", labels=OTHER_APP))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "NameTaken"
    return w


def test_a_taken_service_name_is_ports_routed_false_with_that_reason():
    w = _service_taken(World(status_rules=NOW))
    routed = w.condition("PortsRouted")
    assert (routed["status"], routed["reason"]) == ("False", "NameTaken")
    assert "Service team/demo" in routed["message"] and routed["message"].startswith("no port is routed: ")
    assert not [s for s in writes(w) if cond(s, "PortsRouted")["status"] == "True"], "nothing was ever routed"


def test_ports_routed_is_true_only_once_the_service_and_the_ingress_route_the_pod():
    w = World(status_rules=NOW).to_provisioning(when=1)
    w.run_pod(5, ready=False)
    w.answer("create", "Service", when=6, obj={})
    assert w.pending("create", "Ingress"), "the Ingress is still on its way"
    w.answer("create", "Ingress", when=6, obj={})
    assert w.phase == "Provisioning"
    w.run_pod(7)
    assert w.phase == "Ready"
    assert (w.condition("PortsRouted")["status"], w.condition("PortsRouted")["reason"]) == ("True", "AllRouted")
    assert [s["phase"] for s in writes(w)] == ["Ready"], "the bring-up's steps, routing included, write nothing"


def test_a_status_written_before_the_routes_says_they_are_being_routed():
    w = World(status_rules=NOW).to_provisioning(when=1)
    w.observe_pod(3, waiting=("ErrImagePull", "no such image"))   # something to tell: written
    routed = w.condition("PortsRouted")
    assert (routed["status"], routed["reason"]) == ("False", "Routing") and "demo-g1" in routed["message"]


def test_routing_as_the_bring_up_goes_writes_no_status_of_its_own():
    """The step from routing to routed is the bring-up's own: like Creating and Provisioning, it
    writes nothing until Ready (a resumed generation 2 writes its Pending, then its Ready)."""
    w = World(status_rules=NOW).to_ready()
    before = len(writes(w))
    _next_generation_ready(w, {**SPEC, "image": "registry.example/ws:2"}, 10)
    assert [s["phase"] for s in writes(w)[before:]] == ["Pending", "Ready"]


def test_a_suspended_session_routes_nothing():
    w = World(status_rules=NOW).to_ready()
    w.submit({**SPEC, "suspended": True}, 10)
    routed = w.condition("PortsRouted")
    assert (routed["status"], routed["reason"]) == ("False", "NoPod") and "Suspended" in routed["message"]


def test_a_session_that_declares_no_port_has_nothing_to_route():
    w = World(status_rules=NOW).to_provisioning({**SPEC, "apps": [{"name": "batch"}]}, when=1)
    w.run_pod(5)
    assert w.phase == "Ready" and w.condition("PortsRouted")["status"] == "True"


def test_a_failure_before_any_pod_generation_has_no_generation_in_its_note():
    w = World(status_rules=NOW)
    w.submit({**SPEC, "cluster": "mars"})
    [note] = notes(w, "InvalidSpec")
    assert note == w.condition("Ready")["message"] and "generation" not in note


def test_a_failure_names_the_pod_generation_it_ended():
    w = _service_taken(World(status_rules=NOW))
    [note] = notes(w, "NameTaken")
    assert note.startswith("pod generation 1: Service team/demo")


def test_each_ready_event_names_the_pod_that_serves():
    w = _next_generation_ready(World(status_rules=NOW).to_ready(), {**SPEC, "image": "registry.example/ws:2"}, 10)
    assert notes(w, "Ready") == ["pod demo-g1 is serving", "pod demo-g2 is serving"]


def test_kfold_run_states_the_rules_these_tests_hold():
    assert NOW >= 2, "rules 2 hold from 2 on (3 adds containers' states: tests/scenario/test_kubelet_answers.py)"


def test_a_journal_from_before_the_status_rules_refolds_as_it_was_decided():
    w = _service_taken(World())
    assert w.condition("PortsRouted")["status"] == "True"
    assert notes(w, "NameTaken")[0].startswith("generation 1: ")
    w = World()
    w.submit({**SPEC, "cluster": "mars"})
    assert notes(w, "InvalidSpec")[0].startswith("generation 0: ")
