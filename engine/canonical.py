"""Canonical JSON text of a decision's inputs, for the digests the session machine compares and
keeps (a Service manifest, a status, a spec): ``json.dumps(value, sort_keys=True,
separators=(",", ":"))``, byte for byte, made by orjson where that gives the same text.

The text is stored in decision records and snapshots and compared with the next one, so it must
not change between versions: a digest in a new format would differ from one a snapshot holds and
cause a write that changes nothing. orjson writes the same text as the standard library for every
JSON value but three kinds, each recognisable in its output, where the slower path is taken:

- text outside printable ASCII (the standard library escapes it as ``\\uXXXX``, DEL included;
  orjson writes UTF-8, and DEL as it is);
- a float of magnitude between 1e-9 and 1e-4: the standard library writes ``1e-05``, orjson
  ``0.00001`` or ``1e-7`` (the output holds ``0.0000`` or ``e-``);
- what orjson refuses (an integer beyond 64 bits, a key that is not a string).

A string that merely contains ``e-`` or ``0.0000`` takes the slower path too, with the same result.
"""
from __future__ import annotations

import json
from typing import Any

import orjson

_SORTED = orjson.OPT_SORT_KEYS


def canonical_json(value: Any, sort_keys: bool = True) -> str:
    """``json.dumps(value, sort_keys=sort_keys, separators=(",", ":"))``, faster."""
    try:
        out = orjson.dumps(value, option=_SORTED if sort_keys else 0)
    except (orjson.JSONEncodeError, TypeError):
        out = None
    if out is not None and out.isascii() and b"\x7f" not in out and b"0.0000" not in out and b"e-" not in out:
        return out.decode("ascii")
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"))


def same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON value, types included: unlike ``==``, ``1``, ``1.0`` and
    ``True`` differ, as they do on the wire and to a validator that checks ``is True``."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b
