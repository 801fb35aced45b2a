"""Bind at boot (issue 3, rules 1, 2, 6 and "Bad input"), in frozen worlds."""
from __future__ import annotations

import pytest

from engine.machines.repo.creds import token_secret_name
from tests.harness import T0
from tests.scenario.test_repo_world import NS, RepoWorld

APP = "github-com-org-app"
BOUND = "kfold.dev/repo-bound"
LAST = "kfold.dev/last-attached"
GH = {"match": "github.com/org", "env": "GH_TOKEN", "secret": "org-deploy-key"}


def test_bind_creates_an_absent_repo_labelled_bound_without_an_attach_clock(frozen_world):
    """Seed 000:214-216: bind creates an absent Repo labelled bound, with no attach clock."""
    w = RepoWorld()
    w.bind(["https://github.com/org/app.git"])
    w.settle()
    obj = w.objs[APP]
    assert obj["metadata"]["labels"][BOUND] == "true"
    assert obj["metadata"]["annotations"] == {"kfold.dev/repo-identity": "github.com/org/app"}
    assert obj["spec"] == {"url": "https://github.com/org/app.git", "refreshInterval": "5m"}


def test_bind_of_an_existing_repo_restates_it_in_one_merge_patch_and_never_touches_the_clock(frozen_world):
    """Seed 000:217-227: bind of an existing Repo is one merge patch (url, secretRef, identity, bound
    label); seed 000:35-37: a boot is not an attach, the clock stays."""
    w = RepoWorld()
    w.put(APP, "https://github.com/org/app", last_attached="2029-12-31T00:00:00.000Z")
    w.bind(["git@github.com:org/app.git"], credentials=[GH])
    w.settle()
    (patch,) = w.sent("patch")
    assert patch.patch == {
        "metadata": {"labels": {BOUND: "true"}, "annotations": {"kfold.dev/repo-identity": "github.com/org/app"}},
        "spec": {"url": "git@github.com:org/app.git", "secretRef": {"name": "org-deploy-key"}},
    }
    assert w.objs[APP]["metadata"]["annotations"][LAST] == "2029-12-31T00:00:00.000Z"


def test_bind_of_a_repo_kfold_has_observed_is_a_patch_never_a_create(frozen_world):
    """What the watch showed exists: restated by a merge patch, with no create met by AlreadyExists."""
    w = RepoWorld()
    w.put(APP, "https://github.com/org/app")
    w.observe(APP)
    w.bind(["https://github.com/org/app"])
    w.settle()
    assert not w.sent("create")
    assert len(w.sent("patch")) == 1


def test_a_credential_the_config_no_longer_names_is_cleared_by_null(frozen_world):
    """Seed 000:218-220: ``secretRef: null`` clears a credential the config no longer names."""
    w = RepoWorld()
    w.put(APP, "git@github.com:org/app.git")["spec"]["secretRef"] = {"name": "org-deploy-key"}
    w.bind(["git@github.com:org/app.git"], credentials=[])
    w.settle()
    assert w.sent("patch")[0].patch["spec"]["secretRef"] is None
    assert "secretRef" not in w.objs[APP]["spec"]


def test_two_spellings_of_one_identity_make_one_resource_stated_by_the_first(frozen_world):
    """Seed 000:18-20: two spellings of one identity are one Repo, stated by the first spelling."""
    w = RepoWorld()
    w.bind(["git@github.com:Org/App.git", "https://user:tok@GitHub.com/Org/App", "ssh://git@github.com/Org/App"])
    w.settle()
    assert [c.name for c in w.sent("create")] == [APP]
    assert w.objs[APP]["spec"]["url"] == "git@github.com:Org/App.git"


def test_an_https_token_becomes_a_flux_shaped_secret_named_from_the_entry_and_never_carried(frozen_world):
    """Seed 000:136-145: an https token becomes a Flux-shaped Secret (username x-access-token, password), never
    carried."""
    w = RepoWorld()
    w.bind(["https://github.com/org/app"], credentials=[GH], env_present=["GH_TOKEN"])
    w.settle()
    (secret,) = w.sent("apply_secret")
    assert secret.name == token_secret_name("github.com/org")
    assert secret.literal == {"username": "x-access-token"}
    assert secret.values_from_env == {"password": "GH_TOKEN"}
    assert w.objs[APP]["spec"]["secretRef"] == {"name": secret.name}
    assert w.requests.index(secret) < w.requests.index(w.sent("create")[0]), "the Secret exists before the Repo names it"


def test_token_secret_names_are_deterministic_and_distinct_per_entry():
    """Seed 000:131-133: the token Secret's name is derived from the entry: stable, two entries never share one."""
    names = {token_secret_name(m) for m in ("github.com/org", "github.com/org-x", "github.com/Org", "gitlab.com")}
    assert len(names) == 4
    assert token_secret_name("github.com/org") == token_secret_name("github.com/org")
    assert all(len(n) <= 63 for n in names)


