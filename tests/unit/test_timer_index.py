"""The ticker's timer index is kept up to date across folds instead of rebuilt: after any sequence
of timers set, moved, cancelled and maps reused, it must hold exactly what a rebuild would."""
from __future__ import annotations

import random

from immutables import Map

from engine.core import Timer, timer_cluster
from engine.effects.timers import _TimerIndex


def rebuilt(timers: Map) -> dict[str, list[tuple[int, str, Timer]]]:
    by: dict[str, list[tuple[int, str, Timer]]] = {}
    for t in timers.values():
        by.setdefault(timer_cluster(t), []).append((t.due, t.id, t))
    return {c: sorted(rows, key=lambda r: (r[0], r[1])) for c, rows in by.items()}


def test_the_index_equals_a_rebuild_after_every_change():
    rng = random.Random(11)
    index, timers, history = _TimerIndex(), Map(), []
    for step in range(3000):
        m = timers.mutate()
        for _ in range(rng.randrange(4)):
            n = rng.randrange(60)
            tid = f"session:c{n % 3}/ns/s{n}:ready"
            if rng.random() < 0.35 and tid in m:
                del m[tid]                                     # cancelled, or fired
            else:                                              # set, or moved to a new due time
                due = rng.choice([1000, 2000, rng.randrange(10**6)])   # ties on due time too
                m[tid] = Timer(id=tid, due=due, machine="session", key=f"c{n % 3}/ns/s{n}", name="ready",
                               cluster=rng.choice(["", "", "east"]))
        timers = m.finish()
        history.append(timers)
        if rng.random() < 0.05:   # the ticker may see an older map again (a rollback is not a fold,
            timers = rng.choice(history)   # but the index must not depend on maps only growing)
        assert index.get(timers) == rebuilt(timers), step
    assert index.get(Map()) == {}
