"""Which REST path serves which kind: the one table both the executor and the fake apiserver use.

Guarantees:
- ``path(api_version, kind, namespace, name, subresource)`` builds the apiserver path for every kind
  kfold touches (core/v1 Pod, Secret, Service, Event, Namespace, ConfigMap, PersistentVolumeClaim; networking.k8s.io/v1
  Ingress; events.k8s.io/v1 Event; kfold.dev/v1alpha1 Repo and Session) and raises ``UnknownKind`` for anything else, so
  an effect on an unlisted kind is refused before any request is sent.
- Every part of a path is validated before the path exists (``k8s_names``): a namespace is a
  DNS-1123 label, an object name follows its kind's own Kubernetes rule (``Resource.name_rule``), a
  subresource is a DNS-1123 label. A part that fails raises ``InvalidObjectName`` naming the part
  and the rule; the executor turns it into a ``refused`` outcome and nothing is sent. So a name
  from a spec, the config or a command (``..``, ``.``, ``a/b``, ``%2e``) can never become a dot
  segment, a collection, or another namespace's path.
- ``parse_path`` is its inverse (used by the HTTP stub apiserver).

Caveat: the table is also what ``kfold manifests`` derives its RBAC rules from; adding a kind here
without a rule there leaves the daemon Forbidden in-cluster.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.effects.k8s_names import DNS1123_LABEL, DNS1123_SUBDOMAIN, InvalidObjectName, Rule, check

__all__ = ["InvalidObjectName", "RESOURCES", "Resource", "UnknownKind", "check_name", "parse_path", "path", "resource"]


class UnknownKind(ValueError):
    """An (apiVersion, kind) kfold has no REST mapping for."""


@dataclass(frozen=True, slots=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    name_rule: Rule = DNS1123_SUBDOMAIN

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def prefix(self) -> str:
        return f"/apis/{self.api_version}" if "/" in self.api_version else f"/api/{self.api_version}"


RESOURCES: tuple[Resource, ...] = (
    Resource("v1", "Pod", "pods", True),
    Resource("v1", "Secret", "secrets", True),
    Resource("v1", "Service", "services", True, DNS1123_LABEL),
    Resource("v1", "Event", "events", True),
    Resource("events.k8s.io/v1", "Event", "events", True),
    Resource("v1", "ConfigMap", "configmaps", True),
    Resource("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True),
    Resource("v1", "Namespace", "namespaces", False, DNS1123_LABEL),
    Resource("networking.k8s.io/v1", "Ingress", "ingresses", True),
    Resource("kfold.dev/v1alpha1", "Repo", "repos", True),
    Resource("kfold.dev/v1alpha1", "Session", "sessions", True),
)
_BY_KIND = {(r.api_version, r.kind): r for r in RESOURCES}
_BY_PLURAL = {(r.prefix, r.plural): r for r in RESOURCES}


def resource(api_version: str, kind: str) -> Resource:
    r = _BY_KIND.get((api_version, kind))
    if r is None:
        known = ", ".join(f"{a} {k}" for a, k in _BY_KIND)
        raise UnknownKind(f"kfold has no REST mapping for {api_version} {kind}; known: {known}")
    return r


def check_name(api_version: str, kind: str, name: str) -> str:
    """``name`` unchanged if it is a valid name for ``kind`` (e.g. the name a create will POST)."""
    return check(name, resource(api_version, kind).name_rule, f"{kind} name")


def path(api_version: str, kind: str, namespace: str = "", name: str = "", subresource: str = "") -> str:
    """The collection path (no name) or the object path, every part validated (module contract).
    A namespaced kind needs a namespace to name an object; its collection without a namespace is
    the all-namespaces list."""
    r = resource(api_version, kind)
    if r.namespaced and not namespace and (name or subresource):
        raise UnknownKind(f"{kind} is namespaced: a namespace is required")
    if subresource and not name:
        raise UnknownKind(f"{kind} subresource {subresource!r} needs an object name")
    out = r.prefix
    if r.namespaced and namespace:
        out += "/namespaces/" + check(namespace, DNS1123_LABEL, f"namespace of {kind}")
    out += f"/{r.plural}"
    if name:
        out += "/" + check(name, r.name_rule, f"{kind} name")
    if subresource:
        out += "/" + check(subresource, DNS1123_LABEL, f"{kind} subresource")
    return out


@dataclass(frozen=True, slots=True)
class ParsedPath:
    resource: Resource
    namespace: str
    name: str
    subresource: str


def parse_path(p: str) -> ParsedPath | None:
    """Inverse of ``path``; ``None`` for a path outside the table."""
    parts = [x for x in p.split("?")[0].split("/") if x]
    if len(parts) < 3:
        return None
    n = 2 if parts[0] == "api" else 3
    prefix, rest = "/" + "/".join(parts[:n]), parts[n:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and (prefix, rest[2]) in _BY_PLURAL:
        namespace, rest = rest[1], rest[2:]
    if not rest or (prefix, rest[0]) not in _BY_PLURAL:
        return None
    r = _BY_PLURAL[(prefix, rest[0])]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return ParsedPath(r, namespace, name, sub)
