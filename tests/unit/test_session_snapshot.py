"""The session table survives a snapshot: both record kinds load back identical."""
from __future__ import annotations

from engine import snapshot
from tests.scenario.test_session_support import World


def test_a_ready_session_and_its_config_round_trip_through_a_snapshot():
    w = World().to_ready()
    data = snapshot.dump(w.s.state)
    assert snapshot.dump(snapshot.load(data)) == data
    assert snapshot.load(data).table("session") == w.s.state.table("session")
