"""The soak's figures (``tests/e2e/soak.py``): the growth fit and its interval, the p99 of a
histogram between two readings, lifetimes split at a restart, and the targets judged from them."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("kubernetes")
from tests.e2e.soak import fit, lifetimes, p99, summarize, t_975  # noqa: E402


def test_t_quantile_is_students():
    assert t_975(5) == pytest.approx(2.5706, rel=0.01)
    assert t_975(30) == pytest.approx(2.0423, rel=0.001)
    assert t_975(10_000) == pytest.approx(1.96, rel=0.001)


def test_a_flat_noisy_gauge_fits_inside_its_interval_and_a_growing_one_outside():
    rng = random.Random(1)
    ts = [10.0 * i for i in range(360)]                       # an hour every 10 s
    flat = fit(ts, [1000 + rng.gauss(0, 5) for _ in ts])
    assert flat["lo_pct_per_h"] < 0 < flat["hi_pct_per_h"] and flat["hi_pct_per_h"] - flat["lo_pct_per_h"] < 0.5
    grows = fit(ts, [1000 + t * 20 / 3600 + rng.gauss(0, 5) for t in ts])   # 20 per hour: 2% of its mean
    assert 1.5 < grows["lo_pct_per_h"] < grows["slope_per_h"] / grows["mean"] * 100 < grows["hi_pct_per_h"] < 2.5
    assert fit(ts[:3], [1, 2, 3]) is None and fit([5.0] * 10, list(range(10))) is None


def test_p99_interpolates_inside_the_bucket_between_two_readings():
    before = {"0.1": 10, "0.5": 10, "1.0": 10, "+Inf": 10}
    after = {"0.1": 10, "0.5": 110, "1.0": 110, "+Inf": 110}   # 100 new, all in (0.1, 0.5]
    assert p99(before, after) == pytest.approx(0.1 + 0.4 * 0.99)
    assert p99(after, after) is None
    tail = {"0.1": 0, "0.5": 98, "1.0": 99, "+Inf": 100}       # the 99th of 100 at the 1.0 bucket's top
    assert p99({}, tail) == pytest.approx(1.0)


def rows(n: int, start: float, t0: float = 0.0, rss=lambda i: 1e8) -> list[dict]:
    return [{"t": t0 + 10 * i, "start_time": start, "ops": 5 * i, "cpu_seconds": 0.1 * i, "requests": 20 * i,
             "rss_bytes": rss(i), "journal_records": 100, "journal_snapshots": 1, "journal_bytes": 1e6,
             "ready": {"+Inf": i}, "event_to_issue": {"+Inf": i}} for i in range(n)]


def test_lifetimes_split_at_a_restart_and_drop_failed_scrapes():
    samples = rows(5, 1.0) + [{"t": 50, "error": "URLError"}] + rows(5, 2.0, 60)
    assert [len(x) for x in lifetimes(samples)] == [5, 5]


def test_summarize_judges_growth_the_journal_bound_and_the_windows():
    ok = summarize(rows(60, 1.0), warmup_s=60, window_s=120, keep_snapshots=2, snapshot_every=50)
    assert ok["ok"], ok["misses"]
    assert ok["windows"][0]["cpu_s_per_op"] == pytest.approx(0.02) and ok["windows"][0]["requests_per_op"] == 4
    leak = summarize(rows(60, 1.0, rss=lambda i: 1e8 + 1e5 * i), 60, 120, 2, 50)   # +1e5 per 10 s: 36% an hour
    assert any(m.startswith("rss_bytes") for m in leak["misses"])
    over = summarize(rows(60, 1.0), 60, 120, keep_snapshots=2, snapshot_every=30)  # 100 records > 3 x 30
    assert not over["journal"]["ok"]
