"""``kfold run``: wire config, registry, journal, executor, observers and HTTP around ``Daemon``.

Expected flow: ``run(config)`` -> home client from the registry -> journal opened -> ``recover``
(in-doubt commands first) -> boot commands -> observers (fresh lists) -> ticker, periodic
commands, HTTP -> wait for SIGTERM/SIGINT -> ``Daemon.stop`` -> one line ``kfold stopped`` (the
seq and how long the stop took; the journal is closed) -> exit 0.

Guarantees:
- Boot commands: ``session.configure``; per watched namespace ``repo.bind`` (with the NAMES of
  the credential variables that are set, never values) and ``repo.reconcile_bound``; then every
  ``repos.gc_interval_seconds`` ``repo.gc`` (home and registered targets alike), every ``sweep.interval_seconds``
  on each registered target ``pod.sweep_orphans``, and ``pod.sweep_secrets`` in each namespace where
  ``kfold.daemon.sweeps`` makes it due (after a Secret write sent there, a fresh journal, a term begun;
  every ``sweep.resync_seconds`` everywhere); both sweeps also once at boot with a fresh journal, once
  the observers have listed. Intervals are monotonic waits: they choose when to ask, the fold decides
  with server time.
- One daemon per journal: ``run`` holds ``<journal>.lock`` (``writer_lock``) from before it reads
  the journal until it returns; a second ``kfold run`` on the same file is refused.
- Registrations are followed while running (``kfold.daemon.follow``): a change journals a fresh
  ``session.configure`` and starts or stops the registered clusters' observers.
- The registry is the only client constructor (``Registry.home``); this module never builds one.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from functools import partial
from typing import Any, Callable, Mapping

from engine.effects.io import resources as res
from engine.effects.io.clock import ServerClocks
from engine.effects.io.executor import Backoff, Executor
from engine.effects.io.transport import KubeTransport
from engine.labels import MANAGED_SELECTOR
from engine.seams import SeamError, SessionConfigure, STATUS_RULES
from journal.records import Command
from journal.store import JournalError
from kfold.daemon.config import Config
from kfold.daemon.loop import Daemon
from kfold.daemon.clusters import client_for, open_registry, registrations
from kfold.daemon.follow import Follower
from kfold.daemon.http import Metrics, routes_for, servers
from kfold.daemon.leader import Elector, Fence, FencedTransport, identity
from kfold.daemon.shards import ShardedExecutor, ShardedTransport, ShardSet
from kfold.daemon.sweeps import SweepSchedule

log = logging.getLogger("kfold.daemon")


def boot_commands(cfg: Config, env: Mapping[str, str], now_ms: int | None,
                  clusters: dict[str, Any] | None = None,
                  remote: list[tuple[str, str, str, str]] = ()) -> list[Command]:
    """``session.configure``, then the Repo statements of every watched namespace: the home
    cluster's, and each registered target's (``remote``: what ``registrations`` read)."""
    out = [configure_command(cfg, now_ms, clusters)]
    return out + repo_commands(cfg, env, now_ms, [(cfg.cluster.name, ns) for ns in cfg.namespaces]) \
        + repo_commands(cfg, env, now_ms, [(handle, ns) for handle, _t, _n, ns in remote])


def repo_commands(cfg: Config, env: Mapping[str, str], now_ms: int | None,
                  where: list[tuple[str, str]]) -> list[Command]:
    """``repo.bind`` and ``repo.reconcile_bound`` for each ``(cluster handle, namespace)``: the
    bindings and credential NAMES of the config, stated in every namespace Sessions may run in."""
    out = []
    for cluster, ns in where:
        out += [Command(at=now_ms, name="repo.bind", cluster=cluster, namespace=ns,
                        args=_bind_args(cfg, env, cluster, ns)),
                Command(at=now_ms, name="repo.reconcile_bound", cluster=cluster, namespace=ns,
                        args={"cluster": cluster, "namespace": ns, "bindings": _bindings(cfg)})]
    return out


def configure_command(cfg: Config, now_ms: int | None, clusters: dict[str, Any] | None = None) -> Command:
    """``session.configure``: at boot, and again whenever the registrations change. Built as the
    model the session machine reads (``engine.seams.SessionConfigure``): one spelling, both sides."""
    home = cfg.cluster.name
    args = SessionConfigure(clusters=(home,), base_domain=cfg.base_domain or "",
                            start_seconds=cfg.deadlines.start_seconds, ready_seconds=cfg.deadlines.ready_seconds,
                            default_image=cfg.sessions.default_image or "", limits=dict(cfg.sessions.limits),
                            workspace_class=cfg.workspace.storage_class or "", workspace_size=cfg.workspace.size,
                            workspace_access=cfg.workspace.access_mode,
                            workspace_seed=cfg.workspace.seed_configmap or "", listed=TARGET_KINDS,
                            event_level=cfg.events.level, container_identity=True,
                            status_rules=STATUS_RULES,
                            **(clusters or {}))
    return Command(at=now_ms, name="session.configure", cluster=home, args=args.model_dump(mode="json"))


def boot_drafts(cfg: Config, env: Mapping[str, str], registry: Any, now_ms: int | None
                ) -> tuple[list[Command], tuple[dict[str, Any], list[tuple[str, str, str, str]]]]:
    """What ``kfold run`` journals at boot, from ONE read of the registry, and that read
    (``configure`` args, registered targets) for the ``Follower``."""
    booted, remote = registrations(cfg, registry)
    return boot_commands(cfg, env, now_ms, booted, remote), (booted, remote)


def _bindings(cfg: Config) -> list[dict[str, str]]:
    return [{"url": b.url} for b in cfg.repos.bindings]


def _bind_args(cfg: Config, env: Mapping[str, str], cluster: str, ns: str) -> dict[str, Any]:
    creds = [c.model_dump(exclude_none=True) for c in cfg.repos.credentials]
    names = sorted({c.env for c in cfg.repos.credentials if c.env and env.get(c.env)})
    return {"cluster": cluster, "namespace": ns, "bindings": _bindings(cfg), "credentials": creds,
            "env_present": names, "refresh_interval": cfg.repos.refresh_interval}


def periodic_commands(cfg: Config, remote: Callable[[], list[tuple[str, str, str, str]]] = lambda: [],
                      schedule: SweepSchedule | None = None, monotonic: Callable[[], float] = time.monotonic,
                      ) -> list[tuple[int, str, Callable[[], list[dict[str, Any]]]]]:
    """``(interval_s, command, args per namespace at each run)``; the Repo gc and the sweeps run
    on the registered clusters too, the ones registered at that run (see ``kfold.daemon.follow``).
    Each is decided on its own cluster's server clock (a gc on its list response's Date). With a
    ``schedule``, ``pod.sweep_secrets`` goes only where it is due (``kfold.daemon.sweeps``)."""
    home = cfg.cluster.name

    def where() -> list[tuple[str, str]]:
        return [(home, ns) for ns in cfg.namespaces] + [(h, ns) for h, _t, _n, ns in remote()]

    def due_sweeps(args: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if schedule is None:
            return args
        due = set(schedule.due([(a["cluster"], a["namespace"]) for a in args], monotonic()))
        return [a for a in args if (a["cluster"], a["namespace"]) in due]

    def gc_args() -> list[dict[str, Any]]:
        return [{"cluster": c, "namespace": ns, "ttl_seconds": cfg.repos.gc_ttl_seconds} for c, ns in where()]

    return [(cfg.repos.gc_interval_seconds, "repo.gc", gc_args),
            (cfg.sweep.interval_seconds, "pod.sweep_secrets", lambda: due_sweeps(secret_sweep_args(cfg, remote()))),
            (cfg.sweep.interval_seconds, "pod.sweep_orphans", lambda: orphan_sweep_args(cfg, remote()))]


def secret_sweep_args(cfg: Config, remote: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """``pod.sweep_secrets`` in every watched namespace: the home cluster's and each registered target's."""
    where = [(cfg.cluster.name, ns) for ns in cfg.namespaces] + [(h, ns) for h, _t, _n, ns in remote]
    return [{"cluster": c, "namespace": ns, "grace_seconds": cfg.sweep.grace_seconds} for c, ns in where]


def orphan_sweep_args(cfg: Config, remote: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """``pod.sweep_orphans`` on each registered target: only there can a pod outlive its Session
    (on the home cluster a Session's pods are owner-referenced to it: the apiserver's garbage
    collector takes them). One pod list per target and interval; a Session is read only for a pod
    whose Session the fold does not track (``engine.machines.pod.orphans``)."""
    return [{"cluster": h, "namespace": ns, "home": cfg.cluster.name} for h, _t, _n, ns in remote]


async def sweep_after_fresh_journal(daemon: Daemon, observers: list[Any], args: list[dict[str, Any]],
                                    wait_s: float = 120.0, poll_s: float = 1.0,
                                    secrets: list[dict[str, Any]] = ()) -> None:
    """Once, at boot with a fresh (or lost) journal: kfold's own requests of a previous life may
    still land (a pod create answered after its Session was deleted), and nothing of this life
    knows them, nor the Secret an earlier spec made (``secrets``: ``pod.sweep_secrets`` args, whose
    list tells each Session its Secret). Sent when every observer has journaled its first list (the
    Sessions are tracked, so their pods and Secrets cost no read), or after ``wait_s`` at most."""
    for _ in range(int(wait_s / poll_s)):
        if all(getattr(o, "synced", True) or getattr(o, "optional", False) or getattr(o, "absent", False)
               for o in observers):
            break
        await asyncio.sleep(poll_s)
    commands = [Command(at=daemon.clock.now_ms(), name=name, cluster=a["cluster"], namespace=a["namespace"], args=a)
                for name, batch in (("pod.sweep_orphans", args), ("pod.sweep_secrets", secrets)) for a in batch]
    if not commands:
        return
    try:
        await daemon.submit(commands)
    except SeamError:
        pass  # refused and logged by the daemon, never journaled; the periodic sweep asks again


async def run_periodic(daemon: Daemon, interval_s: int, name: str,
                       args_list: Callable[[], list[dict[str, Any]]]) -> None:
    while True:
        await asyncio.sleep(interval_s)
        args = args_list()
        if not args:
            continue
        try:
            await daemon.submit([Command(at=daemon.clock.now_ms(), name=name, cluster=a["cluster"],
                                         namespace=a["namespace"], args=a) for a in args])
        except SeamError:
            pass  # refused and logged by the daemon, never journaled; the next run asks again


def _term_began(daemon: Daemon, sweeps: SweepSchedule, acquired: set[int | None] | None = None) -> None:
    """A leadership term began: ``Daemon.resume``; the previous holder's writes may land after
    its term, so every namespace's orphan Secrets are swept once they are past their grace."""
    daemon.resume(acquired)
    if acquired is None or acquired:
        sweeps.everywhere(time.monotonic())


