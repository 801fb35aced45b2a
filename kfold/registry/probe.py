"""The registration probe: proof that a credential reaches its cluster, and the inventory.

Expected flow: ``register`` builds a throw-away client (no retries) and calls ``probe``.
Guarantees:
- Unbounded registration: one node list, bounded by ``PROBE_TIMEOUT`` (15 s). The same read is the
  reachability proof and the inventory (node count, ``nvidia.com/gpu`` and ``amd.com/gpu`` summed
  over node allocatable, a malformed count read as 0).
- Bounded registration: nodes are cluster-scoped and outside what the registration may address, so
  the probe lists at most one pod in each bound namespace instead (also proving the bound is
  addressable) and records no inventory.
- The server time of the answer (``Date`` header, epoch ms) comes back for ``registered_at``.
- Any failure raises ``Unreachable`` with the reason: the HTTP status and Status reason/message, or
  the transport error. Never a credential.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

import urllib3
from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from kfold.registry.errors import Unreachable
from kfold.registry.records import Inventory, http_date_ms, quantity_int

PROBE_TIMEOUT = 15
NVIDIA = "nvidia.com/gpu"
AMD = "amd.com/gpu"


@dataclass(frozen=True)
class ProbeResult:
    inventory: Inventory | None
    server_time_ms: int | None


def inventory_of(nodes: Iterable[Any]) -> Inventory:
    """Counts from ``V1Node``-shaped objects (``status.allocatable`` mapping)."""
    count = nvidia = amd = 0
    for node in nodes:
        count += 1
        allocatable = getattr(getattr(node, "status", None), "allocatable", None) or {}
        nvidia += quantity_int(allocatable.get(NVIDIA))
        amd += quantity_int(allocatable.get(AMD))
    return Inventory(nodes=count, nvidia_gpu=nvidia, amd_gpu=amd)


def _date(headers: Any) -> int | None:
    return http_date_ms((headers or {}).get("Date") or (headers or {}).get("date"))


def api_error_reason(error: ApiException) -> str:
    """``HTTP <code> <Status reason>: <message>`` from an API error body."""
    try:
        status = json.loads(error.body or "{}")
    except ValueError:
        status = {}
    status = status if isinstance(status, dict) else {}
    reason = status.get("reason") or error.reason or ""
    message = status.get("message") or ""
    return f"HTTP {error.status} {reason}" + (f": {message}" if message else "")


def transport_reason(error: Exception) -> str:
    """The innermost transport failure (urllib3 wraps the real one in ``MaxRetryError``)."""
    inner = getattr(error, "reason", None)
    if isinstance(error, urllib3.exceptions.MaxRetryError) and isinstance(inner, Exception):
        error = inner
    return f"{type(error).__name__}: {error}"


def _unpack(answer: Any) -> tuple[Any, Any]:
    """(data, headers) of a ``*_with_http_info`` answer: a (data, status, headers) tuple in the
    legacy-compatible client, an ``ApiResponse`` in the plain generated one."""
    if isinstance(answer, tuple):
        return answer[0], answer[2]
    return answer.data, answer.headers


def _reach(name: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, _request_timeout=PROBE_TIMEOUT, **kwargs)
    except ApiException as e:
        raise Unreachable(name, api_error_reason(e)) from None
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise Unreachable(name, transport_reason(e)) from None


def probe(name: str, client: Any, bound: tuple[str, ...] = ()) -> ProbeResult:
    """Prove ``client`` reaches cluster ``name`` (see module contract)."""
    core = CoreV1Api(client)
    if not bound:
        nodes, headers = _unpack(_reach(name, core.list_node_with_http_info))
        return ProbeResult(inventory_of(nodes.items or ()), _date(headers))
    date = None
    for namespace in bound:
        answer = _reach(name, core.list_namespaced_pod_with_http_info, namespace, limit=1)
        date = _date(_unpack(answer)[1])
    return ProbeResult(None, date)
