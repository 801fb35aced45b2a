"""Scale-out: Sessions sharded over replicas, one ``coordination.k8s.io/v1`` Lease per shard.

Shell side, like ``kfold.daemon.leader`` (whose ``Elector`` runs each shard's Lease, judged on the server
clock, fenced on the monotonic clock); the fold never sees it. Used when ``leader.shards`` > 1.

Which shard an effect belongs to (``effect_shard``; every replica computes the same answer):
- A Session's shard is ``sha256("<namespace>/<name>") mod shards`` (``shard_of``). Namespace/name,
  not uid: it is known to every record about the Session (commands, its pods' ``kfold.dev/session``
  label and ``<session>-g<N>`` names) before the Session is ever read, and it never changes.
- Everything the session machine does (its status, Service, Ingress, Secret) is keyed by the
  Session: its shard. A pod effect follows the Session its pod operation answers (the pod
  machine's reply key), else the ``<session>-g<N>`` name in the pod's namespace: a Session's pod
  is created, read and deleted by the replica that holds the Session.
- Shared statements that Sessions of every shard wait for (a namespace ensured, a Repo ensured,
  bound or evicted, the Repo lists of a namespace, which share the namespace's key) are issued by
  any replica that leads at least one shard, under the term of its lowest shard (``None`` from
  ``effect_shard``): they are idempotent (create, AlreadyExists, merge patch of the same content)
  or fenced (a Repo eviction's delete carries uid and resourceVersion: a second replica's meets
  Conflict or NotFound). The orphan Secret sweep of a namespace goes to the shard of its key: one
  replica sweeps a namespace.
- Effects of one key go out in order, so every effect of one key must map to one shard: a held
  head would block the rest. Keys are ``cluster/namespace/name`` per machine; a Session named like
  another Session's pod (``x-g1`` beside ``x``) shares a key with that pod and may wait for the
  replica holding the other shard (a caveat; pick names without a ``-g<N>`` tail).

Who holds which shard (``ShardSet.step``, every ``retry_seconds``):
- Each replica keeps a member Lease (``<lease_name>-member-<hash of its identity>``, labelled
  ``kfold.dev/members-of: <lease_name>``) renewed every round; the live replicas are the members
  whose ``renewTime + leaseDurationSeconds + 1 s`` is still ahead of the server clock (expired
  ones are deleted, with their resourceVersion as precondition). Fair share = ceil(shards / live).
- A replica over its fair share releases the extra shards (the highest-numbered): the term is
  dropped (nothing more is issued or sent), requests already sent under it finish (bounded wait),
  then the Lease is written free; a replica under its fair share takes free or expired shard
  Leases, starting at a shard offset by its identity (so replicas do not all race for shard 0).
- So a replica that dies loses its shards at their lease expiry, judged on the server clock, and
  the others (now with a larger fair share) take them within about ``lease_seconds`` + one round;
  a replica that joins gets shards as the others release their extras.

Guarantees: an effect is journaled as issued only under a valid term of its own shard (or, when
shared, of a shard this replica holds), and ``EffectIssued`` carries both ``term`` and ``shard``;
the transport refuses to send a request whose effect's term has ended (``ShardFence``). Two
replicas never hold the same shard in overlapping terms (``kfold.daemon.leader``'s argument, per Lease).
The daemon (``Daemon.shards``) issues nothing under a newly acquired term until it has put in
doubt what it decided for that shard meanwhile (``resume``); a term that passed its fence while
its renewal was under way and was then renewed (the same term: nobody else took it) releases what
was held meanwhile (``on_change`` with no shard acquired).

Changing ``leader.shards`` with replicas running (``count_gate``; a rolling update restarts them one at a
time with the new count): every member Lease and every shard Lease taken records its replica's count
(annotation ``kfold.dev/shards``; a shard Lease without it, written by an older kfold, counts as its
holder's member Lease says). The Lease names stay ``<lease_name>-shard-<i>`` under every count (an
upgrade at the same count needs nothing), so the same name may mean other Sessions under another
count, and the count a shard Lease was taken under decides which Sessions it covers. A replica takes a
shard only while (1) no shard Lease of another count is held and unexpired, and (2) its own count is
in force (a shard Lease of its count is held) or no live replica runs another count. So the count in
force keeps its shards while its replicas restart one by one (those left take the shards of the one
that stopped, released cleanly as on any stop); replicas of the new count stand by; when the last
replica of the old count stops, its shards are written free and the new count takes them at once
(after a kill: at their expiry). At no time do terms of two counts cover the same Session: (1)
keeps a count out while the other holds a term, and (2) keeps two counts from starting together
(each replica renews its member Lease before it lists them, so of two starting at once, the later
sees the earlier). A round's reading is used for at most ``lease_seconds - margin_seconds`` (a
replica stalled longer is judged gone by the others, so it must not act on what it read). Each
replica folds everything it sees (all shards), so a takeover starts from warm state; the fold's CPU
is therefore paid on every replica. A ``--replicas N`` StatefulSet without ``leader.shards`` > 1 runs
one leader and N-1 standbys (high availability, no scale-out).
"""
from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import math
import time
from typing import Any, Callable, Iterable

