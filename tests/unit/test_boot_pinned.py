"""A config file through ``kfold run``'s boot into the fold, for two rules no test pinned (issue 33,
item 11): the ready deadline's default is the seed's 120 s, and a token variable holding an empty
string is unset (seed 000: ``if (value === undefined || value === "")`` writes no ref)."""
from __future__ import annotations

from kfold.daemon.config import read_config
from kfold.daemon.boot import boot_drafts
from kfold.daemon.clusters import open_registry
from tests.scenario.test_session_support import World, at, pod_obj
from tests.unit.test_boot_config import URL, config_file

SEED_READY_S = 120   # seed 002: WORKSPACE_READY_TIMEOUT_MS = 120_000


def _boot(tmp_path, env: dict[str, str], extra: str = "", deadlines: bool = True):
    path = config_file(tmp_path)
    text = open(path).read()
    if not deadlines:
        text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("deadlines:"))
    with open(path, "w") as f:
        f.write(text + extra)
    cfg = read_config(path)
    registry, _home = open_registry(cfg)
    commands, _ = boot_drafts(cfg, env, registry, at(0))
    registry.close()
    return commands


def test_the_ready_deadline_defaults_to_the_seeds_120_s(tmp_path):
    """Seed 002:43: the ready deadline is 120 s (a config file without ``deadlines``)."""
    w = World()
    for command in _boot(tmp_path, {}, deadlines=False):
        w.s.feed(command)
    w.to_provisioning(when=1)
    w.run_pod(5, ready=False)
    w.s.advance_to(at(5 + SEED_READY_S) - 1)
    assert w.phase == "Provisioning" and not w.pending("get", "Pod"), "not judged before 120 s"
    w.s.advance_to(at(5 + SEED_READY_S))
    w.answer("get", "Pod", when=5 + SEED_READY_S + 1,
             obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", ready=False, rv="12"))
    w.s.advance_to(at(5 + SEED_READY_S + 6))
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"].endswith(f"within the ready deadline ({SEED_READY_S} s)")


REPOS = f"repos: {{bindings: [{{url: {URL}}}], credentials: [{{match: github.com/org, env: GH_TOKEN}}]}}\n"


def test_an_empty_token_variable_is_unset(tmp_path):
    """Seed 000:156-157: a token variable unset or empty writes no secretRef."""
    commands = _boot(tmp_path, {"GH_TOKEN": ""}, REPOS)
    binds = [c.args for c in commands if c.name == "repo.bind"]
    assert binds and all(b["env_present"] == [] for b in binds), "an empty token counts as unset"
    w = World()
    effects = [e for c in commands for e in w.s.feed(c)]
    assert not [e for e in effects if e.type == "apply_secret"], "no credential Secret from an empty token"


def test_a_set_token_variable_is_present(tmp_path):
    binds = [c.args for c in _boot(tmp_path, {"GH_TOKEN": "s3cret"}, REPOS) if c.name == "repo.bind"]
    assert binds and all(b["env_present"] == ["GH_TOKEN"] for b in binds)


SEED_START_S = 180   # seed 002:38: START_DEADLINE_MS = 180_000


def test_the_start_deadline_defaults_to_the_seeds_180_s(tmp_path):
    """Seed 002:38 at the config layer: a config file without ``deadlines`` gives a pod 180 s to
    reach Running (``kfold run``'s boot, then the fold)."""
    w = World()
    for command in _boot(tmp_path, {}, deadlines=False):
        w.s.feed(command)
    w.to_provisioning(when=1)
    w.observe_pod(2, waiting=("ContainerCreating", ""), rv="11")
    w.s.advance_to(at(1 + SEED_START_S) - 1)
    assert w.phase == "Provisioning" and not w.pending("get", "Pod"), "not judged before 180 s"
    w.s.advance_to(at(1 + SEED_START_S))
    w.answer("get", "Pod", when=1 + SEED_START_S + 1, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="12"))
    w.s.advance_to(at(1 + SEED_START_S + 6))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "StartDeadlineExceeded"


def _refresh_intervals(tmp_path, repos: str) -> set[str]:
    """The ``spec.refreshInterval`` of every Repo the boot creates (one per namespace kfold serves)."""
    w = World()
    effects = [e for c in _boot(tmp_path, {}, repos) for e in w.s.feed(c)]
    creates = [e for e in effects if e.type == "create" and e.kind == "Repo"]
    assert creates
    return {e.manifest["spec"]["refreshInterval"] for e in creates}


def test_the_configured_refresh_interval_is_the_repos_spec(tmp_path):
    """Seed 000:186 (``refreshInterval: opts.refreshInterval ?? "5m"``): the configured
    ``repos.refresh_interval`` is what each Repo's ``spec.refreshInterval`` says; unset, 5m."""
    binding = f"bindings: [{{url: {URL}}}]"
    assert _refresh_intervals(tmp_path, f"repos: {{{binding}, refresh_interval: 17m}}\n") == {"17m"}
    assert _refresh_intervals(tmp_path, f"repos: {{{binding}}}\n") == {"5m"}
