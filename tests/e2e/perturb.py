"""A view-perturbation proxy between ``kfold run`` and the real apiserver, after Sieve (OSDI'22).

It forwards every request (TLS on both sides, the client's own Authorization header) and perturbs
kfold's *view* only in ways the Kubernetes API contract permits:

- **stale reads**: a list or get that permits a cached answer (``resourceVersion=0``, or
  ``resourceVersionMatch=NotOlderThan`` with a resourceVersion the older answer still satisfies)
  may be answered with an earlier answer to the same request path; a quorum read (no
  resourceVersion) is always fresh;
- **watches**: a watch may be ended with ``410 Expired`` after some events, go silent without a
  word (the connection kept open), or lag (each event forwarded up to ``watch_lag_s`` late: a watch
  is only eventually consistent, so kfold's writes may come back long after their answers);
- **slow writes**: a mutating request's response may be held back after the apiserver applied it,
  or the connection dropped after the write was applied (the client cannot tell whether it was);
- **a crash at an intermediate point**: on the K-th mutating request of a resource, the write is
  applied, then ``on_kill`` runs (the test SIGKILLs ``kfold run``) and the request is never answered.

Everything it injected is in ``injected`` (for the failure report). The proxy runs its own event
loop on a thread; ``start()`` returns its port. ``Recorder`` is the oracle's independent view: the
test's own watches of Pods and Sessions straight on the apiserver (not through the proxy).
"""
from __future__ import annotations

import asyncio
import json
import random
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

DROP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"}
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
EXPIRED = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": "injected by the perturbation proxy: too old resource version",
                                       "reason": "Expired", "code": 410}}


@dataclass
class Faults:
    """What the proxy may inject, each with its probability (0: never)."""
    stale_reads: float = 0.0
    watch_expire: float = 0.0            # a watch ends with 410 after 1-``watch_expire_after`` events
    watch_expire_after: int = 5
    watch_lag_s: float = 0.0             # each watch event forwarded up to this late
    watch_stall: float = 0.0             # a watch goes silent for ``stall_s`` (then ends)
    stall_s: float = 20.0
    hold_write: float = 0.0              # a write's answer held back ``hold_s`` after it was applied
    hold_s: float = 2.0
    drop_write: float = 0.0              # the connection closed after the write was applied
    kill_after: tuple[str, int] | None = None   # (resource plural, K): crash on its K-th write


def _resource(path: str) -> str:
    """The resource plural of an apiserver path such as /api/v1/namespaces/ns/pods[/name[/status]]."""
    parts = [p for p in path.split("/") if p]
    if "namespaces" in parts:
        i = parts.index("namespaces")
        rest = parts[i + 2:]
        if not rest:   # /api/v1/namespaces/NAME: the namespace itself
            return "namespaces"
    else:
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    return rest[0] if rest else ""


