"""Structured logs, plain or JSON, carrying object keys.

Guarantees:
- ``setup(format, level)`` configures the root logger once; ``json`` writes one object per line
  with ``ts``, ``level``, ``logger``, ``msg`` and every ``extra`` field (``key``, ``effect_id``,
  ``result``, ...); ``plain`` appends the same extras as ``k=v``.
- The timestamp is the local wall clock with milliseconds (``2026-12-02T04:31:07.412+00:00``):
  logs are for humans; no decision reads them.
- urllib3's own retry WARNINGs (``Retrying (Retry(total=2...)) after connection broken by
  'NewConnectionError(<CheckedHTTPSConnection ...>'``) are silenced below ERROR: kfold logs what a
  failed request means itself (the effect's outcome, the observer's unreachable-apiserver line).
- Values are rendered with ``str``/JSON; callers never pass secret values (effects and records
  carry none, see DESIGN invariant 6).
"""
from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

_STD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


def extras(record: logging.LogRecord) -> dict:
    return {k: v for k, v in record.__dict__.items() if k not in _STD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": timestamp(record), "level": record.levelname.lower(),
               "logger": record.name, "msg": record.getMessage(), **extras(record)}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, sort_keys=False)


def timestamp(record: logging.LogRecord) -> str:
    """ISO 8601 local time with milliseconds and the UTC offset."""
    return datetime.fromtimestamp(record.created, timezone.utc).astimezone().isoformat(timespec="milliseconds")


class PlainFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        fields = " ".join(f"{k}={v}" for k, v in extras(record).items())
        return f"{base} {fields}" if fields else base


def setup(fmt: str = "plain", level: str = "info", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # transitions narrates every callback at INFO; kfold logs its own decisions instead.
    logging.getLogger("transitions").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)
