"""Kubernetes' own object-name rules, checked before a name becomes part of a request path.

The rules are the apiserver's (k8s.io/apimachinery/pkg/util/validation), so a name refused here
is one the apiserver would refuse too, and a name accepted here is one path segment that no HTTP
layer rewrites (no '.', '..', '/', '%', uppercase, whitespace or non-ASCII can pass):
- ``DNS1123_LABEL``: 1-63 characters of a-z, 0-9 and '-', starting and ending alphanumeric
  (Namespace; Service, see below).
- ``DNS1123_SUBDOMAIN``: at most 253 characters, DNS-1123 labels joined by '.' (Pod, Secret,
  ConfigMap, Event, Ingress, custom resources: the default rule of ``ValidateObjectMeta``).
Caveat: the apiserver's default rule for Service names is the stricter DNS-1035 label (starts
with a letter), relaxed to DNS-1123 label by the RelaxedServiceNameValidation feature gate; kfold
checks the relaxed rule, which is all a safe path needs, and leaves the rest to the apiserver.

Guarantees: ``check(name, rule, what)`` returns ``name`` unchanged or raises ``InvalidObjectName``
naming the name (JSON-quoted, cut at 80 characters), the rule and the first thing that breaks it.
Pure: no I/O.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    max_len: int
    summary: str


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = Rule(
    "DNS-1123 label", re.compile(rf"{_LABEL}\Z"), 63,
    "at most 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit",
)
DNS1123_SUBDOMAIN = Rule(
    "DNS-1123 subdomain", re.compile(rf"{_LABEL}(\.{_LABEL})*\Z"), 253,
    "at most 253 characters of a-z, 0-9, '-' and '.', each '.'-separated part starting and ending "
    "with a letter or digit",
)


class InvalidObjectName(ValueError):
    """A name (or namespace) that breaks Kubernetes' rule for its kind: refused, nothing sent."""

    def __init__(self, name: object, rule: Rule, what: str, problem: str) -> None:
        self.name = str(name)
        self.rule = rule
        super().__init__(
            f"{what} {json.dumps(str(name)[:80])} is not a valid {rule.name} ({problem}); "
            f"Kubernetes requires {rule.summary}; nothing was sent"
        )


def problem(name: str, rule: Rule) -> str | None:
    """The first way ``name`` breaks ``rule``, or None."""
    if not isinstance(name, str) or not name:
        return "it is empty"
    if len(name) > rule.max_len:
        return f"it is {len(name)} characters long"
    bad = sorted({c for c in name if not (c.isascii() and (c.islower() or c.isdigit() or c in "-."))})
    if rule is DNS1123_LABEL and "." in name:
        bad = sorted({*bad, "."})
    if bad:
        return "it contains " + " ".join(json.dumps(c) for c in bad)
    if not rule.pattern.match(name):
        return "a part starts or ends with '-' or '.', or is empty"
    return None


def check(name: str, rule: Rule, what: str) -> str:
    """``name`` unchanged, or ``InvalidObjectName`` saying which rule it broke and how."""
    found = problem(name, rule)
    if found is not None:
        raise InvalidObjectName(name, rule, what, found)
    return name
