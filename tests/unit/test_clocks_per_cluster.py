"""One server clock per cluster (issue 12 item 7): two apiservers whose clocks disagree by seconds
never drag each other's readings back and forth, and a deadline about a registered cluster is
judged, and its record stamped, on that cluster's clock."""
from __future__ import annotations

from email.utils import formatdate

from engine.effects.io.clock import ServerClock, ServerClocks
from engine.effects.timers import Ticker
from tests.harness import T0
from tests.scenario.test_session_tenancy import ON_EDGE, TWorld

SKEW_MS = 7_000  # the registered cluster's clock runs 7 s behind the home cluster's


def date(ms: int) -> str:
    return formatdate(ms / 1000, usegmt=True)


class Mono:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_two_skewed_apiservers_keep_their_own_readings_and_none_goes_backwards():
    mono = Mono()
    clocks, shared = ServerClocks(home="local", monotonic=mono), ServerClock(mono)
    seen: dict[str, list[int]] = {"local": [], "edge@acme": []}
    shared_seen: list[int] = []
    for step in range(20):  # replies from both apiservers, interleaved, 0.5 s apart
        mono.t += 0.5
        for cluster, offset in (("local", 0), ("edge@acme", -SKEW_MS)):
            header = date(T0 + step * 500 + offset)
            clocks.for_cluster(cluster).observe(header)
            shared.observe(header)
            seen[cluster].append(clocks.now_ms(cluster))
            shared_seen.append(shared.now_ms())
    for cluster, readings in seen.items():
        assert readings == sorted(readings), f"{cluster}'s clock went backwards: {readings}"
    assert abs(seen["local"][-1] - seen["edge@acme"][-1] - SKEW_MS) <= 1000
    assert shared_seen != sorted(shared_seen), "one clock for both apiservers jumps back and forth (the bug)"


def test_a_start_deadline_on_a_registered_cluster_is_judged_on_its_clock():
    w = TWorld().to_creating(ON_EDGE)
    w.answer("create", "Pod", when=1, obj=w.pod(1))  # the create's outcome: stamped on edge@acme's clock
    (timer,) = [t for t in w.s.state.timers.values() if t.name == "start"]
    assert timer.cluster == "edge@acme"
    due = timer.due
    readings = {"local": due + SKEW_MS - 1, "edge@acme": due - 1}   # home already past it, edge not yet
    ticker = Ticker()
    assert ticker.due(w.s.state, lambda c: readings.get(c or "local")) == []
    readings["edge@acme"] = due
    (deadline,) = ticker.due(w.s.state, lambda c: readings.get(c or "local"))
    assert deadline.timer == timer.id and deadline.at == due  # stamped on edge's clock, not home's
    assert ticker.sleep_s(w.s.state, lambda c: None) == 1.0  # no reading at all: it waits, never guesses


def test_the_ticker_hands_out_timers_in_due_order_per_cluster_and_sees_timers_set_later():
    from immutables import Map

    from engine.core import State, Timer

    def timer(name: str, due: int, cluster: str) -> Timer:
        return Timer(id=f"session:{cluster}/ns/{name}:start", due=due, machine="session",
                     key=f"{cluster}/ns/{name}", name="start", cluster=cluster)

    ts = [timer("b", 300, "local"), timer("a", 100, "local"), timer("c", 200, "edge")]
    state = State(timers=Map({t.id: t for t in ts}))
    ticker, now = Ticker(), {"local": 150, "edge": 250}
    assert [d.due for d in ticker.due(state, now.get)] == [100, 200]
    assert ticker.due(state, now.get) == [], "each (timer, due) is handed out once"
    assert ticker.sleep_s(state, now.get) == 0.15     # local's next timer, b at 300, is 150 ms away
    later = timer("d", 160, "local")                  # a fold sets a timer: a new map, re-indexed
    state = State(timers=state.timers.set(later.id, later))
    assert ticker.sleep_s(state, now.get) == 0.01
    now["local"] = 400
    assert [d.due for d in ticker.due(state, now.get)] == [160, 300]
