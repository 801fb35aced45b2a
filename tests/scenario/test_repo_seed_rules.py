"""Rules of seed 000 (the Repo resource) that one-line mutants broke with every test green (issue
49), each written from the seed's words and driven through the repo machine's commands,
messages and observations. Each docstring cites its rule as ``seed 000:L``, as docs/testing.md's
seed table does."""
from __future__ import annotations

from engine.repo_names import rfc3339
from tests.harness import T0
from tests.scenario.test_repo_world import RepoWorld

APP = "github-com-org-app"
URL = "https://github.com/org/app"
BOUND = "kfold.dev/repo-bound"
TTL_S = 7 * 24 * 3600


def test_an_ensure_that_creates_a_repo_a_configured_binding_names_labels_it_bound(frozen_world):
    """Seed 000:88-90 and 177: an ensure creates an absent resource "labeled bound when a Machine's
    slot names it, so one born before the boot recorded it is not on gc's clock". Here the boot
    bound it, someone deleted it, and the next attach re-creates it: bound, with the attach clock."""
    w = RepoWorld()
    w.bind([URL])
    w.settle()
    del w.objs[APP]
    w.s.observe({"apiVersion": "kfold.dev/v1alpha1", "kind": "Repo",
                 "metadata": {"name": APP, "namespace": "team", "uid": f"uid-{APP}"}}, w.at, event="DELETED")
    w.at = T0 + 60_000
    w.ensure(URL, APP)
    w.settle()
    [_, create] = w.sent("create")
    assert create.manifest["metadata"]["labels"][BOUND] == "true", "the ensure's own create is labelled bound"
    assert create.manifest["metadata"]["annotations"]["kfold.dev/last-attached"] == rfc3339(T0 + 60_000)
    assert w.objs[APP]["metadata"]["labels"][BOUND] == "true"


def test_gc_keeps_a_repo_the_config_binds_while_its_label_is_missing(frozen_world):
    """Seed 000:97-98 (only a slot unbound since the last deploy may be evicted) with seed 000:67 ("a
    registered Machine binds it — never evicted by gc"): a Repo the configuration binds is kept by gc
    even when the label has not landed on it (here the boot's restating patch was refused), however
    old its clock."""
    w = RepoWorld()
    w.put(APP, URL, last_attached=rfc3339(T0 - 10 * TTL_S * 1000))
    w.refuse["patch"] = ("forbidden", "repos is forbidden")
    w.bind([URL])
    w.settle()
    assert BOUND not in w.objs[APP]["metadata"]["labels"], "the label did not land"
    w.command("repo.gc", ttl_seconds=TTL_S)
    w.settle()
    assert w.sent("delete") == [] and APP in w.objs


def test_a_bind_create_refused_otherwise_than_already_exists_surfaces_as_repo_bind_failed(frozen_world):
    """Seed 000:192-200 (``if (!isAlreadyExists(err)) throw err``): only AlreadyExists turns a create
    into the restating patch; any other refusal is the bind's failure, reported as "repo bind
    failed" naming the Repo and the refusal, with nothing patched."""
    w = RepoWorld()
    w.refuse["create"] = ("forbidden", 'repos.kfold.dev is forbidden: User "kfold" cannot create')
    w.bind([URL])
    w.settle()
    [error] = w.logs("error")
    assert error.message.startswith(f"repo bind failed: creating Repo '{APP}': forbidden")
    assert w.sent("patch") == [] and APP not in w.objs
    assert "forbidden" in w.s.decision("repo", f"local/team/{APP}").last_error


def test_per_node_rows_are_the_seeds_type_a_null_is_false_or_absent(frozen_world):
    """Seed 000:44-58 (the type: ``attempted?``, ``lastError?``) with seed 000:315-323: ``present``
    and ``synced`` default to false (``?? false``) and an optional field is present only with a
    value of its type, so a null the agent wrote is false or absent, never a null in ``kfold
    repos``; an empty ``lastError`` is absent too."""
    w = RepoWorld()
    w.put(APP, URL, nodes=[
        {"node": "n1", "present": None, "synced": None, "attempted": None, "lastAttempt": None,
         "lastFetched": None, "lastError": None},
        {"node": "n2", "present": True, "synced": False, "attempted": "Clone", "lastAttempt": "t1",
         "lastFetched": "t0", "lastError": "fatal: repository not found"},
    ])
    w.observe(APP)
    nodes = w.s.decision("repo", f"local/team/{APP}").nodes
    assert [dict(n) for n in nodes] == [
        {"node": "n1", "present": False, "synced": False},
        {"node": "n2", "present": True, "synced": False, "attempted": "Clone", "lastAttempt": "t1",
         "lastFetched": "t0", "lastError": "fatal: repository not found"},
    ]


def test_an_attach_a_configured_binding_names_moves_the_clock_and_reads_nothing(frozen_world):
    """Seed 000:237-239: an existing Repo a Machine's slot binds gets the clock from an ensure and
    nothing else, and nothing is read ("the boot is its writer ... Read nothing")."""
    w = RepoWorld()
    w.bind([URL])
    w.settle()
    w.requests.clear()
    w.at = T0 + 60_000
    w.ensure(URL, APP)
    w.settle()
    assert [(e.type, getattr(e, "patch", None)) for e in w.requests] == [
        ("patch", {"metadata": {"annotations": {"kfold.dev/last-attached": rfc3339(T0 + 60_000)}}})]
