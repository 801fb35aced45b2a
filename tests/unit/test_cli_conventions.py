"""kubectl conventions across the CLI: help text on every option, Examples and exit codes in every
command's help, bad arguments exit 2 everywhere, ``-o`` on the commands that list, and trace's
short keys (a unique ``ns/name`` or ``name``; an ambiguous one exits 2 naming the candidates)."""
from __future__ import annotations

import argparse
import copy
import json

import pytest

from kfold.cli import COMMANDS, build_parser, main
from tests.golden_facts import GOLDEN


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _leaves(child, path + (name,))


LEAVES = list(_leaves(build_parser()))


def test_every_command_is_reachable():
    assert {p[0] for p, _ in LEAVES} == set(COMMANDS)


@pytest.mark.parametrize("path,parser", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_every_option_has_help_and_every_command_examples_and_exit_codes(path, parser):
    undocumented = [a.dest for a in parser._actions if a.help in (None, "") and a.dest != "help"]
    assert not undocumented, f"kfold {' '.join(path)}: options without help: {undocumented}"
    assert "examples:" in (parser.epilog or "") and "exit codes" in (parser.epilog or ""), path
    for line in parser.epilog.split("exit codes", 1)[0].splitlines()[1:]:
        if line.strip():
            assert line.strip().startswith("kfold") or line.strip().startswith("KUBECONFIG"), line


def test_the_top_level_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    for code in ("0  done", "1  the command ran", "2  bad arguments", "3  a journal's broken checksum"):
        assert code in out


BAD = [
    [], ["nope"], ["run"], ["run", "--config", "c.yaml", "--log-level", "loud"],
    ["replay"], ["replay", "j", "-o", "xml"], ["replay", "j", "--until", "x"], ["replay", "j", "--until", "-5"],
    ["replay", "j", "--until", "0"], ["trace", "j", "k", "--until", "-1"], ["export", "j", "--since", "-2"],
    ["export", "j", "--until", "0"], ["ui", "j", "--until", "-5"],
    ["trace", "j"], ["export"], ["ui"], ["diagrams", "--format", "png"], ["manifests", "--replicas", "x"],
    ["repos", "-o", "xml"], ["repos", "--journal", "j", "-n", "ns"],
    ["cluster"], ["cluster", "list", "-o", "xml"], ["cluster", "register", "x"],
    ["sim", "--faults", "nope"], ["sim", "--steps", "-1"], ["sim", "--seeds", "many"],
]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a) or "(none)" for a in BAD])
def test_bad_arguments_exit_2(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["replay", "trace", "export", "ui"])
def test_a_negative_until_is_refused_before_the_journal_is_opened(command, capsys):
    argv = [command, str(GOLDEN), *(["k"] if command == "trace" else []), "--until", "-5"]
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert err.splitlines()[-1] == (f"kfold {command}: error: argument --until: -5 is not a sequence number: "
                                    "records are numbered from 1; pass 1 or more")