class Proxy:
    def __init__(self, upstream: str, upstream_ca: str, cert: str, key: str, faults: Faults, seed: int,
                 on_kill: Callable[[], None] | None = None):
        self.upstream, self.faults, self.on_kill = upstream.rstrip("/"), faults, on_kill
        self.rng = random.Random(seed)
        self.client_ctx = ssl.create_default_context(cafile=upstream_ca)
        self.server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server_ctx.load_cert_chain(cert, key)
        self.injected: list[str] = []
        self.requests: list[tuple[str, str, str]] = []    # (method, path, query) as received
        self.writes: dict[str, int] = {}
        self.killed = threading.Event()
        self.answers: dict[str, list[tuple[int, bytes]]] = {}   # a read's path -> [(its list/object rv, body)]
        self.lock = threading.Lock()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> int:
        self._thread = threading.Thread(target=self._run, name="perturbing-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the perturbation proxy did not start")
        return self.port

    def revive(self) -> None:
        """After the test restarted ``kfold run``: answer again (the crash is spent)."""
        self.faults.kill_after = None
        self.killed.clear()

    def stop(self) -> None:
        if self._loop and self._stop:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread:
            self._thread.join(10)

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        loop.run_until_complete(self._serve())
        pending = asyncio.all_tasks(loop)   # handlers of watches still open (a stall): ended, not leaked
        for task in pending:
            task.cancel()
        if pending:   # a handler that swallowed its cancel may wait on a dead connection: bounded
            loop.run_until_complete(asyncio.wait(pending, timeout=5))
        loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self.session = ClientSession(connector=TCPConnector(ssl=self.client_ctx, limit=512), auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.server_ctx)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]   # type: ignore[union-attr]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()
        await self.session.close()

    def _note(self, what: str) -> None:
        with self.lock:
            self.injected.append(f"{time.monotonic():.3f} {what}")

    # -- one request ----------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        query = parse_qs(request.query_string)
        plural = _resource(request.path)
        with self.lock:
            self.requests.append((request.method, request.path, request.query_string))
        if self.killed.is_set():
            self._hang_up(request)   # the process it served is dead; a late request gets nothing
            return web.Response(status=503)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in DROP}
        body = await request.read()
        url = f"{self.upstream}{request.rel_url}"
        watch = query.get("watch", [""])[0] in ("true", "1")
        timeout = ClientTimeout(total=None if watch else 60, sock_read=None if watch else 60)
        async with self.session.request(request.method, url, headers=headers, data=body or None,
                                        timeout=timeout, allow_redirects=False) as up:
            if watch and up.status == 200:
                return await self._watch(request, up)
            data = await up.read()
            if request.method == "GET":
                data = self._maybe_stale(request, query, data, up.status)
            if request.method in MUTATING:
                dropped = await self._perturb_write(request, plural)
                if dropped:
                    self._hang_up(request)
                    return web.Response(status=503)
            resp = web.Response(status=up.status, body=data,
                                headers={k: v for k, v in up.headers.items() if k.lower() not in DROP})
            return resp

    @staticmethod
    def _hang_up(request: web.Request) -> None:
        """Close the connection without an answer (a client already gone has no transport)."""
        if request.transport is not None:
            request.transport.close()

    def _maybe_stale(self, request: web.Request, query: dict[str, list[str]], data: bytes, status: int) -> bytes:
        """Remember each answer to a read; answer one that allows a cache with an older one."""
        if status != 200:
            return data
        try:
            rv = int(json.loads(data).get("metadata", {}).get("resourceVersion") or 0)
        except (ValueError, AttributeError):
            return data
        key = request.path
        wanted = query.get("resourceVersion", [""])[0]
        match = query.get("resourceVersionMatch", [""])[0]
        cached_ok = wanted == "0" or (match == "NotOlderThan" and wanted.isdigit())
        with self.lock:
            seen = self.answers.setdefault(key, [])
            older = [(r, b) for r, b in seen if r < rv and (wanted == "0" or r >= int(wanted or 0))]
            seen.append((rv, data))
            del seen[:-20]
        if cached_ok and older and self.rng.random() < self.faults.stale_reads:
            r, b = self.rng.choice(older)
            self._note(f"stale read {key}?{request.query_string}: rv {r} instead of {rv}")
            return b
        return data

    async def _perturb_write(self, request: web.Request, plural: str) -> bool:
        """After the apiserver applied a write: hold its answer, drop it, or crash. True: dropped."""
        with self.lock:
            self.writes[plural] = n = self.writes.get(plural, 0) + 1
        kill = self.faults.kill_after
        if kill and kill[0] == plural and n == kill[1] and not self.killed.is_set():
            self._note(f"crash after write {n} of {plural}: {request.method} {request.path}")
            self.killed.set()
            if self.on_kill:
                await asyncio.get_running_loop().run_in_executor(None, self.on_kill)
            return True
        if self.rng.random() < self.faults.drop_write:
            self._note(f"dropped the answer to {request.method} {request.path} (applied)")
            return True
        if self.rng.random() < self.faults.hold_write:
            self._note(f"held the answer to {request.method} {request.path} {self.faults.hold_s} s")
            await asyncio.sleep(self.faults.hold_s)
        return False

    async def _watch(self, request: web.Request, up: Any) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={k: v for k, v in up.headers.items() if k.lower() not in DROP})
        await resp.prepare(request)
        expire_at = self.rng.randint(1, self.faults.watch_expire_after) if self.rng.random() < self.faults.watch_expire else 0
        stall_at = self.rng.randint(1, 5) if self.rng.random() < self.faults.watch_stall else 0
        events = 0
        try:
            async for line in up.content:
                if not line.strip():
                    continue
                if self.faults.watch_lag_s:
                    await asyncio.sleep(self.rng.uniform(0, self.faults.watch_lag_s))
                await resp.write(line if line.endswith(b"\n") else line + b"\n")
                events += 1
                if expire_at and events >= expire_at:
                    self._note(f"watch {request.path} ended with 410 after {events} events")
                    await resp.write(json.dumps(EXPIRED).encode() + b"\n")
                    break
                if stall_at and events >= stall_at:
                    self._note(f"watch {request.path} stalled after {events} events")
                    await asyncio.sleep(self.faults.stall_s)
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp


