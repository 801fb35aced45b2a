"""The fold's one timestamp parser: what Kubernetes and kfold write, and None for the rest."""
import pytest

from engine.rfc3339 import to_ms, to_text

T2030 = 1_893_456_000_000


@pytest.mark.parametrize("text, ms", [
    ("2030-01-01T00:00:00Z", T2030),                    # creationTimestamp
    ("2030-01-01T00:00:00.250Z", T2030 + 250),          # last-attached
    ("2030-01-01T01:00:00+01:00", T2030),
    ("2030-13-01T00:00:00Z", None),                     # no month 13
    ("yesterday", None), (None, None), (1893456000, None),
])
def test_to_ms(text, ms):
    assert to_ms(text) == ms


def test_a_written_time_reads_back_to_the_millisecond():
    assert to_text(T2030 + 7) == "2030-01-01T00:00:00.007Z" and to_ms(to_text(T2030 + 7)) == T2030 + 7
