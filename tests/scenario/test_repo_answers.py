"""Repo machine rules the mutation survivors showed unpinned (issue 34, item 3), through the fold.

A relist lacking a Repo is a reason to read it on its own cluster, not proof it is gone; a list or
patch in doubt is asked again; a refused create or a patch that meets NotFound is answered; the
attach clock is never cleared for want of a server time; ``.../app/.git`` is the identity of
``.../app``; the operator's warning about an unset token variable names each entry's match and env.
"""
from __future__ import annotations

from datetime import datetime, timezone

from tests.harness import T0
from tests.scenario.test_repo_world import CLUSTER, NS, RepoWorld

APP = "github-com-org-app"
KEY = f"{CLUSTER}/{NS}/{APP}"
URL = "https://github.com/org/app"
LAST = "kfold.dev/last-attached"
ATTACH = T0 + 3_600_000
GH = {"match": "github.com/org", "env": "GH_TOKEN"}


def rfc3339(ms: int) -> str:
    """The annotation's form: RFC 3339 UTC with milliseconds (``2030-01-01T01:00:00.000Z``)."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _known(w: RepoWorld, **put: object) -> None:
    w.put(APP, URL, **put)
    w.observe(APP, event="ADDED")


def test_a_relist_without_a_known_repo_reads_it_on_its_cluster_and_keeps_what_the_read_finds(frozen_world):
    w = RepoWorld()
    _known(w)
    w.objs[APP]["spec"]["secretRef"] = {"name": "org-token"}
    w.s.relist("Repo", [], T0, api_version="kfold.dev/v1alpha1", cluster=CLUSTER)
    (read,) = w.s.pending()
    assert (read.type, read.cluster, read.namespace, read.name) == ("get", CLUSTER, NS, APP)
    w.settle()
    entry = w.s.decision("repo", KEY)
    assert entry.exists and entry.url == URL and entry.secret_ref == "org-token"


def test_a_relist_without_a_repo_the_read_finds_gone_forgets_it(frozen_world):
    w = RepoWorld()
    _known(w)
    del w.objs[APP]
    w.s.relist("Repo", [], T0, api_version="kfold.dev/v1alpha1", cluster=CLUSTER)
    w.settle()
    entry = w.s.decision("repo", KEY)
    assert entry is None or not entry.exists


def test_a_gc_list_in_doubt_is_listed_again_and_its_answer_evicts(frozen_world):
    w = RepoWorld()
    w.put("github-com-org-old", "https://github.com/org/old", last_attached=rfc3339(T0))
    w.at = T0 + 30 * 24 * 3600 * 1000
    w.command("repo.gc", ttl_seconds=7 * 24 * 3600)
    (listing,) = w.s.pending()
    w.s.command("effect.in_doubt", w.at, effect_id=listing.id)
    (again,) = w.s.pending()
    assert again.type == "list" and again.id != listing.id
    w.settle()
    assert "github-com-org-old" not in w.objs, "the repeated list's answer decides the eviction"


def test_a_refused_create_tells_the_waiter_repo_failed_naming_the_repo_and_the_servers_reason(frozen_world):
    w = RepoWorld()
    w.refuse["create"] = ("forbidden", 'repos.kfold.dev is forbidden: User "kfold" cannot create')
    w.at = ATTACH
    w.ensure(URL, APP)
    w.settle()
    [(_, message, args)] = w.replies()
    assert message == "repo_failed" and args["repo"] == KEY
    assert APP in args["reason"] and "forbidden" in args["reason"]


def _bound() -> RepoWorld:
    """A Repo made by the boot's bind: an attach moves its clock by one merge patch."""
    w = RepoWorld()
    w.bind([URL])
    w.settle()
    return w


def test_a_patch_that_meets_not_found_creates_the_repo_again(frozen_world):
    w = _bound()
    w.refuse["patch"] = ("not_found", "repos.kfold.dev \"github-com-org-app\" not found")
    del w.objs[APP]   # deleted between the observation and the patch
    w.at = ATTACH
    w.ensure(URL, APP)
    w.settle()
    assert [r[1] for r in w.replies()] == ["repo_ensured"]
    assert w.objs[APP]["metadata"]["annotations"][LAST] == rfc3339(ATTACH)


def test_regression_a_patch_in_doubt_is_sent_again_instead_of_quarantining_the_repo(frozen_world):
    """Found by mutation testing (repo_ops.reissue survived with ``go(None, ...)``: no test reached
    it): re-sending a safe effect in doubt passed its cluster twice, a TypeError that quarantined the
    Repo. Rule: a request safe to repeat is sent again when in doubt (DESIGN.md, invariant 4)."""
    w = _bound()
    w.at = ATTACH
    w.ensure(URL, APP)
    (patch,) = w.s.pending()
    w.s.command("effect.in_doubt", ATTACH, effect_id=patch.id)
    assert not [e for e in w.s.effects if e.type == "log" and "quarantined" in e.message]
    (again,) = w.s.pending()
    assert (again.type, again.patch, again.cluster) == ("patch", patch.patch, CLUSTER)
    w.settle()
    assert [r[1] for r in w.replies()] == ["repo_ensured"]
    assert w.objs[APP]["metadata"]["annotations"][LAST] == rfc3339(ATTACH)


