"""The scrape-time collectors and the bring-up accounting of ``kfold.daemon.metrics``, on hand-made fold
states: Sessions per phase and effects in flight are what the state holds at scrape time; time to
Ready runs from the record that began a generation to the one that made it Ready (server ms);
failures count each move to Failed once, by a bounded set of reasons."""
from __future__ import annotations

from types import SimpleNamespace

from immutables import Map
from prometheus_client.parser import text_string_to_metric_families

from engine.core import Pending, State
from engine.machines.session.model import Failure, SessionConfig, SessionDecision
from kfold.daemon.metrics import MAX_REASONS, BringUps, Metrics, Scrape, effects_in_flight, sessions_by_phase


def session(name: str, phase: str = "Pending", generation: int = 1, **kw) -> SessionDecision:
    return SessionDecision(name=name, namespace="ns", home="local", phase=phase, generation=generation, **kw)


def state(*decisions: SessionDecision, pending: dict | None = None) -> State:
    table = Map({f"local/ns/{d.name}": d for d in decisions}).set("#config", SessionConfig())
    return State(tables=Map({"session": table}), pending=Map(pending or {}))


def observed(name: str, at: int, cluster: str = "local") -> SimpleNamespace:
    return SimpleNamespace(kind="Session", cluster=cluster, namespace="ns", name=name, at=at)


def samples(fam) -> dict:
    return {tuple(sorted(s.labels.items())): s.value for s in fam.samples}


def totals(b: BringUps) -> dict:
    return {x.name: x.value for x in b.to_ready.family().samples if not x.name.endswith("_bucket")}


def test_sessions_by_phase_counts_the_state_at_scrape_time_every_phase_present():
    s = state(session("a", "Ready"), session("b", "Ready"), session("c", "Provisioning"),
              session("d", "Failed"), session("gone", "Stopped", gone=True))
    got = {dict(k)["phase"]: v for k, v in samples(sessions_by_phase(s)).items()}
    assert got == {"Pending": 0, "Creating": 0, "Provisioning": 1, "Ready": 2, "Suspended": 0, "Stopping": 0,
                   "Stopped": 0, "Failed": 1}
    assert sum(got.values()) == 4, "the config entry and a deleted Session are not Sessions"


def test_effects_in_flight_are_the_issued_pending_ones_and_zero_at_rest():
    effect = SimpleNamespace(type="patch", key="local/ns/a")
    s = state(pending={"1.0": Pending(effect, issued=True), "1.1": Pending(effect), "2.0": Pending(effect, issued=True)})
    in_flight, waiting = effects_in_flight(s)
    assert in_flight.samples[0].value == 2 and waiting.samples[0].value == 1
    assert [f.samples[0].value for f in effects_in_flight(state())] == [0, 0]


def test_time_to_ready_runs_from_the_record_that_began_the_generation_to_the_one_that_made_it_ready():
    b = BringUps()
    s0, s1 = state(), state(session("a"))
    b.moved(s0, s1, [observed("a", 1_000)], [()], None)                     # created: Pending at 1.000 s
    s2 = state(session("a", "Provisioning"))
    b.moved(s1, s2, [observed("a", 2_000)], [()], None)                     # a step: same generation
    s3 = state(session("a", "Ready"))
    pod = SimpleNamespace(kind="Pod", cluster="local", namespace="ns", name="a-1", at=4_500)
    b.moved(s2, s3, [pod], [(SimpleNamespace(key="local/ns/a"),)], None)  # Ready via its status patch
    assert totals(b) == {"kfold_session_time_to_ready_seconds_count": 1, "kfold_session_time_to_ready_seconds_sum": 3.5}
    b.moved(s3, state(session("a", "Ready")), [observed("a", 9_000)], [()], None)   # Ready again: no new sample
    s4 = state(session("a", "Pending", generation=2))                        # spec changed: generation 2
    b.moved(s3, s4, [observed("a", 10_000)], [()], None)
    b.moved(s4, state(session("a", "Ready", generation=2)), [observed("a", 70_000)], [()], None)
    assert totals(b) == {"kfold_session_time_to_ready_seconds_count": 2, "kfold_session_time_to_ready_seconds_sum": 63.5}
    le = {x.labels["le"]: x.value for x in b.to_ready.family().samples if x.name.endswith("_bucket")}
    assert le["2.0"] == 0 and le["5.0"] == 1 and le["30.0"] == 1 and le["60.0"] == 2 and le["+Inf"] == 2  # le is inclusive


