"""The Session's conditions follow metav1.Condition (DESIGN invariant 13, docs/session-status.md):
``lastTransitionTime`` kept while a condition's status stays, moved when it changes; every
condition and the status name the spec's ``metadata.generation``."""
from __future__ import annotations

from engine.machines.session.model import SessionConfig, SessionDecision
from engine.machines.session.spec import SpecError
from engine.machines.session.status import compute, stamp
from engine.rfc3339 import to_seconds_text

T1, T2 = "2030-01-01T00:00:01Z", "2030-01-01T00:00:09Z"


def _c(type_: str, status: str, reason: str = "R") -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": "m"}


def test_a_new_condition_gets_now():
    out, since = stamp([_c("Ready", "False")], {}, T1)
    assert out == [{**_c("Ready", "False"), "lastTransitionTime": T1}]
    assert since == {"Ready": ("False", T1)}


def test_the_time_is_kept_while_the_status_stays_even_when_the_reason_changes():
    out, since = stamp([_c("Ready", "False", "Provisioning")], {"Ready": ("False", T1)}, T2)
    assert out[0]["lastTransitionTime"] == T1 and out[0]["reason"] == "Provisioning"
    assert since == {"Ready": ("False", T1)}


def test_the_time_moves_when_the_status_changes():
    out, since = stamp([_c("Ready", "True"), _c("SpecValid", "True")],
                       {"Ready": ("False", T1), "SpecValid": ("True", T1)}, T2)
    assert [c["lastTransitionTime"] for c in out] == [T2, T1]
    assert since == {"Ready": ("True", T2), "SpecValid": ("True", T1)}


def test_a_condition_that_went_away_transitions_when_it_comes_back():
    _, since = stamp([_c("Ready", "True")], {"Ready": ("True", T1), "EndpointsPublished": ("False", T1)}, T2)
    assert "EndpointsPublished" not in since
    out, _ = stamp([_c("EndpointsPublished", "False")], since, T2)
    assert out[0]["lastTransitionTime"] == T2


def test_without_a_known_time_a_new_condition_waits_for_one():
    out, since = stamp([_c("Ready", "False")], {}, None)
    assert "lastTransitionTime" not in out[0] and since == {}
    out, _ = stamp([_c("Ready", "False")], {"Ready": ("False", T1)}, None)
    assert out[0]["lastTransitionTime"] == T1


def test_the_time_is_metav1_times_form_truncated_to_the_second():
    assert to_seconds_text(1_893_456_000_999) == "2030-01-01T00:00:00Z"


def test_the_status_and_every_condition_name_the_specs_generation():
    d = SessionDecision(name="demo", namespace="team", home="local", phase="Pending", generation=2, spec_generation=7)
    st = compute(d, SpecError("image", "required"), SessionConfig())
    assert st["observedGeneration"] == 7
    assert st["conditions"] and all(c["observedGeneration"] == 7 for c in st["conditions"])
    assert st["generation"] == 2   # kfold's pod generation: another count


def test_an_unknown_spec_generation_is_cleared_not_invented():
    d = SessionDecision(name="demo", namespace="team", home="local", phase="Pending", generation=1)
    st = compute(d, SpecError("image", "required"), SessionConfig())
    assert st["observedGeneration"] is None
    assert all("observedGeneration" not in c for c in st["conditions"])
