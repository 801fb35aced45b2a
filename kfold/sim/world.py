"""One seeded simulation run: the real daemon pieces against ``SimApiServer``, faults, invariants.

What runs for real: ``kfold.daemon.loop.Daemon`` — its committer task (``run_committer``: the inbox,
group commit of everything queued, journal first, fold, EffectIssued, the submit futures),
recovery with in-doubt effects, the ticker's deadlines and retries (``Ticker.due`` and the
daemon's term stamping ``_fenced``, as ``run_ticker`` calls them) — over ``journal.memory``; the
pure fold with the real machines; ``engine.effects.io.executor.Executor.run`` through
``FakeTransport``; the observer's record construction (``Observer._observed`` with the journal's
redactor); with ``second_daemon``, ``kfold.daemon.leader``'s ``Elector`` (acquire, renew, fence) on a Lease
in the model, ``Fence``/``FencedTransport`` in front of the executor, and the daemon's gate and
``resume`` exactly as ``kfold.daemon.boot`` wires them. What is simulated: the apiservers
(``kfold.sim.apiserver``, one per cluster), the watch streams (events from its log, delivered by
``SimWatch`` with the observer's list -> Relist -> watch -> 410 -> list cycle), the users, time.

Replicas: ``Replica`` is one kfold process (its own journal, daemon, executor, watches, elector).
``second_daemon`` runs every replica with leader election and starts a second one, with a journal
of its own, at a step the seed draws; ``leader_pause`` stops a replica (SIGSTOP: it does nothing)
for longer than a lease, then lets it go on where it was.

Clusters: ``cluster_skew`` adds a registered cluster (``east``) with a Date clock of its own (offset
from the home cluster's by up to an hour, or sending no Date at all); Sessions may run their pods
there, and its deadlines are judged on its clock (``ServerClocks``).

Determinism: ``random.Random(seed)`` makes every choice of the original faults; the faults added
later (``NEW_FAULTS``) draw from a second stream (``random.Random(f"kfold-sim/{seed}")``), so a
run without them makes exactly the choices it made before they existed. The clock is ``self.now``
(ms), moved only by the run; nothing waits on a thread or a real timer: the asyncio loop runs only
coroutines (the committer task, the inputs) and every input waits until the committer has taken
what it queued, so the loop's FIFO order is the only scheduler. Same seed and options -> the same
journal bytes (``journal_digest``).

A step: the clock moves; the world acts (kubelet, garbage collector, users, faults); then each
running replica's inputs run in a seeded order (each watch delivers, the executor answers some
in-flight effects, the ticker fires what is due, the elector takes its turn every 2 s) — one after
the other, or, when ``batch`` fires, all at once so the committer commits them as one group — and
the periodic orphan Secret and orphan-pod sweeps are submitted when due; then every invariant is checked. After ``steps`` the faults and users stop and the run settles:
liveness must hold within ``settle_ms`` of simulated time.
"""
from __future__ import annotations

import asyncio
import copy
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from engine.effects.io.clock import ServerClocks
from engine.effects.io.executor import Executor
from engine.effects.io.fake import Fault, FakeTransport
from engine.effects.io.observer import Observer
from journal.memory import MemoryJournal, MemoryStore
from journal.records import Command, EffectIssued
from kfold.daemon.loop import Daemon
from kfold.daemon.leader import Elector, Fence, FencedTransport
from kfold.sim import invariants
from kfold.daemon.sweeps import SweepSchedule
from kfold.sim.apiserver import LEASE_PREFIX, NS, SimApiServer
from kfold.sim.invariants import SimFailure

T0 = 1_893_456_000_000  # 2030-01-01T00:00:00Z
CLUSTER, BASE = "local", "sessions.example.test"
EAST = "east"                       # the registered cluster ``cluster_skew`` adds
LEASE_NAME, LEASE_S, RETRY_S = "kfold", 15, 2
LEADER_SKEWS = (-1_000, -500, 500, 1_000)
SWEEP_S, SWEEP_GRACE_S = 60, 120    # the orphan sweeps (config ``sweep.*``), as ``kfold run`` runs them
RESYNC_S = 36000                    # ``sweep.resync_seconds``: never within a run
SESSION_PATH = f"/apis/kfold.dev/v1alpha1/namespaces/{NS}/sessions"
START_S, READY_S = 60, 120

