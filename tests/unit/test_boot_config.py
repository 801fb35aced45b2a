"""A config file through ``kfold run``'s boot into the fold: what the operator wrote is what the
machines decide with (deadlines, tenants, registered clusters).

Issue 12 item 4: the boot sent ``defaults: {start_seconds, ready_seconds}`` and the session machine
read ``start_deadline_s``; ``deadlines: {start_seconds: 30}`` folded to 180 s. Both sides now name
one model (``engine.seams.SessionConfigure``), and this test goes the whole way: YAML file ->
``read_config`` -> ``open_registry`` -> ``boot_drafts`` (what ``kfold run`` journals) -> fold."""
from __future__ import annotations

import textwrap

from engine.machines.session.model import CONFIG_KEY
from kfold.daemon.config import read_config
from kfold.daemon.boot import boot_drafts
from kfold.daemon.clusters import open_registry
from kfold.registry.index import RegistrationIndex
from kfold.registry.records import Registration
from tests.scenario.test_session_support import World, at, pod_obj

KUBECONFIG = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters: [{name: home, cluster: {server: "https://127.0.0.1:1"}}]
    users: [{name: me, user: {token: not-a-real-token}}]
    contexts: [{name: home, context: {cluster: home, user: me}}]
    current-context: home
    """)


def config_file(tmp_path) -> str:
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    RegistrationIndex(tmp_path / "registry" / "index").update(
        "acme", lambda _: (Registration(name="edge", tenant="acme", namespaces=("sb-acme",)),))
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(f"""\
        cluster: {{name: local, kubeconfig: {tmp_path / 'kubeconfig'}}}
        registry: {{dir: {tmp_path / 'registry'}}}
        namespaces: [team-acme, free]
        tenants: {{team-acme: acme}}
        base_domain: sessions.example.com
        journal: {{path: {tmp_path / 'journal.db'}}}
        deadlines: {{start_seconds: 30, ready_seconds: 45}}
        """))
    return str(path)


def booted_world(tmp_path) -> World:
    cfg = read_config(config_file(tmp_path))
    registry, _home = open_registry(cfg)
    commands, (_args, remote) = boot_drafts(cfg, {}, registry, at(0))
    assert ("edge@acme", "acme", "edge", "sb-acme") in remote
    w = World()
    for command in commands:  # the very commands kfold run journals, folded by the real machines
        w.s.feed(command)
    registry.close()
    return w


def test_the_configured_deadlines_tenants_and_clusters_reach_the_fold(tmp_path):
    cfg = booted_world(tmp_path).s.decision("session", CONFIG_KEY)
    assert (cfg.start_ms, cfg.ready_ms) == (30_000, 45_000)
    assert cfg.home == "local" and cfg.tenants == {"team-acme": "acme"} and cfg.base_domain == "sessions.example.com"
    (edge,) = cfg.registered
    assert (edge.handle, edge.name, edge.tenant, edge.namespaces) == ("edge@acme", "edge", "acme", ("sb-acme",))


def test_a_session_fails_at_the_configured_start_deadline_not_the_default(tmp_path):
    w = booted_world(tmp_path).to_provisioning(when=1)
    w.observe_pod(2, waiting=("ContainerCreating", ""))
    w.s.advance_to(at(1 + 29))
    assert w.phase == "Provisioning"
    w.s.advance_to(at(1 + 30))
    assert w.phase == "Provisioning" and w.decision().pod.reading, "a read of the pod first"
    w.answer("get", "Pod", when=1 + 31, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="12"))
    w.s.advance_to(at(1 + 36))
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"] == (
        "pod demo-g1 did not reach Running within the start deadline (30 s): container workspace: ContainerCreating")


# -- Repos on registered clusters (issue 12 item 9) ---------------------------------------------------

URL = "https://github.com/org/app.git"


def test_each_registered_target_gets_the_repo_statements_the_home_namespaces_get(tmp_path):
    path = config_file(tmp_path)
    with open(path, "a") as f:
        f.write(f"repos: {{bindings: [{{url: {URL}}}], credentials: [{{match: github.com/org, env: GH_TOKEN}}]}}\n")
    cfg = read_config(path)
    registry, _home = open_registry(cfg)
    commands, _ = boot_drafts(cfg, {"GH_TOKEN": "s3cret"}, registry, at(0))
    registry.close()
    binds = {(c.cluster, c.namespace): c.args for c in commands if c.name == "repo.bind"}
    assert set(binds) == {("local", "team-acme"), ("local", "free"), ("edge@acme", "sb-acme")}
    edge = binds[("edge@acme", "sb-acme")]
    assert edge["cluster"] == "edge@acme" and edge["env_present"] == ["GH_TOKEN"] and "s3cret" not in str(edge)
    assert ("edge@acme", "sb-acme") in {(c.cluster, c.namespace) for c in commands if c.name == "repo.reconcile_bound"}

    w = World()
    effects = [e for c in commands for e in w.s.feed(c)]
    on_edge = [e for e in effects if e.cluster == "edge@acme"]
    # the credential Secret first (its value read by the executor from GH_TOKEN, never journaled),
    # then the bound list; every effect names the tenant, so it is reached through the registry
    assert [(e.type, e.namespace, e.tenant) for e in on_edge] == [("apply_secret", "sb-acme", "acme"),
                                                                  ("list", "sb-acme", "acme")]
    assert on_edge[0].values_from_env and "s3cret" not in str(on_edge[0])
    assert w.s.decision("repo", "edge@acme/sb-acme/").configured


async def test_a_registered_target_watches_its_repos_too_and_readiness_does_not_wait_for_them(tmp_path):
    from engine.effects.io.clock import ServerClocks
    from kfold.daemon.loop import Daemon
    from kfold.daemon.boot import remote_observers
    from tests.journals import TestJournal

    cfg = read_config(config_file(tmp_path))
    journal = TestJournal()
    await journal.open()
    daemon = Daemon(journal, lambda sink: None, ServerClocks(home="local"))
    watches = remote_observers(cfg, daemon, daemon.clock, registry=None,
                               remote=[("edge@acme", "acme", "edge", "sb-acme")])
    assert [(o.cluster, o.kind, o.namespace, o.optional) for o in watches] == [
        ("edge@acme", "Pod", "sb-acme", False), ("edge@acme", "Service", "sb-acme", False),
        ("edge@acme", "Ingress", "sb-acme", False), ("edge@acme", "Repo", "sb-acme", True)]
    # what a Session placed there is adopted from on a fresh journal (session.seen): kfold's own only
    assert [o.label_selector for o in watches[:3]] == ["app.kubernetes.io/managed-by=kfold"] * 3
    assert all(o.clock is daemon.clock.for_cluster("edge@acme") for o in watches)
    await journal.close()


def test_orphan_pods_are_swept_on_each_registered_target_only(tmp_path):
    """On the home cluster a Session's pods are owner-referenced to it (the garbage collector takes
    them); only a registered target needs kfold's orphan-pod sweep: one list per target and interval."""
    from kfold.daemon.boot import periodic_commands
    from kfold.daemon.clusters import remote_targets
    cfg = read_config(config_file(tmp_path))
    registry, _client = open_registry(cfg)
    remote = remote_targets(cfg, registry)
    sweeps = {name: (interval, args()) for interval, name, args in periodic_commands(cfg, lambda: remote)}
    interval, orphans = sweeps["pod.sweep_orphans"]
    assert interval == cfg.sweep.interval_seconds
    registry.close()
    assert orphans == [{"cluster": "edge@acme", "namespace": "sb-acme", "home": "local"}]


