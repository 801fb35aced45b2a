"""events.k8s.io/v1 Events for ``PostEvent``, deduplicated into series as client-go's
``k8s.io/client-go/tools/events`` recorder does.

Expected flow: ``EventSeries.post(effect, send, now_ms)`` -> the first Event of a (regarding uid,
reason, action, note) is POSTed (name ``<regarding name>.<hex unix nanos>``, ``eventTime`` now,
``reportingController`` ``kfold.dev/kfold``, ``reportingInstance`` this process's host) -> a repeat
of the same key within ``WINDOW_S`` of the last one PATCHes that Event's ``series`` (``count`` 2,
3, ...; ``lastObservedTime`` now) instead of posting another; a repeat after the window, or whose
series PATCH finds the Event gone (404: expired by the apiserver's TTL), POSTs a new Event.

The note is part of the key (client-go's recorder leaves it out and keeps the first note): an
Event's note cannot change (events.k8s.io/v1 refuses an update of it), so a series only ever
counts what its note says; another note (a later pod generation's Ready names its own pod) is an
Event of its own.

Guarantees:
- The dedup state is this process's (a bounded LRU of ``MAX_SERIES`` keys): a restart or another
  replica starts new series. Events are best effort: the outcome is reported to the machine,
  which decides nothing on it, and the executor never retries a ``PostEvent`` (``safe_to_retry``
  False), so a failed post never blocks or delays a Session's work.
- ``note`` is cut to the API's 1 kB bound; ``reason`` and ``action`` to 128 characters.
- Times: ``now_ms`` is the cluster's server time when the executor knows it, else the local
  clock; the window is measured on the monotonic clock.
"""
from __future__ import annotations

import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from engine.effects.io import resources as res
from engine.labels import MANAGED_LABELS
from engine.rfc3339 import to_text

API = "events.k8s.io/v1"
CONTROLLER = "kfold.dev/kfold"
WINDOW_S = 6 * 60        # client-go's finishTime: a series not observed for this long is finished
MAX_SERIES = 4096
MAX_NOTE = 1024          # events.k8s.io/v1 validation: note at most 1 kB
MAX_WORD = 128           # reason, action, reportingInstance
MERGE_PATCH = "application/merge-patch+json"


def micro_time(ms: int) -> str:
    """``metav1.MicroTime`` text: exactly six fractional digits, as the apiserver parses it."""
    return to_text(ms)[:-1] + "000Z"


def instance() -> str:
    return f"kfold-{socket.gethostname()}"[:MAX_WORD]


@dataclass
class _Series:
    cluster: str
    tenant: str
    namespace: str
    name: str
    count: int
    last: float          # monotonic seconds of the last observation


class EventSeries:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic, reporting_instance: str | None = None):
        self._mono = monotonic
        self._instance = reporting_instance or instance()
        self._series: OrderedDict[tuple[str, str, str, str, str], _Series] = OrderedDict()

    def __len__(self) -> int:
        return len(self._series)

    async def post(self, e: Any, send: Callable[..., Awaitable[Any]], now_ms: int | None,
                   done: Callable[[Any], Any]) -> Any:
        """Post or extend the series of ``e``; ``done`` turns a reply into the outcome fields."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        key = (e.cluster, e.regarding.get("uid", "") or e.regarding.get("name", ""), e.reason, e.action, e.note)
        mono = self._mono()
        s = self._series.get(key)
        if s is not None and mono - s.last < WINDOW_S and (s.cluster, s.tenant, s.namespace) == (e.cluster, e.tenant, e.namespace):
            got = done(await send("PATCH", res.path(API, "Event", s.namespace, s.name),
                                  {"series": {"count": s.count + 1, "lastObservedTime": micro_time(now_ms)}},
                                  ct=MERGE_PATCH))
            if got.result != "not_found":
                if got.result == "ok":
                    s.count, s.last = s.count + 1, mono
                    self._series.move_to_end(key)
                return got
        name = res.check_name(API, "Event", f"{e.regarding.get('name') or e.namespace}.{time.time_ns():x}")
        got = done(await send("POST", res.path(API, "Event", e.namespace), self._body(e, name, now_ms)))
        if got.result == "ok":
            self._series[key] = _Series(e.cluster, e.tenant, e.namespace, name, 1, mono)
            self._series.move_to_end(key)
            while len(self._series) > MAX_SERIES:
                self._series.popitem(last=False)
        return got

    def _body(self, e: Any, name: str, now_ms: int) -> dict[str, Any]:
        return {"apiVersion": API, "kind": "Event",
                "metadata": {"name": name, "namespace": e.namespace, "labels": dict(MANAGED_LABELS)},
                "eventTime": micro_time(now_ms), "reportingController": CONTROLLER,
                "reportingInstance": self._instance, "action": e.action[:MAX_WORD], "reason": e.reason[:MAX_WORD],
                "note": _cut(e.note, MAX_NOTE), "type": e.event_type, "regarding": dict(e.regarding)}


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` bytes of UTF-8, whole characters only."""
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")
