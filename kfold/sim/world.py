"""One seeded simulation run: the real daemon pieces against ``SimApiServer``, faults, invariants.

What runs for real: ``kfold.daemon.Daemon`` (its committer: journal first, fold, EffectIssued,
recovery with in-doubt effects, the ticker's deadlines and retries) over ``journal.memory``; the
pure fold with the real machines; ``engine.effects.executor.Executor.run`` through
``FakeTransport``; the observer's record construction (``Observer._observed`` with the journal's
redactor). What is simulated: the apiserver (``kfold.sim.apiserver``), the watch streams (events
from its log, delivered by ``SimWatch`` with the observer's list -> Relist -> watch -> 410 -> list
cycle), the users, and time.

Determinism: one ``random.Random(seed)`` makes every choice; the clock is ``self.now`` (ms), moved
only by the run; nothing waits on a thread or a real timer (the asyncio loop is only the daemon's
``await`` plumbing, driven one call at a time). Same seed and options -> the same journal bytes
(``journal_digest``).

A step: the clock moves; the world acts (kubelet, garbage collector, users, faults); then the
daemon's inputs run in a seeded order (each watch delivers, the executor answers some in-flight
effects, the ticker fires what is due); then every invariant is checked. After ``steps`` the
faults and users stop and the run settles: liveness must hold within ``settle_ms`` of simulated time.
"""
from __future__ import annotations

import asyncio
import copy
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from engine.effects.clock import ServerClock
from engine.effects.executor import Executor
from engine.effects.fake import Fault, FakeTransport
from engine.effects.observer import Observer
from journal.memory import MemoryJournal, MemoryStore
from journal.records import Command
from kfold.daemon import Daemon
from kfold.sim import invariants
from kfold.sim.apiserver import SimApiServer

T0 = 1_893_456_000_000  # 2030-01-01T00:00:00Z
CLUSTER, NS, BASE = "local", "team", "sessions.example.test"
SESSION_PATH = f"/apis/kfold.dev/v1alpha1/namespaces/{NS}/sessions"
START_S, READY_S = 60, 120

FAULTS = ("conflict", "already_exists", "throttle", "server_error", "reset_before", "reset_after",
          "watch_delay", "watch_duplicate", "watch_drop", "stale_list", "compact", "date_missing",
          "date_skew", "kill", "kill_lost_journal", "foreign_objects", "user_edits", "user_deletes")
OFF_BY_DEFAULT = ("second_daemon",)  # not modelled: two replicas and their Lease are tested on the real control plane


class SimFailure(Exception):
    def __init__(self, invariant: str, detail: str, step: int):
        super().__init__(f"{invariant}: {detail} (step {step})")
        self.invariant, self.detail, self.step = invariant, detail, step


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


class SimWatch:
    """One observed kind: list -> Observed ADDED + Relist, then watch events from the list's rv;
    410 -> list again. Faults: delay (hold events back), duplicate, drop (then a relist recovers)."""

    def __init__(self, sim: "Simulation", kind: str, api_version: str, plural: str, managed_only: bool):
        self.sim, self.kind, self.managed_only = sim, kind, managed_only
        self.proto = Observer(lambda: None, CLUSTER, api_version, kind, plural, NS, None, sim.clock,
                              redact=sim.redact())
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
        events = sim.api.events_after(self.kind, NS, self.rv, self.managed_only)
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
            await sim.commit(drafts)
        self.rv = rv

    def _observed(self, etype: str, obj: dict[str, Any]) -> Any:
        return self.proto._observed(etype, obj, self.sim.clock.now_ms())

    async def _list(self) -> None:
        sim = self.sim
        sim.date()  # the list's reply Date
        if sim.fault("stale_list"):
            rv, items = sim.api.list_stale(self.kind, NS, self.managed_only, sim.rng.randint(1, 20))
        else:
            rv, items = sim.api.list_now(self.kind, NS, self.managed_only)
        at = sim.clock.now_ms()
        from journal.records import ListedKey, Relist
        drafts = [self.proto._observed("ADDED", i, at) for i in items]
        keys = tuple(ListedKey(namespace=d.namespace, name=d.name, uid=d.uid, rv=d.rv) for d in drafts)
        drafts.append(Relist(at=at, cluster=CLUSTER, api_version=self.proto.api_version, kind=self.kind,
                             scope=NS, rv=str(rv), keys=keys))
        await sim.commit(drafts)
        self.rv, self.must_list = rv, False