def test_one_word_for_a_tenant_everywhere_a_user_reads_it():
    """Flags say --tenant; so do messages, help and docs (never "org")."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    word = re.compile(r"(?<![./])\b(org|orgs|organi[sz]ations?)\b(?![./])")
    files = [p for d in ("kfold", "engine", "docs") for p in (root / d).rglob("*") if p.suffix in (".py", ".md")]
    files.append(root / "README.md")
    found = [f"{p.relative_to(root)}:{n}: {line.strip()}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if word.search(line.replace("github.com/org", ""))]
    assert not found, found


def test_sim_unknown_fault_names_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        main(["sim", "--faults", "nope"])
    err = capsys.readouterr().err
    assert "unknown fault 'nope'" in err and "conflict" in err


# -- trace's short keys -----------------------------------------------------------------------
def _golden_lines() -> list[dict]:
    return [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]


def _two_namespaces(tmp_path):
    """A journal holding Session ``demo`` in two namespaces (configure, then two ADDED events)."""
    lines = _golden_lines()
    observed = next(r for r in lines if r["rec"] == "observed" and r["kind"] == "Session")
    out = [lines[0]]
    for seq, ns in ((2, "team-a"), (3, "team-b")):
        rec = copy.deepcopy(observed)
        rec.update(seq=seq, namespace=ns, uid=f"uid-{ns}")
        rec["obj"]["metadata"].update(namespace=ns, uid=f"uid-{ns}")
        out.append(rec)
    path = tmp_path / "two.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return path


def _trace(capsys, *argv):
    code = main(["trace", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_trace_takes_a_unique_name_or_namespace_and_name(capsys):
    key = next(r for r in _golden_lines() if r["rec"] == "observed" and r["kind"] == "Session")
    full = f"{key['cluster']}/{key['namespace']}/{key['name']}"
    code, by_key, _ = _trace(capsys, GOLDEN, full)
    assert code == 0 and by_key
    for short in (key["name"], f"{key['namespace']}/{key['name']}"):
        code, out, err = _trace(capsys, GOLDEN, short)
        assert code == 0 and out == by_key
        assert f"is {full}" in err


def test_an_ambiguous_name_exits_2_listing_the_candidates(tmp_path, capsys):
    path = _two_namespaces(tmp_path)
    code, out, err = _trace(capsys, path, "demo")
    assert code == 2 and not out
    assert "local/team-a/demo" in err and "local/team-b/demo" in err and len(err.strip().splitlines()) == 1
    code, out, _ = _trace(capsys, path, "team-b/demo")
    assert code == 0 and "team-b/demo" in out and "team-a" not in out


def test_trace_shows_an_outcome_message():
    from journal.records import Outcome
    from kfold.offline.render import record_line
    rec = Outcome(seq=5, at=0, effect_id="3.0", machine="repo", key="local/ns/", result="transient",
                  message="connection refused")
    assert record_line(rec) == "outcome 3.0 transient: connection refused"


# -- -o on the listing commands ----------------------------------------------------------------
@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml"])
def test_replay_lists_objects_with_their_state(output, capsys):
    import yaml
    assert main(["replay", str(GOLDEN), "--until", "30", "-o", output]) == 0
    out = capsys.readouterr().out
    if output in ("json", "yaml"):
        data = json.loads(out) if output == "json" else yaml.safe_load(out)
        states = {o["key"]: o["state"] for o in data["objects"]}
        assert data["last_seq"] == 30
    else:
        header, *rows = out.split("\n\n", 1)[1].splitlines()
        assert header.split()[:3] == ["MACHINE", "KEY", "STATE"]
        assert ("RV" in header) == (output == "wide")
        states = {r.split()[1]: r.split()[2] for r in rows}
    assert states, out
    assert all(k.count("/") == 2 for k in states)


def _examples():
    import shlex
    for path, parser in LEAVES:
        for line in parser.epilog.split("exit codes", 1)[0].splitlines()[1:]:
            words = shlex.split(line.split("#", 1)[0].split("|", 1)[0].split(">", 1)[0])
            while words and "=" in words[0]:
                words.pop(0)   # KUBECONFIG=... kfold run ...
            if words:
                yield path, words


@pytest.mark.parametrize("path,words", list(_examples()), ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_every_example_parses(path, words):
    assert words[0] == "kfold" and tuple(words[1:1 + len(path)]) == path
    build_parser().parse_args(words[1:])   # argparse exits 2 on a bad one


def test_trace_json_is_one_object_per_record_matching_the_text(capsys):
    key = next(r for r in _golden_lines() if r["rec"] == "observed" and r["kind"] == "Session")
    _, text, _ = _trace(capsys, GOLDEN, key["name"])
    code, out, _ = _trace(capsys, GOLDEN, key["name"], "-o", "json")
    objs = [json.loads(line) for line in out.splitlines()]
    headers = [line for line in text.splitlines() if line.startswith("#")]
    assert code == 0 and len(objs) == len(headers)
    assert [f"#{o['seq']} {o['at']} {o['record']}" for o in objs] == headers
    assert sum(len(o["details"]) for o in objs) + len(objs) == len(text.splitlines())
