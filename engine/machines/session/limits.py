"""Container resources: what a Session asks, clamped to the operator's ceilings (seed 002's
``clampLimits(config.appLimits, ...)``).

Guarantees:
- ``quantity(text)`` is the exact value of a Kubernetes resource quantity (``500m``, ``2``,
  ``1.5Gi``, ``1e3``) as a ``Fraction``, or None when ``text`` is not one.
- ``clamp(ceilings, limits, requests)`` -> (limits, requests), each sorted ``(resource, value)``:
  - a resource with a ceiling gets the smaller of the asked limit and the ceiling as its limit,
    and the ceiling itself when the Session asks no limit for it (the seed's
    ``clampLimits(config.appLimits, undefined)``: no ask, the ceiling is the limit);
  - a resource without a ceiling keeps the asked limit (none asked: none set);
  - a request never exceeds its resource's limit (a request above the ceiling gets the ceiling);
  - a value keeps the spelling it was given in (the Session's, or the ceiling's when that is lower).

Pure: no I/O. Values are assumed to parse (``quantity`` is checked by the callers first).
"""
from __future__ import annotations

import re
from fractions import Fraction

Pairs = tuple[tuple[str, str], ...]

_QUANTITY = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# A resource name: ``cpu``, ``memory``, ``ephemeral-storage``, ``nvidia.com/gpu``, ``hugepages-2Mi``.
RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def quantity(text: object) -> Fraction | None:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        return None
    m = _QUANTITY.match(str(text).strip())
    if m is None:
        return None
    sign, number, suffix = m.group(1), Fraction(m.group(2)), m.group(3) or ""
    if suffix in _BINARY:
        value = number * (2 ** _BINARY[suffix])
    elif suffix in _DECIMAL:
        value = number * Fraction(10) ** _DECIMAL[suffix]
    else:
        value = number * Fraction(10) ** int(suffix[1:])
    return -value if sign == "-" else value


def ceilings(limits: dict[str, str]) -> Pairs:
    """``session.configure``'s ``limits`` as sorted pairs; a value that is no positive quantity
    (which a validated config never states) bounds nothing."""
    return tuple(sorted((k, str(v).strip()) for k, v in limits.items() if (quantity(v) or 0) > 0))


def _lower(asked: str | None, bound: str | None) -> str | None:
    if asked is None or bound is None:
        return bound if asked is None else asked
    return bound if quantity(asked) > quantity(bound) else asked  # type: ignore[operator]


def clamp(ceilings: Pairs, limits: Pairs, requests: Pairs) -> tuple[Pairs, Pairs]:
    ceiling, asked = dict(ceilings), dict(limits)
    final = {name: _lower(asked.get(name), ceiling.get(name)) for name in {*ceiling, *asked}}
    out_requests = {name: _lower(value, final.get(name)) for name, value in requests}
    return (tuple(sorted((k, v) for k, v in final.items() if v is not None)),
            tuple(sorted((k, v) for k, v in out_requests.items() if v is not None)))