def observed_kinds(daemon: Daemon) -> list[res.Resource]:
    return [r for r in res.RESOURCES if r.kind in daemon.machines.by_kind]


def _journal_redact(daemon: Daemon) -> Any:
    """The journal's own redactor (keyed with the salt stored in the journal), so the observer's
    digests are the ones the journal stores, the same before and after a restart; the journal
    redacts again on append, which is idempotent. The journal is open: it has one."""
    return daemon.journal.redactor.redact


def _observer_options(cfg: Config, daemon: Daemon) -> dict[str, Any]:
    """What every observer of ``kfold run`` shares: the journal's redactor, each draft prepared
    for the journal as it is made (``Journal.prepare_one``), the configured idle timeout."""
    return dict(redact=_journal_redact(daemon), prepare=daemon.journal.prepare_one,
                idle_timeout_s=cfg.deadlines.watch_idle_seconds)


def _home_where(registry: Any) -> str:
    """How the home cluster is reached, for messages (``context dev of /home/me/.kube/config``)."""
    source = getattr(registry, "home_source", None)
    return source.describe() if source is not None else ""


# What ``kfold run`` lists, then watches, label-selected, on every cluster it places pods on (the
# home cluster's watched namespaces and each registered target's): ``session.configure`` says so,
# and a Session rebuilt from its status waits for these first lists (``engine.machines.session.seen``).
TARGET_KINDS = ("Pod", "Service", "Ingress")
SELECTED = ("Pod", "Secret", "Service", "Ingress")   # kinds kfold lists by its own label only


