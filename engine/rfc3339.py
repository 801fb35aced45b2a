"""RFC 3339 timestamps <-> epoch milliseconds, for the fold. Pure: no clock is read.

Kubernetes writes ``2030-01-01T00:00:00Z`` (creationTimestamp) and kfold writes
``2030-01-01T00:00:00.250Z`` (a Repo's last-attached); offsets are accepted too. Anything else is
``None``: the caller decides what an unreadable time means (usually "no time, so wait").
"""
from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta, timezone
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def to_text(ms: int) -> str:
    """Epoch milliseconds -> ``2030-01-01T00:00:00.000Z``."""
    dt = _EPOCH + timedelta(milliseconds=ms)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def to_seconds_text(ms: int) -> str:
    """Epoch milliseconds -> ``2030-01-01T00:00:00Z``, truncated to the second (``metav1.Time``'s
    form, e.g. a condition's ``lastTransitionTime``)."""
    return to_text(ms - ms % 1000)[:-5] + "Z"


def to_ms(text: Any) -> int | None:
    """RFC 3339 -> epoch milliseconds; ``None`` when absent or unparsable."""
    m = _RFC3339.match(text) if isinstance(text, str) else None
    if not m:
        return None
    try:
        base = calendar.timegm(datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S").timetuple()) * 1000
    except ValueError:  # e.g. month 13
        return None
    frac = int((m[2] or ".0")[1:].ljust(3, "0")[:3])
    return base + frac - _offset_ms(m[3])


def _offset_ms(tz: str) -> int:
    if tz == "Z":
        return 0
    sign = -1 if tz[0] == "-" else 1
    return sign * (int(tz[1:3]) * 60 + int(tz[4:6])) * 60_000
