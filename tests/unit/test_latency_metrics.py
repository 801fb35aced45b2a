"""/metrics shows the latency inside the daemon: event -> fold, fold -> effect issued, event -> effect
issued, and each effect's round trip; every value comes from the daemon's shell, never the fold.

The daemon runs the tiny ``stepper`` machine of test_executor_order against the fake apiserver:
one command, one PATCH. Each histogram must count exactly what happened and render in the
Prometheus text format (cumulative buckets ending in +Inf == _count).
"""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from engine.effects.io.fake import T2030
from journal.records import Command
from kfold.daemon.http import Histogram, Metrics
from tests.unit.test_executor_order import idle, world


def series(text: str, name: str) -> dict[str, float]:
    """``{name{labels sorted}: value}`` of every sample of family ``name`` (buckets, sum, count)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.name == name:
            for s in fam.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return out


async def test_one_command_one_patch_fills_each_latency_histogram_once():
    d, server, _ = world()
    d.metrics = metrics = Metrics()
    d.start_loops()
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 1})])
    await idle(d)
    text = metrics.render([], journal_bytes=0, skew_ms=None, seq=d.state.seq)

    issued = series(text, "kfold_event_to_effect_issued_seconds")
    assert issued['kfold_event_to_effect_issued_seconds_count{held="false"}'] == 1, "issued by the commit that emitted it"
    assert issued['kfold_event_to_effect_issued_seconds_bucket{held="false",le="+Inf"}'] == 1
    assert 0 < issued['kfold_event_to_effect_issued_seconds_sum{held="false"}'] < 1.0
    assert series(text, "kfold_fold_to_effect_issued_seconds")['kfold_fold_to_effect_issued_seconds_count{held="false"}'] == 1
    trip = series(text, "kfold_effect_round_trip_seconds")
    assert trip['kfold_effect_round_trip_seconds_count{type="patch"}'] == 1
    assert trip['kfold_effect_round_trip_seconds_bucket{le="+Inf",type="patch"}'] == 1
    # the command and the patch's outcome each went from the inbox to a fold
    assert series(text, "kfold_event_to_fold_seconds")["kfold_event_to_fold_seconds_count"] == 2
    # two transactions reached the disk: the command with its EffectIssued, then the outcome
    assert series(text, "kfold_journal_flush_to_durable_seconds")["kfold_journal_flush_to_durable_seconds_count"] == 2
    assert not d._born and not d._sent, "bookkeeping of issued and answered effects is dropped"


async def test_an_effect_behind_a_busy_key_is_counted_as_held():
    d, server, _ = world()
    d.metrics = metrics = Metrics()
    d.start_loops()
    await d.submit([Command(at=T2030, name="step.patch", args={"step": 1}),
                    Command(at=T2030, name="step.patch", args={"step": 2})])   # same key, one commit
    await idle(d)
    issued = series(metrics.render([], journal_bytes=0, skew_ms=None, seq=0), "kfold_event_to_effect_issued_seconds")
    assert issued['kfold_event_to_effect_issued_seconds_count{held="false"}'] == 1
    assert issued['kfold_event_to_effect_issued_seconds_count{held="true"}'] == 1, "the second waited for the first's outcome"


def test_histogram_buckets_are_cumulative_and_include_their_upper_bound():
    h = Histogram("x_seconds", (0.001, 0.01), label="type")
    for s in (0.001, 0.005, 0.5):
        h.observe(s, "create")
    got = [(s.name, s.labels, s.value) for s in h.family().samples]
    assert got == [("x_seconds_bucket", {"type": "create", "le": "0.001"}, 1),
                   ("x_seconds_bucket", {"type": "create", "le": "0.01"}, 2),
                   ("x_seconds_bucket", {"type": "create", "le": "+Inf"}, 3),
                   ("x_seconds_count", {"type": "create"}, 3),
                   ("x_seconds_sum", {"type": "create"}, 0.001 + 0.005 + 0.5)]


def test_the_fold_histogram_keeps_its_name_and_format():
    m = Metrics()
    m.fold.observe(0.0002)
    text = m.render([], journal_bytes=0, skew_ms=None, seq=0)
    assert 'kfold_fold_seconds_bucket{le="0.0005"} 1.0' in text
    assert "kfold_fold_seconds_count 1.0" in text


def test_each_pass_of_the_cyclic_collector_is_timed_by_generation():
    import gc
    m = Metrics()
    m.watch_gc()
    m.watch_gc()   # once only
    try:
        gc.collect(0)
        gc.collect(2)
    finally:
        gc.callbacks.remove(m._gc_callback)
    assert m._gc_callback not in gc.callbacks
    text = m.text()
    assert 'kfold_gc_pause_seconds_count{generation="0"} 1.0' in text
    assert 'kfold_gc_pause_seconds_count{generation="2"} 1.0' in text