def test_token_env_unset_means_no_secret_ref_and_is_reported_once_at_boot_not_per_attach(frozen_world):
    w = RepoWorld()
    w.bind(["https://github.com/org/app"], credentials=[GH], env_present=[])
    (warning,) = w.logs()
    assert "GH_TOKEN" in warning.message and "github.com/org" in warning.message
    w.settle()
    assert w.sent("apply_secret") == [] and "secretRef" not in w.objs[APP]["spec"]
    w.at = T0 + 60_000
    w.ensure("https://github.com/org/other", "github-com-org-other")
    w.ensure("https://github.com/org/app", APP)
    w.settle()
    assert w.logs() == [warning]
    assert "secretRef" not in w.objs["github-com-org-other"]["spec"]


def test_an_ssh_url_names_the_deploy_key_secret_and_applies_nothing(frozen_world):
    """Seed 000:155: an ssh entry names its deploy-key Secret; nothing is read or applied."""
    w = RepoWorld()
    w.bind(["git@github.com:org/app.git"], credentials=[GH], env_present=["GH_TOKEN"])
    w.settle()
    assert w.sent("apply_secret") == []
    assert w.objs[APP]["spec"]["secretRef"] == {"name": "org-deploy-key"}


def test_the_longest_matching_entry_wins_on_a_path_segment_boundary(frozen_world):
    """Seed 000:111: credentials are matched by prefix on the identity (the longest, on a segment boundary)."""
    w = RepoWorld()
    creds = [{"match": "github.com", "secret": "any"}, {"match": "github.com/org", "secret": "org-key"}]
    w.bind(["git@github.com:org/app.git", "git@github.com:org-x/app.git"], credentials=creds)
    w.settle()
    assert w.objs[APP]["spec"]["secretRef"] == {"name": "org-key"}
    assert w.objs["github-com-org-x-app"]["spec"]["secretRef"] == {"name": "any"}


def test_an_unparsable_url_refuses_the_bind_with_the_value_and_reason_before_any_effect(frozen_world):
    w = RepoWorld()
    effects = w.bind(["https://github.com/org/app", "https://github.com"])
    (log,) = effects
    assert log.type == "log" and log.level == "error"
    assert "'https://github.com'" in log.message and "no repository path" in log.message
    assert w.s.pending() == []


def test_a_refused_url_never_echoes_its_password(frozen_world):
    w = RepoWorld()
    (log,) = w.bind(["https://user:hunter2@github.com"])
    assert "hunter2" not in log.message and "https://user@github.com" in log.message


def test_a_bad_credential_entry_refuses_the_bind_before_any_effect(frozen_world):
    w = RepoWorld()
    (log,) = w.bind(["https://github.com/org/app"], credentials=[{"match": "https://github.com/org", "env": "T"}])
    assert log.level == "error" and "'https://github.com/org'" in log.message
    (log2,) = w.bind(["https://github.com/org/app"], credentials=[{"match": "github.com/org"}])
    assert "names neither env nor secret" in log2.message


@pytest.mark.parametrize("entry", [
    {"match": "github.com/org", "secret": "org-deploy-key", "evn": "GH_TOKEN"},
    {"match": "github.com/org", "env": "GH_TOKEN", "username": "bot"},
], ids=["misspelt-env", "a-field-kfold-has-not"])
def test_a_credential_entry_with_a_key_beyond_match_env_secret_refuses_the_bind(entry, frozen_world):
    """An entry is {match, env?, secret?} (issue 3, rule 6): a key kfold would ignore is refused, not
    dropped (a misspelt ``env`` would otherwise clone anonymously without a word)."""
    w = RepoWorld()
    (log,) = w.bind(["https://github.com/org/app"], credentials=[entry], env_present=["GH_TOKEN"])
    assert log.level == "error" and "expected keys match, env?, secret?" in log.message
    assert w.s.pending() == []


def test_a_refused_credential_entry_names_its_keys_never_a_value(frozen_world):
    """No secret material in a log (DESIGN invariant 6): a token pasted inline under a key kfold has
    not is refused by naming the key, and the token appears in no log line."""
    token = "ghp_" + "A1b2" * 9
    w = RepoWorld()
    (log,) = w.bind(["https://github.com/org/app"], credentials=[{"match": "github.com/org", "token": token}])
    assert log.level == "error" and "['token']" in log.message and token not in log.message
    (log2,) = w.bind(["https://github.com/org/app"], credentials=[token])
    assert log2.level == "error" and "type str" in log2.message and token not in log2.message
    (log3,) = w.bind(["https://github.com/org/app"], credentials={"github.com/org": token})
    assert log3.level == "error" and token not in log3.message
