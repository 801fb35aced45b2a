"""``kfold ui`` in a real browser (headless Chromium over the DevTools protocol): a golden journal
is served by the real command, a Session is opened from the object list, one of its effects is
followed to its outcome, the field-level diff is there, and a journal whose journaled effect was
edited shows the divergence marked. Every view is screenshotted into the test's tmp dir (checked
to be a non-empty PNG) while the DOM is checked for the expected text."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.cdp import Browser

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_session.jsonl"
SESSION = "local/golden-f728c6/demo"
PNG = b"\x89PNG\r\n\x1a\n"


def serve(journal: Path):
    proc = subprocess.Popen([sys.executable, "-m", "kfold", "ui", str(journal), "--listen", "127.0.0.1:0"],
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

    def start(journal: Path) -> str:
        proc, url = serve(journal)
        procs.append(proc)
        return url
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def shot(browser: Browser, tmp_path: Path, name: str) -> Path:
    path = browser.screenshot(tmp_path / f"{name}.png")
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000, f"{path}: not a real screenshot ({len(data)} bytes)"
    return path


def test_open_a_session_follow_an_effect_to_its_outcome_and_see_the_diff(browser, ui, tmp_path):
    url = ui(GOLDEN)
    browser.open(url)
    browser.wait("document.querySelectorAll('#objects li').length > 0", "the object list")
    assert "107 records" in browser.text("#journal")
    browser.wait("document.querySelectorAll('#timeline .rec').length > 0", "the whole journal's timeline")
    browser.wait("document.querySelectorAll('#diagram svg.kfold-diagram').length === 3", "every machine's diagram")
    assert browser.eval("[...document.querySelectorAll('#diagram svg')].map(s => s.dataset.machine).join()") == \
        "pod,repo,session"
    shot(browser, tmp_path, "1-overview")

    session = browser.eval(f"[...document.querySelectorAll('#objects li')].findIndex(li => "
                           f"li.innerText.includes('{SESSION}') && li.querySelector('.kind').innerText === 'Session')")
    assert session >= 0, "the Session is listed"
    browser.click(f"#objects li:nth-child({session + 1})")
    browser.wait(f"document.querySelector('#object-head').innerText.includes('{SESSION}')", "the Session's header")
    browser.wait("!!document.querySelector('#rec-9')", "the Session's first record")
    head = browser.text("#object")
    assert "Stopped" in head and "Pod" in head and "Service" in head and "Ingress" in head and "Secret" in head
    assert browser.text("#rec-9").startswith("#9\n2026-11-29T20:05:17.155Z") or "2026-11-29T20:05:17.155Z" in browser.text("#rec-9")
    shot(browser, tmp_path, "2-session")

    # the effect that creates the pod (emitted by #19), followed to its outcome
    effect = browser.text("#rec-19")
    assert "effect 19.1 create Pod golden-f728c6/demo-g1" in effect and "→ outcome #24 ok" in effect
    browser.click("#rec-19 a.outcome-link[data-effect='19.1']")
    browser.wait("!!document.querySelector('#rec-24.selected')", "the outcome record selected")
    outcome = browser.text("#rec-24")
    assert "answers effect 19.1 create Pod golden-f728c6/demo-g1 emitted by #19" in outcome
    assert "Creating → Provisioning" in outcome                     # the decision it changed...
    assert "pod.created\nfalse\ntrue" in outcome or "pod.created\tfalse\ttrue" in outcome   # ...field by field
    browser.wait("!!document.querySelector('#raw').innerText.includes('\"effect_id\": \"19.1\"')", "the raw record")
    browser.wait("!!document.querySelector('#diagram .state.current')", "the diagram")
    assert browser.eval("document.querySelector('#diagram .state.current').dataset.state") == "Provisioning"
    shot(browser, tmp_path, "3-outcome")


def test_a_journal_with_an_edited_effect_shows_its_first_divergence(browser, ui, tmp_path):
    lines = GOLDEN.read_text().splitlines()
    edited = []
    for line in lines:
        rec = json.loads(line)
        if rec["rec"] == "effect" and rec["effect"]["id"] == "28.0":   # create Service
            rec["effect"]["manifest"]["spec"]["ports"][0]["port"] = 9999
            line = json.dumps(rec)
        edited.append(line)
    bug = tmp_path / "bug.jsonl"
    bug.write_text("\n".join(edited) + "\n")

    browser.open(ui(bug))
    banner = browser.wait("(() => { const b = document.querySelector('#divergence'); "
                          "return b && !b.classList.contains('hidden') && b.innerText; })()", "the divergence banner")
    assert banner == "first divergence at #29: effect 28.0"
    browser.click("#divergence")
    browser.wait("!!document.querySelector('#rec-29.divergent.selected')", "the divergent record, selected")
    text = browser.text("#rec-29")
    assert "DIVERGENCE: effect 28.0 caused by #28" in text
    assert "manifest.spec.ports[0].port\n9999\n8080" in text or "manifest.spec.ports[0].port\t9999\t8080" in text
    shot(browser, tmp_path, "4-divergence")
