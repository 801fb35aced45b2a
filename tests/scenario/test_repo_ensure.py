"""Ensure at attach (issue 3, rules 3 and 7, "Bad input"), in frozen worlds: server time only."""
from __future__ import annotations

from engine import snapshot
from engine.repo_names import rfc3339
from tests.conftest import run_in_all_worlds
from tests.harness import T0
from tests.scenario.test_repo_world import RepoWorld

APP = "github-com-org-app"
LAST = "kfold.dev/last-attached"
DEPLOY = {"match": "github.com/org", "env": "GH_TOKEN", "secret": "org-deploy-key"}
ATTACH = T0 + 3_600_000


def attached(w: RepoWorld, url: str, key: str = APP, session: str = "s1") -> None:
    w.at = ATTACH
    w.ensure(url, key, session)
    w.settle()


def test_ensure_creates_an_absent_repo_stamped_with_the_attach_server_time(frozen_world):
    """Seed 000:231-233: ensure creates an absent Repo stamped last-attached at the attach."""
    w = RepoWorld()
    attached(w, "https://github.com/org/app")
    md = w.objs[APP]["metadata"]
    assert md["annotations"][LAST] == rfc3339(ATTACH) == "2030-01-01T01:00:00.000Z"
    assert "kfold.dev/repo-bound" not in md["labels"]
    assert w.replies() == [("s1", "repo_ensured", {"repo": f"local/team/{APP}", "url": "https://github.com/org/app"})]


def test_ensure_labels_a_new_repo_bound_when_a_configured_binding_names_it(frozen_world):
    w = RepoWorld()
    w.bind(["https://github.com/org/app"])   # boot; the create is still in flight when the attach comes
    attached(w, "https://github.com/org/app")
    assert w.objs[APP]["metadata"]["labels"]["kfold.dev/repo-bound"] == "true"
    assert w.objs[APP]["metadata"]["annotations"][LAST] == rfc3339(ATTACH)


def test_ensure_of_an_existing_repo_moves_only_the_clock_and_the_url_stands(frozen_world):
    """Seed 000:234-236: ensure of an existing Repo moves the clock; the url stands."""
    w = RepoWorld()
    w.bind(["git@github.com:org/app.git"])
    w.settle()
    attached(w, "https://github.com/org/app.git")
    (patch,) = w.sent("patch")
    assert patch.patch == {"metadata": {"annotations": {LAST: rfc3339(ATTACH)}}}
    assert w.objs[APP]["spec"]["url"] == "git@github.com:org/app.git"
    assert w.replies("repo_ensured")[0][2]["url"] == "git@github.com:org/app.git"


def test_a_bound_repo_attached_by_an_unbound_slot_gets_the_clock_only(frozen_world):
    """Seed 000:240-243: a per-run slot on a Repo labelled bound: the clock only."""
    w = RepoWorld()
    w.bind(["https://github.com/org/other"], credentials=[DEPLOY], env_present=["GH_TOKEN"])
    w.settle()
    w.put(APP, "https://github.com/org/app", bound=True)   # another deploy's binding holds it
    w.observe(APP)
    before = len(w.requests)
    attached(w, "https://github.com/org/app")
    assert [e.type for e in w.requests[before:]] == ["get", "patch"], "quorum read, then the clock"
    assert w.sent("patch")[-1].patch == {"metadata": {"annotations": {LAST: rfc3339(ATTACH)}}}


def test_an_attach_of_a_repo_not_yet_seen_tries_the_create_and_falls_back_to_the_clock(frozen_world):
    w = RepoWorld()
    w.put(APP, "https://github.com/org/app", bound=True)
    attached(w, "https://github.com/org/app")
    assert [e.type for e in w.requests] == ["create", "get", "patch"]
    assert w.objs[APP]["metadata"]["annotations"][LAST] == rfc3339(ATTACH)


