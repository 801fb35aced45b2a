"""State diagrams come from the machines' own transition tables: every row is an edge, a changed
table gives a changed diagram, docs/architecture.md's diagrams and docs/diagrams/*.svg are exactly what the
tables draw now, and the SVG is laid out by Graphviz's dot with the happy path drawn first, bold,
straight down."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from engine.machines.pod import machine as pod_table
from engine.machines.repo import ops as repo_ops
from engine.machines.session import model as session_model
from engine.machines.base import Table
from kfold.offline import diagrams
from kfold.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "docs" / "architecture.md"
DOCS = ROOT / "docs" / "diagrams"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (scripts/setup.sh installs the graphviz package)")


def drawn(picture: str) -> list[tuple[str, str, str, str]]:
    """(kind, from, to, label) of every edge <g> in document order: kind "edge" (one state to
    another, from = its data-from) or "group" (from = its data-sources)."""
    out = []
    for m in re.finditer(r'<g id="[^"]*" class="([^"]*)"([^>]*)>(.*?)</g>', picture, re.S):
        cls, attrs, body = m.groups()
        data = dict(re.findall(r'data-(\w+)="([^"]*)"', attrs))
        if "to" not in data:
            continue
        label = " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", body))
        kind = "group" if "sources" in data else "edge"
        out.append((kind, data["sources"] if kind == "group" else data["from"], data["to"], label))
    return out


def test_every_machine_table_is_found_by_looking_not_by_a_list():
    found = diagrams.tables()
    assert found["session"] is session_model.TABLE and found["pod"] is pod_table.TABLE
    assert found["repo"] is repo_ops.TABLE


@needs_dot
@pytest.mark.parametrize("name", sorted(diagrams.tables()))
def test_every_row_of_the_table_is_an_edge_of_its_diagrams(name):
    table = diagrams.tables()[name]
    text, picture = diagrams.mermaid(table), diagrams.svg(table)
    edges = drawn(picture)
    for event, sources, dest in table.rows:
        for src in [sources] if isinstance(sources, str) else sources:
            assert re.search(rf"^    {src} --> {dest}: .*\b{event}\b", text, re.M), (src, event, dest)
            assert any(dst == dest and event in label.split(" / ") and
                       (src == frm if kind == "edge" else src in frm.split()) for kind, frm, dst, label in edges), \
                (src, event, dest)
    assert set(re.findall(r'data-state="([^"]+)"', picture)) == set(table.states)


@needs_dot
def test_changing_a_table_changes_its_diagrams():
    rows = [("go", "idle", "busy"), ("done", "busy", "idle")]
    before = Table("toy", ["idle", "busy"], rows, initial="idle")
    after = Table("toy", ["idle", "busy", "broken"], rows + [("break", "busy", "broken")], initial="idle")
    assert "busy --> broken: break" not in diagrams.mermaid(before)
    assert "busy --> broken: break" in diagrams.mermaid(after)
    assert 'data-state="broken"' in diagrams.svg(after) and 'data-state="broken"' not in diagrams.svg(before)
    assert diagrams.svg(after) == diagrams.svg(after)  # deterministic


@needs_dot
def test_the_current_state_is_highlighted():
    picture = diagrams.svg(session_model.TABLE, highlight="Ready")
    assert re.findall(r'class="[^"]*\bcurrent\b[^"]*" data-state="(\w+)"', picture) == ["Ready"]
    assert "class Ready current" in diagrams.mermaid(session_model.TABLE, highlight="Ready")


def test_the_readme_embeds_the_diagrams_the_tables_draw_now():
    text = README.read_text()
    assert diagrams.update_readme(text, diagrams.tables()) == text, \
        "docs/architecture.md's state diagrams are stale: run `kfold diagrams --update-readme docs/architecture.md`"


# The happy paths, from the seeds (a Session is created, provisioned, served, stopped; a pod
# operation creates and confirms; a Repo is secured, created and verified), not from the code.
HAPPY = {"session": ["Pending", "Creating", "Provisioning", "Ready", "Stopping", "Stopped"],
         "pod": ["idle", "creating", "confirming", "idle"],
         "repo": ["idle", "securing", "creating", "verifying", "idle"]}


def node_y(picture: str, state: str) -> float:
    g = re.search(rf'data-state="{state}">.*?<text[^>]* y="([-\d.]+)"', picture, re.S)
    return float(g[1])


@needs_dot
@pytest.mark.parametrize("name", sorted(HAPPY))
def test_the_happy_path_is_drawn_first_bold_and_in_order_down_the_page(name):
    table = diagrams.tables()[name]
    picture = diagrams.svg(table)
    path = HAPPY[name]
    steps = list(zip(path, path[1:]))
    edges = drawn(picture)
    states = table.states
    declared = [(states[int(a)], states[int(b)]) for a, b in
                re.findall(r"^  s(\d+) -> s(\d+) ", diagrams.dot_source(table), re.M)]
    assert declared[:len(steps)] == steps, "the happy path's edges are laid out first, in order"
    assert all(any((f, t) == step for kind, f, t, _ in edges if kind == "edge") for step in steps)
    for frm, dst in steps:
        g = re.search(rf'class="([^"]*)" data-from="{frm}" data-to="{dst}">(.*?)</g>', picture, re.S)
        assert "happy" in g[1] and 'stroke-width="2.6"' in g[2], (frm, dst)
    forward = list(dict.fromkeys(path))                  # each state once: the column top to bottom
    ys = [node_y(picture, st) for st in forward]
    assert ys == sorted(ys) and len(set(ys)) == len(ys), dict(zip(forward, ys))
    others = [e for e in edges if e[0] == "edge" and (e[1], e[2]) not in steps]
    assert all(f'data-from="{f}" data-to="{t}">' in picture for _, f, t, _ in others)


@needs_dot
def test_docs_diagrams_are_what_the_tables_draw_now(tmp_path):
    assert main(["diagrams", "--format", "svg", "-o", str(tmp_path)]) == 0
    fresh = {p.name: p.read_text() for p in tmp_path.glob("*.svg")}
    kept = {p.name: p.read_text() for p in DOCS.glob("*.svg")}
    assert kept == fresh, "docs/diagrams/*.svg are stale: run `kfold diagrams --format svg -o docs/diagrams`"


def test_without_dot_the_svg_commands_say_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(diagrams, "DOT", "no-such-dot-here")
    diagrams._svg.cache_clear()
    try:
        assert main(["diagrams", "--format", "svg", "-o", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "apt-get install graphviz" in err
    finally:
        diagrams._svg.cache_clear()


@needs_dot
def test_kfold_diagrams_writes_one_file_per_machine(tmp_path, capsys):
    assert main(["diagrams", "--format", "svg", "-o", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.svg" for n in diagrams.tables())
    assert main(["diagrams", "--machine", "nosuch"]) == 2
    assert "no machine table named 'nosuch'" in capsys.readouterr().err