from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.transport import Request, Response, Transport, TransportError
from engine.machines.base import split_key
from engine.rfc3339 import to_ms as parse_ms
from kfold.daemon.leader import RESOLUTION_MS, Elector, FencedTransport, Repeats, micro_time

log = logging.getLogger("kfold.leader")
MEMBER_LABEL = "kfold.dev/members-of"
SHARDS_ANNOTATION = "kfold.dev/shards"   # on member and shard Leases: the ``leader.shards`` they belong to
DRAIN_S = 5.0
_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("kfold_effect_id", default="")


def shard_of(namespace: str, name: str, shards: int) -> int:
    """The shard of the Session ``namespace/name``: a hash every process computes alike (Python's
    ``hash`` is salted per process, so it is not used)."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def session_of_pod(pod: str) -> str:
    """``<session>-g<N>`` -> ``<session>`` (``engine.machines.session.manifests.pod_name``)."""
    base, sep, gen = pod.rpartition("-g")
    return base if sep and gen.isdigit() else pod


def count_gate(shards: int, holder: str, held: Iterable[tuple[str, str | None]],
               members: dict[str, str]) -> str | None:
    """Why a replica running ``leader.shards = shards`` may take no shard now (``None``: it may).
    ``held``: (holder, count or None) of every shard Lease held and unexpired (any index, any
    count; None: not recorded); ``members``: live replica -> its count. See the module doc."""
    mine, other = str(shards), {}
    in_force = False
    for who, count in held:
        count = count or members.get(who) or (mine if who == holder else None)
        if count == mine:
            in_force = True
        else:
            other[who] = count or "unknown"
    if other:
        return "shard Leases of another leader.shards are held (" + ", ".join(
            f"{w}: {n}" for w, n in sorted(other.items())) + ")"
    foreign = {w: n for w, n in members.items() if n != mine}
    if foreign and not in_force:
        return "live replicas run another leader.shards (" + ", ".join(
            f"{w}: {n}" for w, n in sorted(foreign.items())) + ") and hold no shard of this one's"
    return None


def effect_shard(effect: Any, state: Any, shards: int) -> int | None:
    """The shard whose term ``effect`` needs; ``None``: shared (any held shard). See module doc."""
    if shards <= 1:
        return 0
    _cluster, ns, name = split_key(effect.key)
    if not name:
        # A namespace's key: the pod machine ensures the namespace there (Sessions of every shard
        # wait for it) and the repo machine lists Repos on the same key (effects of one key go out
        # in order, so one key needs one answer, or a held head would block the rest).
        return None
    if effect.machine == "session":
        return shard_of(ns, name.partition("#")[0], shards)   # ``<session>#events``: the Session's Events
    if effect.machine == "pod":
        if name.startswith("#"):
            return shard_of(ns, name, shards)    # the namespace's orphan Secret sweep
        op = state.table("pod").get(effect.key) if state is not None else None
        for reply in (*getattr(op, "replies", ()), *getattr(op, "then_delete", ())):
            if reply.to == "session":
                _c, sns, sname = split_key(reply.key)
                return shard_of(sns, sname, shards)
        return shard_of(ns, session_of_pod(name), shards)
    if effect.machine == "repo":
        return None     # ensure/bind/evict of one Repo, which Sessions of any shard share
    return shard_of(ns, name, shards)


class ShardSet:
    """``shards`` Leases (``<lease_name>-shard-<i>``) and this replica's member Lease.

    ``stamp(effect)`` -> ``(shard, term)``: ``term`` None means not held here (hold the effect).
    ``on_change(shards, reason)`` is called with the set of shards just acquired (``None`` in it
    when this replica went from no shard to one: shared effects held meanwhile are released too)."""

    def __init__(self, transport: Transport, clock: ServerClock, *, namespace: str, lease_name: str, shards: int,
                 holder: str, lease_seconds: int = 15, renew_seconds: int = 10, retry_seconds: float = 2,
                 margin_seconds: int = 2, cluster: str = "", monotonic: Callable[[], float] = time.monotonic,
                 state: Callable[[], Any] = lambda: None):
        if shards < 1:
            raise ValueError(f"leader.shards must be at least 1, got {shards}")
        self.transport, self.clock, self.namespace, self.holder = transport, clock, namespace, holder
        self.lease_name, self.shards, self.cluster = lease_name, shards, cluster
        self.lease_s, self.retry_s = lease_seconds, retry_seconds
        self._mono, self._state = monotonic, state
        self._repeats = Repeats(log, monotonic=monotonic)
        self.on_change: Callable[[set[int | None], str], Any] | None = None
        self.electors = [Elector(transport, clock, namespace=namespace, name=f"{lease_name}-shard-{i}", holder=holder,
                                 lease_seconds=lease_seconds, renew_seconds=renew_seconds, retry_seconds=retry_seconds,
                                 margin_seconds=margin_seconds, cluster=cluster, monotonic=monotonic,
                                 on_change=self._changed(i), may_acquire=self._under_fair_share, shard=i,
                                 annotations={SHARDS_ANNOTATION: str(shards)})
                         for i in range(shards)]
        self.member = f"{lease_name}-member-{hashlib.sha256(holder.encode()).hexdigest()[:12]}"
        self._member: dict[str, Any] | None = None
        self.live = 1
        self._offset = int(hashlib.sha256(holder.encode()).hexdigest()[:8], 16) % shards
        self.fence = ShardFence(self)
        self._had_none = True     # no shard held yet: shared effects are held too
        self._warned = False
        self.foreign: dict[str, str] = {}   # live replicas running another ``leader.shards`` -> theirs
        self.gate: str | None = None        # why no shard may be taken (``count_gate``), None: may
        self._read_at: float | None = None  # monotonic send time of the round's Lease list (None: none yet)
        self.margin_s = margin_seconds
        self._lapsed: set[int] = set()
        self.stopping = False                # ``stop_holding``: renew the shards held, take none
        self._round = asyncio.Lock()         # a round and a release never overlap

    # -- the fence ------------------------------------------------------------------------------
    def term(self, shard: int | None) -> int | None:
        """The term of ``shard`` while it is valid here; for ``None``, of the lowest shard held."""
        if shard is None:
            return next((t for e in self.electors if (t := e.term()) is not None), None)
        return self.electors[shard].term()

    def holding(self, shard: int) -> int | None:
        """The term number this replica holds ``shard`` under, valid or lapsed (None: not held)."""
        t = self.electors[shard]._term
        return t.number if t is not None else None

    def held(self) -> list[int]:
        return [i for i, e in enumerate(self.electors) if e.term() is not None]

    def shard_for(self, effect: Any) -> int | None:
        return effect_shard(effect, self._state(), self.shards)

    def stamp(self, effect: Any) -> tuple[int | None, int | None]:
        """``(shard, term)`` to journal with ``effect``; a shared effect gets its issuing shard."""
        shard = self.shard_for(effect)
        if shard is None:
            shard = next((i for i, e in enumerate(self.electors) if e.term() is not None), None)
            if shard is None:
                return None, None
        term = self.electors[shard].term()
        if term is not None:
            self.fence.issued[effect.id] = (shard, term)
        elif self.electors[shard]._term is not None:
            self._lapsed.add(shard)    # held, but past its fence: the renewal is late
        return shard, term

    def fair_share(self) -> int:
        return math.ceil(self.shards / max(1, self.live))

    def _under_fair_share(self) -> bool:
        fresh = self._read_at is not None and self._mono() - self._read_at < self.lease_s - self.margin_s
        return fresh and self.gate is None and len(self.held()) < self.fair_share()

    def _changed(self, shard: int) -> Callable[[Any, str], None]:
        def changed(term: Any, reason: str) -> None:
            if term is None:
                return
            acquired: set[int | None] = {shard}
            if self._had_none:
                acquired.add(None)
                self._had_none = False
            if self.on_change is not None:
                self.on_change(acquired, reason)
        return changed

    # -- rounds ---------------------------------------------------------------------------------
    async def step(self) -> list[int]:
        """Renew the shards held (at once: a slow round must not let a term lapse), heartbeat,
        count the live replicas, release what is over the fair share, then take free or expired
        shards while under it. Returns the shards held. While ``stopping``: no shard released or taken."""
        await asyncio.gather(*(self.electors[i].step() for i in self.held()))
        try:
            await self._heartbeat()
            await self._count_live()
        except TransportError as exc:
            self._repeats.warn(f"shards: member lease {self.namespace}/{self.member}: {exc}")
        else:
            self._repeats.clear()
        if self.stopping:
            return self.held()
        held = self.held()
        fair = self.fair_share()
        for i in sorted(held, reverse=True)[:max(0, len(held) - fair)]:
            await self.electors[i].release(
                reason=f"rebalance: {len(held)} shards held, fair share {fair} of {self.shards} over {self.live} replicas",
                drain=lambda i=i: self.fence.drain(i))
        for k in range(self.shards):
            i = (self._offset + k) % self.shards
            if self.electors[i].term() is None:
                await self.electors[i].step()
        self._renewed_after_lapse()
        if not self.held():
            self._had_none = True
        return self.held()

    def _renewed_after_lapse(self) -> None:
        """A term that passed its fence while its renewal was under way, then renewed (same term:
        nobody else took it), is valid again; the daemon is told, so what it held meanwhile goes out."""
        back = {i for i in self._lapsed if self.electors[i].term() is not None}
        self._lapsed = {i for i in self._lapsed - back if self.electors[i]._term is not None}
        if back and self.on_change is not None:
            self.on_change(set(), f"term of shards {sorted(back)} renewed after a lapse")

    async def run(self) -> None:
        while True:
            try:
                async with self._round:
                    await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:   # keep trying; fenced meanwhile
                log.error("shards: %r; retrying in %gs", exc, self.retry_s)
            await asyncio.sleep(self.retry_s)

    def stop_holding(self) -> None:
        """A clean stop begins: ``run`` goes on renewing the shards held and the member Lease (effects
        in flight finish under their terms; no shard lapses while the daemon drains) but takes
        none and gives none away; ``release`` then gives them all up."""
        self.stopping = True

    async def release(self) -> None:
        """On a clean stop: every shard released at once (each after its in-flight requests), then
        the member Lease deleted. A shard is free for the others from its own release on, and under
        a changed ``leader.shards`` the new count waits for the last one, so none waits on another's drain."""
        async with self._round:
            await asyncio.gather(*(self.electors[i].release(drain=lambda i=i: self.fence.drain(i))
                                   for i in self.held()))
            if self._member is not None:
                rv = (self._member.get("metadata") or {}).get("resourceVersion")
                try:
                    await self._call("DELETE", self._path(self.member),
                                     {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": rv}})
                except TransportError:
                    pass

    # -- members --------------------------------------------------------------------------------
    def _path(self, name: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        return f"{base}/{name}" if name else base

    async def _heartbeat(self) -> None:
        now = self.clock.now_ms(self._mono())
        if now is None:   # no server time yet: read something to learn it
            await self._call("GET", self._path(self.member))
            now = self.clock.now_ms(self._mono())
            if now is None:
                return
        spec = {"holderIdentity": self.holder, "leaseDurationSeconds": self.lease_s, "renewTime": micro_time(now)}
        if self._member is not None:
            body = {**self._member, "spec": {**(self._member.get("spec") or {}), **spec}}
            reply = await self._call("PUT", self._path(self.member), body)
            if reply.status == 200:
                self._member = reply.data
                return
            self._member = None    # 404 (deleted as expired) or 409: create or re-read next
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.member, "namespace": self.namespace, "labels": {MEMBER_LABEL: self.lease_name},
                             "annotations": {SHARDS_ANNOTATION: str(self.shards)}},
                "spec": {**spec, "acquireTime": micro_time(now)}}
        reply = await self._call("POST", self._path(), body)
        if reply.status in (200, 201):
            self._member = reply.data
        elif reply.status == 409:
            got = await self._call("GET", self._path(self.member))
            self._member = got.data if got.status == 200 else None
        else:
            log.warning("shards: member lease %s/%s answered %d; grant get/list/create/update/delete on leases "
                        "(`kfold manifests`)", self.namespace, self.member, reply.status)

    async def _count_live(self) -> None:
        sent = self._mono()
        reply = await self._call("GET", self._path())   # members and shard Leases (of every count) in one list
        now = self.clock.now_ms()
        if reply.status != 200 or now is None:
            if reply.status != 200 and not self._warned:
                self._warned = True
                log.warning("shards: listing the leases in %s answered %d; counting only the replicas that hold "
                            "a shard (a joining one is not seen): grant list/delete on leases (`kfold manifests`)",
                            self.namespace, reply.status)
            holders = {e.observed_holder for e in self.electors if e.observed_holder}
            self.live = max(1, len(holders | {self.holder}))
            self.gate, self._read_at = None, sent
            return
        live, members, held = {self.holder}, {self.holder: str(self.shards)}, []
        shard_prefix = f"{self.lease_name}-shard-"
        every: dict[str, str] = {}   # any member, live or not -> its count (for shard Leases of an older kfold)
        for item in (reply.data or {}).get("items") or []:
            meta, spec = item.get("metadata") or {}, item.get("spec") or {}
            renewed = parse_ms(spec.get("renewTime") or "")
            duration = int(spec.get("leaseDurationSeconds") or self.lease_s) * 1000
            count = (meta.get("annotations") or {}).get(SHARDS_ANNOTATION)
            who = spec.get("holderIdentity") or ""
            alive = renewed is not None and now <= renewed + duration + RESOLUTION_MS
            if meta.get("name", "").startswith(shard_prefix) and meta["name"][len(shard_prefix):].isdigit():
                if who and alive:
                    held.append((who, count))
                continue
            if (meta.get("labels") or {}).get(MEMBER_LABEL) != self.lease_name:
                continue
            who = who or meta["name"]
            every[who] = count or str(self.shards)
            if alive:
                members[who] = every[who]
                if every[who] == str(self.shards):
                    live.add(who)
            elif renewed is not None:   # expired on the server clock: its replica is gone
                await self._call("DELETE", self._path(meta["name"]),
                                 {"apiVersion": "v1", "kind": "DeleteOptions",
                                  "preconditions": {"resourceVersion": meta.get("resourceVersion")}})
        held = [(w, c or every.get(w)) for w, c in held]
        gate = count_gate(self.shards, self.holder, held, members)
        if gate != self.gate:
            if gate is not None:
                log.warning("shards: taking no shard (leader.shards %d): %s", self.shards, gate)
            elif self.gate is not None:
                log.info("shards: leader.shards %d in force: taking shards again", self.shards)
        self.gate, self._read_at = gate, sent
        self.foreign = {w: n for w, n in members.items() if n != str(self.shards)}
        if len(live) != self.live:
            log.info("shards: %d live replicas (fair share %d of %d shards)", len(live),
                     math.ceil(self.shards / len(live)), self.shards, extra={"live": len(live)})
        self.live = len(live)

    async def _call(self, method: str, path: str, body: Any = None, query: tuple = ()) -> Response:
        reply = await self.transport.call(Request(cluster=self.cluster, tenant="", method=method, path=path,
                                                  query=query, body=body))
        self.clock.observe(reply.header("Date"))
        return reply


class ShardFence:
    """The transport's check: a request goes out only while the term its effect was issued under
    (``ShardSet.stamp``) is still this replica's. ``issued`` maps effect id -> (shard, term);
    ``ShardedExecutor`` says which effect a request belongs to; requests of no effect (none today)
    need any held shard."""

    def __init__(self, shards: ShardSet):
        self.shards = shards
        self.issued: dict[str, tuple[int, int]] = {}
        self._sending: dict[int, tuple[int, int | None]] = {}   # id(request) -> (shard, term), while in the transport
        self.fenced = 0

    def stamp_of(self, effect_id: str) -> tuple[int | None, int | None]:
        return self.issued.get(effect_id, (None, None))

    def check(self, req: Request | None = None, stamp: tuple[int | None, int | None] | None = None) -> None:
        shard, term = stamp if stamp is not None else self._stamp_of_request(req)
        now = self.shards.term(shard)
        if now is None or (term is not None and now != term):
            self.fenced += 1
            raise TransportError(f"not sent: this replica's term of shard {shard} ended (fenced)")

    def _stamp_of_request(self, req: Request | None) -> tuple[int | None, int | None]:
        return self._sending.get(id(req), (None, None)) if req is not None else (None, None)

    async def drain(self, shard: int, timeout_s: float = DRAIN_S) -> None:
        """Wait (bounded) until no request of ``shard`` is in the transport."""
        deadline = time.monotonic() + timeout_s
        while any(s == shard for s, _t in list(self._sending.values())) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


class ShardedTransport(FencedTransport):
    """A transport that sends a request only while its effect's term is valid (checked here and,
    through ``KubeTransport(before_send=fence.check)``, again in the sending thread)."""

    fence: ShardFence

    async def call(self, req: Request) -> Response:
        stamp = self.fence.stamp_of(_CURRENT.get())
        self.fence.check(stamp=stamp)
        if stamp[0] is not None:
            self.fence._sending[id(req)] = stamp
        try:
            return await self.inner.call(req)
        finally:
            self.fence._sending.pop(id(req), None)


class ShardedExecutor(Executor):
    """The executor, telling the transport which effect each request is for (a context variable
    set for the duration of ``run``); the stamp is forgotten once the effect has its outcome."""

    def __init__(self, *args: Any, fence: ShardFence, **kw: Any):
        super().__init__(*args, **kw)
        self._fence = fence

    async def run(self, effect: Any, attempt: int = 0) -> Any:
        token = _CURRENT.set(effect.id)
        try:
            return await super().run(effect, attempt)
        finally:
            _CURRENT.reset(token)
            self._fence.issued.pop(effect.id, None)


def held_effects(pending: Iterable[Any], shard_for: Callable[[Any], int | None], acquired: set[int | None]) -> list[Any]:
    """The effects decided but never sent whose shard was just acquired (put in doubt on takeover)."""
    return [p.effect for p in pending if not p.issued and shard_for(p.effect) in acquired]
