"""Typed refusals of the cluster registry.

Guarantees:
- Every refusal names what was refused and why, and never carries credential material: messages are
  built only from names, namespaces, request paths and server answers.
- ``NotRegistered`` is the single answer for "not in this tenant's index", whether the name does not
  exist anywhere or belongs to another tenant: same type, same message, so a refusal is never an
  oracle for other tenants' cluster names.
"""

from __future__ import annotations

import json
import re

from engine.effects.io.transport import NotSent

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def printable(name: object) -> str:
    """``name`` as it may appear in a message: a DNS label verbatim, anything else JSON-quoted and cut."""
    text = str(name)
    if _LABEL.match(text):
        return text
    return json.dumps(text[:80])


class RegistryError(NotSent):
    """Base of every registry refusal."""


class NotRegistered(RegistryError, LookupError):
    """No cluster of that name in the calling tenant's index (also: another tenant's cluster)."""

    def __init__(self, name: object) -> None:
        self.name = str(name)
        super().__init__(f"no cluster named {printable(name)} is registered for this tenant")


class InvalidName(RegistryError, ValueError):
    """A cluster (or tenant, or namespace) name that could not be a DNS label."""

    def __init__(self, name: object, problem: str, what: str = "cluster name") -> None:
        self.name = str(name)
        super().__init__(
            f"{what} {printable(name)} is not usable: {problem}; it must be 1-63 characters of "
            "a-z, 0-9 and '-', starting and ending alphanumeric"
        )


class KubeconfigRefused(RegistryError, ValueError):
    """A kubeconfig that is malformed or asks for something the operator did not allow."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("kubeconfig refused: " + "; ".join(self.problems))


class Unreachable(RegistryError):
    """The probe (list nodes, 15 s bound) failed: the cluster is not registered."""

    def __init__(self, name: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"cluster {printable(name)} unreachable with this credential: {reason}")


class CredentialMissing(RegistryError):
    """The record exists but its credential is gone from the credential store."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"cluster {printable(name)} is registered but its credential is gone from the "
            "credential store; re-register it"
        )


class OutOfBounds(RegistryError):
    """A request or namespace outside what a bounded registration may address (refused locally).

    Deliberately not an ``OSError``: nothing was sent, so it must never be read as a transport
    failure (in doubt)."""


class UnsafePath(RegistryError, ValueError):
    """A request-target that something between the check and the apiserver could read differently
    (dot segments, encoded slashes, ``//``, backslashes, non-canonical escapes...): refused locally,
    on every client, bounded or not, because what was checked would not be what is sent."""

    def __init__(self, method: str, target: str, problem: str) -> None:
        self.target = target
        self.problem = problem
        shown = json.dumps(target[:200])
        super().__init__(f"request {method.upper()} {shown} refused before sending: {problem}")


class HomeUnavailable(RegistryError):
    """No way to reach kfold's own cluster: no kubeconfig given and not running in a pod."""


class RegistryCorrupt(RegistryError):
    """A stored index file that does not parse as registrations."""
