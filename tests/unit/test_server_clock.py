"""The server clock reads the apiserver's Date advanced by the monotonic clock, never the wall."""
from __future__ import annotations

import freezegun
import pytest

from engine.effects.io.clock import ServerClock, parse_http_date

DATE = "Tue, 01 Jan 2030 00:00:00 GMT"
DATE_MS = 1_893_456_000_000


class FakeMonotonic:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def mono():
    return FakeMonotonic()


@pytest.fixture
def clock(mono):
    return ServerClock(monotonic=mono)


def test_an_http_date_parses_to_epoch_milliseconds():
    assert parse_http_date(DATE) == DATE_MS


@pytest.mark.parametrize("value", [None, "", "yesterday", "Tue, 99 Foo 2030 00:00:00 GMT",
                                   "Thu, 01 Jan 1970 00:00:00 GMT", 12345],
                         ids=["missing", "empty", "word", "bad-month", "epoch-zero", "not-a-string"])
def test_a_garbage_date_parses_to_none(value):
    assert parse_http_date(value) is None


def test_the_clock_reads_none_before_any_date(clock):
    assert clock.now_ms() is None
    assert clock.skew_ms(DATE_MS) is None


def test_the_clock_reads_the_date_when_just_received(clock):
    clock.observe(DATE)
    assert clock.now_ms() == DATE_MS


def test_monotonic_time_advances_the_clock(clock, mono):
    clock.observe(DATE)
    mono.t += 12.5
    assert clock.now_ms() == DATE_MS + 12_500


def test_an_explicit_monotonic_reading_is_used_for_receipt_and_read(clock):
    clock.observe(DATE, monotonic=5.0)
    assert clock.now_ms(monotonic=7.25) == DATE_MS + 2_250


@pytest.mark.parametrize("when", ["1999-12-31 23:59:58", "2099-06-15 12:00:00"])
def test_a_wall_clock_jump_does_not_move_the_clock(clock, mono, when):
    """Seed 001:46-48: the budget is monotonic: a wall-clock step does not move it."""
    clock.observe(DATE)
    mono.t += 3
    before = clock.now_ms()
    with freezegun.freeze_time(when):
        assert clock.now_ms() == before
        mono.t += 1
        assert clock.now_ms() == before + 1000


def test_the_real_monotonic_source_is_immune_to_a_frozen_wall_clock():
    clock = ServerClock()
    with freezegun.freeze_time("1999-12-31 23:59:58"):
        clock.observe(DATE)
        reading = clock.now_ms()
    assert DATE_MS <= reading < DATE_MS + 5_000


@pytest.mark.parametrize("bad", [None, "garbage", "Tue, 01 Jan 2030 99:99:99 GMT"],
                         ids=["missing", "garbage", "bad-time"])
def test_a_missing_or_garbage_date_leaves_the_clock_as_it_was(clock, mono, bad):
    clock.observe(DATE)
    mono.t += 2
    assert clock.observe(bad) is False
    assert clock.now_ms() == DATE_MS + 2000
    assert clock.rejected == 1


def test_a_garbage_date_before_any_date_keeps_the_clock_unknown(clock):
    clock.observe("garbage")
    assert clock.now_ms() is None


def test_a_truncated_date_within_the_current_second_keeps_the_finer_reading(clock, mono):
    clock.observe(DATE)
    mono.t += 1.7
    clock.observe("Tue, 01 Jan 2030 00:00:01 GMT")   # server truncated 1.7 s to 1 s
    assert clock.now_ms() == DATE_MS + 1700


def test_a_date_ahead_of_the_reading_re_anchors_forward(clock, mono):
    clock.observe(DATE)
    mono.t += 1
    clock.observe("Tue, 01 Jan 2030 00:01:00 GMT")
    assert clock.now_ms() == DATE_MS + 60_000


def test_a_server_clock_stepped_back_re_anchors_backward(clock, mono):
    clock.observe("Tue, 01 Jan 2030 00:01:00 GMT")
    clock.observe(DATE)
    assert clock.now_ms() == DATE_MS


def test_skew_is_server_reading_minus_the_given_wall_time(clock):
    clock.observe(DATE)
    assert clock.skew_ms(DATE_MS - 1500) == 1500
