"""A fake apiserver: in-memory objects with the behaviour kfold's decisions depend on.

``FakeApiServer.handle(method, path, query, body) -> Response`` answers like a kube-apiserver for the
kinds in ``resources``; ``FakeTransport`` plugs it into the executor in place of the
real client, and ``tests/contract/exec_stub.py`` serves the very same object over HTTP so the
real executor can be held to the same contract (tests/contract/test_executor_contract.py).

Guarantees (the contract the machines rely on):
- every object gets a ``uid`` and a ``resourceVersion`` that grows on every write;
- POST of an existing name -> 409 ``AlreadyExists``; PUT/PATCH with a stale resourceVersion and
  DELETE whose uid/resourceVersion preconditions do not match -> 409 ``Conflict``; absent -> 404
  ``NotFound``; a namespaced write into a missing namespace -> 404 ``NotFound``; every failure body
  is a ``Status`` with ``reason`` and ``code``;
- every reply carries ``Date`` from ``server_ms`` (``None`` -> no Date header; ``date_header``
  overrides it, e.g. with garbage);
- ``faults`` are served first, in order, to matching requests (status/Status reason/headers, or
  ``reset=True`` -> ``TransportError``); ``forbid`` makes a verb on a kind answer 403;
- ``requests`` records every request, for "must not be called" assertions.

Caveat: no admission, no defaulting, no watch; label selectors support ``k=v``, ``k!=v``, ``k``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from engine.effects.io.resources import ParsedPath, parse_path
from engine.effects.io.transport import Response, Request, TransportError
from engine.effects.models import Json

T2030 = 1_893_456_000_000  # 2030-01-01T00:00:00Z


@dataclass
class Fault:
    status: int = 500
    reason: str = "InternalError"
    message: str = "injected fault"
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False
    method: str = ""          # "" = any
    path_contains: str = ""   # "" = any
    raw_body: bytes | None = None   # served instead of a Status (e.g. an HTML proxy page)
    after_apply: bool = False       # perform the request, then fail the reply (lost response)


def status_body(code: int, reason: str, message: str, name: str = "", kind: str = "") -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": {"name": name, "kind": kind}, "code": code}


def json_patch(target: dict, ops: list) -> dict:
    """RFC 6902, the ``test`` and ``remove`` ops kfold sends; a failed test is 422 Invalid, as
    kube-apiserver answers it."""
    out = copy.deepcopy(target)
    for op in ops:
        *parents, last = [s.replace("~1", "/").replace("~0", "~") for s in op["path"].split("/")[1:]]
        node: Any = out
        for s in parents:
            node = node[int(s)] if isinstance(node, list) else (node or {}).get(s)
        idx: Any = int(last) if isinstance(node, list) and last.isdigit() else last
        has = (isinstance(node, list) and isinstance(idx, int) and idx < len(node)) or \
            (isinstance(node, dict) and idx in node)
        if op["op"] == "test" and not (has and node[idx] == op.get("value")):
            raise _ApiError(422, "Invalid", f"the server rejected our request: test failed at {op['path']}")
        if op["op"] == "remove":
            if not has:
                raise _ApiError(422, "Invalid", f"the server rejected our request: nothing to remove at {op['path']}")
            del node[idx]
        elif op["op"] != "test":
            raise _ApiError(422, "Invalid", f"the fake apiserver does not apply JSON patch op {op['op']!r}")
    return out


def merge_patch(target: Json, patch: Json) -> Json:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


class _ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, name: str | None = None, kind: str | None = None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.name, self.kind = name, kind


class FakeApiServer:
    def __init__(self, server_ms: int | None = T2030, strict_namespaces: bool = True):
        self.server_ms = server_ms
        self.date_header: str | None = None
        self.strict_namespaces = strict_namespaces
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.faults: list[Fault] = []
        self.forbidden: set[tuple[str, str]] = set()
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[Any] = []
        self._rv = 100
        self._uid = 0

    # -- test controls ------------------------------------------------------------------------
    def forbid(self, verb: str, kind: str) -> None:
        self.forbidden.add((verb, kind))

    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as if created (no faults, no checks); returns the stored copy."""
        return self._store(copy.deepcopy(obj), _key_of(obj))

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((api_version, kind, namespace, name))

    # -- the apiserver ------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, str] | None = None, body: Any = None) -> tuple[Response, bytes | None]:
        """One request -> (reply, raw body override). Raises ``TransportError`` on an injected reset."""
        self.requests.append((method, path))
        self.bodies.append(copy.deepcopy(body))
        fault = self._take_fault(method, path)
        if fault and not fault.after_apply:
            return self._fault_reply(fault)
        reply = self._dispatch(method, path, query or {}, body)
        return self._fault_reply(fault) if fault else (reply, None)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for i, f in enumerate(self.faults):
            if (not f.method or f.method == method) and f.path_contains in path:
                return self.faults.pop(i)
        return None

    def _fault_reply(self, f: Fault) -> tuple[Response, bytes | None]:
        if f.reset:
            raise TransportError("connection reset by peer (injected)")
        body = None if f.raw_body is not None else status_body(f.status, f.reason, f.message)
        return Response(f.status, {**self._headers(), **f.headers}, body), f.raw_body

    def _headers(self) -> dict[str, str]:
        if self.date_header is not None:
            return {"Date": self.date_header}
        if self.server_ms is None:
            return {}
        return {"Date": formatdate(self.server_ms / 1000, usegmt=True)}

    def _dispatch(self, method: str, path: str, query: dict[str, str], body: Any) -> Response:
        p = parse_path(path)
        if p is None:
            return Response(404, self._headers(), status_body(404, "NotFound", f"the server could not find the requested resource ({path})"))
        verb = _verb(method, p)
        try:
            if (verb, p.resource.kind) in self.forbidden:
                raise _ApiError(403, "Forbidden", f'{p.resource.plural} is forbidden: User "kfold" cannot {verb} resource "{p.resource.plural}"')
            code, obj = getattr(self, f"_{verb}")(p, query, body)
        except _ApiError as e:
            return Response(e.code, self._headers(), status_body(e.code, e.reason, e.message,
                                                              e.name if e.name is not None else p.name,
                                                              e.kind if e.kind is not None else p.resource.plural))
        return Response(code, self._headers(), obj)

    # -- verbs --------------------------------------------------------------------------------
    def _create(self, p: ParsedPath, query: dict, body: Any) -> tuple[int, dict]:
        md = (body or {}).get("metadata") or {}
        if not md.get("name"):
            raise _ApiError(422, "Invalid", f"{p.resource.kind} is invalid: metadata.name: Required value")
        self._need_namespace(p)
        key = (p.resource.api_version, p.resource.kind, p.namespace, md["name"])
        if key in self.objects:
            raise _ApiError(409, "AlreadyExists", f'{p.resource.plural} "{md["name"]}" already exists')
        return 201, copy.deepcopy(self._store(copy.deepcopy(body), key))

    def _get(self, p: ParsedPath, query: dict, body: Any) -> tuple[int, dict]:
        return 200, copy.deepcopy(self._existing(p))

    def _list(self, p: ParsedPath, query: dict, body: Any) -> tuple[int, dict]:
        r, sel = p.resource, query.get("labelSelector", "")
        items = [copy.deepcopy(o) for (a, k, ns, _), o in sorted(self.objects.items())
                 if (a, k) == (r.api_version, r.kind) and (not p.namespace or ns == p.namespace)
                 and selector_matches(sel, o["metadata"].get("labels") or {})]
        return 200, {"kind": f"{r.kind}List", "apiVersion": r.api_version,
                     "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def _patch(self, p: ParsedPath, query: dict, body: Any) -> tuple[int, dict]:
        cur = self._existing(p)
        if isinstance(body, list):
            return 200, copy.deepcopy(self._store(json_patch(cur, body), _key_of(cur)))
        self._check_rv(p, cur, ((body or {}).get("metadata") or {}).get("resourceVersion"))
        body = dict(body or {})
        if p.subresource == "status":
            body = {"status": body.get("status")}
        else:
            body.pop("status", None)
        merged = merge_patch(cur, body)
        merged["metadata"] = {**merged["metadata"], "uid": cur["metadata"]["uid"], "name": cur["metadata"]["name"]}
        return 200, copy.deepcopy(self._store(merged, _key_of(cur)))

    def _replace(self, p: ParsedPath, query: dict, body: Any) -> tuple[int, dict]:
        cur = self._existing(p)
        md = (body or {}).get("metadata") or {}
        if md.get("name") != p.name:
            raise _ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        self._check_rv(p, cur, md.get("resourceVersion"))
        new = copy.deepcopy(body)
        new["metadata"]["uid"] = cur["metadata"]["uid"]
        new["metadata"].setdefault("creationTimestamp", cur["metadata"].get("creationTimestamp"))
        return 200, copy.deepcopy(self._store(new, _key_of(cur)))

    def _delete(self, p: ParsedPath, query: dict, body: Any) -> tuple[int, dict]:
        cur = self._existing(p)
        pre = (body or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != cur["metadata"]["uid"]:
            raise _ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {pre['uid']}, "
                                             f"UID in object meta: {cur['metadata']['uid']}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
            raise _ApiError(409, "Conflict", f"Precondition failed: ResourceVersion in precondition: "
                                             f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                             f"{cur['metadata']['resourceVersion']}")
        del self.objects[_key_of(cur)]
        return 200, copy.deepcopy(cur)

    # -- helpers ------------------------------------------------------------------------------
    def _existing(self, p: ParsedPath) -> dict[str, Any]:
        obj = self.objects.get((p.resource.api_version, p.resource.kind, p.namespace, p.name))
        if obj is None:
            raise _ApiError(404, "NotFound", f'{p.resource.plural} "{p.name}" not found')
        return obj

    def _need_namespace(self, p: ParsedPath) -> None:
        if p.resource.namespaced and self.strict_namespaces and ("v1", "Namespace", "", p.namespace) not in self.objects:
            raise _ApiError(404, "NotFound", f'namespaces "{p.namespace}" not found', p.namespace, "namespaces")

    def _check_rv(self, p: ParsedPath, cur: dict, rv: str | None) -> None:
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise _ApiError(409, "Conflict", f'Operation cannot be fulfilled on {p.resource.plural} "{p.name}": '
                                             "the object has been modified; please apply your changes to the latest version and try again")

    def _store(self, obj: dict[str, Any], key: tuple[str, str, str, str]) -> dict[str, Any]:
        self._rv += 1
        md = obj.setdefault("metadata", {})
        before = self.objects.get(key)
        # metadata.generation as the apiserver keeps it: 1 at create, +1 when anything but metadata
        # and status changes (what a client sends there is ignored)
        md["generation"] = 1 if before is None else (before["metadata"].get("generation") or 1) + (
            _spec_part(before) != _spec_part(obj))
        if not md.get("uid"):
            self._uid += 1
            md["uid"] = f"uid-{self._uid:04d}"
        md.update(name=key[3], resourceVersion=str(self._rv))
        if key[2]:
            md["namespace"] = key[2]
        if self.server_ms is not None:
            md.setdefault("creationTimestamp", _rfc3339(self.server_ms))
        obj["apiVersion"], obj["kind"] = key[0], key[1]
        self.objects[key] = obj
        return obj


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _verb(method: str, p: ParsedPath) -> str:
    if method == "GET":
        return "get" if p.name else "list"
    return {"POST": "create", "PATCH": "patch", "PUT": "replace", "DELETE": "delete"}[method]


def _key_of(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    md = obj["metadata"]
    return obj["apiVersion"], obj["kind"], md.get("namespace", ""), md["name"]


def _rfc3339(ms: int) -> str:
    from datetime import datetime, timezone
    return datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeTransport:
    """The executor's port onto one or more ``FakeApiServer`` by cluster name ("" = home)."""

    def __init__(self, servers: dict[str, FakeApiServer] | FakeApiServer):
        self.servers = servers if isinstance(servers, dict) else {"": servers}

    async def call(self, req: Request) -> Response:
        from engine.effects.io.transport import Refused, decode_body
        server = self.servers.get(req.cluster) or (self.servers.get("") if len(self.servers) == 1 else None)
        if server is None:
            raise Refused(f'cluster "{req.cluster}" not found')
        reply, raw = server.handle(req.method, req.path, dict(req.query), copy.deepcopy(req.body))
        return Response(reply.status, reply.headers, decode_body(raw)) if raw is not None else reply

    async def close(self) -> None:
        return None
