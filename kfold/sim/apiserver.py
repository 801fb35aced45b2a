"""The simulator's apiserver: ``FakeApiServer`` plus what a whole-system run needs.

Added to the fake's semantics (engine/effects/io/fake.py):
- a watch event log: every write appends ``(rv, type, obj)``; ``events_after(kind, rv)`` is what a
  watch from ``rv`` streams; ``compact()`` forgets the log so a watch from an older rv gets 410;
- list resourceVersion (the fake's) and stale lists: ``list_at(kind, rv)`` answers from a history
  of earlier states, with that state's rv;
- finalizers and ``deletionTimestamp``: a DELETE of an object with finalizers only marks it; it
  goes when its last finalizer is removed; a Pod is marked too and removed by the kubelet later;
- ownerReferences garbage collection: an object whose owner uid no longer exists is deleted;
- a kubelet: a Pod becomes Running and Ready ``kubelet_ms`` after it was created;
- the clock is the simulation's: ``now_ms`` (set by the simulator) plus ``skew_ms``; a cluster of
  its own (``name``) gets uids of its own, and ``peers`` are every cluster's servers (a Session on
  the home cluster may run its pod on another);
- ``coordination.k8s.io/v1`` Leases (get, create, replace with a resourceVersion precondition):
  every write of one records which holder has which term (``leaseTransitions``) and the renewTime
  it last wrote in it (``terms``), so the leader invariants are judged on this server's clock;
- every request kfold sends is checked against the write-side invariants at the moment the
  apiserver sees it (``violations``): a delete without a uid precondition, a delete or replace of
  an object kfold does not own, a Session written Failed while its pod is healthy.

Requests by "users" (``user_*``) bypass faults and checks: they are the world, not kfold.
"""
from __future__ import annotations

import copy
from typing import Any

from engine.effects.io.resources import ParsedPath, Resource, parse_path
from engine.effects.io.transport import Response
from engine.labels import MANAGED_BY, MANAGER
from engine.effects.io.fake import FakeApiServer, _key_of, _rfc3339

SESSION_LABEL = "kfold.dev/session"
GEN_LABEL = "kfold.dev/generation"
NS = "team"   # the namespace of the simulated Sessions
Key = tuple[str, str, str, str]
# A Session fails by design when a foreign object holds one of its names (kfold never takes it
# over), healthy pod or not: that Failed is not a violation.
NAME_HELD = frozenset({"NameTaken", "TargetTaken"})
LEASE = Resource("coordination.k8s.io/v1", "Lease", "leases", True)
LEASE_PREFIX = "/apis/coordination.k8s.io/v1/namespaces/"