def test_a_record_stamped_elsewhere_is_timed_on_the_home_clock():
    home = SimpleNamespace(now_ms=lambda: 5_000)
    clocks = SimpleNamespace(for_cluster=lambda c: home if c == "local" else None)
    b = BringUps()
    b.moved(state(), state(session("a")), [observed("a", 1_000)], [()], clocks)
    pod = SimpleNamespace(kind="Pod", cluster="far", namespace="ns", name="a-1", at=999_999)   # another clock
    b.moved(state(session("a", "Provisioning")), state(session("a", "Ready")), [pod],
            [(SimpleNamespace(key="local/ns/a"),)], clocks)
    assert [x.value for x in b.to_ready.family().samples if x.name.endswith("_sum")] == [4.0]


def test_failures_count_each_move_to_failed_once_with_bounded_reasons():
    b = BringUps()
    failed = session("a", "Failed", failure=Failure(reason="PodFailed", message="x"))
    b.moved(state(session("a", "Provisioning")), state(failed), [observed("a", 1)], [()], None)
    b.moved(state(failed), state(failed), [observed("a", 2)], [()], None)   # still Failed, same failure
    assert b.failures == {"PodFailed": 1}
    weird = session("a", "Failed", failure=Failure(reason="not a reason!", message="x"))
    b.moved(state(session("a")), state(weird), [observed("a", 3)], [()], None)
    for i in range(MAX_REASONS + 5):
        d = session("a", "Failed", failure=Failure(reason=f"Reason{i}", message="x"))
        b.moved(state(session("a")), state(d), [observed("a", 4)], [()], None)
    assert len(b.failures) <= MAX_REASONS + 1 and b.failures["Other"] >= 6


def test_a_deleted_session_stops_its_bring_up():
    b = BringUps()
    b.moved(state(), state(session("a")), [observed("a", 1_000)], [()], None)
    b.moved(state(session("a")), state(), [observed("a", 2_000)], [()], None)
    b.moved(state(), state(session("a", "Ready")), [observed("a", 3_000)], [()], None)
    assert not [x for x in b.to_ready.family().samples if x.name.endswith("_count")]


def test_each_metrics_has_its_own_registry_with_help_on_every_family():
    one, two = Metrics(), Metrics()
    one.effect_done("create", "ok")
    one.bind(lambda: Scrape(state=state(session("a", "Ready")), ready=True, journal_path="/"))
    text = one.text()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(f.documentation for f in fams.values()), [n for n, f in fams.items() if not f.documentation]
    assert {"kfold_build_info", "process_cpu_seconds", "python_info", "kfold_sessions", "kfold_ready",
            "kfold_journal_filesystem_size_bytes", "kfold_effects_in_flight"} <= set(fams)
    assert 'kfold_effects_total{result="ok",type="create"} 1.0' in text
    assert "kfold_effects_total{" not in two.text(), "the second daemon's registry saw nothing"


def test_a_session_seen_before_its_first_generation_is_timed_from_that_sighting():
    b = BringUps()
    b.moved(state(), state(session("a", generation=0)), [observed("a", 1_000)], [()], None)
    b.moved(state(session("a", generation=0)), state(session("a", "Creating")), [observed("a", 3_000)], [()], None)
    b.moved(state(session("a", "Creating")), state(session("a", "Ready")), [observed("a", 6_000)], [()], None)
    assert totals(b) == {"kfold_session_time_to_ready_seconds_count": 1, "kfold_session_time_to_ready_seconds_sum": 5.0}


