"""Kubernetes resource quantities (``500m``, ``2``, ``1.5Gi``, ``1e3``) and resource names.

Guarantees:
- ``quantity(text)`` is the exact value of a quantity as a ``Fraction``, or None when ``text`` is
  not one (surrounding whitespace is ignored: kfold's config is read that way).
- ``RESOURCE_NAME`` matches a resource name: ``cpu``, ``memory``, ``nvidia.com/gpu``, ``hugepages-2Mi``.

Pure: no I/O.
"""
from __future__ import annotations

import re
from fractions import Fraction

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