def owned_by_kfold(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == MANAGER


def healthy_pod(obj: dict[str, Any]) -> bool:
    st = obj.get("status") or {}
    ready = any(c.get("ready") for c in st.get("containerStatuses") or [] if c.get("name") == "workspace")
    return st.get("phase") == "Running" and ready and not obj["metadata"].get("deletionTimestamp")


class SimApiServer(FakeApiServer):
    def __init__(self, now_ms: int, kubelet_ms: int = 3000, history: int = 40, name: str = ""):
        super().__init__(server_ms=now_ms)
        self.name = name                                          # "" = the home cluster (uids as the fake's)
        self.peers: list[SimApiServer] = [self]
        self.terms: dict[int, tuple[str, int, int]] = {}          # term -> (holder, renewTime ms, duration ms)
        self.now_ms = now_ms
        self.skew_ms = 0
        self.kubelet_ms = kubelet_ms
        self.events: list[tuple[int, str, dict[str, Any]]] = []   # (rv, type, obj) in rv order
        self.compacted_rv = 0
        self.history: list[tuple[int, dict[Key, dict[str, Any]]]] = []
        self._history_len = history
        self.created_ms: dict[str, int] = {}                     # pod uid -> creation time
        self.deleted_ms: dict[str, int] = {}                     # pod uid -> deletion request time
        self.terminate_ms = 1000
        self.violations: list[tuple[str, str]] = []               # (invariant, detail)
        self.kfold_requests = 0
        self._user = False

    # -- clock --------------------------------------------------------------------------------
    def set_time(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.server_ms = now_ms + self.skew_ms

    @property
    def clock_ms(self) -> int:
        """This server's own clock (what its Date says, when it sends one)."""
        return self.now_ms + self.skew_ms

    # -- kfold's requests ---------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, str] | None = None, body: Any = None):
        if not self._user:
            self.kfold_requests += 1
            self._check_request(method, path, body)
        return super().handle(method, path, query, body)

    def _check_request(self, method: str, path: str, body: Any) -> None:
        p = parse_path(path)
        if p is None or not p.name:
            return
        cur = self.objects.get((p.resource.api_version, p.resource.kind, p.namespace, p.name))
        where = f"{method} {p.resource.kind} {p.namespace}/{p.name}"
        if method == "DELETE":
            if not ((body or {}).get("preconditions") or {}).get("uid"):
                self.violations.append(("delete_has_uid_precondition", f"{where} sent without a uid precondition"))
        if method in ("DELETE", "PUT") and cur is not None and p.resource.kind != "Session" and not owned_by_kfold(cur):
            pre = ((body or {}).get("preconditions") or {}).get("uid")
            if method == "PUT" or pre in (None, "", cur["metadata"]["uid"]):
                self.violations.append(("no_write_to_foreign_object",
                                        f"{where}: the object (uid {cur['metadata']['uid']}) is not kfold's"))
        status = ((body if isinstance(body, dict) else {}).get("status")) or {}
        reasons = {c.get("reason") for c in status.get("conditions") or [] if isinstance(c, dict)}
        if (method == "PATCH" and p.resource.kind == "Session" and p.subresource == "status"
                and status.get("phase") == "Failed" and not reasons & NAME_HELD):
            for pod in self._pods_of(p.namespace, p.name):
                if healthy_pod(pod) and self.now_ms - self.created_ms.get(pod["metadata"]["uid"], 0) > self.kubelet_ms + 60_000:
                    self.violations.append(("no_failed_while_pod_healthy",
                                            f"Session {p.namespace}/{p.name} written Failed while pod "
                                            f"{pod['metadata']['name']} is Running and Ready"))

    def _pods_of(self, namespace: str, session: str) -> list[dict[str, Any]]:
        """The Session's pods on every cluster (its pod may run on another than its own)."""
        return [o for server in self.peers for (a, k, ns, _), o in sorted(server.objects.items())
                if k == "Pod" and ns == namespace and owned_by_kfold(o)
                and (o["metadata"].get("labels") or {}).get(SESSION_LABEL) == session]

    # -- Leases -----------------------------------------------------------------------------------
    def _dispatch(self, method: str, path: str, query: dict[str, str], body: Any) -> Response:
        p = _lease_path(path)
        if p is None:
            return super()._dispatch(method, path, query, body)
        from engine.effects.io.fake import _ApiError, _verb, status_body
        try:
            code, obj = getattr(self, f"_{_verb(method, p)}")(p, query, body)
        except _ApiError as e:
            return Response(e.code, self._headers(), status_body(e.code, e.reason, e.message, p.name, "leases"))
        self._note_term(obj)
        return Response(code, self._headers(), obj)

    def _note_term(self, lease: dict[str, Any]) -> None:
        from engine.rfc3339 import to_ms
        spec = lease.get("spec") or {}
        holder, renewed = spec.get("holderIdentity") or "", to_ms(spec.get("renewTime") or "")
        if not holder or renewed is None:
            return
        term = int(spec.get("leaseTransitions") or 0)
        had = self.terms.get(term)
        if had is not None and had[0] != holder:
            self.violations.append(("one_leader_per_term", f"lease term {term} written by {holder} while {had[0]} holds it"))
        self.terms[term] = (holder, renewed, int(spec.get("leaseDurationSeconds") or 0) * 1000)

    # -- writes: the event log, finalizers, deletion --------------------------------------------
    def _store(self, obj: dict[str, Any], key: Key) -> dict[str, Any]:
        new = key not in self.objects
        if self.name and not obj.setdefault("metadata", {}).get("uid"):
            self._uid += 1
            obj["metadata"]["uid"] = f"{self.name}-uid-{self._uid:04d}"
        stored = super()._store(obj, key)
        if stored["kind"] == "Pod" and new:
            self.created_ms[stored["metadata"]["uid"]] = self.now_ms
        md = stored["metadata"]
        if md.get("deletionTimestamp") and not md.get("finalizers") and stored["kind"] != "Pod":
            self._remove(key)
            return stored
        self.events.append((self._rv, "ADDED" if new else "MODIFIED", copy.deepcopy(stored)))
        return stored

    def _delete(self, p: Any, query: dict, body: Any) -> tuple[int, dict]:
        cur = self._existing(p)
        if cur["kind"] == "Pod" or cur["metadata"].get("finalizers"):
            return self._mark(cur, body)
        code, obj = super()._delete(p, query, body)
        self._log_gone(obj)
        return code, obj

    def _mark(self, cur: dict[str, Any], body: Any) -> tuple[int, dict]:
        """Graceful deletion: the object stays, marked, until its finalizers (or the kubelet) let go."""
        from engine.effects.io.fake import _ApiError
        pre = (body or {}).get("preconditions") or {}
        for field, have in (("uid", cur["metadata"]["uid"]), ("resourceVersion", cur["metadata"]["resourceVersion"])):
            if pre.get(field) and pre[field] != have:
                raise _ApiError(409, "Conflict", f"Precondition failed: {field} in precondition: {pre[field]}, "
                                                 f"{field} in object meta: {have}")
        if cur["metadata"].get("deletionTimestamp"):
            return 200, copy.deepcopy(cur)
        marked = copy.deepcopy(cur)
        marked["metadata"]["deletionTimestamp"] = _rfc3339(self.now_ms)
        self.deleted_ms[cur["metadata"]["uid"]] = self.now_ms
        return 200, copy.deepcopy(self._store(marked, _key_of(cur)))

    def _remove(self, key: Key) -> None:
        obj = self.objects.pop(key, None)
        if obj is not None:
            self._log_gone(obj)

    def _log_gone(self, obj: dict[str, Any]) -> None:
        self._rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self.events.append((self._rv, "DELETED", gone))

    # -- the world: kubelet, garbage collector, history -----------------------------------------
    def tick(self) -> None:
        """Kubelet and garbage collector, then a history point for stale lists."""
        for key, obj in sorted(self.objects.items()):
            if key[1] != "Pod":
                continue
            md = obj["metadata"]
            age = self.now_ms - self.created_ms.get(md["uid"], self.now_ms)
            if md.get("deletionTimestamp"):
                if self.now_ms - self.deleted_ms.get(md["uid"], 0) >= self.terminate_ms and not md.get("finalizers"):
                    self._remove(key)
            elif (obj.get("status") or {}).get("phase") != "Running" and age >= self.kubelet_ms:
                self._run_pod(key, obj)
        self._collect_garbage()
        # A shallow copy: a write stores a new object (never edits a stored one in place), and a
        # stale list deep-copies what it answers.
        self.history.append((self._rv, dict(self.objects)))
        del self.history[:-self._history_len]

    def _run_pod(self, key: Key, obj: dict[str, Any]) -> None:
        running = copy.deepcopy(obj)
        names = [c.get("name", "") for c in (running.get("spec") or {}).get("containers") or []] or ["workspace"]
        running.setdefault("spec", {})["nodeName"] = "sim-node"
        running["status"] = {"phase": "Running", "podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}],
                             "containerStatuses": [{"name": n, "ready": True, "state": {"running": {}}} for n in names]}
        self._store(running, key)

    def _collect_garbage(self) -> None:
        uids = {o["metadata"]["uid"] for o in self.objects.values()}
        for key, obj in sorted(self.objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if refs and not any(r.get("uid") in uids for r in refs):
                self._remove(key)

    def compact(self) -> None:
        self.compacted_rv = self._rv
        self.events.clear()

    # -- reads for the simulated observers ----------------------------------------------------
    def events_after(self, kind: str, namespace: str, rv: int, managed_only: bool) -> list[tuple[int, str, dict]] | None:
        """What a watch from ``rv`` streams, or ``None`` for 410 (compacted past it)."""
        if rv < self.compacted_rv:
            return None
        return [copy.deepcopy(e) for e in self.events
                if e[0] > rv and e[2]["kind"] == kind and e[2]["metadata"].get("namespace") == namespace
                and (not managed_only or owned_by_kfold(e[2]))]

    def list_now(self, kind: str, namespace: str, managed_only: bool) -> tuple[int, list[dict[str, Any]]]:
        return self._rv, _select(self.objects, kind, namespace, managed_only)

    def list_stale(self, kind: str, namespace: str, managed_only: bool, back: int) -> tuple[int, list[dict[str, Any]]]:
        if not self.history:
            return self.list_now(kind, namespace, managed_only)
        rv, objects = self.history[max(0, len(self.history) - 1 - back)]
        return rv, _select(objects, kind, namespace, managed_only)

    # -- users ----------------------------------------------------------------------------------
    def user(self, method: str, path: str, body: Any = None) -> Response:
        self._user = True
        try:
            return self._dispatch(method, path, {}, copy.deepcopy(body))
        finally:
            self._user = False


def _lease_path(path: str) -> ParsedPath | None:
    if not path.startswith(LEASE_PREFIX):
        return None
    parts = path[len(LEASE_PREFIX):].split("?")[0].split("/")
    if len(parts) not in (2, 3) or parts[1] != "leases":
        return None
    return ParsedPath(LEASE, parts[0], parts[2] if len(parts) == 3 else "", "")


def _select(objects: dict[Key, dict[str, Any]], kind: str, namespace: str, managed_only: bool) -> list[dict[str, Any]]:
    return [copy.deepcopy(o) for k, o in sorted(objects.items())
            if k[1] == kind and k[2] == namespace and (not managed_only or owned_by_kfold(o))]
