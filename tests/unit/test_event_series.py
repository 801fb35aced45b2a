"""events.k8s.io/v1 Events and their series dedup (issue 36, item 4), through ``executor_ops.perform``.

The oracle is the events.k8s.io/v1 API and client-go's events recorder: an Event carries
``eventTime`` (MicroTime: six fractional digits), ``reportingController``, ``reportingInstance``,
``action``, ``reason``, ``note`` (at most 1 kB), ``type`` and ``regarding``; a repeat of the same
(regarding, reason, action, note) within the window updates ``series.count`` / ``series.lastObservedTime``
of the Event already posted (count 2 on the first repeat) instead of posting another.
"""
from __future__ import annotations

import re

from engine.effects.io import event_series
from engine.effects.io.event_series import EventSeries
from engine.effects.io.ops import perform
from engine.effects.io.transport import Response
from engine.effects.models import PostEvent

T0 = 1_893_456_000_000   # 2030-01-01T00:00:00Z
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
REGARDING = {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "name": "demo", "namespace": "team", "uid": "u1"}


def event(reason: str = "Ready", action: str = "BringUp", uid: str = "u1", note: str = "generation 1: serving") -> PostEvent:
    return PostEvent(id="1.0", machine="session", key="local/team/demo#events", namespace="team", reason=reason,
                     action=action, note=note, regarding={**REGARDING, "uid": uid})


class Api:
    """Answers POST with 201 and PATCH with 200, or with ``answers`` first; records every request."""

    def __init__(self, *answers: int):
        self.requests: list = []
        self.answers = list(answers)

    async def __call__(self, req):
        self.requests.append(req)
        code = self.answers.pop(0) if self.answers else (201 if req.method == "POST" else 200)
        body = {"kind": "Status", "code": code, "reason": "NotFound" if code == 404 else "InternalError",
                "details": {"name": req.path.rsplit("/", 1)[-1]}} if code >= 400 else req.body
        return Response(code, {}, body)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


async def post(series: EventSeries, api: Api, e: PostEvent, now_ms: int = T0):
    return await perform(e, api, {}, series, now_ms)


async def test_the_first_event_is_posted_with_the_events_k8s_io_fields():
    api, series = Api(), EventSeries(Clock(), reporting_instance="kfold-host-a")
    out = await post(series, api, event())
    [req] = api.requests
    assert out.result == "ok" and (req.method, req.path) == ("POST", "/apis/events.k8s.io/v1/namespaces/team/events")
    b = req.body
    assert (b["apiVersion"], b["kind"], b["reason"], b["action"], b["type"], b["note"]) == \
        ("events.k8s.io/v1", "Event", "Ready", "BringUp", "Normal", "generation 1: serving")
    assert (b["reportingController"], b["reportingInstance"]) == ("kfold.dev/kfold", "kfold-host-a")
    assert MICRO.match(b["eventTime"]) and b["eventTime"] == "2030-01-01T00:00:00.000000Z"
    assert b["regarding"] == REGARDING and "series" not in b
    assert b["metadata"]["name"].startswith("demo.") and b["metadata"]["namespace"] == "team"


async def test_a_repeat_within_the_window_extends_the_series_instead_of_posting_again():
    api, clock = Api(), Clock()
    series = EventSeries(clock)
    await post(series, api, event())
    name = api.requests[0].body["metadata"]["name"]
    for n, at in ((2, 60), (3, 300)):
        clock.t += at
        assert (await post(series, api, event(), T0 + n * 1000)).result == "ok"
    assert [r.method for r in api.requests] == ["POST", "PATCH", "PATCH"]
    assert {r.path for r in api.requests[1:]} == {f"/apis/events.k8s.io/v1/namespaces/team/events/{name}"}
    assert [r.body["series"]["count"] for r in api.requests[1:]] == [2, 3]
    assert api.requests[2].body["series"]["lastObservedTime"] == "2030-01-01T00:00:03.000000Z"
    assert api.requests[1].content_type == "application/merge-patch+json"


async def test_another_reason_action_note_or_object_is_another_event():
    api, series = Api(), EventSeries(Clock())
    for e in (event(), event(reason="Stopped"), event(action="Teardown"), event(uid="u2"),
              event(note="generation 2: serving")):
        await post(series, api, e)
    assert [r.method for r in api.requests] == ["POST"] * 5
    assert api.requests[-1].body["note"] == "generation 2: serving", "a later note is never counted in an earlier one"


async def test_after_the_window_or_once_the_event_is_gone_a_new_event_is_posted():
    api, clock = Api(), Clock()
    series = EventSeries(clock)
    await post(series, api, event())
    clock.t += event_series.WINDOW_S
    await post(series, api, event())        # the series is finished: a new Event
    clock.t += 1
    api.answers = [404]                     # that one expired meanwhile (the apiserver's TTL)
    await post(series, api, event())
    assert [r.method for r in api.requests] == ["POST", "POST", "PATCH", "POST"]


async def test_a_failed_post_is_reported_not_retried_and_starts_no_series():
    api, series = Api(500), EventSeries(Clock())
    out = await post(series, api, event())
    assert out.result != "ok" and len(api.requests) == 1 and len(series) == 0
    assert event().safe_to_retry is False, "the executor never repeats an Event"
    await post(series, api, event())
    assert [r.method for r in api.requests] == ["POST", "POST"]


async def test_the_dedup_state_is_bounded_and_the_note_is_cut_to_one_kilobyte(monkeypatch):
    monkeypatch.setattr(event_series, "MAX_SERIES", 3)
    api, series = Api(), EventSeries(Clock())
    for i in range(5):
        await post(series, api, event(uid=f"u{i}"))
    assert len(series) == 3
    await post(series, api, event(uid="u9", note="é" * 2000))
    assert len(api.requests[-1].body["note"].encode()) <= 1024


async def test_without_the_executors_series_an_event_is_refused_and_nothing_is_sent():
    api = Api()
    out = await perform(event(), api, {})
    assert out.result == "refused" and api.requests == []
