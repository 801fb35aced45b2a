"""Only the repo dispatcher moves a Repo's phase.

A step of an operation (``repo.ops``) that changes a Repo's phase answers ``base.Move(key, entry,
trigger, then)``; ``Dispatch.run`` hands it to ``base.fire``, the one caller of ``Table.next`` and
the one writer of ``phase=`` on a record (read from the source: tests/unit/test_machine_moves.py).
Here, what the moves do, fired on a recording context."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.seams import addressed
from engine.machines.base import Dispatch, IllegalTransition, Move, fire, move
from engine.machines.repo import ops
from engine.machines.repo.ops import TABLE
from engine.machines.repo.records import Op, RepoEntry


class Recorder:
    """A fold step's context as far as the repo operation uses it: what was stored and sent."""

    def __init__(self):
        self.table, self.done = {}, []

    def get(self, key):
        return self.table.get(key)

    def put(self, key, e):
        self.table[key] = e
        self.done.append(("put", e.phase, e.op.kind if e.op else None))

    def emit(self, effect_type, key, **fields):
        self.done.append(("emit", effect_type.__name__))
        return SimpleNamespace(id=f"1.{len(self.done)}")

    def log(self, key, text, **fields):
        self.done.append(("log", text))

    def tell(self, key, message, to=""):
        self.done.append(("tell", addressed(message)[1]))


KEY = "local/team/r"


def _entry(**fields):
    return RepoEntry(key="local/team/r", cluster="local", namespace="team", name="r", **fields)


def test_fire_follows_the_table_and_refuses_what_it_forbids():
    seen = []
    fire(Recorder(), TABLE, move(KEY, _entry(), "create", lambda ctx, key, e: seen.append(e.phase)))
    fire(Recorder(), TABLE, move(KEY, _entry(phase="patching"), None, lambda ctx, key, e: seen.append(e.phase)))
    assert seen == ["creating", "patching"]          # no trigger: the phase stays
    with pytest.raises(IllegalTransition):
        fire(Recorder(), TABLE, move(KEY, _entry(), "verify", lambda ctx, key, e: None))   # idle -> verifying is no row
    fire(Recorder(), TABLE, None)


def test_a_step_answers_its_move_and_sends_nothing_itself():
    ctx = Recorder()
    answer = ops.start(ctx, _entry(exists=True, uid="u", rv="1"), Op(kind="unbind"))
    assert isinstance(answer, Move) and answer.trigger == "patch" and ctx.done == []
    fire(ctx, TABLE, answer)
    assert ctx.done == [("emit", "PatchObject"), ("put", "patching", "unbind")]
    assert ctx.get("local/team/r").op.effect_id == "1.1"


def test_a_finished_op_starts_the_next_queued_one_in_the_same_fire():
    ctx = Recorder()
    busy = _entry(phase="patching", exists=True, uid="u", rv="1", op=Op(kind="unbind", effect_id="0.1"),
                  queue=(Op(kind="evict", uid="u", rv="1"),))
    fire(ctx, TABLE, ops.succeed(ctx, busy))
    assert ctx.done == [("put", "idle", None), ("emit", "DeleteObject"), ("put", "deleting", "evict")]


def test_a_handler_that_starts_several_operations_has_each_made_before_the_next_starts():
    ctx, seen = Recorder(), []

    def several(ctx, key, record, ev):
        for name in ("a", "b"):
            seen.append([d for d in ctx.done if d[0] == "emit"])
            yield ops.start(ctx, RepoEntry(key=f"local/team/{name}", cluster="local", namespace="team", name=name,
                                           exists=True), Op(kind="unbind"))
    Dispatch("repo", [("config", object, several)], phases=TABLE, kinds=("config",)).run(
        ctx, "local/team/", "config", object, None, object())
    assert seen == [[], [("emit", "PatchObject")]]
    assert [d for d in ctx.done if d[0] == "emit"] == [("emit", "PatchObject")] * 2
