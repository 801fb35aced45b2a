"""The registration record and the pure rules around it.

A ``Registration`` is what the index stores about one cluster of one tenant. Guarantees:
- It holds NO credential and NO credential reference (``extra="forbid"`` refuses a row that grew
  one). The reference is derived from (tenant, name) by ``credential_ref`` at use, so an edited row
  cannot name another tenant's material.
- ``name`` and ``tenant`` are DNS labels: they become path segments of the credential reference, so
  '/', '..' or uppercase could address material outside the tenant's own prefix.
- ``namespaces`` is the namespace bound, cleaned (trimmed, deduplicated, order kept); empty means
  the whole cluster.
- ``inventory`` is None when it was not read (a bounded registration may not read nodes).
- ``registered_at`` is server time (epoch ms) from the probe's ``Date`` header; None when the
  server sent none.
- ``allow_exec``/``allow_files`` record the operator's explicit trust at registration, so the
  stored kubeconfig is re-validated with the same permissions each time it is used.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime
from typing import Iterable

from pydantic import BaseModel, ConfigDict, field_validator

from kfold.registry.errors import InvalidName

MAX_NAME_LEN = 63


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a DNS label, or None when it is one."""
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME_LEN:
        return f"it is {len(name)} characters long"
    if name != name.lower():
        return "uppercase letters are not allowed"
    bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c == "-"))})
    if bad:
        return "it contains " + " ".join(repr(c) for c in bad)
    if name[0] == "-" or name[-1] == "-":
        return "it starts or ends with '-'"
    return None


def check_name(name: str, what: str = "cluster name") -> str:
    """``name`` unchanged, or ``InvalidName`` saying which rule it broke."""
    problem = name_problem(name)
    if problem is not None:
        raise InvalidName(name, problem, what)
    return name


def credential_ref(tenant: str, name: str) -> str:
    """The credential store key of (tenant, name): ``<tenant>.<name>``.

    Unambiguous because neither part may contain '.'; usable as a file name and as a Secret key."""
    return f"{check_name(tenant, 'tenant')}.{check_name(name)}"


def clean_namespaces(names: Iterable[str]) -> tuple[str, ...]:
    """A namespace bound: trimmed, blanks dropped, deduplicated in order, each a DNS label."""
    out: list[str] = []
    for raw in names:
        ns = raw.strip()
        if ns and ns not in out:
            out.append(check_name(ns, "namespace"))
    return tuple(out)


def quantity_int(value: object) -> int:
    """A Kubernetes quantity that is a plain count; anything else (malformed, fractional) is 0.

    A node that reports a malformed accelerator count must not fail the whole inventory."""
    text = "" if value is None else str(value).strip()
    return int(text) if text.isascii() and text.isdigit() else 0


def http_date_ms(value: str | None) -> int | None:
    """An HTTP ``Date`` header as epoch milliseconds; None when absent or unparseable."""
    if not value:
        return None
    try:
        return int(parsedate_to_datetime(value).timestamp() * 1000)
    except (TypeError, ValueError):
        return None


class Inventory(BaseModel):
    """Node and accelerator counts read from node allocatable at registration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: int = 0
    nvidia_gpu: int = 0
    amd_gpu: int = 0


class Registration(BaseModel):
    """One cluster registered by one tenant (see module docstring for the guarantees)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tenant: str
    provider: str = "byo"
    endpoint: str = ""
    namespaces: tuple[str, ...] = ()
    inventory: Inventory | None = None
    registered_at: int | None = None
    default: bool = False
    allow_exec: bool = False
    allow_files: bool = False

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value)

    @field_validator("tenant")
    @classmethod
    def _valid_tenant(cls, value: str) -> str:
        return check_name(value, "tenant")

    @field_validator("namespaces", mode="before")
    @classmethod
    def _clean_bound(cls, value: Iterable[str] | None) -> tuple[str, ...]:
        return clean_namespaces(value or ())

    @property
    def bounded(self) -> bool:
        """True when the registration may address only ``namespaces``."""
        return bool(self.namespaces)
