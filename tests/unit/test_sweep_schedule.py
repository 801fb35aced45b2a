"""When the orphan Secret sweep lists (kfold.daemon.sweeps): after a reason, once its Secrets are
past their grace; every namespace at the resync; nothing at rest."""
from __future__ import annotations

import pytest

from engine.effects.models import CreateObject, DeleteObject, GetObject, ReplaceObject
from kfold.daemon.sweeps import SLACK_S, SweepSchedule

GRACE, RESYNC, TICK = 600.0, 36000.0, 300.0
RIPE = GRACE + SLACK_S          # a Secret written then is past its grace on a list this much later
A, B = ("home", "a"), ("home", "b")


def secret(effect_type: type, namespace: str = "a", kind: str = "Secret") -> object:
    fields = dict(id="e1", machine="session", key=f"home/{namespace}/s1", cluster="home", api_version="v1",
                  kind=kind, namespace=namespace, name="s1-env")
    if effect_type in (CreateObject, ReplaceObject):
        fields["manifest"] = {}
    return effect_type(**fields)


def ticks(s: SweepSchedule, until: float, start: float = TICK) -> list[tuple[float, list[tuple[str, str]]]]:
    """Every tick's sweeps from ``start`` to ``until`` (each ``TICK`` seconds), those that sweep."""
    out, t = [], start
    while t <= until:
        due = s.due([A, B], t)
        if due:
            out.append((t, due))
        t += TICK
    return out


def test_at_rest_no_tick_sweeps_until_the_resync_which_sweeps_everywhere():
    s = SweepSchedule(GRACE, RESYNC, now=0.0)
    assert ticks(s, RESYNC - 1) == []
    assert s.due([A, B], RESYNC) == [A, B]
    assert ticks(s, 2 * RESYNC - 1, start=RESYNC + TICK) == []


@pytest.mark.parametrize("write", [CreateObject, ReplaceObject], ids=["create", "replace"])
def test_a_secret_written_is_swept_once_in_its_namespace_at_the_first_tick_past_its_grace(write):
    s = SweepSchedule(GRACE, RESYNC, now=0.0)
    s.secret_written(secret(write), now=100.0)
    assert ticks(s, 3600) == [(900.0, [A])]   # 100 + 600 + 60 = 760 -> the tick at 900


@pytest.mark.parametrize("effect", [
    pytest.param(lambda: secret(DeleteObject), id="a-delete"),
    pytest.param(lambda: secret(GetObject), id="a-read"),
    pytest.param(lambda: secret(CreateObject, kind="Pod"), id="another-kind"),
])
def test_what_cannot_leave_an_orphan_secret_is_no_reason(effect):
    s = SweepSchedule(GRACE, RESYNC, now=0.0)
    s.secret_written(effect(), now=100.0)
    assert ticks(s, 3600) == []


def test_a_fresh_journal_or_a_term_begun_sweeps_every_namespace_once_past_the_grace():
    s = SweepSchedule(GRACE, RESYNC, now=0.0)
    s.everywhere(now=0.0)
    assert ticks(s, 3600) == [(900.0, [A, B])]


def test_one_sweep_covers_every_reason_ripe_by_then_and_a_later_one_waits_for_the_next():
    s = SweepSchedule(GRACE, RESYNC, now=0.0)
    for t in (10.0, 200.0, 700.0):
        s.secret_written(secret(CreateObject), now=t)
    # 10 ripe at 670 -> tick 900 covers 10 and 200; 700 ripe at 1360 -> tick 1500
    assert ticks(s, 7200) == [(900.0, [A]), (1500.0, [A])]


def test_a_stream_of_writes_still_sweeps_once_per_grace_not_never():
    s = SweepSchedule(GRACE, RESYNC, now=0.0)
    swept, t = [], 0.0
    while t <= 7200:
        s.secret_written(secret(CreateObject), now=t)
        t += 30.0
        if t % TICK == 0 and s.due([A, B], t):
            swept.append(t)
    assert swept and all(later - earlier <= RIPE + TICK for earlier, later in zip(swept, swept[1:]))
    assert len(swept) >= 7200 // (RIPE + TICK)


def test_the_resync_keeps_a_reason_not_yet_past_its_grace():
    s = SweepSchedule(GRACE, RESYNC, now=0.0)
    s.secret_written(secret(CreateObject), now=RESYNC - 100)
    assert s.due([A, B], RESYNC) == [A, B]
    assert s.due([A, B], RESYNC + 600) == [A]   # RESYNC - 100 + 660 = RESYNC + 560