def make_observers(cfg: Config, daemon: Daemon, client: Any, clock: ServerClocks, where: str = "") -> list[Any]:
    """Every observed kind in every watched namespace of the home cluster (the registered
    clusters' watches are the ``Follower``'s: ``remote_observers``)."""
    from engine.effects.io.observer import Observer
    out = []
    common = _observer_options(cfg, daemon)
    for r in observed_kinds(daemon):
        api_version = _absent_version(r) or r.api_version
        for ns in cfg.namespaces:
            selector = MANAGED_SELECTOR if r.kind in SELECTED else ""
            out.append(Observer(lambda: client, cfg.cluster.name, api_version, r.kind, r.plural, ns,
                                _late_lists(daemon.submit, r.kind), clock.for_cluster(cfg.cluster.name),
                                label_selector=selector, where=where, may_be_absent=r.kind == "Repo", **common))
    return out


def _absent_version(r: Any) -> str | None:
    """TEST-ONLY (tests/e2e/test_without_repos.py); inert unless ``KFOLD_TEST_ABSENT_KIND`` is set.

    ``KFOLD_TEST_ABSENT_KIND=<kind>`` makes the home observer of ``kind`` watch a version of its
    group no apiserver serves (same group and plural, so RBAC allows it), as on a cluster without
    that kind's CRD: the list answers 404 (the CRDs are cluster-scoped: a shared test apiserver
    cannot lack one for one test alone)."""
    if os.environ.get("KFOLD_TEST_ABSENT_KIND") == r.kind:
        log.warning("KFOLD_TEST_ABSENT_KIND=%s: watching a version the apiserver does not serve (test-only hook)", r.kind)
        return f"{r.group}/v0absent"
    return None