def test_a_bring_up_without_server_time_on_either_side_is_not_timed_and_does_not_raise():
    """A restart's in-doubt records carry no server time (``at`` None): such a bring-up is left
    untimed rather than failing the accounting (which runs in the committer)."""
    b = BringUps()
    s0, s1 = state(), state(session("a"))
    b.moved(s0, s1, [observed("a", None)], [()], None)                       # began with no server time
    b.moved(s1, state(session("a", "Ready")), [observed("a", 5_000)], [()], None)
    b.moved(state(), s1, [observed("a", 1_000)], [()], None)                  # began at 1 s ...
    b.moved(s1, state(session("a", "Ready")), [observed("a", None)], [()], None)   # ... Ready with no time
    assert totals(b) == {}


def test_state_sizes_count_decisions_and_timers_per_machine_and_the_retries_waiting():
    from engine.core import Timer
    from kfold.daemon.metrics import state_sizes
    eff = SimpleNamespace(key="local/ns/a", id="e1")
    timers = {f"session:local/ns/{n}:start": Timer(f"session:local/ns/{n}:start", 1, "session", f"local/ns/{n}", "start")
              for n in ("a", "b")}
    timers["pod:local/ns/a-g1:sweep"] = Timer("pod:local/ns/a-g1:sweep", 1, "pod", "local/ns/a-g1", "sweep")
    s = State(tables=Map({"session": Map({"local/ns/a": session("a"), "local/ns/b": session("b")}),
                          "pod": Map({"local/ns/a-g1": object()})}),
              timers=Map(timers), pending=Map({"e1": Pending(eff, attempt=2), "e2": Pending(eff, issued=True)}))
    fams = {f.name: samples(f) for f in state_sizes(s)}
    assert fams["kfold_state_objects"] == {(("machine", "pod"),): 1, (("machine", "session"),): 2}
    assert fams["kfold_timers"] == {(("machine", "pod"),): 1, (("machine", "session"),): 2}
    assert fams["kfold_effects_retrying"] == {(): 1}   # the unissued one with attempts, not the issued one
    fewer = State(tables=Map({"session": Map({"local/ns/a": session("a")})}))
    fams = {f.name: samples(f) for f in state_sizes(fewer)}
    assert fams["kfold_state_objects"] == {(("machine", "session"),): 1}
    assert fams["kfold_timers"] == {} and fams["kfold_effects_retrying"] == {(): 0}


def test_runtime_sizes_count_the_live_tasks_threads_series_and_the_daemons_maps():
    import asyncio
    import threading
    from kfold.daemon.metrics import runtime_sizes

    def read(s: Scrape) -> dict:
        return {f.name: samples(f) for f in runtime_sizes(s)}

    assert "kfold_asyncio_tasks" not in read(Scrape())   # no running loop: not known, not 0
    before = read(Scrape())["kfold_threads"][()]
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert read(Scrape())["kfold_threads"][()] == before + 1
    finally:
        stop.set()
        t.join()

    async def tasks() -> tuple[float, float]:
        idle = read(Scrape())["kfold_asyncio_tasks"][()]
        sleepers = [asyncio.create_task(asyncio.sleep(10)) for _ in range(3)]
        busy = read(Scrape())["kfold_asyncio_tasks"][()]
        for x in sleepers:
            x.cancel()
        return idle, busy
    idle, busy = asyncio.run(tasks())
    assert busy == idle + 3
    page = read(Scrape(event_series=4, bookkeeping={"effects_born": 2, "executor_workers": 0}))
    assert page["kfold_event_series"] == {(): 4}
    assert page["kfold_bookkeeping_entries"] == {(("map", "effects_born"),): 2, (("map", "executor_workers"),): 0}
