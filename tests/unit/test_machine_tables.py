"""A machine's transition table admits exactly its rows (DESIGN: every step moves along a declared row)."""
import pytest

from engine.machines.base import IllegalTransition, Table


def test_a_table_admits_its_rows_and_nothing_else_not_even_a_jump_to_a_named_state():
    t = Table("t", ["idle", "busy"], [("start", "idle", "busy")], "idle")
    assert t.next("idle", "start") == "busy"
    assert t.allows("idle", "start") and not t.allows("busy", "start")
    for state, event in (("busy", "start"), ("idle", "to_busy"), ("busy", "to_idle"), ("idle", "stop")):
        with pytest.raises(IllegalTransition):
            t.next(state, event)
    assert not t.allows("idle", "to_busy")
