"""reconcileBound and eviction (issue 3, rules 4 and 5): decided on the server clock only.

Every test runs with the wall clock real, frozen in 1999 and frozen in 2099; the server time in the
records is 2030. If anything read the wall clock, the frozen worlds would evict everything (2099)
or nothing (1999).
"""
from __future__ import annotations

import pytest

from engine.repo_names import rfc3339
from tests.harness import T0
from tests.scenario.test_repo_world import RepoWorld

TTL_S = 7 * 24 * 3600
TTL_MS = TTL_S * 1000
ATTACHED = rfc3339(T0)


def gc(w: RepoWorld, at: int | None) -> None:
    w.at = at
    w.command("repo.gc", ttl_seconds=TTL_S)
    w.settle()


# -- reconcileBound --------------------------------------------------------------------------------
def test_reconcile_unlabels_every_bound_repo_the_config_no_longer_binds(frozen_world):
    """Seed 000:252-271: reconcileBound unlabels every bound Repo whose key the config no longer binds."""
    w = RepoWorld()
    w.put("github-com-org-kept", "https://github.com/org/kept", bound=True)
    w.put("github-com-org-dropped", "https://github.com/org/dropped", bound=True)
    w.put("github-com-org-loose", "https://github.com/org/loose")
    w.command("repo.reconcile_bound", bindings=[{"url": "git@github.com:org/kept.git"}])
    w.settle()
    (listing,) = w.sent("list")
    assert listing.label_selector == "kfold.dev/repo-bound=true"
    assert [(p.name, p.patch) for p in w.sent("patch")] == [
        ("github-com-org-dropped", {"metadata": {"labels": {"kfold.dev/repo-bound": None}}})]
    assert "kfold.dev/repo-bound" not in w.objs["github-com-org-dropped"]["metadata"]["labels"]
    assert w.objs["github-com-org-kept"]["metadata"]["labels"]["kfold.dev/repo-bound"] == "true"


def test_a_cluster_without_the_repo_crd_holds_no_repos_so_reconcile_has_nothing_to_do(frozen_world):
    """Seed 000:256-264: no Repo resource type: nothing to unlabel, no error."""
    w = RepoWorld(crd=False)
    w.command("repo.reconcile_bound", bindings=[])
    w.settle()
    assert [e.type for e in w.s.effects] == ["list"]
    assert "no Repo resource type" in w.s.decision("repo", "local/team/").last_reconcile


def test_a_plain_text_404_for_an_unserved_group_also_means_no_repo_type(frozen_world):
    w = RepoWorld()
    listing = w.command("repo.reconcile_bound", bindings=[])[0]
    w.s.outcome(listing, "error", T0, code=404, message="404 page not found")
    assert w.logs("error") == []
    assert "nothing to do" in w.s.decision("repo", "local/team/").last_reconcile


@pytest.mark.parametrize("result", ["forbidden", "error", "gone"])
def test_any_other_list_refusal_during_reconcile_is_an_error(frozen_world, result):
    """Seed 000:263: any other refusal of that list is an error."""
    w = RepoWorld()
    w.refuse["list"] = (result, "repos.kfold.dev is forbidden")
    w.command("repo.reconcile_bound", bindings=[])
    w.settle()
    (log,) = w.logs("error")
    assert result in log.message
    assert result in w.s.decision("repo", "local/team/").last_reconcile


def test_an_unparsable_binding_refuses_reconcile_before_any_effect(frozen_world):
    w = RepoWorld()
    (log,) = w.command("repo.reconcile_bound", bindings=[{"url": "github.com/org/app"}])
    assert log.level == "error" and "'github.com/org/app'" in log.message


# -- eviction --------------------------------------------------------------------------------------
@pytest.mark.parametrize("age_ms, evicted", [(TTL_MS - 1, False), (TTL_MS, False), (TTL_MS + 1, True)],
                         ids=["before-ttl", "exactly-at-ttl", "just-past-ttl"])
def test_an_unbound_repo_is_evicted_only_once_strictly_older_than_the_ttl(frozen_world, age_ms, evicted):
    """Seed 000:69-70: the eviction clock is the last attach; evicted only once older than the TTL."""
    w = RepoWorld()
    w.put("r", "https://github.com/org/r", last_attached=ATTACHED)
    gc(w, T0 + age_ms)
    assert ("r" not in w.objs) is evicted
    if evicted:
        (delete,) = w.sent("delete")
        assert (delete.uid, delete.rv) == ("uid-r", "101"), "fenced by the listed uid and resourceVersion"


def test_a_bound_repo_is_never_evicted(frozen_world):
    """Seed 000:67: a bound Repo is never evicted by gc."""
    w = RepoWorld()
    w.put("r", "https://github.com/org/r", bound=True, last_attached=rfc3339(T0 - 10 * TTL_MS))
    gc(w, T0)
    assert "r" in w.objs and w.sent("delete") == []


def test_a_repo_the_config_binds_is_kept_even_before_its_label_lands(frozen_world):
    w = RepoWorld()
    w.bind(["https://github.com/org/r"])   # the create is still in flight
    w.put("github-com-org-r", "https://github.com/org/r", last_attached=rfc3339(T0 - 10 * TTL_MS))
    w.command("repo.gc", ttl_seconds=TTL_S)
    w.settle()
    assert w.sent("delete") == []


def test_a_never_attached_repo_is_dated_from_its_creation(frozen_world):
    """Seed 000:37: a Repo never attached is dated from its creationTimestamp."""
    w = RepoWorld()
    w.put("old", "https://github.com/org/old", created="2029-12-01T00:00:00Z")
    w.put("new", "https://github.com/org/new", created="2029-12-31T00:00:00Z")
    gc(w, T0)
    assert sorted(w.objs) == ["new"]


def test_with_no_server_time_nothing_is_evicted(frozen_world):
    w = RepoWorld()
    w.put("r", "https://github.com/org/r", created="2000-01-01T00:00:00Z")
    gc(w, None)
    assert "r" in w.objs and w.sent("delete") == []
    assert "no server time" in w.logs("warning")[0].message


def test_an_unreadable_clock_is_never_taken_as_old(frozen_world):
    w = RepoWorld()
    w.put("r", "https://github.com/org/r", last_attached="yesterday", created="2000-01-01T00:00:00Z")
    gc(w, T0)
    assert "r" in w.objs


def test_an_attach_between_the_list_and_the_delete_keeps_the_repo(frozen_world):
    w = RepoWorld()
    w.put("github-com-org-r", "https://github.com/org/r", last_attached=rfc3339(T0 - 2 * TTL_MS))
    w.at = T0
    w.command("repo.gc", ttl_seconds=TTL_S)
    (listing,) = w.s.pending()
    w.s.outcome(listing, "ok", T0, **w.apply(listing)[1])
    (delete,) = w.s.pending()
    w.objs["github-com-org-r"]["metadata"]["resourceVersion"] = "999"   # a session attached meanwhile
    w.settle()
    assert "github-com-org-r" in w.objs
    assert any("changed since the gc listed it" in e.message for e in w.logs())


def test_a_missing_crd_during_gc_evicts_nothing_without_error(frozen_world):
    w = RepoWorld(crd=False)
    gc(w, T0)
    assert w.logs("error") == []


@pytest.mark.parametrize("ttl", [-1, "7d", None, True])
def test_a_bad_ttl_is_refused_with_its_value_before_any_effect(frozen_world, ttl):
    w = RepoWorld()
    (log,) = w.command("repo.gc", ttl_seconds=ttl)
    assert log.level == "error" and repr(ttl) in log.message
