"""Repository identity and cache key (issue 3, rule 1 and "Bad input")."""
from __future__ import annotations

import re

import pytest

from engine.repo_names import (
    RepoUrlError, cache_key, check_identity, epoch_ms, identity, rfc3339, transport, without_password,
)

SPELLINGS = [
    "git@github.com:Org/App.git",
    "ssh://git@github.com/Org/App",
    "ssh://git@github.com:22/Org/App.git",
    "git+ssh://git@GITHUB.com/Org/App/",
    "https://user:tok@GitHub.com/Org/App.git",
    "https://github.com/Org/App",
    "http://github.com:80/Org/App.git/",
]
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@pytest.mark.parametrize("url", SPELLINGS)
def test_every_spelling_of_one_repository_has_one_identity_and_one_key(url):
    assert identity(url) == "github.com/Org/App"
    assert cache_key(url) == "github-com-org-app"


@pytest.mark.parametrize("url, kind", [("git@h.io:a/b", "ssh"), ("ssh://h.io/a/b", "ssh"),
                                       ("https://h.io/a/b", "https"), ("http://h.io/a/b", "https"),
                                       ("git://h.io/a/b", "git")])
def test_the_url_scheme_names_the_transport(url, kind):
    assert transport(url) == kind


def test_a_long_identity_gets_a_hashed_suffix_and_stays_a_dns_label():
    long_a = "https://github.com/org/" + "a" * 80
    long_b = "https://github.com/org/" + "a" * 79 + "b"
    keys = {cache_key(long_a), cache_key(long_b)}
    assert len(keys) == 2, "truncation never merges two repositories"
    assert all(DNS_LABEL.match(k) and len(k) <= 63 for k in keys)
    assert cache_key(long_a) == cache_key("git@github.com:org/" + "a" * 80 + ".git"), "deterministic across spellings"


def test_a_short_key_is_the_readable_identity():
    assert cache_key("https://gitlab.example.org/group/sub/proj.git") == "gitlab-example-org-group-sub-proj"


@pytest.mark.parametrize("url, reason", [
    ("", "empty"),
    (None, "empty or not a string"),
    ("https://github.com", "no repository path"),
    ("https://github.com/", "no repository path"),
    ("ftp://github.com/a/b", "scheme 'ftp'"),
    ("file:///srv/repo.git", "scheme 'file'"),
    ("github.com/org/app", "neither"),
    ("https://github.com/org/../app", "'..'"),
    ("https://git hub.com/org/app", "whitespace"),
    ("https://under_score.com/org/app", "not a DNS name"),
    ("ssh://git@host:notaport/org/app", "not a parsable url"),
])
def test_an_unparsable_url_is_refused_naming_the_value_and_the_reason(url, reason):
    with pytest.raises(RepoUrlError) as err:
        cache_key(url)
    assert repr(url) in str(err.value) and reason in str(err.value)


@pytest.mark.parametrize("ident", ["github.com", "GitHub.com/org/app", "https://github.com/org/app",
                                   "github.com/org/app.git", "github.com//app"])
def test_an_identity_that_is_not_normalised_is_refused(ident):
    with pytest.raises(RepoUrlError, match="refused"):
        check_identity(ident)


def test_credentials_never_survive_into_what_kfold_writes_or_says():
    assert without_password("https://user:tok@github.com/o/a") == "https://user@github.com/o/a"
    assert without_password("https://:tok@github.com/o/a") == "https://github.com/o/a"
    assert without_password("git@github.com:o/a") == "git@github.com:o/a"
    with pytest.raises(RepoUrlError) as err:
        identity("https://user:s3cret@github.com")
    assert "s3cret" not in str(err.value)


@pytest.mark.parametrize("text, ms", [("2030-01-01T00:00:00Z", 1893456000000),
                                      ("2030-01-01T00:00:00.250Z", 1893456000250),
                                      ("2030-01-01T01:00:00+01:00", 1893456000000),
                                      ("yesterday", None), (None, None)])
def test_server_timestamps_parse_to_epoch_milliseconds_or_none(text, ms):
    assert epoch_ms(text) == ms


def test_the_attach_stamp_round_trips():
    assert rfc3339(1893456000250) == "2030-01-01T00:00:00.250Z"
    assert epoch_ms(rfc3339(1893456000250)) == 1893456000250
