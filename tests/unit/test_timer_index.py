"""The ticker's timer index is kept up to date across folds instead of rebuilt: after any sequence
of timers set, moved, cancelled and maps reused, it must hold exactly what a rebuild would."""
from __future__ import annotations

import random

from immutables import Map

from engine.core import Timer
from engine.effects.timers import _TimerIndex


from tests.harness import timers_rebuilt as rebuilt


def changes(rng: random.Random, timers: Map) -> tuple[Map, set[str]]:
    """Up to 3 timers set, moved or cancelled; the new map and the ids touched."""
    m, touched = timers.mutate(), set()
    for _ in range(rng.randrange(4)):
        n = rng.randrange(60)
        tid = f"session:c{n % 3}/ns/s{n}:ready"
        touched.add(tid)
        if rng.random() < 0.35 and tid in m:
            del m[tid]                                     # cancelled, or fired
        else:                                              # set, or moved to a new due time
            due = rng.choice([1000, 2000, rng.randrange(10**6)])   # ties on due time too
            m[tid] = Timer(id=tid, due=due, machine="session", key=f"c{n % 3}/ns/s{n}", name="ready",
                           cluster=rng.choice(["", "", "east"]))
    return m.finish(), touched


def test_the_index_equals_a_rebuild_after_every_change():
    rng = random.Random(11)
    index, timers, history = _TimerIndex(), Map(), []
    for step in range(3000):
        timers, _touched = changes(rng, timers)
        history.append(timers)
        if rng.random() < 0.05:   # the ticker may see an older map again (a rollback is not a fold,
            timers = rng.choice(history)   # but the index must not depend on maps only growing)
        assert index.get(timers) == rebuilt(timers), step
    assert index.get(Map()) == {}


def test_the_index_fed_the_timers_each_fold_touched_equals_a_rebuild_and_a_missed_note_costs_only_a_full_compare():
    """As the daemon feeds it (``Ticker.note_timers`` after every fold): looked up after one or
    several noted folds; a fold not noted (a state loaded), a note over-reporting ids (a refolded
    batch's) and an older map seen again all still give what a rebuild gives."""
    rng = random.Random(12)
    index, timers, history = _TimerIndex(), Map(), []
    for step in range(3000):
        before = timers
        timers, touched = changes(rng, timers)
        history.append(timers)
        r = rng.random()
        if r < 0.05:
            pass                                             # not noted
        elif r < 0.1:
            index.note(before, timers, touched | {"session:c0/ns/s99:ready", next(iter(index._seen), "x")})
        else:
            index.note(before, timers, touched)
        if rng.random() < 0.03:
            timers = rng.choice(history)                     # the ticker sees an older map
        if rng.random() < 0.6:
            assert index.get(timers) == rebuilt(timers), step


def test_a_noted_fold_is_looked_up_by_the_ids_touched_only():
    """The point of the notes: the timers a fold did not touch are not visited (a full compare
    would find the planted timer below; the noted lookup must not)."""
    index, t = _TimerIndex(), Timer(id="a", due=5, machine="m", key="c/ns/a", name="x")
    first = Map({"a": t})
    assert index.get(first) == {"c": [(5, "a", t)]}
    planted = first.set("b", Timer(id="b", due=1, machine="m", key="c/ns/b", name="x"))   # not noted as touched
    later = planted.set("c", Timer(id="c", due=9, machine="m", key="c/ns/c", name="x"))
    index.note(first, later, {"c"})
    assert [tid for _d, tid, _t in index.get(later)["c"]] == ["a", "c"]