def _late_lists(sink: Callable[[list[Any]], Any], kind: str) -> Callable[[list[Any]], Any]:
    """TEST-ONLY fault injection (tests/e2e/drills.py); inert unless ``KFOLD_TEST_LATE_LIST`` is set.

    ``KFOLD_TEST_LATE_LIST=<kind>:<seconds>`` holds back the journaling of every list of ``kind``
    (the drafts ending in its ``Relist``) by ``seconds``, after the apiserver answered it: it widens
    the window in which kfold's own creates land and are journaled before a list that predates them
    (issue 12 item 1), which on a loaded machine happens by itself."""
    spec = os.environ.get("KFOLD_TEST_LATE_LIST", "")
    want, _, seconds = spec.partition(":")
    if want != kind:
        return sink

    async def late(drafts: list[Any]) -> Any:
        if any(getattr(d, "rec", "") == "relist" for d in drafts):
            log.warning("KFOLD_TEST_LATE_LIST=%s: journaling a %s list %ss late (test-only hook)", spec, kind, seconds)
            await asyncio.sleep(float(seconds))
        return await sink(drafts)
    return late


def _slow_status(check: Callable[[Any], None]) -> Callable[[Any], None]:
    """TEST-ONLY fault injection (tests/e2e/test_leader.py); inert unless ``KFOLD_TEST_SLOW_STATUS`` is set.

    ``KFOLD_TEST_SLOW_STATUS=<seconds>``: each Session status write waits ``seconds`` in the sending
    thread AFTER the fence let it through, as a request already on the wire does: a process frozen
    (SIGSTOP) meanwhile sends it when it wakes, after another replica took over."""
    delay = float(os.environ.get("KFOLD_TEST_SLOW_STATUS") or 0)
    if not delay:
        return check

    def slow(req: Any) -> None:
        check(req)
        if req.method == "PATCH" and req.path.endswith("/status"):
            time.sleep(delay)
    return slow