def test_an_attach_without_server_time_never_clears_the_clock_already_on_the_repo(frozen_world):
    w = _bound()
    w.objs[APP]["metadata"]["annotations"][LAST] = "2029-12-20T00:00:00.000Z"
    w.observe(APP)
    w.at = None
    w.ensure(URL, APP)
    w.settle()
    assert w.objs[APP]["metadata"]["annotations"][LAST] == "2029-12-20T00:00:00.000Z"
    assert w.sent("patch") == [] and w.replies("repo_ensured")


def test_a_url_ending_in_slash_dot_git_names_the_same_repo(frozen_world):
    w = RepoWorld()
    w.at = ATTACH
    w.ensure("https://github.com/org/app/.git", APP)
    w.settle()
    assert [r[1] for r in w.replies()] == ["repo_ensured"] and APP in w.objs


def test_the_unset_token_warning_lists_each_entrys_match_and_env(frozen_world):
    w = RepoWorld()
    w.bind([URL], credentials=[GH], env_present=[])
    (warning,) = w.logs("warning")
    assert warning.fields["missing"] == [{"match": "github.com/org", "env": "GH_TOKEN"}]


def _evicting() -> tuple[RepoWorld, object]:
    """A world whose gc has just sent the fenced delete of a month-old unbound Repo, and that delete."""
    w = RepoWorld()
    w.put("github-com-org-old", "https://github.com/org/old", last_attached=rfc3339(T0))
    w.at = T0 + 30 * 24 * 3600 * 1000
    w.command("repo.gc", ttl_seconds=7 * 24 * 3600)
    (listing,) = w.s.pending()
    result, fields = w.apply(listing)
    w.s.outcome(listing, result, w.at, **fields)
    (delete,) = [e for e in w.s.pending() if e.type == "delete"]
    return w, delete


def test_an_eviction_in_doubt_whose_quorum_read_finds_the_repo_keeps_it(frozen_world):
    """A crash left the gc's delete in doubt and the Repo is still on the server: the read that
    settles the doubt keeps the Repo known (only a 404 is a deletion)."""
    w, delete = _evicting()
    w.s.command("effect.in_doubt", w.at, effect_id=delete.id)   # it never reached the server
    assert [e.type for e in w.settle()] == ["get"]
    assert "github-com-org-old" in w.objs
    entry = w.s.decision("repo", "local/team/github-com-org-old")
    assert entry is not None and entry.exists


def test_an_attach_to_a_repo_with_node_status_tells_the_waiter_that_status(frozen_world):
    w = RepoWorld()
    w.put(APP, URL, nodes=[{"node": "n1", "present": True, "synced": True}])
    w.ensure(URL, APP)
    w.settle()
    assert w.replies("repo_ensured")
    assert w.replies("repo_status") == [("s1", "repo_status", {"repo": f"local/team/{APP}", "nodes": {
        "n1": {"present": True, "synced": True}}})]


def test_a_request_in_doubt_at_every_try_fails_the_ensure_after_the_bound_naming_the_doubt(frozen_world):
    """Found by mutation testing (``repo_ops.doubt`` with ``fail(None, ...)`` survived): a request
    still in doubt after ``backoff.REPO_OP.limit`` attempts tells the waiter ``repo_failed``."""
    w = _bound()
    w.at = ATTACH
    w.ensure(URL, APP)
    for _ in range(20):
        pending = w.s.pending()
        if not pending:
            break
        w.s.command("effect.in_doubt", ATTACH, effect_id=pending[0].id)
    (failed,) = w.replies("repo_failed")
    assert "still in doubt" in str(failed)
    assert not [e for e in w.s.effects if e.type == "log" and "quarantined" in e.message]


def test_an_eviction_in_doubt_whose_quorum_read_fails_is_reported_and_sends_nothing_more(frozen_world):
    """Found by mutation testing (``repo_ops.on_verified`` failing without its reason survived)."""
    w, delete = _evicting()
    w.s.command("effect.in_doubt", w.at, effect_id=delete.id)
    (read,) = w.s.pending()
    w.s.outcome(read, "forbidden", w.at)
    assert [e for e in w.logs("error") if "re-reading Repo 'github-com-org-old' after a request in doubt" in e.message]
    assert w.s.pending() == [] and "github-com-org-old" in w.objs
