"""A Repo missing from a relist (DESIGN invariant 9: a list is never proof of absence): the repo
machine re-reads it with one quorum GET and forgets it only on that read's 404; while an
operation of its own is in flight, that operation's outcome decides and no second read goes out."""
from __future__ import annotations

import pytest

from journal.records import ListedKey, Relist
from tests.scenario.test_repo_world import CLUSTER, NS, RepoWorld

pytestmark = pytest.mark.usefixtures("frozen_world")

URL = "https://github.com/org/app"
NAME = "github-com-org-app"


def _relist(w: RepoWorld, *present: dict) -> list:
    keys = tuple(ListedKey(namespace=o["metadata"]["namespace"], name=o["metadata"]["name"],
                           uid=o["metadata"]["uid"], rv=o["metadata"]["resourceVersion"]) for o in present)
    return list(w.s.feed(Relist(at=w.at, cluster=CLUSTER, api_version="kfold.dev/v1alpha1", kind="Repo",
                                scope=NS, rv="900", keys=keys)))


def _gets(effects) -> list:
    return [e for e in effects if e.type == "get" and e.kind == "Repo"]


def _known_repo(w: RepoWorld) -> None:
    w.put(NAME, URL)
    w.observe(NAME, event="ADDED")


def test_a_repo_a_relist_lacks_is_read_once_and_kept_while_it_exists():
    w = RepoWorld()
    _known_repo(w)
    assert [e.name for e in _gets(_relist(w))] == [NAME]
    assert _gets(_relist(w)) == []          # a check already in flight: not asked twice
    w.settle()                              # the quorum read finds it
    assert w.s.state.tables["repo"][f"{CLUSTER}/{NS}/{NAME}"].exists


def test_a_repo_a_relist_lacks_is_forgotten_only_on_the_reads_404():
    w = RepoWorld()
    _known_repo(w)
    del w.objs[NAME]                        # gone on the server
    _relist(w)
    w.settle()
    entry = w.s.state.tables["repo"].get(f"{CLUSTER}/{NS}/{NAME}")
    assert entry is None or not entry.exists


def test_a_repo_in_the_relist_is_not_read():
    w = RepoWorld()
    _known_repo(w)
    assert _gets(_relist(w, w.objs[NAME])) == []


def test_while_an_operation_on_the_repo_is_in_flight_a_relist_sends_no_read():
    w = RepoWorld()
    _known_repo(w)
    w.ensure(URL, NAME)                     # an ensure is now in flight (its request unanswered)
    assert w.s.pending(), "the ensure's request is outstanding"
    assert _gets(_relist(w)) == []


def test_an_ensure_under_a_cache_key_naming_another_repository_is_refused_to_its_asker():
    w = RepoWorld()
    w.put(NAME, "https://github.com/org/other", identity="github.com/org/other")
    w.observe(NAME, event="ADDED")
    w.ensure(URL, NAME, session="s1")
    w.settle()
    failed = w.replies("repo_failed")
    assert [(k, m) for k, m, _ in failed] == [("s1", "repo_failed")], w.probe.got
    assert "already names repository" in failed[0][2]["reason"]