class Simulation:
    def __init__(self, opts: Options):
        self.opts = opts
        self.rng = random.Random(opts.seed)
        # Every fault's rate and every draw are taken whether or not the fault is selected, so a
        # run with fewer faults (the shrinker's) keeps the same choices everywhere else.
        self.rates = {f: self._rate(f) for f in FAULTS}
        self.enabled = frozenset(opts.faults)
        self.faults_on = True
        self.fired: dict[str, int] = {}
        self.now = T0
        self.step = 0
        self.api = SimApiServer(T0, kubelet_ms=opts.kubelet_ms)
        self.api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        self.mono_ms = 0
        self.store = self._new_store()
        self.world_log: list[str] = []                  # what the world did, step by step (users, kills)
        self.lost: list[MemoryStore] = []               # journals lost by earlier lives, oldest first
        self.sessions: dict[str, dict[str, Any]] = {}   # name -> the spec the user last asked for (None = deleted)
        self.foreign: set[str] = set()                  # sessions whose names a foreign object took first
        self.daemon: Daemon | None = None
        self.watches: list[SimWatch] = []
        self.lives = 0

    def note(self, what: str) -> None:
        self.world_log.append(f"step {self.step} t+{(self.now - T0) / 1000:.1f}s: {what}")

    def _rate(self, fault: str) -> float:
        top = {"kill": 0.02, "kill_lost_journal": 0.005, "compact": 0.03, "foreign_objects": 0.5,
               "user_edits": 0.08, "user_deletes": 0.02}.get(fault, 0.15)
        return round(self.rng.uniform(0, top), 4)

    def fault(self, name: str) -> bool:
        if not self.faults_on:
            return False
        hit = self.rng.random() < self.rates[name] and name in self.enabled
        if hit:
            self.fired[name] = self.fired.get(name, 0) + 1
        return hit

    def _new_store(self) -> MemoryStore:
        store = MemoryStore()
        store.meta["salt"] = self.rng.randbytes(16)  # the redaction salt, from the seed
        return store

    # -- the daemon -----------------------------------------------------------------------------
    def redact(self) -> Any:
        r = getattr(self.daemon.journal, "redactor", None) if self.daemon else None
        return r.redact if r is not None else None

    async def start_daemon(self) -> None:
        self.lives += 1
        self.clock = ServerClock(monotonic=lambda: self.mono_ms / 1000)
        journal = MemoryJournal(self.store)
        await journal.open()
        transport = FakeTransport(self.api)
        self.executor = SimExecutor(Executor(transport, self.clock, self._no_sink, env={}, rng=self.rng))
        self.daemon = Daemon(journal, lambda _sink: self.executor, self.clock,
                             monotonic=lambda: self.mono_ms / 1000, snapshot_every=10**9)
        self.date()
        await self.daemon.recover()
        await self.commit([Command(at=self.clock.now_ms(), name="session.configure", cluster=CLUSTER, args={
            "clusters": [CLUSTER], "base_domain": BASE, "start_ms": START_S * 1000, "ready_ms": READY_S * 1000,
            "defaults": {"start_seconds": START_S, "ready_seconds": READY_S}})])
        self.watches = [SimWatch(self, "Session", "kfold.dev/v1alpha1", "sessions", False),
                        SimWatch(self, "Pod", "v1", "pods", True)]

    async def _no_sink(self, _outcome: Any) -> None:  # pragma: no cover - run() is called directly
        raise AssertionError("the simulator performs effects with Executor.run")

    async def kill(self, lose_journal: bool) -> None:
        """kill -9 at a record boundary: in-flight effects vanish (their outcomes never journaled)."""
        await self._close_journal()
        self.note(f"daemon killed{' and its journal lost' if lose_journal else ''}; restarted "
                  f"({len(self.executor.inflight)} effects in flight vanish)")
        if lose_journal:
            self.lost.append(self.store)
            self.store = self._new_store()
        await self.start_daemon()

    async def _close_journal(self) -> None:
        try:
            await self.daemon.journal.close()
        except Exception:  # noqa: BLE001 - a killed process closes nothing; this only frees the task
            pass

    async def commit(self, drafts: list[Any]) -> None:
        await self.daemon.commit(drafts)

    def date(self) -> None:
        """A reply reaches kfold: its Date (maybe missing, maybe stepped) feeds the server clock."""
        self.api.set_time(self.now)
        if self.fault("date_missing"):
            self.api.server_ms = None
        self.clock.observe(self.api._headers().get("Date"))
        self.api.set_time(self.now)

    # -- one step ---------------------------------------------------------------------------------
    async def run_step(self) -> None:
        self.step += 1
        dt = self.rng.choice((0, 100, 500, 1000, 2000, 5000))
        self.now += dt
        self.mono_ms += dt
        if self.fault("date_skew"):
            self.api.skew_ms = self.rng.choice((-5_000, -1_000, 1_000, 5_000))  # apiservers a few s apart
        self.api.set_time(self.now)
        self.api.tick()
        if self.faults_on:
            self._users()
            if self.fault("compact"):
                self.note("etcd compacted: watches from older resourceVersions get 410")
                self.api.compact()
            if self.fault("kill"):
                await self.kill(lose_journal=False)
            elif self.fault("kill_lost_journal"):
                await self.kill(lose_journal=True)
        order = ["watch:0", "watch:1", "exec", "exec", "ticker"]
        self.rng.shuffle(order)
        for what in order:
            if what.startswith("watch"):
                await self.watches[int(what[-1])].deliver()
            elif what == "exec":
                await self._perform()
            else:
                await self._tick()

    async def _perform(self) -> None:
        ex = self.executor
        if not ex.inflight:
            return
        effect, attempt = ex.inflight.pop(self.rng.randrange(len(ex.inflight)))
        injected = self._request_fault(effect)
        if injected is not None:
            self.api.faults = [injected]
        self.api.set_time(self.now)
        if self.fault("date_missing"):
            self.api.server_ms = None
        outcome = await ex.real.run(effect, attempt)
        self.api.faults = []
        self.api.set_time(self.now)
        if self.fault("kill"):  # performed, then killed before its outcome was journaled
            self.note(f"effect {effect.id} {effect.type} {effect.key} performed; daemon killed before its outcome")
            await self.kill(lose_journal=False)
            return
        await self.commit([outcome])

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

    async def _tick(self) -> None:
        d = self.daemon
        drafts = d.ticker.due(d.state, self.clock.now_ms(), self.mono_ms)
        if drafts:
            await self.commit(drafts)

    # -- users ------------------------------------------------------------------------------------
    def _users(self) -> None:
        live = sorted(n for n, s in self.sessions.items() if s is not None)
        if len(self.sessions) < self.opts.sessions and self.rng.random() < 0.3:
            name = f"s{len(self.sessions)}"
            if self.fault("foreign_objects"):
                self._squat(name)
            self.note(f"user creates Session {name}")
            self.sessions[name] = {"image": "registry.example/ws:1", "apps": [{"name": "web", "ports": [{"port": 8080}]}]}
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
        self.api.user("POST", path, {"apiVersion": api, "kind": kind,
                                     "metadata": {"name": obj_name, "namespace": NS, "labels": {"owner": "someone-else"}}})

    # -- the run ----------------------------------------------------------------------------------
    async def run(self) -> SimFailure | None:
        await self.start_daemon()
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
            await self._close_journal()
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
        s, at, kind, payload, chk = store.rows[seq]
        h.update(f"{s}|{at}|{kind}|{chk}|".encode())
        h.update(payload if isinstance(payload, bytes) else str(payload).encode())
    return h.hexdigest()


def simulate(opts: Options) -> Result:
    sim = Simulation(opts)
    failure = asyncio.run(sim.run())
    return Result(opts.seed, sim.step, len(sim.store.rows), journal_digest(*sim.lost, sim.store), failure,
                  {f: r for f, r in sim.rates.items() if f in sim.enabled}, dict(sorted(sim.fired.items())),
                  sim.store, sim.lost, sim.world_log)
