"""The status says which spec it is about (issue 33 item 4, DESIGN invariant 13): the step that
folds a spec change starting a new bring-up writes Ready False at the new ``metadata.generation``;
a metadata-only edit (same generation) writes nothing; ``lastTransitionTime`` moves only with a
condition's status, on the record's clock, and survives a lost journal."""
from __future__ import annotations

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import SPEC, World, at, owned_obj, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

IMAGE2 = {**SPEC, "image": "registry.example/ws:2"}


def _writes(w: World) -> list[dict]:
    return [e.patch["status"] for e in w.effects("patch", "Session") if e.subresource == "status"]


def _cond(status: dict, type_: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == type_)


def _ready_at_1() -> World:
    w = World()
    w.meta_generation = 1
    return w.to_ready()


def test_ready_names_the_generation_it_is_about():
    w = _ready_at_1()
    st = _writes(w)[-1]
    assert st["phase"] == "Ready" and st["observedGeneration"] == 1
    assert all(c["observedGeneration"] == 1 for c in st["conditions"])
    assert _cond(st, "Ready")["lastTransitionTime"] == "2030-01-01T00:00:06Z"   # endpoints published at 6 s


@pytest.mark.parametrize("change", [{"image": "registry.example/ws:2"}, {"apps": []}, {"suspended": True}],
                         ids=["image", "apps", "suspend"])
def test_the_step_that_folds_a_spec_change_writes_ready_false_at_the_new_generation(change):
    w = _ready_at_1()
    before = len(_writes(w))
    w.meta_generation = 2
    w.submit({**SPEC, **change}, when=20)
    written = _writes(w)[before:]
    assert written, "the change is written in the step that folds it"
    st = written[0]
    assert st["observedGeneration"] == 2
    ready = _cond(st, "Ready")
    assert (ready["status"], ready["observedGeneration"]) == ("False", 2)
    assert ready["lastTransitionTime"] == "2030-01-01T00:00:20Z"
    assert _cond(st, "SpecValid")["lastTransitionTime"] == "2030-01-01T00:00:06Z", "SpecValid stayed True"


def test_a_metadata_only_edit_writes_nothing():
    w = _ready_at_1()
    before = len(_writes(w))
    w.submit(SPEC, when=20)   # a new resourceVersion, the same spec and metadata.generation
    assert len(_writes(w)) == before


def test_back_to_ready_the_time_moves_again():
    w = _ready_at_1()
    w.meta_generation = 2
    w.submit(IMAGE2, when=20)
    w.rv += 1
    gen = w.decision().generation
    assert gen == 2
    w.answer("delete", "Pod", when=20)                         # generation 1's pod goes first (seed 002)
    w.observe_pod(20, gen=1, event="DELETED")
    w.answer("create", "Pod", when=21, obj=pod_obj(gen))
    w.run_pod(25)
    for kind in ("Service", "Ingress"):   # re-pointed at the new pod: read, then replaced
        w.answer("get", kind, when=26, obj=owned_obj(kind))
        w.answer("replace", kind, when=26, obj={})
    st = _writes(w)[-1]
    assert st["phase"] == "Ready" and st["observedGeneration"] == 2 and st["generation"] == 2
    assert _cond(st, "Ready")["lastTransitionTime"] == "2030-01-01T00:00:26Z"


def test_a_fresh_journal_keeps_the_transition_times_the_status_carries():
    w = World()
    obj = session_obj(SPEC, rv="500", finalizers=(FINALIZER,), generation=4)
    obj["status"] = {"phase": "Suspended", "generation": 3, "observedGeneration": 4, "conditions": [
        {"type": "SpecValid", "status": "True", "reason": "Valid", "message": "spec accepted",
         "observedGeneration": 4, "lastTransitionTime": "2029-06-01T00:00:00Z"},
        {"type": "Ready", "status": "False", "reason": "Suspended", "message": "suspended; the pod was released",
         "observedGeneration": 4, "lastTransitionTime": "2029-06-01T00:00:05Z"}]}
    w.s.observe(obj, at(0))
    resumed = _writes(w)[-1]   # not suspended in the spec it meets: a resume, written as it starts
    assert _cond(resumed, "SpecValid")["lastTransitionTime"] == "2029-06-01T00:00:00Z"
    assert _cond(resumed, "Ready")["lastTransitionTime"] == "2029-06-01T00:00:05Z", "Ready stayed False"


def test_a_ports_only_change_is_ready_again_only_once_the_new_ports_are_routed():
    w = _ready_at_1()
    before = len(_writes(w))
    w.meta_generation = 2
    w.submit({**SPEC, "apps": [{"name": "web", "ports": [{"port": 9090}], "io": "tty"}]}, when=20)
    assert w.decision().generation == 1, "a ports-only change keeps the pod"
    st = _writes(w)[before]
    ready = _cond(st, "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("False", "Routing", 2)
    for kind in ("Service", "Ingress"):
        for e in w.pending("replace", kind) + w.pending("create", kind):
            w.s.outcome(e, "ok", at(21), obj={})
        if w.pending("get", kind):
            w.answer("get", kind, when=21, obj=owned_obj(kind))
            w.answer("replace", kind, when=21, obj={})
    st = _writes(w)[-1]
    ready = _cond(st, "Ready")
    assert (ready["status"], ready["observedGeneration"], ready["lastTransitionTime"]) == ("True", 2, "2030-01-01T00:00:21Z")
    assert [e["port"] for e in st["endpoints"]] == [9090]


def test_a_transition_decided_on_a_registered_clusters_clock_is_stamped_on_the_home_clock():
    from tests.scenario.test_session_tenancy import ON_EDGE, TWorld
    ahead = 3 * 3600   # the edge apiserver's clock runs three hours ahead of the home one
    w = TWorld().to_creating(ON_EDGE, 1)
    w.answer("create", "Pod", when=2 + ahead, obj=w.pod(1))
    w.s.observe(w.pod(1, phase="Running", ip="10.1.0.7", node="edge-node", ready=True), at(4 + ahead),
                cluster="edge@acme")
    for kind in ("Service", "Ingress"):
        w.answer("create", kind, when=5 + ahead, obj={})
    assert w.phase == "Ready"
    ready = _cond(w.status(), "Ready")
    assert ready["status"] == "True"
    assert ready["lastTransitionTime"] == "2030-01-01T00:00:01Z", \
        "the latest home-clock time the Session's record knows, not the edge's clock"
