"""What the browser tests share: ``kfold ui`` served by the real command on a journal, a headless
Chromium that fails the test if the page threw, and screenshots checked to be real PNGs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.cdp import Browser

PNG = b"\x89PNG\r\n\x1a\n"


def serve(journal: Path, *flags: str):
    proc = subprocess.Popen([sys.executable, "-m", "kfold", "ui", str(journal), "--listen", "127.0.0.1:0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if " at http://" not in line:
        proc.kill()
        raise AssertionError(f"kfold ui did not start: {line}{proc.stderr.read()}")
    return proc, line.split(" at ", 1)[1].split()[0]


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path / "profile")
    yield b
    errors = b.errors
    b.close()
    assert not errors, f"the page threw: {errors}"


@pytest.fixture
def ui(request):
    procs = []

    def start(journal: Path, *flags: str) -> str:
        proc, url = serve(journal, *flags)
        procs.append(proc)
        return url
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def shot(browser: Browser, tmp_path: Path, name: str) -> Path:
    browser.wait("!!document.querySelector('#diagram svg, #diagram .error')", "the diagram drawn")
    path = browser.screenshot(tmp_path / f"{name}.png")
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000, f"{path}: not a real screenshot ({len(data)} bytes)"
    return path