def test_an_unbound_attach_restates_the_credential_against_the_url_that_stands(frozen_world):
    """Seed 000:244-248: nothing binds it: secretRef re-resolved against the url that stands."""
    w = RepoWorld()
    w.bind([], credentials=[DEPLOY], env_present=["GH_TOKEN"])   # the credential was fixed since
    w.put(APP, "git@github.com:org/app.git")                     # the first attach's spelling
    w.observe(APP)
    attached(w, "https://github.com/org/app")                    # this attach spells it https
    patch = w.sent("patch")[-1].patch
    assert patch["spec"] == {"secretRef": {"name": "org-deploy-key"}}, "ssh stands: the deploy key, not a token"
    assert patch["metadata"]["annotations"][LAST] == rfc3339(ATTACH)
    assert w.sent("apply_secret") == []
    assert w.objs[APP]["spec"]["url"] == "git@github.com:org/app.git"


def test_an_unbound_https_attach_applies_the_token_secret_before_naming_it(frozen_world):
    w = RepoWorld()
    w.bind([], credentials=[DEPLOY], env_present=["GH_TOKEN"])
    w.put(APP, "https://github.com/org/app")
    w.observe(APP)
    attached(w, "git@github.com:org/app.git")
    assert [e.type for e in w.requests] == ["get", "apply_secret", "patch"]
    assert w.objs[APP]["spec"]["secretRef"] == {"name": w.sent("apply_secret")[0].name}


def test_an_unbound_attach_clears_a_credential_nothing_names_any_more(frozen_world):
    """Seed 000:246-249: an unbound attach clears a credential nothing names (``null``)."""
    w = RepoWorld()
    w.bind([], credentials=[])
    w.put(APP, "https://github.com/org/app")["spec"]["secretRef"] = {"name": "old"}
    attached(w, "https://github.com/org/app")
    assert w.sent("patch")[-1].patch["spec"] == {"secretRef": None}
    assert "secretRef" not in w.objs[APP]["spec"]


def test_an_unparsable_url_is_refused_with_the_value_and_reason_before_any_effect(frozen_world):
    w = RepoWorld()
    effects = w.ensure("ftp://github.com/org/app", APP)
    assert effects == ()
    ((_, message, args),) = w.replies()
    assert message == "repo_failed" and "'ftp://github.com/org/app'" in args["reason"] and "scheme" in args["reason"]


def test_a_url_whose_cache_key_is_not_the_key_asked_for_is_refused(frozen_world):
    w = RepoWorld()
    assert w.ensure("https://github.com/org/other", APP) == ()
    assert "cache key is 'github-com-org-other'" in w.replies("repo_failed")[0][2]["reason"]


def test_an_attach_that_finds_its_cache_key_holding_another_repository_only_on_the_read_is_refused(frozen_world):
    """Two identities can share a cache key (github.com/my-org/app and github.com/my/org-app both
    read ``github-com-my-org-app``); the Repo already there, not yet observed, names the other one:
    the attach learns it from the read after AlreadyExists and fails its asker, writing nothing."""
    w = RepoWorld()
    held = w.put("github-com-my-org-app", "https://github.com/my/org-app", identity="github.com/my/org-app")
    before = {**held["metadata"]["annotations"]}
    attached(w, "https://github.com/my-org/app", key="github-com-my-org-app")
    assert [e.type for e in w.requests] == ["create", "get"], "nothing is written after the read"
    ((session, message, args),) = w.replies()
    assert (session, message) == ("s1", "repo_failed")
    assert "'github-com-my-org-app'" in args["reason"] and "'github.com/my/org-app'" in args["reason"]
    assert w.objs["github-com-my-org-app"]["metadata"]["annotations"] == before


def test_concurrent_attaches_join_one_operation_and_all_are_answered(frozen_world):
    w = RepoWorld()
    w.at = ATTACH
    w.ensure("https://github.com/org/app", APP, "s1")
    w.ensure("git@github.com:org/app.git", APP, "s2")
    w.settle()
    assert len(w.sent("create")) == 1 and w.sent("patch") == []
    assert sorted(k for k, m, _ in w.replies("repo_ensured")) == ["s1", "s2"]


