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
Everything here is pure; ``admit`` is what the registry's client calls on every request path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from kfold.registry.errors import OutOfBounds
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


def _outside(record: Registration, namespace: str) -> OutOfBounds:
    return OutOfBounds(
        f"namespace {namespace!r} is outside what this org's registration of cluster "
        f"{record.name!r} may address (bound: {', '.join(record.namespaces)})"
    )


def _cluster_scoped(record: Registration, what: str) -> OutOfBounds:
    return OutOfBounds(
        f"cluster {record.name!r} is registered to this org with a namespace bound, so "
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


def admit(record: Registration, method: str, path: str) -> None:
    """Raise ``OutOfBounds`` unless ``record`` may send ``method path``."""
    if not record.bounded:
        return
    target = classify(method, path)
    if target.scope == "cluster":
        raise _cluster_scoped(record, f"{method.upper()} {path}")
    if target.scope == "namespaced" and target.namespace not in record.namespaces:
        raise _outside(record, str(target.namespace))
