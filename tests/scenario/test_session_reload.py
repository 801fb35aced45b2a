"""A snapshot of the fold loads back the same (DESIGN.md: the state is a cache of the journal's
fold, so a restart from a snapshot decides as the fold would). Each scenario here ends on an answer
that resets a part of the Session's record: the pod read, the workspace claim adopted, an endpoint
left to someone else; the record must still be one a snapshot can hold and load."""
from __future__ import annotations

from typing import Any

import pytest

from engine import snapshot
from engine.core import Machines
from engine.machines import all_machines
from tests.scenario.test_session_endpoints import EXISTING_SERVICE
from tests.scenario.test_session_support import SPEC, World, at, owned_obj, pod_obj
from tests.scenario.test_session_workspace import _claim_obj, _to_claim, _world

pytestmark = pytest.mark.usefixtures("frozen_world")


def _reloads(w: World) -> None:
    data = snapshot.dump(w.s.state)
    again = snapshot.load(data, Machines(all_machines()))
    assert snapshot.dump(again) == data
    assert dict(again.table("session").items()) == dict(w.s.state.table("session").items())


def test_after_the_sessions_read_of_its_pod():
    w = World().to_provisioning(when=1)
    w.observe_pod(100, waiting=("ContainerCreating", ""))
    w.s.advance_to(at(1 + 181))
    w.answer("get", "Pod", when=182, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="11"))
    _reloads(w)


def test_after_the_workspace_claim_met_again_is_adopted():
    w = _world()
    w.s.outcome(_to_claim(w), "already_exists", at(1), status_reason="AlreadyExists")
    [read] = w.pending("get", "PersistentVolumeClaim")
    w.s.outcome(read, "ok", at(2), obj=_claim_obj())
    _reloads(w)


def test_after_a_service_name_held_by_someone_else_fails_the_session():
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    w.answer("create", "Service", "already_exists", when=6)
    w.answer("get", "Service", when=7, obj={**EXISTING_SERVICE, "metadata": {
        **EXISTING_SERVICE["metadata"], "labels": {"app": "billing"}}})
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "NameTaken"
    _reloads(w)


def test_after_ports_dropped_while_the_service_name_is_someone_elses():
    w = World().to_ready()
    w.submit({**SPEC, "apps": [{"name": "web", "io": "tty"}]}, 20)
    w.answer("get", "Service", when=21, obj=owned_obj("Service", labels={"app": "billing"}))
    assert not [e for e in w.s.effects if e.type == "log" and e.level == "error"], "decided, not quarantined"
    _reloads(w)