FAULTS = ("conflict", "already_exists", "throttle", "server_error", "reset_before", "reset_after",
          "watch_delay", "watch_duplicate", "watch_drop", "stale_list", "compact", "date_missing",
          "date_skew", "kill", "kill_lost_journal", "foreign_objects", "user_edits", "user_deletes",
          "batch", "second_daemon", "leader_pause", "cluster_skew")
NEW_FAULTS = ("batch", "second_daemon", "leader_pause", "cluster_skew")  # drawn from the second stream


@dataclass
class Options:
    seed: int = 0
    steps: int = 200
    sessions: int = 3
    faults: tuple[str, ...] = FAULTS
    settle_ms: int = 15 * 60_000
    kubelet_ms: int = 3000


@dataclass
class Result:
    seed: int
    steps: int
    records: int
    digest: str
    failure: SimFailure | None
    rates: dict[str, float]
    fired: dict[str, int] = field(default_factory=dict)
    store: Any = None
    lost: list[Any] = field(default_factory=list)
    world_log: list[str] = field(default_factory=list)
    others: list[Any] = field(default_factory=list)   # the journals of the second daemon (if one ran)


class SimExecutor:
    """The daemon's executor seam: ``submit`` queues; the run performs one effect at a time with
    the real ``Executor.run``, in an order the seed picks (any key's effect may go first)."""

    def __init__(self, real: Executor):
        self.real = real
        self.inflight: list[tuple[Any, int]] = []

    def submit(self, effect: Any, attempt: int = 0) -> None:
        if effect.type != "log":
            self.inflight.append((effect, attempt))

    @property
    def busy(self) -> int:
        return len(self.inflight)

    async def join(self) -> None:
        return None

    async def close(self) -> None:
        return None


class SimJournal(MemoryJournal):
    """The in-memory journal, with the leader invariant judged where an effect is issued: every
    ``EffectIssued`` appended carries a term the Lease gave this replica (``issued_in_own_term``)."""

    def __init__(self, store: MemoryStore, on_issued: Any = None):
        super().__init__(store)
        self.on_issued = on_issued

    def seal(self, drafts: Any) -> Any:
        self._check(drafts)
        return super().seal(drafts)

    def _check(self, drafts: Any) -> None:
        if self.on_issued is not None:
            for d in drafts:
                if isinstance(d, EffectIssued):
                    self.on_issued(d)


class SimTransport:
    """One replica's port onto the clusters' apiservers. Every request but a Lease's is judged, as
    it arrives, against the term its sender holds (``effect_in_a_live_term``)."""

    def __init__(self, sim: "Simulation", replica: "Replica"):
        self.sim, self.replica = sim, replica
        self.inner = FakeTransport(sim.apis)

    async def call(self, req: Any) -> Any:
        if self.sim.leader and not req.path.startswith(LEASE_PREFIX):
            self.sim.check_term(self.replica, f"{req.method} {req.path}")
        return await self.inner.call(req)

    async def close(self) -> None:
        return None


TARGET_KINDS = ("Pod", "Service", "Ingress")   # kfold.daemon.boot.TARGET_KINDS
TARGETS = (("Pod", "v1", "pods"), ("Service", "v1", "services"), ("Ingress", "networking.k8s.io/v1", "ingresses"))


