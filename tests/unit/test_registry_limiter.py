"""The client-side limiter: client-go's 50 QPS / burst 100, with an injected clock."""

import pytest

from kfold.registry import TokenBucket


class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


def bucket(clock, **kw):
    return TokenBucket(clock=clock, sleep=clock.sleep, **kw)


def test_the_defaults_are_client_gos_50_qps_burst_100(clock):
    """Seed 004:417-421: the client paces at 50 QPS, burst 100."""
    limiter = bucket(clock)
    assert (limiter.qps, limiter.burst) == (50.0, 100)


def test_a_full_bucket_lets_a_burst_of_100_through_without_waiting(clock):
    limiter = bucket(clock)
    assert [limiter.acquire() for _ in range(100)] == [0.0] * 100
    assert clock.slept == []


def test_the_request_after_the_burst_waits_one_token_interval(clock):
    limiter = bucket(clock)
    for _ in range(100):
        limiter.acquire()
    assert limiter.acquire() == pytest.approx(1 / 50)


def test_waiting_callers_queue_in_order_at_the_steady_rate(clock):
    limiter = bucket(clock)
    for _ in range(100):
        limiter.reserve()
    waits = [limiter.reserve() for _ in range(3)]
    assert waits == pytest.approx([0.02, 0.04, 0.06])


def test_the_bucket_refills_at_qps_up_to_the_burst(clock):
    limiter = bucket(clock)
    for _ in range(100):
        limiter.acquire()
    clock.now += 1.0
    assert [limiter.acquire() for _ in range(50)] == [0.0] * 50
    assert limiter.acquire() > 0
    clock.now += 3600
    assert [limiter.reserve() for _ in range(100)] == [0.0] * 100
    assert limiter.reserve() > 0


def test_sustained_load_runs_at_qps(clock):
    limiter = bucket(clock, qps=10, burst=1)
    start = clock.now
    for _ in range(21):
        limiter.acquire()
    assert clock.now - start == pytest.approx(2.0)


def test_a_clock_that_steps_back_adds_no_tokens(clock):
    limiter = bucket(clock, qps=1, burst=1)
    limiter.reserve()
    clock.now -= 100
    assert limiter.reserve() == pytest.approx(1.0)


def test_nonsense_rates_are_refused():
    with pytest.raises(ValueError):
        TokenBucket(qps=0)
    with pytest.raises(ValueError):
        TokenBucket(burst=0)
