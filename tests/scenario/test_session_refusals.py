"""A lasting refusal is not hammered (issue 33, item 10): a Session's repeated requests wait on one
exponential backoff with a cap, on server time, and the refusal is reported once; when it clears,
work resumes. The schedule is the oracle: 1 s, 2 s, 4 s... doubling, never more than 30 s apart."""
from __future__ import annotations

import pytest

from tests.scenario.test_session_support import ENV_SPEC, SPEC, World, at, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

SCHEDULE_S = [1, 2, 4, 8, 16, 30, 30]


def _warnings(w: World, text: str) -> list[str]:
    return [e.message for e in w.s.effects if e.type == "log" and e.level == "warning" and text in e.message]


def _session_read_refused(result: str) -> World:
    """The finalizer patch met 409 Conflict, so the Session is read again: that read is refused
    (403 forbidden; 401 comes back as "error"; 400 as "invalid"; a 5xx out of attempts as "transient")."""
    w = World()
    w.submit(SPEC)
    w.answer("patch", "Session", "conflict", status_reason="Conflict")
    w.answer("get", "Session", result, when=0, status_reason=result.capitalize())
    return w


def _reads_sent(w: World) -> list:
    """The Session reads on the wire: pending, not waiting for their retry."""
    waiting = {p.effect.id for p in w.s.waiting_retries()}
    return [e for e in w.pending("get", "Session") if e.id not in waiting]


@pytest.mark.parametrize("result", ["forbidden", "error", "invalid", "transient"])
def test_a_refused_session_read_is_repeated_on_the_backoff_not_at_once(result):
    w = _session_read_refused(result)
    first = w.pending("get", "Session")   # a transient's read waits for its retry; a refusal's is answered
    t = 0.0
    for wait in SCHEDULE_S:
        assert not _reads_sent(w), "nothing is sent before the backoff has passed"
        w.s.advance_to(at(t + wait) - 1)
        assert not _reads_sent(w), f"read again before {wait} s had passed"
        t += wait
        w.s.advance_to(at(t))
        assert len(_reads_sent(w)) == 1, f"read again {wait} s after the last refusal"
        if result == "transient":   # the executor's attempts spent: the same read's loop goes on
            assert [e.id for e in _reads_sent(w)] == [e.id for e in first]
        w.answer("get", "Session", result, when=t, status_reason=result.capitalize())
    assert len(_warnings(w, "could not read Session")) == 1, "a lasting refusal is reported once"
    (event,) = w.effects("event")
    assert (event.reason, event.event_type, event.involved["kind"]) == ("ReadFailed", "Warning", "Session")


def test_once_the_refusal_clears_the_session_carries_on():
    w = _session_read_refused("forbidden")
    w.s.advance_to(at(1))
    w.rv += 1
    w.answer("get", "Session", when=1, obj=session_obj(SPEC, rv=str(w.rv)))
    assert len(w.pending("patch", "Session")) == 1, "the finalizer is added again on the fresh read"
    assert w.decision().reread_tries == 0
    w.s.advance_to(at(120))
    assert not w.pending("get", "Session"), "no read left armed once one answered"
    # a later refusal is a new run: reported again, backed off from the start
    w.answer("patch", "Session", "conflict", when=121, status_reason="Conflict")
    w.answer("get", "Session", "forbidden", when=121, status_reason="Forbidden")
    assert len(_warnings(w, "could not read Session")) == 2
    w.s.advance_to(at(122))
    assert len(w.pending("get", "Session")) == 1


def test_without_server_time_a_few_reads_then_the_next_observation():
    w = World()
    w.submit(SPEC)
    w.answer("patch", "Session", "conflict", status_reason="Conflict")
    sent = 1
    while w.pending("get", "Session"):
        w.s.outcome(w.pending("get", "Session")[0], "forbidden", None, status_reason="Forbidden")
        sent += 1
        assert sent < 20, "no end to immediate reads without server time"
    assert sent <= 7