def remote_observers(cfg: Config, daemon: Daemon, clock: ServerClocks, registry: Any,
                     remote: list[tuple[str, str, str, str]]) -> list[Any]:
    """kfold's pods, Services and Ingresses (``TARGET_KINDS``) and the Repos on each registered target
    ``(handle, tenant, name, namespace)``.
    A Repo watch there is ``optional`` for /readyz and ``may_be_absent``: a cluster without the
    Repo CRD runs Sessions that name no repository."""
    from engine.effects.io.observer import Observer
    common = _observer_options(cfg, daemon)
    repo = next(r for r in res.RESOURCES if r.kind == "Repo")
    out = []
    for handle, tenant, name, ns in remote:
        reach = (lambda t=tenant, n=name: registry.reach(t, n))
        where = f"registered cluster {name} of tenant {tenant}: `kfold cluster list --tenant {tenant}`"
        for r in res.RESOURCES:
            if r.kind in TARGET_KINDS and r.kind in daemon.machines.by_kind:
                out.append(Observer(reach, handle, r.api_version, r.kind, r.plural, ns, daemon.submit,
                                    clock.for_cluster(handle), label_selector=MANAGED_SELECTOR, where=where, **common))
        if repo.kind in daemon.machines.by_kind:  # per-node status for the Sessions placed there
            out.append(Observer(reach, handle, repo.api_version, repo.kind, repo.plural, ns, daemon.submit,
                                clock.for_cluster(handle), optional=True, may_be_absent=True, where=where, **common))
    return out


async def run(cfg: Config, journal: Any = None, env: Mapping[str, str] | None = None) -> int:
    from kfold.daemon.journal import writer_lock
    env = os.environ if env is None else env
    lock = writer_lock(cfg.journal.path) if journal is None else None  # before anything is read
    try:
        return await _run(cfg, journal, env)
    finally:
        if lock is not None:
            lock.close()