@dataclass
class Recorder:
    """The test's own watches of Pods and Sessions in one namespace, straight on the apiserver: the
    timeline the oracles judge (every event in the order the apiserver sent it)."""
    admin: Any
    ns: str
    events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)   # (kind, type, object)

    def start(self) -> "Recorder":
        from kubernetes import client
        core, co = client.CoreV1Api(self.admin), client.CustomObjectsApi(self.admin)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._follow, args=("Pod", core.list_namespaced_pod, (self.ns,)),
                                          daemon=True),
                         threading.Thread(target=self._follow, args=("Session", co.list_namespaced_custom_object,
                                                                     ("kfold.dev", "v1alpha1", self.ns, "sessions")),
                                          daemon=True)]
        for t in self._threads:
            t.start()
        time.sleep(0.5)
        return self

    def _follow(self, kind: str, lister: Callable, args: tuple) -> None:
        from kubernetes import watch
        rv = ""
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                kw = {"resource_version": rv} if rv else {}
                for ev in w.stream(lister, *args, timeout_seconds=5, _request_timeout=10, **kw):
                    obj = ev["object"] if isinstance(ev["object"], dict) else self.admin.sanitize_for_serialization(ev["object"])
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    with self._lock:
                        self.events.append((kind, ev["type"], obj))
                    if self._stop.is_set():
                        break
            except Exception:   # a 410 or a closed connection: list again from the last rv seen
                rv = ""
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)


# -- oracles over a recorded timeline (each returns the violations found) ----------------------------

def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def two_live_pods(events: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """Never two live (not terminating) pods of one Session at once."""
    live: dict[str, set[str]] = {}
    out = []
    for kind, typ, obj in events:
        if kind != "Pod":
            continue
        session = _labels(obj).get("kfold.dev/session")
        if not session:
            continue
        md = obj["metadata"]
        pods = live.setdefault(session, set())
        if typ == "DELETED" or md.get("deletionTimestamp"):
            pods.discard(md["name"])
        else:
            pods.add(md["name"])
        if len(pods) > 1:
            out.append(f"Session {session} has two live pods: {sorted(pods)}")
    return sorted(set(out))


def in_apiserver_order(events: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str, dict[str, Any]]]:
    """The recorded events of every kind in the order the apiserver made them.

    The recorder's watches run on one thread per kind, so events of different kinds arrive in no
    order relative to each other: a pod's deletion can be recorded before the Session update that
    asked for it. The test's control plane stores everything in one etcd, whose revision (the
    resourceVersion of each event's object) orders all writes; the oracle may lean on that, kfold
    never does (``engine.machines.base.missing_after_relist``). Events of one revision keep their
    recorded order (a stable sort); if any event lacks an integer resourceVersion, the recorded
    order stands for all."""
    revs = [(obj.get("metadata") or {}).get("resourceVersion") or "" for _kind, _typ, obj in events]
    if not all(rv.isdigit() for rv in revs):
        return list(events)
    return [e for _rv, e in sorted(zip(map(int, revs), events), key=lambda pair: pair[0])]


def healthy_pods_deleted(events: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """A pod is deleted only after its Session asked for it: a spec change (metadata.generation up)
    or the Session's deletion after the pod was created. Judged in the apiserver's order
    (``in_apiserver_order``), per pod uid (a pod deleted and made again under its name is two)."""
    asked: dict[str, int] = {}    # session -> index of its last spec change / deletion
    born: dict[str, int] = {}     # pod uid -> index of its first event
    gen: dict[str, int] = {}
    out = []
    for i, (kind, typ, obj) in enumerate(in_apiserver_order(events)):
        md = obj.get("metadata") or {}
        if kind == "Session":
            g = int(md.get("generation") or 0)
            if typ == "DELETED" or md.get("deletionTimestamp") or g != gen.get(md["name"], g):
                asked[md["name"]] = i
            gen[md["name"]] = g
            continue
        session = _labels(obj).get("kfold.dev/session")
        if not session:
            continue
        uid = md.get("uid") or md["name"]
        born.setdefault(uid, i)
        if (typ == "DELETED" or md.get("deletionTimestamp")) and asked.get(session, -1) < born[uid]:
            out.append(f"pod {md['name']} (uid {uid}) deleted with no spec change or deletion of Session "
                       f"{session} since it was made")
    return sorted(set(out))


_RANK = {"Pending": 0, "Creating": 1, "Provisioning": 2, "Ready": 3}


def phase_regressions(events: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """No bring-up phase shown going backwards while the spec (metadata.generation) stays the same;
    never Failed (these runs have no invalid spec and pods that run)."""
    last: dict[str, tuple[int, str, Any]] = {}
    out = []
    for kind, typ, obj in events:
        if kind != "Session" or typ == "DELETED":
            continue
        md, status = obj["metadata"], obj.get("status") or {}
        phase = status.get("phase")
        if not phase:
            continue
        before = last.get(md["name"])
        # Which spec the status is about: its observedGeneration; without one, the generation of
        # the event that last changed the status (the spec change's own event carries the
        # previous spec's status).
        about = status.get("observedGeneration")
        if about is None:
            about = before[0] if before and before[2] == status else int(md.get("generation") or 0)
        if phase == "Failed":
            out.append(f"Session {md['name']} Failed: {status.get('conditions')}")
        if before and before[0] == about and phase in _RANK and before[1] in _RANK and _RANK[phase] < _RANK[before[1]]:
            out.append(f"Session {md['name']} went {before[1]} -> {phase} under the spec of generation {about}")
        last[md["name"]] = (about, phase, status)
    return sorted(set(out))
