"""Argument types the commands share (argparse ``type=``): a bad value is argparse's usage line
and ``error: argument --until: ...``, exit 2, before the command opens anything."""
from __future__ import annotations

import argparse


def _whole(text: str, least: int, why: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; pass {least} or more") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value} {why}; pass {least} or more")
    return value


def seq_number(text: str) -> int:
    """A journal sequence number: 1 or more (the first record is seq 1)."""
    return _whole(text, 1, "is not a sequence number: records are numbered from 1")


def count(text: str) -> int:
    """How many: 0 or more."""
    return _whole(text, 0, "is negative")