async def _run(cfg: Config, journal: Any, env: Mapping[str, str]) -> int:
    from kfold.daemon import gc_policy
    gc_policy.set_thresholds()  # see kfold.daemon.gc_policy; recovery freezes what it loaded
    registry, client = open_registry(cfg)
    clock, metrics = ServerClocks(home=cfg.cluster.name), Metrics()  # one server clock per cluster
    metrics.watch_gc()
    metrics.clients = registry.clients
    sharded = cfg.leader.enabled and cfg.leader.shards > 1    # kfold.daemon.shards: one Lease per shard
    elector = make_elector(cfg, registry, clock) if cfg.leader.enabled and not sharded else None
    shards = make_shards(cfg, registry, clock) if sharded else None
    fence = Fence(elector.term) if elector is not None else shards.fence if shards is not None else None
    transport = KubeTransport(client_for(registry, cfg.cluster.name), max_threads=cfg.executor.threads,
                              before_send=_slow_status(fence.check) if fence is not None else None)
    if elector is not None:   # nothing leaves outside a valid term
        transport = FencedTransport(transport, fence)
        elector.fenced = lambda: fence.fenced
    if shards is not None:
        transport = ShardedTransport(transport, shards.fence)
    backoff = Backoff(max_attempts=cfg.executor.max_attempts)
    journal = journal or _sqlite_journal(cfg)
    await journal.open()
    daemon = Daemon(journal, executor_factory(transport, clock, env, backoff, metrics, shards),
                    clock, metrics=metrics, snapshots=cfg.journal.snapshot_policy())
    sweeps = SweepSchedule(cfg.sweep.grace_seconds, cfg.sweep.resync_seconds, time.monotonic())
    daemon.on_send = lambda effect: sweeps.secret_written(effect, time.monotonic())
    if elector is not None:
        daemon.gate = elector.term
        elector.on_change = lambda term, _reason: _term_began(daemon, sweeps) if term is not None else None
    if shards is not None:
        daemon.shards, shards._state = shards, lambda: daemon.state
        shards.on_change = lambda acquired, _reason: _term_began(daemon, sweeps, acquired)
    elector = elector or shards    # below: the election task, /readyz, /metrics, release on stop
    daemon.start_loops()
    await daemon.recover()    # while standby: what recovery would issue is held
    fresh = daemon.state.seq == 0    # nothing recovered: a new or lost journal (sweep_after_fresh_journal)
    # after recovery: ``resume`` goes through the committer, never beside it. Not the daemon's task:
    # the terms are renewed until released, after the daemon has stopped (``stop_in_order``)
    election = asyncio.create_task(elector.run(), name="leader-election") if elector is not None else None
    commands, (booted, remote) = boot_drafts(cfg, env, registry, clock.now_ms())  # what boot configures is what it watches
    await daemon.submit(commands)
    observers = make_observers(cfg, daemon, client, clock, _home_where(registry))
    follower = Follower(daemon, registry, cfg.registry.rescan_seconds,
                        read=lambda r: registrations(cfg, r),
                        configure=lambda args: configure_command(cfg, clock.now_ms(), args),
                        bind=lambda targets: repo_commands(cfg, env, clock.now_ms(),
                                                           [(h, ns) for h, _t, _n, ns in targets]),
                        observe=lambda targets: remote_observers(cfg, daemon, clock, registry, targets),
                        observers=observers, initial=(booted, remote))
    for o in observers:
        daemon.spawn(o.run(), f"observe:{o.cluster}:{o.kind}:{o.namespace}")
    follower.start()  # kfold's pods on each registered target, appended to ``observers``
    if cfg.registry.rescan_seconds:
        daemon.spawn(follower.run(), "registry-follower")
    if fresh:
        sweeps.everywhere(time.monotonic())
    for interval, name, args in periodic_commands(cfg, lambda: follower.remote, sweeps):
        daemon.spawn(run_periodic(daemon, interval, name, args), f"periodic:{name}")
    if fresh:
        daemon.spawn(sweep_after_fresh_journal(daemon, observers, orphan_sweep_args(cfg, follower.remote),
                                               secrets=secret_sweep_args(cfg, follower.remote)),
                     "orphan-sweep-at-boot")
    auth, cert = metrics_guard(cfg, registry)
    listeners = servers(cfg, routes_for(daemon, observers, metrics, elector), auth, cert)
    for server in listeners:
        await server.start()
    log.info("kfold running", extra={"listen": f"{listeners[0].host}:{listeners[0].port}",
                                     "metrics": _metrics_where(cfg, listeners), "seq": daemon.state.seq,
                                     "server": getattr(registry.home_source, "endpoint", ""),
                                     "via": _home_where(registry),
                                     "home_limits": str(registry.home_limits)})
    code = await _wait_for_stop(daemon)
    began = time.monotonic()
    for server in listeners:
        await server.close()
    if auth is not None:
        await auth.transport.close()
    await stop_in_order(daemon, elector, election)
    registry.close()
    log.info("kfold stopped: effects drained, journal closed",
             extra={"seq": daemon.state.seq, "stop_seconds": round(time.monotonic() - began, 3)})
    return code


def metrics_guard(cfg: Config, registry: Any) -> tuple[Any, Any]:
    """(``DelegatedAuth``, ``ServingCert``) for a secure ``metrics.listen``, else (None, None): the
    reviews go to the home cluster with kfold's own credentials, on two threads of their own (a
    scrape never queues behind effects)."""
    if cfg.metrics.listen is None or not cfg.metrics.secure:
        return None, None
    from kfold.daemon.secure import DelegatedAuth, ServingCert
    transport = KubeTransport(client_for(registry, cfg.cluster.name), max_threads=2, timeout=(2.0, 10.0))
    return DelegatedAuth(transport, cfg.cluster.name), ServingCert(cfg.metrics.cert_dir)


def _metrics_where(cfg: Config, listeners: list[Any]) -> str:
    scheme = "https" if cfg.metrics.listen is not None and cfg.metrics.secure else "http"
    return f"{scheme}://{listeners[-1].host}:{listeners[-1].port}/metrics"


