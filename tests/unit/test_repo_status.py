"""Per-node status and ``kfold repos`` (issue 3, rule 7)."""
from __future__ import annotations

import argparse
import json

from journal.records import dump_record
from kfold.cli.commands import repos
from engine.repo_names import repo_status_rows
from tests.scenario.test_repo_world import RepoWorld

APP = "github-com-org-app"


def test_status_rows_keep_absent_fields_absent_and_omit_empty_errors():
    """Seed 000:315-323: per-node rows: node, present and synced always; optional fields only when reported; an
    empty lastError absent."""
    obj = {"status": {"nodes": [
        {"node": "n1", "present": True, "synced": True, "attempted": "Fetch", "lastAttempt": "t1",
         "lastFetched": "t1", "lastError": ""},
        {"node": "n2", "attempted": "Clone", "lastError": "Permission denied (publickey)"},
        {"present": True},
    ]}}
    assert repo_status_rows(obj) == [
        {"node": "n1", "present": True, "synced": True, "attempted": "Fetch", "lastAttempt": "t1", "lastFetched": "t1"},
        {"node": "n2", "present": False, "synced": False, "attempted": "Clone",
         "lastError": "Permission denied (publickey)"},
    ]


def test_a_repo_no_agent_reported_on_has_no_rows():
    assert repo_status_rows({"spec": {"url": "x"}}) == [] == repo_status_rows({"status": {}})


def _journal(tmp_path) -> str:
    w = RepoWorld()
    w.bind(["git@github.com:org/app.git"])
    w.settle()
    w.objs[APP]["status"] = {"nodes": [{"node": "n1", "present": True, "synced": False, "attempted": "Fetch",
                                        "lastError": "could not resolve host"}]}
    w.objs[APP]["metadata"]["annotations"]["kfold.dev/last-attached"] = "2030-01-01T01:00:00.000Z"
    w.observe(APP)
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(dump_record(r) + b"\n" for r in w.s.records))
    return str(path)


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    repos.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_kfold_repos_lists_what_a_folded_journal_holds_as_json(tmp_path, capsys):
    code, out, _ = _run(["repos", "--journal", _journal(tmp_path), "-o", "json"], capsys)
    assert code == 0
    assert json.loads(out) == [{
        "cluster": "local", "namespace": "team", "key": APP, "url": "git@github.com:org/app.git",
        "identity": "github.com/org/app", "bound": True, "lastAttached": "2030-01-01T01:00:00.000Z",
        "nodes": [{"node": "n1", "present": True, "synced": False, "attempted": "Fetch",
                   "lastError": "could not resolve host"}],
    }]


def test_kfold_repos_prints_a_table_naming_what_failed_on_which_node(tmp_path, capsys):
    code, out, _ = _run(["repos", "--journal", _journal(tmp_path)], capsys)
    header, row = out.splitlines()
    assert header.split() == ["CLUSTER", "NAMESPACE", "KEY", "URL", "BOUND", "LAST-ATTACHED", "NODES"]
    assert row.split() == ["local", "team", APP, "git@github.com:org/app.git", "yes",
                           "2030-01-01T01:00:00.000Z", "n1:present/Fetch-failed"]


def test_kfold_repos_reports_an_unreadable_journal_on_stderr(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rec": "nonsense"}\n')
    code, _, err = _run(["repos", "--journal", str(bad)], capsys)
    assert code == 2 and "bad.jsonl" in err and "nonsense" in err   # unusable input, as replay and run
