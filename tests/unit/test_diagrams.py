"""State diagrams come from the machines' own transition tables: every row is an edge, a changed
table gives a changed diagram, and the README's diagrams are exactly what the tables draw now."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.machines.pod import table as pod_table
from engine.machines.repo import ops as repo_ops
from engine.machines.session import model as session_model
from engine.machines.base import Table
from kfold import diagrams
from kfold.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_machine_table_is_found_by_looking_not_by_a_list():
    found = diagrams.tables()
    assert found["session"] is session_model.TABLE and found["pod"] is pod_table.TABLE
    assert found["repo"] is repo_ops.TABLE


@pytest.mark.parametrize("name", sorted(diagrams.tables()))
def test_every_row_of_the_table_is_an_edge_of_its_diagrams(name):
    table = diagrams.tables()[name]
    text, picture = diagrams.mermaid(table), diagrams.svg(table)
    for event, sources, dest in table.rows:
        for src in [sources] if isinstance(sources, str) else sources:
            assert re.search(rf"^    {src} --> {dest}: .*\b{event}\b", text, re.M), (src, event, dest)
            assert f'data-from="{src}" data-to="{dest}"' in picture
    assert set(re.findall(r'data-state="([^"]+)"', picture)) == set(table.states)


def test_changing_a_table_changes_its_diagrams():
    rows = [("go", "idle", "busy"), ("done", "busy", "idle")]
    before = Table("toy", ["idle", "busy"], rows, initial="idle")
    after = Table("toy", ["idle", "busy", "broken"], rows + [("break", "busy", "broken")], initial="idle")
    assert "busy --> broken: break" not in diagrams.mermaid(before)
    assert "busy --> broken: break" in diagrams.mermaid(after)
    assert 'data-state="broken"' in diagrams.svg(after) and 'data-state="broken"' not in diagrams.svg(before)
    assert diagrams.svg(after) == diagrams.svg(after)  # deterministic


def test_the_current_state_is_highlighted():
    picture = diagrams.svg(session_model.TABLE, highlight="Ready")
    assert re.findall(r'class="state current" data-state="(\w+)"', picture) == ["Ready"]
    assert "class Ready current" in diagrams.mermaid(session_model.TABLE, highlight="Ready")


def test_the_readme_embeds_the_diagrams_the_tables_draw_now():
    text = README.read_text()
    assert diagrams.update_readme(text, diagrams.tables()) == text, \
        "README.md's state diagrams are stale: run `kfold diagrams --update-readme README.md`"


def test_kfold_diagrams_writes_one_file_per_machine(tmp_path, capsys):
    assert main(["diagrams", "--format", "svg", "-o", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.svg" for n in diagrams.tables())
    assert main(["diagrams", "--machine", "nosuch"]) == 2
    assert "no machine table named 'nosuch'" in capsys.readouterr().err