async def stop_in_order(daemon: Any, elector: Any, election: asyncio.Task | None) -> None:
    """A clean stop: the daemon stops its inputs and drains the effects in flight while the terms
    held are still renewed (none lapses however long the drain takes, none is taken meanwhile),
    then the terms are released, so a standby (or, under a changed ``leader.shards``, the new
    count) takes over at once rather than at the Leases' expiry."""
    if elector is not None:
        elector.stop_holding()
    try:
        await daemon.stop()
    finally:
        if elector is not None:   # released first: a round under way finishes before (their lock)
            await elector.release()
            if election is not None:
                election.cancel()
                await asyncio.gather(election, return_exceptions=True)
            await elector.transport.close()


def _sqlite_journal(cfg: Config) -> Any:
    """The journal at ``journal.path`` (its directory created), with the configured retention."""
    from kfold.daemon.journal import open_journal
    journal = open_journal(cfg.journal.path)
    journal.retention = cfg.journal.retention_policy()
    return journal


def _lease_home(cfg: Config, registry: Any, threads: int = 1) -> tuple[str, KubeTransport]:
    """The Leases' namespace, and their own transport (a renewal never queues behind effects;
    with shards, one thread per held shard's renewal, up to 8)."""
    lc = cfg.leader
    source = getattr(registry, "home_source", None)
    namespace = lc.namespace or getattr(source, "namespace", None) or cfg.namespaces[0]
    return namespace, KubeTransport(client_for(registry, cfg.cluster.name), max_threads=threads,
                                    timeout=(2.0, float(max(1, lc.lease_seconds - lc.renew_seconds))))


def executor_factory(transport: Any, clock: ServerClocks, env: Mapping[str, str], backoff: Backoff, metrics: Any,
                     shards: Any = None) -> Any:
    """``sink -> executor`` for the daemon: every reply's Date feeds the server clock of the
    cluster the request went to, and its outcome is stamped on that clock (one clock per cluster)."""
    make = partial(ShardedExecutor, fence=shards.fence) if shards is not None else Executor
    return lambda sink: make(transport, clock.for_cluster, sink, env=env, backoff=backoff, metrics=metrics)


def make_shards(cfg: Config, registry: Any, clock: ServerClocks) -> ShardSet:
    """``leader.shards`` Leases and this replica's member Lease, judged on the home cluster's server clock."""
    lc = cfg.leader
    namespace, transport = _lease_home(cfg, registry, threads=min(8, lc.shards))
    return ShardSet(transport, clock.for_cluster(cfg.cluster.name), namespace=namespace, lease_name=lc.lease_name,
                    shards=lc.shards, holder=identity(), lease_seconds=lc.lease_seconds, renew_seconds=lc.renew_seconds,
                    retry_seconds=lc.retry_seconds, margin_seconds=lc.margin_seconds, cluster=cfg.cluster.name)


def make_elector(cfg: Config, registry: Any, clock: ServerClocks) -> Elector:
    """The Lease's elector on the home cluster, with its own one-thread transport (a renewal never
    queues behind effects); judged on the home cluster's server clock."""
    lc = cfg.leader
    namespace, transport = _lease_home(cfg, registry)
    return Elector(transport, clock.for_cluster(cfg.cluster.name), namespace=namespace, name=lc.lease_name,
                   holder=identity(), lease_seconds=lc.lease_seconds, renew_seconds=lc.renew_seconds,
                   retry_seconds=lc.retry_seconds, margin_seconds=lc.margin_seconds, cluster=cfg.cluster.name)


async def _wait_for_stop(daemon: Daemon) -> int:
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    committer = next(t for t in daemon._tasks if t.get_name() == "committer")
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({waiter, committer}, return_when=asyncio.FIRST_COMPLETED)
    if committer.done():
        exc = committer.exception()
        if isinstance(exc, JournalError):  # e.g. a full volume: the message says what to do
            log.error("the committer stopped: journal %s", exc)
        else:
            log.error("the committer stopped: %r", exc)
        return 1
    log.info("signal received: draining and closing the journal")
    return 0
