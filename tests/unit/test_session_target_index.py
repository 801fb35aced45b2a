"""The target index agrees with the Session records after any sequence of saves and deletions.

``session.model``: the index says which Session's pods live in each slot
(``"<handle>/<namespace>/<session name>"``); it is derived state, so its slots are exactly those
some Session record is placed on, whatever happened before: ``SessionMachine.answer("placed")``
reads it (tests/mutation/equivalent.txt, ``answer__mutmut_14``, relies on this). A slot keeps the
Session that claimed it first while that one stays there (``lookup`` refuses the others its pods);
when it leaves, the least other key placed there takes it at once (an index rebuilt from the
records names the least key too). Several Sessions of one name share a slot when their spec places them in the same
target namespace (from two home namespaces or two home clusters): the later ones are refused
(TargetTaken) but stay placed there.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from immutables import Map

from engine.core import State, StepContext
from engine.machines.session import machine, observed, targets
from engine.machines.session.machine import SessionMachine
from engine.machines.session.model import INDEX_KEY, SessionDecision

KEYS = ["local/team/demo", "local/lab/demo", "west/team/demo", "local/team/other"]
PLACES = [("", ""), ("east", ""), ("east", "shared"), ("local", "shared")]   # (target, target_namespace)


def _ctx() -> StepContext:
    ctx = StepContext(State(tables=Map({"session": Map()})))
    ctx._machine = "session"
    return ctx


def _record(key: str, place: tuple[str, str]) -> SessionDecision:
    home, namespace, name = key.split("/")
    return SessionDecision(name=name, namespace=namespace, home=home, target=place[0], target_namespace=place[1],
                           phase="Provisioning" if place[0] else "Pending")


def _table(ctx: StepContext) -> Map:
    return Map(ctx.items())


def _placed(ctx: StepContext) -> set[str]:
    """Every slot a Session record is placed on, read from the records alone."""
    return {targets.slot_of(d) for _, d in ctx.items() if targets.slot_of(d)}


OPS = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([None, *PLACES])), max_size=30)


@settings(max_examples=200, derandomize=True, database=None)
@given(OPS)
def test_the_index_names_every_slot_a_session_is_placed_on_and_only_those(ops):
    """``None``: the Session is deleted (``session_gone``); else saved placed there (``save``)."""
    ctx = _ctx()
    for key, place in ops:
        held = dict(getattr(ctx.get(INDEX_KEY), "slots", {}))
        if place is None:
            observed.session_gone(ctx, key)
        else:
            machine.save(ctx, key, _record(key, place))
        slots = getattr(ctx.get(INDEX_KEY), "slots", {})
        assert set(slots) == _placed(ctx)
        for s, k in slots.items():
            assert targets.slot_of(ctx.get(k)) == s, f"{s} names {k}, which is not placed there"
            if s in held and targets.slot_of(ctx.get(held[s])) == s:
                assert k == held[s], f"{s} passed from {held[s]}, still placed there, to {k}"
            elif s in held:
                assert k == min(key_ for key_, d in ctx.items() if targets.slot_of(d) == s), "the least heir"
        table = _table(ctx)
        if INDEX_KEY in table:   # the answer from the index is the answer from the records
            assert SessionMachine().answer("placed", table) == SessionMachine().answer("placed", table.delete(INDEX_KEY))


def test_a_slot_whose_holder_is_deleted_passes_to_the_session_still_placed_there():
    """Two home clusters' ``team/demo`` placed in ``east/team``: the second is refused the slot
    while the first holds it; once the first is deleted, the second is the one ``lookup`` names."""
    ctx = _ctx()
    machine.save(ctx, "west/team/demo", _record("west/team/demo", ("east", "")))
    machine.save(ctx, "local/team/demo", _record("local/team/demo", ("east", "")))
    assert targets.lookup(ctx, "east", "team", "demo") == "west/team/demo", "first come"
    observed.session_gone(ctx, "west/team/demo")
    assert targets.lookup(ctx, "east", "team", "demo") == "local/team/demo"
    assert SessionMachine().answer("placed", _table(ctx)) == {"east/team/demo"}
