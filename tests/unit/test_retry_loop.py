"""``Ctx.retry`` and ``Ctx.drop_retries`` (engine/core.py): the handler's "retry" goes on with the
same effect's own loop; it refuses what is not the answered effect or not safe to repeat."""
from __future__ import annotations

from typing import Any

import pytest

from engine import backoff, fold, initial_state
from engine.core import Machines
from engine.effects.models import CreateObject, GetObject
from engine.machines.base import Machine
from journal.records import Command, Outcome

REF = {"cluster": "c", "api_version": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "x"}


class Asker(Machine):
    """Emits one request per command; answers every transient with ``how``."""

    name = "asker"
    commands = ("ask",)
    how = "retry"

    def on_command(self, ctx: Any, rec: Command) -> None:
        kind = CreateObject if rec.args.get("create") else GetObject
        extra = {"manifest": {}} if rec.args.get("create") else {}
        ctx.emit(kind, "c/ns/x", **REF, **extra)

    def on_outcome(self, ctx: Any, rec: Outcome, effect: Any) -> None:
        if rec.result != "transient":
            return
        if self.how == "retry":
            ctx.put("c/ns/x", ctx.retry(backoff.POD_READ))
        elif self.how == "drop":
            ctx.drop_retries("c/ns/x")


def _step(state, rec):
    return fold(state, rec.stamped(state.seq + 1), Machines([Asker()]))


def _asked(create: bool = False):
    state, [effect] = _step(initial_state(), Command(at=1_000, name="ask", args={"create": create}))
    return state, effect


def test_a_retry_is_the_same_effect_with_its_count_going_on():
    state, effect = _asked()
    for attempt in range(3):   # the executor's journaled decisions
        state, _ = _step(state, Outcome(at=2_000, effect_id=effect.id, machine="asker", key=effect.key,
                                        result="transient", retry_after_ms=500))
        assert state.pending[effect.id].attempt == attempt + 1
    state, out = _step(state, Outcome(at=10_000, effect_id=effect.id, machine="asker", key=effect.key, result="transient"))
    assert out == ()
    p = state.pending[effect.id]
    assert (p.effect, p.issued, p.attempt) == (effect, False, 4)
    assert p.not_before == 10_000 + backoff.delay_ms(4 + backoff.POD_READ.step)
    assert state.table("asker").get("c/ns/x") is True


def test_a_retry_of_an_unsafe_request_is_refused():
    state, effect = _asked(create=True)
    state, out = _step(state, Outcome(at=2_000, effect_id=effect.id, machine="asker", key=effect.key, result="transient"))
    assert effect.id not in state.pending, "nothing sent again"
    assert "c/ns/x" in state.quarantine and "not safe to repeat" in state.quarantine["c/ns/x"].error


def test_a_dropped_retry_is_never_sent():
    state, effect = _asked()
    state, _ = _step(state, Outcome(at=2_000, effect_id=effect.id, machine="asker", key=effect.key,
                                    result="transient", retry_after_ms=500))
    assert state.pending[effect.id].attempt == 1
    Asker.how = "drop"
    try:
        state, _ = _step(state, Command(at=2_100, name="ask", args={}))   # a second request, answered transient
        [second] = [p.effect for p in state.pending.values() if p.effect.id != effect.id]
        state, _ = _step(state, Outcome(at=2_200, effect_id=second.id, machine="asker", key=second.key, result="transient"))
    finally:
        Asker.how = "retry"
    assert effect.id not in state.pending, "the waiting retry is dropped"


@pytest.mark.parametrize("record", [Command(at=1, name="ask", args={})])
def test_a_retry_outside_an_answer_is_refused(record):
    class Eager(Asker):
        def on_command(self, ctx: Any, rec: Command) -> None:
            ctx.retry(backoff.POD_READ)
    state, _ = fold(initial_state(), record.stamped(1), Machines([Eager()]))
    assert any("only the effect whose outcome is being folded" in q.error for q in state.quarantine.values())


def test_drop_retries_drops_only_this_machines_waiting_retries_on_the_key_that_match():
    """Another machine's retry on the same key, a retry on another key and one ``match`` refuses
    all stay; the state's ``retrying`` map (derived from the pending map) follows."""
    from engine.core import State

    class Other(Asker):
        name, commands = "other", ("other",)

    class Dropper(Asker):
        commands = ("ask", "drop")

        def on_command(self, ctx: Any, rec: Command) -> None:
            if rec.name == "drop":
                ctx.drop_retries("c/ns/x", lambda e: e.kind == "ConfigMap")
            else:
                ctx.emit(GetObject, rec.args["key"], **{**REF, "kind": rec.args.get("kind", "ConfigMap")})

    machines = Machines([Dropper(), Other()])

    def step(state, rec):
        return fold(state, rec.stamped(state.seq + 1), machines)
    state = initial_state()
    state, [mine] = step(state, Command(at=1, name="ask", args={"key": "c/ns/x"}))
    state, [secret] = step(state, Command(at=1, name="ask", args={"key": "c/ns/x", "kind": "Secret"}))
    state, [elsewhere] = step(state, Command(at=1, name="ask", args={"key": "c/ns/y"}))
    state, [theirs] = step(state, Command(at=1, name="other", args={}))
    for e in (mine, secret, elsewhere, theirs):
        state, _ = step(state, Outcome(at=2, effect_id=e.id, machine=e.machine, key=e.key, result="transient"))
    assert {e.id for e in (mine, secret, elsewhere, theirs)} == set(state.retrying)
    state, _ = step(state, Command(at=3, name="drop", args={}))
    assert mine.id not in state.pending
    assert {secret.id, elsewhere.id, theirs.id} <= set(state.pending)
    assert state.retrying == State(pending=state.pending).retrying and dict(state.retrying) == {secret.id: "c/ns/x", elsewhere.id: "c/ns/y",
                                                                       theirs.id: "c/ns/x"}