def test_subscribers_hear_per_node_status_changes(frozen_world):
    w = RepoWorld()
    attached(w, "https://github.com/org/app")
    w.objs[APP]["status"] = {"nodes": [{"node": "n1", "present": True, "synced": False, "attempted": "Clone",
                                        "lastError": "auth failed", "lastAttempt": "2030-01-01T01:00:05Z"}]}
    w.observe(APP)
    w.observe(APP)   # the same status again: nothing new to tell
    statuses = w.replies("repo_status")
    assert statuses == [("s1", "repo_status", {"repo": f"local/team/{APP}", "nodes": {
        "n1": {"present": True, "synced": False, "attempted": "Clone", "lastError": "auth failed"}}})]


def test_with_no_server_time_the_attach_stamps_nothing_the_server_did_not_say(frozen_world):
    """Seed 000:122: the clock last-attached is stamped from: kfold uses the server's (invariant 2), never a
    local one."""
    w = RepoWorld(at=None)
    w.ensure("https://github.com/org/app", APP)
    w.settle()
    assert LAST not in w.objs[APP]["metadata"]["annotations"]
    assert w.replies("repo_ensured")


def test_a_create_in_doubt_is_re_observed_not_repeated_blindly(frozen_world):
    w = RepoWorld()
    w.at = ATTACH
    w.ensure("https://github.com/org/app", APP)
    (create,) = w.s.pending()
    w.apply(create)                       # it happened on the server...
    w.s.outcome(create, "transient", ATTACH)   # ...but the answer was lost
    (get,) = w.s.pending()
    assert get.type == "get"
    w.settle()
    assert w.replies("repo_ensured") and len([r for r in w.requests if r.type == "create"]) == 0


def test_the_repo_table_survives_a_snapshot_round_trip():
    w = RepoWorld()
    w.bind(["https://github.com/org/app"], credentials=[DEPLOY], env_present=["GH_TOKEN"])
    attached(w, "https://github.com/org/other", "github-com-org-other")
    data = snapshot.dump(w.s.state)
    assert snapshot.dump(snapshot.load(data, w.s.machines)) == data


def test_the_same_attach_story_gives_the_same_effects_in_every_world():
    def story():
        w = RepoWorld()
        w.bind(["git@github.com:org/app.git"], credentials=[DEPLOY], env_present=["GH_TOKEN"])
        w.settle()
        attached(w, "https://github.com/org/app")
        attached(w, "https://github.com/org/new", "github-com-org-new")
        return w.s.transcript()
    assert [e["type"] for e in run_in_all_worlds(story)] == ["create", "patch", "apply_secret", "create"]


def test_regression_a_flickering_repo_fails_after_the_attempt_bound_instead_of_looping(frozen_world):
    """Found by mutation testing (repo_ops.on_read survived attempts=None): a Repo present at every
    create and gone at every read was re-created forever. Rule: an operation is repeated a bounded
    number of times (engine.backoff.REPO_OP: 3 creates), then every waiter is told ``repo_failed``."""
    w = RepoWorld()
    w.at = ATTACH
    w.ensure("https://github.com/org/app", APP)
    creates = 0
    for _ in range(20):
        pending = w.s.pending()
        if not pending:
            break
        (e,) = pending
        if e.type == "create":
            creates += 1
            w.s.outcome(e, "already_exists", ATTACH, status_reason="AlreadyExists", code=409)
        else:
            assert e.type == "get"
            w.s.outcome(e, "not_found", ATTACH, status_reason="NotFound", code=404)
    assert not w.s.pending(), "kfold kept re-creating a Repo that flickers"
    assert creates == 3
    assert [r[1] for r in w.replies()] == ["repo_failed"]
