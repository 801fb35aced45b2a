"""scripts/walk.py stays a working tool (the files and functions one fold step enters, on the golden
journal), and what it shows holds the layering: a walk enters only the fold and the machine
concerned, and no I/O. The number of files it enters is not a target and is not pinned here."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def walk():
    """scripts/walk.py's ``walk``, each walk folded once for the module."""
    spec = importlib.util.spec_from_file_location("kfold_walk", ROOT / "scripts" / "walk.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return functools.cache(mod.walk)


@pytest.mark.parametrize("name", ["pod", "configure"])
def test_a_walk_enters_some_file(walk, name):
    assert walk(name), "the walk entered no file: the profiler saw nothing"


def test_the_walks_enter_only_the_fold_and_the_machine_concerned(walk):
    configure = walk("configure")
    assert "engine/core.py" in configure and "engine/machines/session/decide.py" in configure
    assert not [f for f in configure if f.startswith(("engine/machines/pod/", "engine/machines/repo/"))]
    pod = walk("pod")
    assert "engine/machines/pod/machine.py" in pod
    assert not [f for f in pod if f.startswith(("engine/machines/repo/",))]
    assert not [f for f in pod if f.startswith(("journal/", "kfold/", "engine/effects/io/"))], "the fold does no I/O"