class SimWatch:
    """One observed kind: list -> Observed ADDED + Relist, then watch events from the list's rv;
    410 -> list again. Faults: delay (hold events back), duplicate, drop (then a relist recovers)."""

    def __init__(self, sim: "Simulation", replica: "Replica", kind: str, api_version: str, plural: str,
                 managed_only: bool, cluster: str = CLUSTER):
        self.sim, self.replica, self.kind, self.managed_only, self.cluster = sim, replica, kind, managed_only, cluster
        self.api = sim.apis[cluster]
        self.clock = replica.clocks.for_cluster(cluster)
        self.proto = Observer(lambda: None, cluster, api_version, kind, plural, NS, None, self.clock,
                              redact=replica.redact())
        self.rv = 0
        self.must_list = True
        self.relist_after: int | None = None   # a dropped event is noticed (the watch breaks) at this step

    async def deliver(self) -> None:
        sim = self.sim
        if self.relist_after is not None and sim.step >= self.relist_after:
            self.must_list, self.relist_after = True, None
        if self.must_list:
            await self._list()
            return
        events = self.api.events_after(self.kind, NS, self.rv, self.managed_only)
        if events is None:  # 410 Gone
            sim.fired["gone"] = sim.fired.get("gone", 0) + 1
            self.must_list = True
            return
        if not events:
            return
        if sim.fault("watch_delay"):
            events = events[:sim.rng.randrange(len(events) + 1)]
        drafts, rv = [], self.rv
        for e_rv, etype, obj in events:
            if sim.fault("watch_drop") and self.relist_after is None:
                self.relist_after = sim.step + sim.rng.randint(1, 5)
                rv = e_rv
                continue
            drafts.append(self._observed(etype, obj))
            if sim.fault("watch_duplicate"):
                drafts.append(self._observed(etype, obj))
            rv = e_rv
        if drafts:
            await sim.commit(drafts, self.replica)
            self.proto.remember(drafts)
        self.rv = rv

    def _observed(self, etype: str, obj: dict[str, Any]) -> Any:
        return self.proto._observed(etype, obj, self.clock.now_ms())

    async def _list(self) -> None:
        sim = self.sim
        sim.date(self.replica, self.cluster)  # the list's reply Date
        if sim.fault("stale_list"):
            rv, items = self.api.list_stale(self.kind, NS, self.managed_only, sim.rng.randint(1, 20))
        else:
            rv, items = self.api.list_now(self.kind, NS, self.managed_only)
        drafts = self.proto.list_drafts(items, str(rv), self.clock.now_ms())   # what changed, as ``kfold run`` does
        await sim.commit(drafts, self.replica)
        self.proto.remember(drafts)
        self.rv, self.must_list = rv, False


@dataclass
class Replica:
    """One kfold process: its journal (``store``, and the ones it lost), and, per life, its daemon
    with the committer task, executor, server clocks, watches and (with leader election) elector."""

    name: str
    store: MemoryStore
    lives: int = 0
    lost: list[MemoryStore] = field(default_factory=list)
    daemon: Any = None
    committer: Any = None
    executor: Any = None
    clocks: Any = None
    watches: list[SimWatch] = field(default_factory=list)
    elector: Any = None
    next_elect_ms: int = 0
    paused_until: int | None = None     # SIGSTOP'ed until this simulated time
    next_sweep_ms: int = 0              # the periodic ``pod.sweep_secrets`` (monotonic ms)
    sweeps: Any = None                  # where it is due (kfold.daemon.sweeps.SweepSchedule)
    fences: list[Any] = field(default_factory=list)   # each life's fence (``fenced``: requests it stopped)

    @property
    def holder(self) -> str:
        return f"kfold-{self.name}-{self.lives}"

    def redact(self) -> Any:
        r = getattr(self.daemon.journal, "redactor", None) if self.daemon else None
        return r.redact if r is not None else None

    def paused(self, now: int) -> bool:
        return self.paused_until is not None and now < self.paused_until


