"""Issue 35's measure of how far a reader follows one input: the files one fold step enters
(scripts/walk.py, on the golden journal). Before issue 35 (main 1b697e0) a Pod seen Running during
bring-up entered 16 files and ``session.configure`` over a Ready Session 15; both stay at half of
that or less, and each walk stays inside the machine it concerns."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BEFORE = {"pod": 16, "configure": 15}


@pytest.fixture(scope="module")
def walk():
    """scripts/walk.py's ``walk``, each walk folded once for the module."""
    spec = importlib.util.spec_from_file_location("kfold_walk", ROOT / "scripts" / "walk.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return functools.cache(mod.walk)


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_one_input_enters_at_most_half_the_files_it_entered_before(walk, name):
    files = sorted(walk(name))
    assert files, "the walk entered no file: the profiler saw nothing"
    assert len(files) <= BEFORE[name] // 2, f"{name} walk enters {len(files)} files: {files}"


def test_the_walks_enter_only_the_fold_and_the_machine_concerned(walk):
    configure = walk("configure")
    assert "engine/core.py" in configure and "engine/machines/session/flow.py" in configure
    assert not [f for f in configure if f.startswith(("engine/machines/pod/", "engine/machines/repo/"))]
    pod = walk("pod")
    assert "engine/machines/pod/machine.py" in pod
    assert [f for f in pod if f.startswith("engine/machines/pod/")] == ["engine/machines/pod/machine.py"], \
        "a plain Pod event enters one file of the pod machine"
    assert not [f for f in pod if f.startswith(("journal/", "kfold/", "engine/effects/io/"))], "the fold does no I/O"
