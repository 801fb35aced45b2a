"""Structured logs, plain or JSON, carrying object keys.

Guarantees:
- ``setup(format, level)`` configures the root logger once; ``json`` writes one object per line
  with ``ts``, ``level``, ``logger``, ``msg`` and every ``extra`` field (``key``, ``effect_id``,
  ``result``, ...); ``plain`` appends the same extras as ``k=v``.
- The timestamp is the local wall clock: logs are for humans; no decision reads them.
- Values are rendered with ``str``/JSON; callers never pass secret values (effects and records
  carry none, see DESIGN invariant 6).
"""
from __future__ import annotations

import json
import logging
import sys

_STD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


def extras(record: logging.LogRecord) -> dict:
    return {k: v for k, v in record.__dict__.items() if k not in _STD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"), "level": record.levelname.lower(),
               "logger": record.name, "msg": record.getMessage(), **extras(record)}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, sort_keys=False)


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
