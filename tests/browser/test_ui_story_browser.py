"""``kfold ui`` opens on the journal's story, in headless Chromium: the landing page lists each
Session with its phase, the reason and message kfold wrote to its Ready condition and its last
problem (here a Session whose Service name is taken, NameTaken, and one with an invalid spec,
InvalidSpec: tests/data/golden_name_taken.jsonl, recorded on the real control plane); the
machines' bookkeeping rows wait behind a toggle; a failed Session's last problem is its failure,
not the ordinary teardown answer after it; and ``--follow`` shows what a live journal appends
without a restart. Expectations come from the journal's raw records (its status writes)."""
from __future__ import annotations

import asyncio

import pytest

from tests.browser.conftest import shot
from tests.unit.test_ui_explain import NAME_TAKEN, failed_writes, records_of

RECORDS = records_of(NAME_TAKEN)
FAILED = failed_writes(RECORDS)        # name -> (seq of the record that failed it, reason, message)
SIZES = [(1024, 768), (1440, 900)]


def rows(browser) -> dict[str, list[str]]:
    return browser.eval("Object.fromEntries([...document.querySelectorAll('#sessions tr.session')].map(r => "
                        "[r.querySelector('td.key b').innerText, [...r.cells].map(c => c.innerText)]))")


@pytest.mark.parametrize("width,height", SIZES)
def test_the_landing_page_lists_each_session_with_its_phase_reason_and_message(browser, ui, tmp_path, width, height):
    browser.viewport(width, height)
    browser.open(ui(NAME_TAKEN))
    browser.wait(f"document.querySelectorAll('#sessions tr.session').length === {len(FAILED)}", "the Sessions")
    assert browser.eval("document.querySelector('#timeline-pane').classList.contains('hidden')"), "not record #1"
    listed = rows(browser)
    assert list(listed) == sorted(FAILED)   # natural order
    for name, (cause, reason, message) in FAILED.items():
        _, phase, got_reason, got_message, problem, _ = listed[name]
        assert got_reason == reason and got_message == message
        assert problem.startswith(f"#{cause}") and reason in problem and "NotFound" not in problem
        assert "deleted" in phase     # both Sessions were deleted at the end of the recording
    assert f"{len(FAILED)} Sessions" in browser.text("#sessions-counts") and "2 with a problem" in browser.text("#sessions-counts")
    assert browser.eval("document.documentElement.scrollWidth") <= width, "nothing overflows sideways"
    shot(browser, tmp_path, f"landing-{width}")

    cause, reason, message = FAILED["demo"]   # the problem link opens the Session at the record that failed it
    browser.click("#sessions tr.session:nth-child(2) td.problem-cell a")
    browser.wait(f"!!document.querySelector('#rec-{cause}.selected')", "the failing record, selected")
    assert browser.eval("new URLSearchParams(location.hash.slice(1)).get('obj')") is not None
    problem = browser.wait("(() => { const p = document.querySelector('#session-problem'); return p && p.innerText; })()",
                           "the Session's last problem")
    assert problem == f"last problem #{cause}: {reason}: {message}"
    assert browser.text("#session-ready").startswith(f"{reason}: {message}")


def test_bookkeeping_rows_are_behind_a_toggle(browser, ui, tmp_path):
    browser.viewport(1440, 900)
    browser.open(ui(NAME_TAKEN))
    browser.wait("document.querySelectorAll('#objects li').length > 0", "the object list")
    kinds = lambda: browser.eval("[...document.querySelectorAll('#objects li .kind')].map(k => k.innerText)")  # noqa: E731
    assert kinds() and not [k for k in kinds() if k.endswith("bookkeeping")]
    assert "bookkeeping rows of the machines hidden" in browser.text("#bookkeeping-note")
    hidden = int(browser.text("#bookkeeping-note").split()[0])
    before = len(kinds())
    browser.click("#bookkeeping")
    browser.wait(f"document.querySelectorAll('#objects li').length === {before + hidden}", "the bookkeeping rows too")
    assert len([k for k in kinds() if k.endswith("bookkeeping")]) == hidden > 0
    assert browser.eval("document.querySelector('#bookkeeping-note').classList.contains('hidden')")


def _append(path, lines_from: int, lines_to: int) -> None:
    from journal.jsonl import read_jsonl
    from journal.sqlite import SqliteJournal
    records = list(read_jsonl(NAME_TAKEN))[lines_from:lines_to]

    async def go() -> None:
        j = SqliteJournal(str(path))
        await j.open()
        await j.append(records)
        await j.close()
    asyncio.run(go())


def test_follow_shows_what_a_live_journal_appends_without_a_restart(browser, ui, tmp_path):
    journal = tmp_path / "live.db"
    first_bad = next(r["seq"] for r in RECORDS if r["rec"] == "observed" and r.get("name") == "bad")
    _append(journal, 0, first_bad - 1)   # the demo Session seen; the bad one not yet
    browser.viewport(1440, 900)
    browser.open(ui(journal, "--follow"))
    browser.wait("document.querySelectorAll('#sessions tr.session').length === 1", "the one Session so far")
    assert "following" in browser.text("#journal") and f"{first_bad - 1} records" in browser.text("#journal")
    assert list(rows(browser)) == ["demo"]
    browser.click("#modes button[data-mode=timeline]")   # the whole journal's timeline, its end shown
    browser.wait(f"!!document.querySelector('#rec-{first_bad - 1}')", "the last record so far")
    browser.eval("window.sameDocument = true")
    _append(journal, first_bad - 1, len(RECORDS))
    browser.wait(f"!!document.querySelector('#rec-{len(RECORDS)}')", "the records appended, at the end", 20)
    assert browser.eval("[...document.querySelectorAll('#timeline .rec')].map(c => Number(c.dataset.seq))") == \
        list(range(1, len(RECORDS) + 1))
    assert f"{len(RECORDS)} records" in browser.text("#journal")
    browser.click("#modes button[data-mode=sessions]")
    browser.wait(f"document.querySelectorAll('#sessions tr.session').length === {len(FAILED)}", "the new Session")
    listed = rows(browser)
    for name, (_, reason, message) in FAILED.items():
        assert listed[name][2:4] == [reason, message]
    assert browser.eval("window.sameDocument") is True, "no reload"
    shot(browser, tmp_path, "follow")
