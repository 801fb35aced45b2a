"""Every ``kfold`` subcommand runs as a user runs it: in a fresh interpreter, ``python -m kfold CMD``.

The rest of the suite imports kfold once, in whatever order its modules happen to be collected, so
an import-order fault (a circle that only one entry point enters first) passes it; each call here
starts a new process, entering the package through the command alone. Each command gets its
``--help`` and one real invocation that reaches the command's own modules (an import error is a
traceback and rc 1, which the asserts below refuse).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from kfold.cli import COMMANDS
from tests.golden_facts import GOLDEN

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = REPO / "kfold" / "data" / "config.example.yaml"


def _kfold(*argv: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "kfold", *argv], cwd=kw.pop("cwd", REPO), env=env,
                          capture_output=True, text=True, timeout=timeout, **kw)


def _no_traceback(p: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr[-3000:]


def _real_invocations(tmp: Path) -> dict[str, tuple[list[str], int, str]]:
    """command -> (argv, the exit code a user gets, a text its output must hold)."""
    return {
        "replay": (["replay", str(GOLDEN), "--check"], 0, "record"),
        "export": (["export", str(GOLDEN), "-o", str(tmp / "out.jsonl")], 0, ""),
        "trace": (["trace", str(GOLDEN), "demo"], 0, "demo"),
        "diagrams": (["diagrams", "-o", str(tmp / "diagrams")], 0, "pod.mmd"),
        "manifests": (["manifests", "--part", "crds"], 0, "CustomResourceDefinition"),
        "repos": (["repos", "--journal", str(GOLDEN), "-o", "json"], 0, ""),
        "cluster": (["cluster", "list", "--registry-dir", str(tmp / "registry"), "-o", "json"], 0, ""),
        "sim": (["sim", "--seed", "3", "--steps", "40", "--sessions", "2"], 0, ""),
        # the daemon, as far as a config it can use and a kubeconfig it cannot: one line, exit 2
        "run": (["run", "--config", str(EXAMPLE_CONFIG), "--kubeconfig", str(tmp / "missing-kubeconfig"),
                 "--journal", str(tmp / "journal.db")], 2, "kubeconfig"),
    }


def test_every_command_has_a_real_invocation_here(tmp_path):
    assert set(_real_invocations(tmp_path)) | {"ui"} == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_in_a_fresh_process(command):
    p = _kfold(command, "--help")
    _no_traceback(p)
    assert p.returncode == 0, p.stderr
    assert f"usage: kfold {command}" in p.stdout


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - {"ui"}))
def test_real_invocation_in_a_fresh_process(command, tmp_path):
    argv, rc, text = _real_invocations(tmp_path)[command]
    p = _kfold(*argv)
    _no_traceback(p)
    assert p.returncode == rc, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert text in p.stdout + p.stderr
    if rc == 2:
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_diagrams_write_every_machine(tmp_path):
    p = _kfold("diagrams", "-o", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["pod.mmd", "repo.mmd", "session.mmd"]
    assert all("stateDiagram" in f.read_text() for f in tmp_path.iterdir())


def test_ui_in_a_fresh_process_serves_its_page_and_stops_on_sigterm():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-m", "kfold", "ui", str(GOLDEN), "--listen", "127.0.0.1:0"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for _ in range(50):
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if m:
                url = m.group(0)
                break
        assert url, proc.stderr.read() if proc.poll() is not None else "no URL printed"
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert proc.returncode == 0, err
