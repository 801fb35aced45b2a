"""Only the dispatcher moves a pod operation's phase.

A handler of the pod machine (``pod.machine``, ``pod.create``, ``pod.delete``) that changes a
``PodOp``'s phase answers ``base.Move(key, e, trigger, then, changes)``; ``Dispatch.run`` hands it
to ``base.fire``, the one caller of ``Table.next`` and the one writer of ``phase=`` on a record
(read from the source: tests/unit/test_machine_moves.py). Here, what the moves do: moves of its
own and of the real handlers fired on a recording context."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.seams import addressed
from engine.machines.base import IllegalTransition, Move, fire, move
from engine.machines.pod.acts import TABLE, save, send_read
from engine.machines.pod import create, delete
from engine.machines.pod.records import PodOp, Reply


class Recorder:
    """A fold step's context as far as the pod acts use it: what was stored, sent and cancelled."""

    def __init__(self, **entries):
        self.table, self.done, self.now = dict(entries), [], None

    def get(self, key):
        return self.table.get(key)

    def put(self, key, e):
        self.table[key] = e
        self.done.append(("put", e.phase))

    def drop(self, key):
        self.table.pop(key, None)
        self.done.append(("drop", key))

    def emit(self, effect_type, key, **fields):
        self.done.append(("emit", effect_type.__name__))
        return SimpleNamespace(id=f"1.{len(self.done)}")

    def now_on(self, cluster):
        return None

    def cancel_timer(self, key, name):
        self.done.append(("cancel", name))

    def drop_retries(self, key, match=None):
        self.done.append(("drop retries", key))

    def tell(self, key, message, to=""):
        self.done.append(("tell", addressed(message)[1]))


KEY = "local/ns/p"


def test_fire_follows_the_table_and_refuses_what_it_forbids():
    seen = []
    fire(Recorder(), TABLE, move(KEY, PodOp(), "create", lambda ctx, key, e: seen.append(e), op="create"))
    assert [(e.phase, e.op) for e in seen] == [("creating", "create")]
    with pytest.raises(IllegalTransition):
        fire(Recorder(), TABLE, move(KEY, PodOp(), "accepted", save))    # idle -> terminating is no row
    fire(Recorder(), TABLE, None)                                     # no move: nothing to make


def test_a_handler_answers_its_move_and_does_nothing_of_it_itself():
    ctx = Recorder()
    e = PodOp(op="delete", phase="deleting", uid="u1", rv="7", target="u1")
    answer = delete.deleted(ctx, KEY, e, SimpleNamespace(result="ok"))
    assert answer == Move(KEY, e, "accepted", save, {"terminating": True}) and ctx.done == []
    fire(ctx, TABLE, answer)
    assert ctx.get(KEY).phase == "terminating" and ctx.get(KEY).terminating


def test_an_act_that_answers_a_move_is_fired_in_turn():
    """A delete without a complete fence (no resourceVersion) reads first: ``send_delete`` answers
    the read's move, and the dispatcher makes it (idle -> deleting -> reading, a GET, no DELETE)."""
    ctx = Recorder(**{KEY: PodOp(uid="u1")})
    fire(ctx, TABLE, delete.start(ctx, KEY, (Reply(to="session", key="s"),), "stop", 60_000))
    assert ctx.done == [("emit", "GetObject"), ("put", "reading")]
    assert ctx.get(KEY).target == "u1"


def test_a_settled_create_starts_the_delete_queued_behind_it():
    ctx = Recorder()
    e = PodOp(op="create", phase="creating", session="s", generation=1, uid="u1", rv="3",
              replies=(Reply(to="session", key="s"),), then_delete=(Reply(to="session", key="s"),))
    fire(ctx, TABLE, create.fail(ctx, KEY, e, "no"))
    assert ctx.done == [("tell", "pod_create_failed"), ("cancel", "budget"), ("cancel", "retry"),
                        ("drop retries", KEY), ("put", "idle"), ("emit", "DeleteObject"), ("put", "deleting")]


def test_send_read_is_an_act_and_moves_nothing():
    ctx = Recorder()
    send_read(ctx, KEY, PodOp(op="delete", phase="reading"))
    assert ctx.get(KEY).phase == "reading"