def test_the_secret_sweep_is_issued_only_where_its_schedule_makes_it_due(tmp_path):
    """Issue 38 item 2: at rest the orphan Secret sweep lists nothing; a Secret write sent in a
    namespace makes it due there once that Secret is past its grace (kfold.daemon.sweeps)."""
    from engine.effects.models import CreateObject
    from kfold.daemon.boot import periodic_commands
    from kfold.daemon.sweeps import SweepSchedule
    cfg = read_config(config_file(tmp_path))
    now = [0.0]
    schedule = SweepSchedule(cfg.sweep.grace_seconds, cfg.sweep.resync_seconds, now=0.0)
    commands = {name: args for _i, name, args in periodic_commands(cfg, schedule=schedule, monotonic=lambda: now[0])}
    now[0] = 300.0
    assert commands["pod.sweep_secrets"]() == []
    schedule.secret_written(CreateObject(id="e", machine="session", key="local/free/s", cluster="local", api_version="v1",
                                         kind="Secret", namespace="free", name="s-env", manifest={}), now=300.0)
    now[0] = 300.0 + cfg.sweep.grace_seconds + 60
    assert commands["pod.sweep_secrets"]() == [{"cluster": "local", "namespace": "free",
                                                "grace_seconds": cfg.sweep.grace_seconds}]
    now[0] += cfg.sweep.interval_seconds
    assert commands["pod.sweep_secrets"]() == []