# kind -> (the World's configuration, the spec, the Event's reason)
CREATES = {"Secret": ({}, ENV_SPEC, "SecretRetrying"),
           "PersistentVolumeClaim": ({"workspace_class": "fast-ssd", "workspace_size": "5Gi"}, SPEC, "ClaimRetrying")}


@pytest.mark.parametrize("kind", sorted(CREATES))
@pytest.mark.parametrize("first", ["already_exists", "transient"])
def test_an_object_that_cannot_be_made_is_tried_again_on_the_backoff(first, kind):
    """The Session's Secret (with env references) or its workspace claim (with a storage class):
    the create answered AlreadyExists and its read is refused, or the create failed transiently.
    Created again after 1 s, 2 s, 4 s..., not at once."""
    config, spec, reason = CREATES[kind]
    w = World(**config)
    w.submit(spec)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(spec, rv=str(w.rv), finalizers=("kfold.dev/teardown",)))
    t = 0.0
    for wait in SCHEDULE_S[:5]:
        w.answer("create", kind, first, when=t, status_reason="AlreadyExists" if first == "already_exists" else "")
        if first == "already_exists":
            w.answer("get", kind, "forbidden", when=t, status_reason="Forbidden")
        assert not w.pending("create", kind) and not w.pending("get", kind)
        w.s.advance_to(at(t + wait) - 1)
        assert not w.pending("create", kind), f"created again before {wait} s had passed"
        t += wait
        w.s.advance_to(at(t))
        assert len(w.pending("create", kind)) == 1
    assert len(_warnings(w, f"could not create {kind}")) == 1
    assert [e.reason for e in w.effects("event")] == [reason]
    w.answer("create", kind, when=t)
    assert w.pod_creates() == ["demo-g1"], "the bring-up carries on once it is made"


def test_an_observation_of_the_session_drops_the_waiting_read():
    """The watch brought the Session while a refused read waited: what it shows is fresher, so the
    read is not sent; the finalizer is added again from it."""
    w = _session_read_refused("forbidden")
    w.submit(SPEC, when=0.5)
    assert len(w.pending("patch", "Session")) == 1, "the finalizer is added again from the observation"
    w.s.advance_to(at(60))
    assert not w.pending("get", "Session"), "the waiting read was dropped"


def test_a_session_its_watch_brings_ends_the_run_of_refused_reads():
    """The Session arriving by its watch is fresher than the read that waits: the run of refused
    reads is over, so a later refusal is a new run, reported again and backed off from the start."""
    w = _session_read_refused("forbidden")
    w.submit(SPEC, 0.5)
    w.s.advance_to(at(120))
    assert not w.pending("get", "Session"), "the waiting read is dropped"
    w.answer("patch", "Session", "conflict", when=121, status_reason="Conflict")
    w.answer("get", "Session", "forbidden", when=121, status_reason="Forbidden")
    assert len(_warnings(w, "could not read Session")) == 2, "a new run is reported"
    w.s.advance_to(at(122) - 1)
    assert not w.pending("get", "Session")
    w.s.advance_to(at(122))
    assert len(w.pending("get", "Session")) == 1, f"read again {SCHEDULE_S[0]} s after the refusal"


def test_a_watched_session_drops_the_read_waiting_for_its_retry():
    """A transient re-read waits for its retry (the same read); the Session arriving by a watch
    meanwhile is fresher, so that read is dropped, never sent."""
    w = _session_read_refused("transient")
    [read] = w.pending("get", "Session")
    assert [p.effect.id for p in w.s.waiting_retries()] == [read.id]
    w.rv += 1
    w.s.observe(session_obj(SPEC, rv=str(w.rv)), at(0.5))
    assert not w.s.waiting_retries() and read.id not in {e.id for e in w.pending("get", "Session")}
    assert w.decision().reread_tries == 0
    assert [e for e in w.s.advance_to(at(60)) if e.type == "get" and e.kind == "Session"] == []
