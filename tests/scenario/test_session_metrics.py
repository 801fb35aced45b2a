"""The bring-up accounting of /metrics (``kfold.daemon.metrics.BringUps``) on the real machines: fed each
fold's state before and after, as the daemon does, it times a Session from the record that created
it to the one whose fold made it Ready, and counts a failure once by its status reason."""
from __future__ import annotations

import pytest

from kfold.daemon.metrics import BringUps
from tests import harness
from tests.scenario.test_session_support import SPEC, World, pod_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


@pytest.fixture
def bringups(monkeypatch):
    b, real = BringUps(), harness.fold

    def metered(state, rec, machines):
        after, effects = real(state, rec, machines)
        b.moved(state, after, [rec], [effects], None)
        return after, effects

    monkeypatch.setattr(harness, "fold", metered)
    return b


def totals(b: BringUps) -> dict:
    return {x.name.rpartition("_")[2]: x.value for x in b.to_ready.family().samples if not x.name.endswith("_bucket")}


def test_a_bring_up_is_timed_from_the_sessions_creation_to_ready_on_the_record_clock(bringups):
    w = World()
    w.submit(SPEC, when=2)
    w.rv += 1
    w.answer("patch", "Session", when=2)
    w.answer("create", "Pod", when=3, obj=pod_obj(1))
    w.run_pod(5)
    assert totals(bringups) == {}, "not Ready yet: nothing observed"
    w.publish_endpoints(9.5)
    assert w.phase == "Ready"
    assert totals(bringups) == {"count": 1, "sum": 7.5}
    w.run_pod(12)   # Ready already: no second observation
    assert totals(bringups)["count"] == 1 and not bringups.failures


def test_a_failed_pod_counts_one_failure_by_its_reason(bringups):
    w = World().to_provisioning()
    w.observe_pod(7, phase="Failed")
    assert w.phase == "Failed"
    w.observe_pod(8, phase="Failed", rv="11")
    assert dict(bringups.failures) == {"PodFailed": 1}
    assert totals(bringups) == {}