def test_the_repo_gc_runs_in_every_watched_namespace_of_every_cluster_registered_targets_included(tmp_path):
    """Issue 33 item 6: Repos on a registered cluster are evicted too. Each gc decides on its own
    list response's server time (engine.machines.repo.bindings), so each cluster is judged on its clock."""
    from kfold.daemon.boot import periodic_commands
    from kfold.daemon.clusters import remote_targets
    cfg = read_config(config_file(tmp_path))
    registry, _client = open_registry(cfg)
    remote = remote_targets(cfg, registry)
    registry.close()
    commands = {name: args for _interval, name, args in periodic_commands(cfg, lambda: remote)}
    ttl = cfg.repos.gc_ttl_seconds
    assert commands["repo.gc"]() == [{"cluster": "local", "namespace": "team-acme", "ttl_seconds": ttl},
                                     {"cluster": "local", "namespace": "free", "ttl_seconds": ttl},
                                     {"cluster": "edge@acme", "namespace": "sb-acme", "ttl_seconds": ttl}]


async def test_the_boot_sweep_after_a_fresh_journal_waits_for_the_first_lists_then_asks_once():
    import asyncio
    from kfold.daemon.boot import sweep_after_fresh_journal

    class Observer:
        synced, optional = False, False

    class Daemon:
        class clock:
            @staticmethod
            def now_ms() -> None:
                return None

        def __init__(self) -> None:
            self.submitted: list = []

        async def submit(self, drafts: list) -> None:
            self.submitted.append(drafts)

    daemon, observer = Daemon(), Observer()
    args = [{"cluster": "edge@acme", "namespace": "sb-acme", "home": "local"}]
    task = asyncio.ensure_future(sweep_after_fresh_journal(daemon, [observer], args, wait_s=5, poll_s=0.01))
    await asyncio.sleep(0.05)
    assert daemon.submitted == [], "nothing before the observers have listed"
    observer.synced = True
    await asyncio.wait_for(task, 1)
    [[command]] = daemon.submitted
    assert (command.name, command.cluster, command.namespace, command.args) == \
        ("pod.sweep_orphans", "edge@acme", "sb-acme", args[0])


def test_the_client_pool_holds_every_executor_thread_and_every_watch_beside_them(tmp_path):
    """A request finding the pool full opens a connection urllib3 discards after it (a TLS
    handshake per request and 'Connection pool is full' in the log): the home client's pool is as
    wide as the executor's threads plus the watches ``kfold run`` holds open (one per observed kind
    and watched namespace)."""
    from engine.core import default_machines
    from engine.effects.io.resources import RESOURCES
    cfg = read_config(config_file(tmp_path))
    registry, home = open_registry(cfg)
    try:
        watches = [(r.kind, ns) for r in RESOURCES if r.kind in default_machines().by_kind for ns in cfg.namespaces]
        assert len(watches) >= 2 * len(cfg.namespaces)
        assert home.configuration.connection_pool_maxsize >= cfg.executor.threads + len(watches)
    finally:
        registry.close()
