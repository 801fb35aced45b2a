"""Leader election on a ``coordination.k8s.io/v1`` Lease, judged on the apiserver's clock, with fencing.

Shell side (it talks to the apiserver and reads the monotonic clock); the fold never sees it. The
daemon asks ``Elector.term()`` before it journals an effect as issued (``kfold.daemon.loop``), and the
executor's transport asks it again right before each request leaves (``fence_transport``).

Expected flow (``Elector.run``, one task): every ``retry_seconds`` one ``step()``:
  - not leading: GET the Lease. Absent -> create it holding it (409 AlreadyExists = lost the race).
    Held by another holder whose ``renewTime + leaseDurationSeconds`` (+1 s, the Date header's
    resolution) is still ahead of the server clock -> stay standby. Free or expired -> PUT it with
    ``metadata.resourceVersion`` of the GET (409 Conflict = another replica won), holder = me,
    ``leaseTransitions`` + 1. That number is the **term**.
  - leading: PUT the renewal with the last resourceVersion (409 -> GET and judge again).

Clocks (the point of this module, and where it goes past client-go):
- "Now" for the Lease's age is the home cluster's ``ServerClock`` (the apiserver's ``Date`` advanced
  by the monotonic clock), observed on every reply here too. ``renewTime``/``acquireTime`` are
  written in that clock, as the latest time the server can be at (the reading plus the Date's
  one-second resolution): the server's own expiry of the term, ``renewTime + leaseDurationSeconds``,
  is then never earlier than the fence below assumes. The local wall clock is never read: moving it
  by a day changes nothing.
  client-go judges expiry on each replica's local clock (the time it observed the record change),
  so it needs bounded clock-rate skew between replicas and gives no fencing.
- A term's validity is measured on the **monotonic** clock from the moment the winning request
  was *sent* (before the apiserver stamped it): ``valid_until = sent + lease_seconds -
  margin_seconds``. Any latency only shortens it. A replica acquires only after
  ``renewTime + lease_seconds + 1 s`` on its own server-clock reading, and a reading lags the server
  (never leads it), so with ``margin_seconds`` above the request latency plus clock-rate drift over
  one lease, the old leader's term has ended before another can begin.
- Renew deadline: a leader that has not renewed for ``renew_seconds`` gives up (logged, reason
  ``renew deadline``), well before its term's fence; the fence is the hard stop either way.

Guarantees:
- ``term()`` is the current term number while ``monotonic() < valid_until``, else ``None``; it is
  a pure clock comparison, so a process frozen (SIGSTOP, GC pause) past its term wakes up fenced,
  before any renew attempt.
- Every acquire and every loss is logged once with the term and the reason, and ``on_change``
  is called (the daemon releases held effects on acquire).
- Terms only grow per Lease: ``leaseTransitions`` is incremented on every acquire, under a
  resourceVersion precondition, so two replicas never hold the same term.

Caveats:
- Deleting the Lease by hand restarts ``leaseTransitions`` at 1 (term numbers are then reused;
  the fence still holds, since it is time-based).
- Requests already in the apiserver when a term ends cannot be recalled (Kubernetes has no
  multi-object transaction); the per-object uid/resourceVersion preconditions of the effects close
  that window (docs/ha.md).
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from engine.effects.io.clock import ServerClock
from engine.effects.io.transport import Request, Response, Transport, TransportError
from engine.rfc3339 import to_ms as parse_ms, to_text

log = logging.getLogger("kfold.leader")


class Repeats:
    """A problem that recurs every round (an unreachable apiserver): the first time, or when it
    changes, at WARNING; its repeats at DEBUG, with a WARNING reminder every ``remind_s``."""

    def __init__(self, logger: logging.Logger, remind_s: float = 300.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.log, self.remind_s, self._mono = logger, remind_s, monotonic
        self._last: str | None = None
        self._told = 0.0

    def warn(self, text: str) -> None:
        now = self._mono()
        if text != self._last or now - self._told >= self.remind_s:
            self.log.warning("%s", text if text != self._last else f"{text} (still)")
            self._last, self._told = text, now
        else:
            self.log.debug("%s", text)

    def clear(self) -> None:
        self._last = None
RESOLUTION_MS = 1000   # the Date header's resolution: a candidate waits this much more


@dataclass(frozen=True, slots=True)
class Term:
    number: int
    holder: str
    valid_until: float     # monotonic seconds


def identity(env: dict[str, str] | None = None) -> str:
    """The pod name (``POD_NAME``/``HOSTNAME``) or host name, plus a random suffix: two processes on
    one host, or a restarted pod, are two holders."""
    env = os.environ if env is None else env
    base = env.get("POD_NAME") or env.get("HOSTNAME") or socket.gethostname() or "kfold"
    return f"{base}-{secrets.token_hex(3)}"


def micro_time(ms: int) -> str:
    """A Lease MicroTime (RFC 3339, microseconds, UTC) from epoch milliseconds; no wall clock read."""
    return to_text(ms)[:-1] + "000Z"


class Elector:
    def __init__(self, transport: Transport, clock: ServerClock, *, namespace: str, name: str,
                 holder: str, lease_seconds: int = 15, renew_seconds: int = 10, retry_seconds: float = 2,
                 margin_seconds: int = 2, cluster: str = "", monotonic: Callable[[], float] = time.monotonic,
                 on_change: Callable[[Term | None, str], Any] | None = None,
                 may_acquire: Callable[[], bool] | None = None, shard: int | None = None,
                 annotations: dict[str, str] | None = None):
        if not (0 < margin_seconds and retry_seconds < renew_seconds <= lease_seconds - margin_seconds):
            raise ValueError(f"leader: need retry_seconds ({retry_seconds}) < renew_seconds ({renew_seconds}) "
                             f"<= lease_seconds ({lease_seconds}) - margin_seconds ({margin_seconds}), margin > 0")
        self.transport, self.clock = transport, clock
        self.namespace, self.name, self.holder, self.cluster = namespace, name, holder, cluster
        self.lease_s, self.renew_s, self.retry_s, self.margin_s = lease_seconds, renew_seconds, retry_seconds, margin_seconds
        self._mono = monotonic
        self._repeats = Repeats(log, monotonic=monotonic)   # an unreachable apiserver: not a WARNING per round
        self.on_change = on_change
        # kfold.daemon.shards: a free or expired Lease is taken only while ``may_acquire()`` (this replica
        # is under its fair share); ``shard`` names the shard in the log lines. Defaults: one Lease.
        self.may_acquire, self.shard = may_acquire, shard
        self.annotations = dict(annotations or {})   # written on the Lease when taken (its shard count)
        self._term: Term | None = None
        self._renewed = 0.0           # monotonic send time of the last successful acquire/renew
        self._lease: dict[str, Any] | None = None
        self.observed_holder = ""    # who holds it, as last read (metrics, /readyz)
        self.acquired = self.lost = 0
        self.stopping = False         # ``stop_holding``: renew what is held, take nothing
        self._round = asyncio.Lock()         # a round and a release never overlap

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    # -- the fence ------------------------------------------------------------------------------
    def term(self) -> int | None:
        """The current term number, or None: not leading, or the term's fence has passed. Reads
        only (the executor's sending threads call it); the loss is recorded by ``step``."""
        t = self._term
        return t.number if t is not None and self._mono() < t.valid_until else None

    def leading(self) -> bool:
        return self.term() is not None

    # -- one round --------------------------------------------------------------------------------
    async def step(self) -> int | None:
        """One acquire-or-renew round; returns the term held after it (None: standby). While
        ``stopping``, only a term held is renewed."""
        if self._term is not None and self._mono() >= self._term.valid_until:
            self._lose("term expired before renewal (fence)")
        try:
            if self.term() is not None and self._lease is not None:
                await self._renew()
            elif not self.stopping:
                await self._try_acquire()
        except TransportError as exc:
            self._repeats.warn(f"leader: lease {self.namespace}/{self.name}: {exc}")
        else:
            self._repeats.clear()
        if self._term is not None and self._mono() - self._renewed > self.renew_s:
            self._lose(f"renew deadline ({self.renew_s}s) passed")
        return self.term()

    async def run(self) -> None:
        while True:
            try:
                async with self._round:
                    await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:   # e.g. the registry refusing the home client: keep trying, fenced meanwhile
                log.error("leader: lease %s/%s: %r; retrying in %gs", self.namespace, self.name, exc, self.retry_s)
            await asyncio.sleep(self.retry_s)

    def stop_holding(self) -> None:
        """A clean stop begins: ``run`` goes on renewing the term held (effects in flight finish
        under it, and the Lease never lapses while the daemon drains) but takes none; ``release``
        then gives it up."""
        self.stopping = True

    async def release(self, reason: str = "released on stop",
                      drain: Callable[[], Awaitable[Any]] | None = None) -> None:
        """On a clean stop (or a rebalance, ``kfold.daemon.shards``): give the Lease up so another replica
        need not wait for it to expire. Issuing stops first (the term is dropped), then ``drain``
        (requests already sent under the term finish), then the Lease is written free."""
        async with self._round:   # after a renewal under way: written over the Lease it returned
            await self._release(reason, drain)

    async def _release(self, reason: str, drain: Callable[[], Awaitable[Any]] | None) -> None:
        if self._term is None or self._lease is None:
            return
        lease = _with(self._lease, holder="", renew_ms=None)
        self._lose(reason)
        if drain is not None:
            await drain()
        try:
            await self._call("PUT", self.path, lease)
        except TransportError:
            pass

    def _stamp(self, sent: float) -> int | None:
        """The ``renewTime`` to write for a request sent at ``sent``: the server clock's reading plus
        the Date header's resolution, the latest time the server can be at (a reading lags the
        server by up to a truncated second; found by ``kfold sim --seed 71643``). The server judges
        this term by ``renewTime + leaseDurationSeconds`` on its own clock; written from the lagging
        reading, that expiry came up to a second early and ate the fence's margin, which is meant
        for clock steps and latency: with ±1 s steps a request reached the apiserver 100 ms after
        its term had expired there. Erring late only makes a standby wait up to a second longer."""
        now = self.clock.now_ms(sent)
        return None if now is None else now + RESOLUTION_MS

    async def _renew(self) -> None:
        sent = self._mono()
        now = self._stamp(sent)
        if now is None:
            return
        body = _with(self._lease, holder=self.holder, renew_ms=now)
        reply = await self._call("PUT", self.path, body)
        if reply.status == 200:
            self._took(reply.data, sent)
            return
        if _reason(reply) == "Conflict" or reply.status == 404:
            await self._try_acquire(renew=False)   # someone wrote it: read and judge again (once)
            return
        log.warning("leader: renew of lease %s/%s answered %d %s", self.namespace, self.name, reply.status, _reason(reply))

    async def _try_acquire(self, renew: bool = True) -> None:
        reply = await self._call("GET", self.path)
        if reply.status == 404:
            await self._create()
            return
        if reply.status != 200:
            log.warning("leader: read of lease %s/%s answered %d %s; grant get/create/update on leases "
                        "(`kfold manifests`)", self.namespace, self.name, reply.status, _reason(reply))
            return
        lease = reply.data
        self._lease = lease
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        self.observed_holder = holder
        if holder == self.holder and self._term is not None:
            if renew:
                await self._renew()
            return
        if holder != self.holder and self._term is not None:   # no longer ours, whatever comes next
            self._lose(f"lease taken by {holder}" if holder else "lease written free by another")
        why = "acquired (free)"
        if holder and holder != self.holder:
            now = self.clock.now_ms()
            renewed = parse_ms(spec.get("renewTime") or spec.get("acquireTime") or "")
            duration = int(spec.get("leaseDurationSeconds") or self.lease_s) * 1000
            if now is None or renewed is None or now <= renewed + duration + RESOLUTION_MS:
                return   # held and not expired on the server clock (or no server time yet: wait)
            why = f"acquired (expired, held by {holder})"
        if self.stopping or (self.may_acquire is not None and not self.may_acquire()):
            return   # stopping; or kfold.daemon.shards: at its fair share, another replica takes it
        sent = self._mono()
        now = self._stamp(sent)
        if now is None:
            return
        body = _with(lease, holder=self.holder, renew_ms=now, acquire_ms=now, lease_s=self.lease_s,
                     transitions=int(spec.get("leaseTransitions") or 0) + 1)
        body = self._annotated(body)
        put = await self._call("PUT", self.path, body)
        if put.status == 200:
            self._took(put.data, sent, acquired=why)
        elif _reason(put) != "Conflict":
            log.warning("leader: acquire of lease %s/%s answered %d %s", self.namespace, self.name, put.status, _reason(put))

    async def _create(self) -> None:
        if self.stopping or (self.may_acquire is not None and not self.may_acquire()):
            return
        sent = self._mono()
        now = self._stamp(sent)
        if now is None:
            return
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": {}}
        body = self._annotated(_with(body, holder=self.holder, renew_ms=now, acquire_ms=now, lease_s=self.lease_s,
                                     transitions=1))
        reply = await self._call("POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body)
        if reply.status == 201 or reply.status == 200:
            self._took(reply.data, sent, acquired="acquired (created)")
        elif _reason(reply) != "AlreadyExists":
            log.warning("leader: create of lease %s/%s answered %d %s", self.namespace, self.name, reply.status, _reason(reply))

    def _annotated(self, lease: dict[str, Any]) -> dict[str, Any]:
        if not self.annotations:
            return lease
        meta = dict(lease.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        return {**lease, "metadata": meta}

    def _took(self, lease: dict[str, Any], sent: float, acquired: str = "") -> None:
        self._lease, self._renewed = lease, sent
        self.observed_holder = self.holder
        number = int((lease.get("spec") or {}).get("leaseTransitions") or 0)
        self._term = Term(number, self.holder, sent + self.lease_s - self.margin_s)
        if acquired:
            self.acquired += 1
            log.info("leader: acquired lease %s/%s%s, term %d, as %s: %s", self.namespace, self.name, self._shard_text(),
                     number, self.holder, acquired,
                     extra={"term": number, "reason": acquired, "holder": self.holder, "shard": self.shard})
            if self.on_change is not None:
                self.on_change(self._term, "acquired")

    def _lose(self, reason: str) -> None:
        t, self._term = self._term, None
        if t is None:
            return
        self.lost += 1
        log.warning("leader: lost lease %s/%s%s, term %d: %s; issuing nothing until acquired again",
                    self.namespace, self.name, self._shard_text(), t.number, reason,
                    extra={"term": t.number, "reason": reason, "shard": self.shard})
        if self.on_change is not None:
            self.on_change(None, reason)

    def _shard_text(self) -> str:
        return "" if self.shard is None else f" (shard {self.shard})"

    async def _call(self, method: str, path: str, body: Any = None) -> Response:
        reply = await self.transport.call(Request(cluster=self.cluster, tenant="", method=method, path=path, body=body))
        self.clock.observe(reply.header("Date"))
        return reply


def _with(lease: dict[str, Any], *, holder: str, renew_ms: int | None, acquire_ms: int | None = None,
          lease_s: int | None = None, transitions: int | None = None) -> dict[str, Any]:
    """``lease`` with its spec changed; ``metadata.resourceVersion`` kept: the PUT's precondition."""
    spec = dict(lease.get("spec") or {})
    spec["holderIdentity"] = holder or None
    spec["renewTime"] = micro_time(renew_ms) if renew_ms is not None else None
    if acquire_ms is not None:
        spec["acquireTime"] = micro_time(acquire_ms)
    if lease_s is not None:
        spec["leaseDurationSeconds"] = lease_s
    if transitions is not None:
        spec["leaseTransitions"] = transitions
    return {**lease, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec}


def _reason(reply: Response) -> str:
    return (reply.data or {}).get("reason", "") if isinstance(reply.data, dict) else ""


class Fence:
    """``check(req)`` raises ``TransportError`` (the executor's "in doubt": the machine re-observes,
    under a valid term) once the term has ended; ``fenced`` counts the requests it stopped."""

    def __init__(self, term: Callable[[], int | None]):
        self._term = term
        self.fenced = 0

    def check(self, req: Request | None = None) -> None:
        if self._term() is None:
            self.fenced += 1
            raise TransportError("not sent: this replica's leadership term ended (fenced)")


class FencedTransport:
    """A transport that sends nothing once the term has ended. Checked when the executor calls,
    and (``KubeTransport(before_send=fence.check)``) again in the sending thread right before the
    request is written, after any wait for the thread pool or the client's limiter: an effect
    handed over before a pause is not sent after it. What is already being written when the term
    ends is the window only per-object preconditions close (docs/ha.md)."""

    def __init__(self, inner: Transport, fence: Fence):
        self.inner, self.fence = inner, fence

    @property
    def fenced(self) -> int:
        return self.fence.fenced

    async def call(self, req: Request) -> Response:
        self.fence.check(req)
        return await self.inner.call(req)

    async def close(self) -> None:
        await self.inner.close()
