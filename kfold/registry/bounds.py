"""Namespace bounds: what a registration may address, decided before any request leaves.

Rules (a registration with an empty bound addresses the whole cluster and passes every check):
- a named namespace inside the bound resolves to itself;
- a named namespace outside the bound is REFUSED, never silently narrowed: a caller that asked for
  the wrong thing must be told, or it will believe an empty answer;
- no namespace on a bounded registration resolves to the whole bound (reads) and is refused for
  single-object operations (``resolve_one``);
- cluster-scoped operations (nodes, namespaces themselves, CRDs, all-namespace lists, anything not
  under ``/namespaces/<ns>/<resource>``) are refused on a bounded registration: they cannot be
  narrowed, and answering them would show a tenant what other tenants have on a shared cluster.
- read-only discovery (``GET /api``, ``/api/v1``, ``/apis[/<g>[/<v>]]``, ``/version``,
  ``/openapi/...``) is allowed: it describes the apiserver, not anybody's objects.

Wire form (every client, bounded or not): a request-target is admitted only when nothing between
the check and the apiserver can read it differently, i.e. it is already in the one canonical form
that urllib3 sends unchanged and the apiserver splits into the same segments the check saw
(``wire_problem``): no dot segments (``.``, ``..``, nor their percent-encodings), no empty
segments (``//``), no backslash, no fragment, no percent-escape that decodes to ``/``, ``\\``,
``%``, ``?``, ``#``, a control or a non-ASCII character, and every segment spelled exactly as
``quote(decoded, safe="")`` spells it (so ``%2e``, ``%2D``, lowercase hex or a raw ``:`` are
refused instead of being normalised somewhere else). The query may hold only characters urllib3
passes through untouched. Such a path names one resource, so "checked" and "sent" are the same.
Everything here is pure; ``admit`` is what the registry's client calls on every request-target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

from kfold.registry.errors import OutOfBounds, UnsafePath
from kfold.registry.records import Registration

ALL_NAMESPACES = ""
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class RequestScope:
    """What a request path addresses."""

    scope: Literal["discovery", "namespaced", "cluster"]
    namespace: str | None = None


def _discovery(method: str, segments: list[str]) -> bool:
    if method.upper() != "GET":
        return False
    if segments[:1] == ["api"]:
        return len(segments) <= 2
    if segments[:1] == ["apis"]:
        return len(segments) <= 3
    return segments[:1] in (["version"], ["openapi"])


def _resource_segments(segments: list[str]) -> list[str]:
    rest = segments[2:] if segments[:1] == ["api"] else segments[3:]
    return rest[1:] if rest[:1] == ["watch"] else rest


def classify(method: str, path: str) -> RequestScope:
    """Classify an apiserver request path (no host, no query)."""
    segments = [unquote(s) for s in path.split("/") if s]
    if _discovery(method, segments):
        return RequestScope("discovery")
    if segments[:1] not in (["api"], ["apis"]):
        return RequestScope("cluster")
    rest = _resource_segments(segments)
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in NAMESPACE_SUBRESOURCES:
        return RequestScope("namespaced", rest[1])
    return RequestScope("cluster")


_HEX = frozenset("0123456789ABCDEFabcdef")
_QUERY_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%"
)
_DECODED_FORBIDDEN = frozenset("/\\%?#")


def _escapes_problem(text: str) -> str | None:
    """Why the percent-escapes of ``text`` are not canonical (valid, upper-case hex), or None."""
    for i, c in enumerate(text):
        if c != "%":
            continue
        pair = text[i + 1:i + 3]
        if len(pair) < 2 or not set(pair) <= _HEX:
            return f"it has a malformed percent-escape at {text[i:i + 3]!r}"
        if pair != pair.upper():
            return f"it has a lower-case percent-escape {text[i:i + 3]!r}"
    return None


def _segment_problem(raw: str) -> str | None:
    if raw in (".", ".."):
        return f"it has a dot segment {raw!r}"
    problem = _escapes_problem(raw)
    if problem:
        return problem
    decoded = unquote(raw, errors="strict")
    if decoded in (".", ".."):
        return f"segment {raw!r} is an encoded dot segment"
    bad = sorted({c for c in decoded if c in _DECODED_FORBIDDEN or not c.isascii() or not c.isprintable()})
    if bad:
        return f"segment {raw!r} decodes to {', '.join(repr(c) for c in bad)}"
    if quote(decoded, safe="") != raw:
        return f"segment {raw!r} is not in canonical form (it would be sent as {quote(decoded, safe='')!r})"
    return None


# The common case, decided by two regexes: segments of unreserved characters only (no escapes),
# none of them '.' or '..'; a query of urllib3's query characters with upper-case escapes. What
# they accept is a subset of what ``explain_wire_problem`` accepts; anything else goes there.
_PLAIN_PATH = re.compile(r"(?=/)(?:/(?!\.\.?(?:/|\Z))[A-Za-z0-9._~-]+)*/?\Z")
_PLAIN_QUERY = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-F]{2})*\Z")


def wire_problem(target: str) -> str | None:
    """Why request-target ``target`` (path, optional ``?query``) could be read differently by the
    HTTP layer or the apiserver than by this module, or None when it is in canonical wire form."""
    path, sep, query = target.partition("?")
    if _PLAIN_PATH.match(path) and (not sep or _PLAIN_QUERY.match(query)):
        return None
    return explain_wire_problem(target)


def explain_wire_problem(target: str) -> str | None:
    """``wire_problem`` without the fast path: every rule, one by one, with its reason."""
    bad = sorted({c for c in target if not c.isascii() or not c.isprintable() or c == " "})
    if bad:
        return "it contains " + ", ".join(repr(c) for c in bad)
    for char, what in (("#", "a fragment ('#')"), ("\\", "a backslash")):
        if char in target:
            return f"it contains {what}"
    path, _, query = target.partition("?")
    if not path.startswith("/"):
        return "it does not start with '/'"
    segments = path[1:].split("/")
    if "" in segments[:-1]:
        return "it has an empty segment ('//')"
    for raw in segments:
        try:
            problem = _segment_problem(raw)
        except UnicodeDecodeError:
            problem = f"segment {raw!r} decodes to bytes that are not UTF-8"
        if problem:
            return problem
    if not set(query) <= _QUERY_CHARS:
        return f"its query has {', '.join(repr(c) for c in sorted(set(query) - _QUERY_CHARS))}"
    return _escapes_problem(query)


def check_wire(method: str, target: str) -> None:
    """Raise ``UnsafePath`` unless ``target`` is in canonical wire form (see ``wire_problem``)."""
    problem = wire_problem(target)
    if problem is not None:
        raise UnsafePath(method, target, problem)


def _outside(record: Registration, namespace: str) -> OutOfBounds:
    return OutOfBounds(
        f"namespace {namespace!r} is outside what this tenant's registration of cluster "
        f"{record.name!r} may address (bound: {', '.join(record.namespaces)})"
    )


def _cluster_scoped(record: Registration, what: str) -> OutOfBounds:
    return OutOfBounds(
        f"cluster {record.name!r} is registered to this tenant with a namespace bound, so "
        f"cluster-scoped operations are not available ({what})"
    )


def resolve(record: Registration, namespace: str | None) -> tuple[str, ...]:
    """The namespaces an operation may read, given the one it asked for.

    ``(ALL_NAMESPACES,)`` means every namespace and only happens on an unbounded registration."""
    ns = (namespace or "").strip()
    if not record.bounded:
        return (ns,) if ns else (ALL_NAMESPACES,)
    if not ns:
        return record.namespaces
    if ns in record.namespaces:
        return (ns,)
    raise _outside(record, ns)


def resolve_one(record: Registration, namespace: str | None) -> str:
    """Exactly one namespace for an operation on a single object: it must be named (and inside the bound)."""
    ns = (namespace or "").strip()
    if not ns:
        raise OutOfBounds(f"cluster {record.name!r} requires a namespace for this operation")
    return resolve(record, ns)[0]


def admit(record: Registration | None, method: str, target: str) -> None:
    """Raise ``UnsafePath`` unless ``target`` is in canonical wire form, then ``OutOfBounds``
    unless ``record`` may send ``method target`` (``None``: kfold's own cluster, no bound)."""
    check_wire(method, target)
    if record is None or not record.bounded:
        return
    path = target.partition("?")[0]
    addressed = classify(method, path)
    if addressed.scope == "cluster":
        raise _cluster_scoped(record, f"{method.upper()} {path}")
    if addressed.scope == "namespaced" and addressed.namespace not in record.namespaces:
        raise _outside(record, str(addressed.namespace))