class Simulation:
    def __init__(self, opts: Options):
        self.opts = opts
        self.rng = random.Random(opts.seed)
        # Every fault's rate and every draw are taken whether or not the fault is selected, so a
        # run with fewer faults (the shrinker's) keeps the same choices everywhere else.
        self.rates = {f: self._rate(f) for f in FAULTS if f not in NEW_FAULTS}
        self.rng2 = random.Random(f"kfold-sim/{opts.seed}")   # the choices of NEW_FAULTS only
        self.rates.update({f: self._rate(f, self.rng2) for f in NEW_FAULTS})
        self.enabled = frozenset(opts.faults)
        self.leader = "second_daemon" in self.enabled      # every replica elects a leader on a Lease
        self.faults_on = True
        self.fired: dict[str, int] = {}
        self.now = T0
        self.step = 0
        self.api = SimApiServer(T0, kubelet_ms=opts.kubelet_ms)
        self.apis = {CLUSTER: self.api}
        if "cluster_skew" in self.enabled:
            self._add_cluster()
        for api in self.apis.values():
            api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        self.mono_ms = 0
        self.world_log: list[str] = []                  # what the world did, step by step (users, kills)
        self.replicas = [Replica("a", self._new_store())]
        self.sessions: dict[str, dict[str, Any]] = {}   # name -> the spec the user last asked for (None = deleted)
        self.foreign: set[str] = set()                  # sessions whose names a foreign object took first
        self.kill_after: list[tuple[Replica, bool]] = []  # kills decided inside a batch, done after it
        self.batching = False

    def _add_cluster(self) -> None:
        """A registered cluster whose clock is its own: offset from home's, or sending no Date."""
        east = SimApiServer(T0, kubelet_ms=self.opts.kubelet_ms, name=EAST)
        east.skew_ms = self.rng2.choice((-3_600_000, -90_000, -20_000, 20_000, 90_000, 3_600_000))
        east.no_date = self.rng2.random() < 0.15
        east.created_ms = self.api.created_ms   # one pod uid space: the uids say which cluster
        self.apis[EAST] = east
        self.fired["cluster_skew"] = 1
        for api in self.apis.values():
            api.peers = list(self.apis.values())

    # -- compatibility: the first replica ----------------------------------------------------------
    @property
    def store(self) -> MemoryStore:
        return self.replicas[0].store

    @property
    def lost(self) -> list[MemoryStore]:
        return self.replicas[0].lost

    @property
    def daemon(self) -> Daemon:
        return self.replicas[0].daemon

    def note(self, what: str) -> None:
        self.world_log.append(f"step {self.step} t+{(self.now - T0) / 1000:.1f}s: {what}")

    def _rate(self, fault: str, rng: random.Random | None = None) -> float:
        top = {"kill": 0.02, "kill_lost_journal": 0.005, "compact": 0.03, "foreign_objects": 0.5,
               "user_edits": 0.08, "user_deletes": 0.02, "second_daemon": 0.05, "leader_pause": 0.01,
               "cluster_skew": 0.05, "batch": 0.5}.get(fault, 0.15)
        return round((rng or self.rng).uniform(0, top), 4)

    def fault(self, name: str) -> bool:
        if not self.faults_on:
            return False
        rng = self.rng2 if name in NEW_FAULTS else self.rng
        hit = rng.random() < self.rates[name] and name in self.enabled
        if hit:
            self.fired[name] = self.fired.get(name, 0) + 1
        return hit

    def _new_store(self) -> MemoryStore:
        store = MemoryStore()
        store.meta["salt"] = self.rng.randbytes(16)  # the redaction salt, from the seed
        return store

    # -- the daemon -----------------------------------------------------------------------------
    def _mono(self) -> float:
        return self.mono_ms / 1000

    async def start_daemon(self, r: Replica) -> None:
        r.lives += 1
        r.clocks = ServerClocks(home=CLUSTER, monotonic=self._mono)
        journal = SimJournal(r.store, (lambda rec, r=r: self.check_issued(r, rec)) if self.leader else None)
        await journal.open()
        transport: Any = SimTransport(self, r)
        r.elector = None
        if self.leader:
            r.elector = Elector(transport, r.clocks.for_cluster(CLUSTER), namespace=NS, name=LEASE_NAME,
                                holder=r.holder, lease_seconds=LEASE_S, retry_seconds=RETRY_S, cluster=CLUSTER,
                                monotonic=self._mono)
            r.fences.append(Fence(r.elector.term))
            transport = FencedTransport(transport, r.fences[-1])
            r.next_elect_ms = self.mono_ms
        r.executor = SimExecutor(Executor(transport, r.clocks.for_cluster, self._no_sink, env={}, rng=self.rng))
        r.daemon = Daemon(journal, lambda _sink: r.executor, r.clocks, monotonic=self._mono, snapshot_every=10**9)
        r.sweeps = SweepSchedule(SWEEP_GRACE_S, RESYNC_S, self._mono())   # as kfold.daemon.boot wires it
        r.daemon.on_send = lambda effect, sw=r.sweeps: sw.secret_written(effect, self._mono())
        if r.elector is not None:   # as kfold.daemon.boot wires them
            r.daemon.gate = self.leader_gate(r.elector)
            r.elector.on_change = lambda term, _reason, r=r: self._term_began(r) if term is not None else None
        r.committer = r.daemon.spawn(r.daemon.run_committer(), "committer")
        r.paused_until = None
        r.next_sweep_ms = self.mono_ms + SWEEP_S * 1000
        self.date(r, CLUSTER)
        await r.daemon.recover()
        if r.daemon.state.seq == 0:   # a fresh (or lost) journal
            r.sweeps.everywhere(self._mono())
        clusters = sorted(self.apis)
        await self.commit([Command(at=r.clocks.now_ms(), name="session.configure", cluster=CLUSTER, args={
            "clusters": clusters, "base_domain": BASE, "start_ms": START_S * 1000, "ready_ms": READY_S * 1000,
            "defaults": {"start_seconds": START_S, "ready_seconds": READY_S}, "listed": list(TARGET_KINDS)})], r)
        r.watches = [SimWatch(self, r, "Session", "kfold.dev/v1alpha1", "sessions", False)]
        r.watches += [SimWatch(self, r, kind, api_version, plural, True, cluster=c)   # as kfold run watches them
                      for c in [CLUSTER, *(c for c in clusters if c != CLUSTER)] for kind, api_version, plural in TARGETS]

    @staticmethod
    def leader_gate(elector: Elector) -> Any:
        """The daemon's gate: the elector's term (a test may plant another)."""
        return elector.term

    async def _no_sink(self, _outcome: Any) -> None:  # pragma: no cover - run() is called directly
        raise AssertionError("the simulator performs effects with Executor.run")

    async def kill(self, r: Replica, lose_journal: bool) -> None:
        """kill -9 at a record boundary: in-flight effects vanish (their outcomes never journaled)."""
        await self._close_journal(r)
        self.note(f"daemon {r.name} killed{' and its journal lost' if lose_journal else ''}; restarted "
                  f"({len(r.executor.inflight)} effects in flight vanish)")
        if lose_journal:
            r.lost.append(r.store)
            r.store = self._new_store()
        await self.start_daemon(r)

    async def _close_journal(self, r: Replica) -> None:
        if r.committer is not None:
            r.committer.cancel()
            await asyncio.gather(r.committer, return_exceptions=True)
        try:
            await r.daemon.journal.close()
        except Exception:  # noqa: BLE001 - a killed process closes nothing; this only frees the task
            pass

    async def commit(self, drafts: list[Any], r: Replica) -> None:
        """Hand ``drafts`` to the replica's committer task (``Daemon.submit``) and wait until they are
        committed and folded; a committer that died (a fold error) raises here, never hangs."""
        submitted = asyncio.ensure_future(r.daemon.submit(drafts))
        await asyncio.wait({submitted, r.committer}, return_when=asyncio.FIRST_COMPLETED)
        if not submitted.done():
            submitted.cancel()
            exc = r.committer.exception() if not r.committer.cancelled() else None
            raise exc or RuntimeError(f"the committer of daemon {r.name} stopped")
        submitted.result()

    def date(self, r: Replica, cluster: str = CLUSTER) -> None:
        """A reply reaches kfold: its Date (maybe missing, maybe stepped) feeds the server clock."""
        api = self.apis[cluster]
        api.set_time(self.now)
        if self.fault("date_missing") or getattr(api, "no_date", False):
            api.server_ms = None
        r.clocks.for_cluster(cluster).observe(api._headers().get("Date"))
        api.set_time(self.now)

    # -- leadership invariants ------------------------------------------------------------------
    def check_issued(self, r: Replica, rec: EffectIssued) -> None:
        """``issued_in_own_term``: an effect is journaled as issued only with a term, one the Lease
        gave this replica (two replicas never issue in one term)."""
        term = rec.term
        holder = self.api.terms.get(term, ("",))[0] if term is not None else ""
        if term is None or holder != r.holder:
            e = rec.effect
            self.api.violations.append(("issued_in_own_term", f"daemon {r.holder} issued {e.get('id')} {e.get('type')} "
                                        f"{e.get('key')} in term {term}, which the Lease gives to {holder or 'nobody'}"))

    def check_term(self, r: Replica, what: str) -> None:
        """``effect_in_a_live_term``: a request of a replica's reaches the apiserver only while the term
        it holds is unexpired on the server's clock (renewTime + leaseDurationSeconds)."""
        term = r.elector.term()
        server = self.api.clock_ms
        if term is None:
            self.api.violations.append(("effect_in_a_live_term", f"daemon {r.holder} sent {what} at server time "
                                        f"{server} holding no term (its fence had ended it)"))
            return
        holder, renewed, duration = self.api.terms.get(term, ("", 0, 0))
        if holder != r.holder or server > renewed + duration:
            self.api.violations.append(("effect_in_a_live_term", f"daemon {r.holder} sent {what} in term {term} "
                                        f"(held by {holder or 'nobody'}) at server time {server}, "
                                        f"the term expired at {renewed + duration} (server clock skew {self.api.skew_ms} ms)"))

    # -- one step ---------------------------------------------------------------------------------
    def _set_time(self) -> None:
        for api in self.apis.values():
            api.set_time(self.now)

    async def run_step(self) -> None:
        self.step += 1
        dt = self.rng.choice((0, 100, 500, 1000, 2000, 5000))
        self.now += dt
        self.mono_ms += dt
        if self.fault("date_skew"):   # apiservers a few s apart; with a Lease, within its margin (docs/simulation.md)
            self.api.skew_ms = self.rng.choice(LEADER_SKEWS if self.leader else (-5_000, -1_000, 1_000, 5_000))
        self._set_time()
        for api in self.apis.values():
            api.tick()
        if self.faults_on:
            self._users()
            if self.fault("compact"):
                self.note("etcd compacted: watches from older resourceVersions get 410")
                self.api.compact()
            if self.fault("kill"):
                await self.kill(self._victim(), lose_journal=False)
            elif self.fault("kill_lost_journal"):
                await self.kill(self._victim(), lose_journal=True)
            if self.leader and len(self.replicas) == 1 and self.fault("second_daemon"):
                await self._second_daemon()
            if self.fault("leader_pause"):
                self._pause()
        await self._inputs()

    def _victim(self) -> Replica:
        return self.replicas[0] if len(self.replicas) == 1 else self.rng2.choice(self.replicas)

    async def _second_daemon(self) -> None:
        r = Replica("b", self._new_store())
        self.replicas.append(r)
        self.note("a second daemon starts, with a journal of its own")
        await self.start_daemon(r)

    def _pause(self) -> None:
        """SIGSTOP: the leader (or, without one, any replica) does nothing for longer than a lease."""
        leading = [r for r in self.replicas if r.elector is not None and r.elector.term() is not None]
        r = self.rng2.choice(leading or self.replicas)
        if r.paused(self.now):
            return
        r.paused_until = self.now + self.rng2.randint(LEASE_S + 1, 3 * LEASE_S) * 1000
        self.note(f"daemon {r.name} paused (SIGSTOP) for {(r.paused_until - self.now) // 1000}s"
                  f"{' while leading' if leading else ''}")

    async def _inputs(self) -> None:
        running = [r for r in self.replicas if not r.paused(self.now)]
        order: list[tuple[Replica, str]] = []
        for r in running:
            order += [(r, f"watch:{i}") for i in range(len(r.watches))] + [(r, "exec"), (r, "exec"), (r, "ticker")]
            if r.elector is not None:
                order.append((r, "elect"))
        self.rng.shuffle(order)
        if self.fault("batch"):   # everything at once: the committer takes what is queued as one group
            self.batching = True
            try:
                await asyncio.gather(*(self._input(r, what) for r, what in order))
            finally:
                self.batching = False
            kills, self.kill_after = self.kill_after, []
            for r, lose in kills:
                await self.kill(r, lose)
        else:
            for r, what in order:
                await self._input(r, what)
        for r in running:
            await self._sweep(r)

    def _term_began(self, r: Replica) -> None:
        r.daemon.resume()
        r.sweeps.everywhere(self._mono())

    async def _sweep(self, r: Replica) -> None:
        """``kfold run``'s periodic sweeps (``run_periodic``): orphan Secrets on every cluster, orphan
        pods on every cluster but the home one (``kfold.daemon.boot.periodic_commands``)."""
        if self.mono_ms < r.next_sweep_ms:
            return
        r.next_sweep_ms = self.mono_ms + SWEEP_S * 1000
        due = r.sweeps.due([(c, NS) for c in sorted(self.apis)], self._mono())
        if due:
            self.fired["sweep_secrets"] = self.fired.get("sweep_secrets", 0) + len(due)
        await self.commit([Command(at=r.clocks.now_ms(), name="pod.sweep_secrets", cluster=c, namespace=NS,
                                   args={"cluster": c, "namespace": NS, "grace_seconds": SWEEP_GRACE_S})
                           for c, _ns in due]
                          + [Command(at=r.clocks.now_ms(), name="pod.sweep_orphans", cluster=c, namespace=NS,
                                     args={"cluster": c, "namespace": NS, "home": CLUSTER})
                             for c in sorted(self.apis) if c != CLUSTER], r)

    async def _input(self, r: Replica, what: str) -> None:
        if any(k is r for k, _ in self.kill_after):
            return   # killed a moment ago in this batch
        if what.startswith("watch"):
            await r.watches[int(what[6:])].deliver()
        elif what == "exec":
            await self._perform(r)
        elif what == "elect":
            await self._elect(r)
        else:
            await self._tick(r)

    async def _perform(self, r: Replica) -> None:
        ex = r.executor
        if not ex.inflight:
            return
        effect, attempt = ex.inflight.pop(self.rng.randrange(len(ex.inflight)))
        api = self.apis.get(effect.cluster or CLUSTER, self.api)
        injected = self._request_fault(effect)
        if injected is not None:
            api.faults = [injected]
        self._set_time()
        if self.fault("date_missing") or getattr(api, "no_date", False):
            api.server_ms = None
        outcome = await ex.real.run(effect, attempt)
        api.faults = []
        self._set_time()
        if self.fault("kill"):  # performed, then killed before its outcome was journaled
            self.note(f"effect {effect.id} {effect.type} {effect.key} performed; daemon {r.name} killed before its outcome")
            if self.batching:   # the batch's other inputs are under way: the kill waits for them
                self.kill_after.append((r, False))
            else:
                await self.kill(r, lose_journal=False)
            return
        await r.daemon.outcome_sink(outcome)   # as the executor hands it over: queued, no wait
        await self.commit([], r)                # then wait until the committer has taken it

    def _request_fault(self, effect: Any) -> Fault | None:
        if effect.type in ("patch", "replace", "delete") and self.fault("conflict"):
            return Fault(409, "Conflict", "the object has been modified (injected)")
        if effect.type == "create" and self.fault("already_exists"):
            return Fault(409, "AlreadyExists", "already exists (injected)")
        if self.fault("throttle"):
            return Fault(429, "TooManyRequests", "slow down (injected)", headers={"Retry-After": "2"})
        if self.fault("server_error"):
            return Fault(500, "InternalError", "injected")
        if self.fault("reset_before"):
            return Fault(reset=True)
        if self.fault("reset_after"):
            return Fault(reset=True, after_apply=True)
        return None

    async def _elect(self, r: Replica) -> None:
        """The elector's turn (``Elector.run`` steps every ``retry_seconds``); a Lease request may fail."""
        if self.mono_ms < r.next_elect_ms:
            return
        r.next_elect_ms = self.mono_ms + RETRY_S * 1000
        self._set_time()
        if self.fault("server_error"):
            self.api.faults = [Fault(500, "InternalError", "injected", path_contains="/leases/")]
        elif self.fault("reset_after"):
            self.api.faults = [Fault(reset=True, after_apply=True, path_contains="/leases/")]
        if self.fault("date_missing"):
            self.api.server_ms = None
        await r.elector.step()
        self.api.faults = []
        self._set_time()
        await self.commit([], r)   # a term that began queued ``resume``: the committer takes it now

    async def _tick(self, r: Replica) -> None:
        d = r.daemon
        drafts = d._fenced(d.ticker.due(d.state, r.clocks.now_ms, self.mono_ms))   # as run_ticker does
        if drafts:
            await self.commit(drafts, r)

    # -- users ------------------------------------------------------------------------------------
    def _users(self) -> None:
        live = sorted(n for n, s in self.sessions.items() if s is not None)
        if len(self.sessions) < self.opts.sessions and self.rng.random() < 0.3:
            name = f"s{len(self.sessions)}"
            if self.fault("foreign_objects"):
                self._squat(name)
            self.note(f"user creates Session {name}")
            self.sessions[name] = {"image": "registry.example/ws:1", "apps": [{"name": "web", "ports": [{"port": 8080}]}]}
            if len(self.apis) > 1 and self.rng2.random() < 0.5:
                self.sessions[name]["cluster"] = EAST
            self.api.user("POST", SESSION_PATH, {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session",
                                                 "metadata": {"name": name, "namespace": NS},
                                                 "spec": self.sessions[name]})
            return
        if live and self.fault("user_edits"):
            name = self.rng.choice(live)
            spec = dict(self.sessions[name])
            change = self.rng.choice(("suspend", "resume", "stop", "apps"))
            spec.pop("suspended", None) if change == "resume" else None
            if change == "suspend":
                spec["suspended"] = True
            elif change == "stop":
                spec["stopped"] = True
            elif change == "apps":
                spec["apps"] = [{"name": "web", "ports": [{"port": 8080 + self.rng.randint(0, 9)}]}]
            cur = self.api.get("kfold.dev/v1alpha1", "Session", NS, name)
            if cur is None or cur["metadata"].get("deletionTimestamp"):
                return
            self.note(f"user edits Session {name}: {change}")
            self.sessions[name] = spec
            body = copy.deepcopy(cur)
            body["spec"] = spec
            self.api.user("PUT", f"{SESSION_PATH}/{name}", body)
        elif live and self.fault("user_deletes"):
            name = self.rng.choice(live)
            self.note(f"user deletes Session {name}")
            self.sessions[name] = None
            self.api.user("DELETE", f"{SESSION_PATH}/{name}")

    def _squat(self, name: str) -> None:
        """A foreign object already holds one of the names kfold will want for this Session."""
        self.foreign.add(name)
        self.note(f"a foreign object takes a name of Session {name}")
        kind, api, plural, obj_name = self.rng.choice((
            ("Service", "v1", "services", name), ("Secret", "v1", "secrets", f"{name}-env"),
            ("Pod", "v1", "pods", f"{name}-g1")))
        path = f"/api/{api}/namespaces/{NS}/{plural}"
        server = self.apis[self.rng2.choice(sorted(self.apis))] if len(self.apis) > 1 else self.api
        server.user("POST", path, {"apiVersion": api, "kind": kind,
                                   "metadata": {"name": obj_name, "namespace": NS, "labels": {"owner": "someone-else"}}})

    # -- the run ----------------------------------------------------------------------------------
    async def run(self) -> SimFailure | None:
        await self.start_daemon(self.replicas[0])
        try:
            for _ in range(self.opts.steps):
                await self.run_step()
                invariants.check_step(self)
            self.faults_on = False
            self.api.skew_ms = 0
            settle_end = self.now + self.opts.settle_ms
            while self.now < settle_end:
                await self.run_step()
                invariants.check_step(self)
                if invariants.settled(self):
                    break
            invariants.check_settled(self)
        except SimFailure as failure:
            return failure
        except Exception as exc:  # the daemon itself broke (a fold error is a poison record)
            return SimFailure("daemon_never_raises", f"{type(exc).__name__}: {exc}", self.step)
        finally:
            for r in self.replicas:
                await self._close_journal(r)
        try:
            invariants.check_replays(self)
        except SimFailure as failure:
            return failure
        return None


def journal_digest(*stores: MemoryStore) -> str:
    """sha256 over every journal row of the run (lost journals first), bytes as stored."""
    h = hashlib.sha256()
    for store in stores:
        h.update(b"--journal--")
        _digest_rows(h, store)
    return h.hexdigest()


def _digest_rows(h: Any, store: MemoryStore) -> None:
    for seq in sorted(store.rows):
        s, at, kind, payload, chk = store.rows[seq][:5]   # the projection is derived from the payload
        h.update(f"{s}|{at}|{kind}|{chk}|".encode())
        h.update(payload if isinstance(payload, bytes) else str(payload).encode())
    return h.hexdigest()


def simulate(opts: Options) -> Result:
    sim = Simulation(opts)
    failure = asyncio.run(sim.run())
    stores = [s for r in sim.replicas for s in (*r.lost, r.store)]
    return Result(opts.seed, sim.step, sum(len(s.rows) for s in stores), journal_digest(*stores), failure,
                  {f: r for f, r in sim.rates.items() if f in sim.enabled and f != "cluster_skew"},  # per run
                  dict(sorted(sim.fired.items())),
                  sim.store, sim.lost, sim.world_log, [r.store for r in sim.replicas[1:]])
