"""``kfold ui`` explaining a Session, in headless Chromium at 1024x768 and 1440x900: the summary
header's phase strip, "problems only", the effect -> outcome rows, "pending now" on a journal cut
while effects were in flight, natural order in the object list, and a layout that leaves the
timeline most of the width. Expectations come from the journal's records (tests/golden_facts.py
and the raw lines), not from the page's own API; every view is screenshotted and checked to be a
real PNG."""
from __future__ import annotations

import json

import pytest

from tests.browser.conftest import shot
from tests.golden_facts import GOLDEN, golden, iso_ms
from tests.unit.test_ui_explain import NAME_TAKEN, expected_answers, failed_writes, records_of, renamed, status_writes

G = golden()
SESSION = G.session
SIZES = [(1024, 768), (1440, 900)]


def reported_phases() -> list[tuple[str, int]]:
    """(status.phase, status.generation) of each status write kfold journaled for the Session."""
    return [(phase, generation) for _, phase, generation, _ in status_writes(G.records)]


def open_session(browser, url: str, width: int, height: int, extra: str = "") -> None:
    """Open the page at that size, then the Session from the object list, as a user does (at a
    narrow width the list is folded away: open it first)."""
    browser.viewport(width, height)
    browser.open(url)
    browser.wait("document.querySelectorAll('#objects li').length > 0", "the object list")
    if browser.eval("document.body.classList.contains('side-closed')"):
        browser.click("#toggle-side")
    index = browser.eval(f"[...document.querySelectorAll('#objects li')].findIndex(li => "
                         f"li.innerText.includes('{SESSION}') && li.querySelector('.kind').innerText === 'Session')")
    assert index >= 0, "the Session is listed"
    browser.click(f"#objects li:nth-child({index + 1})")
    browser.wait("!!document.querySelector('#phase-strip')", "the Session's phase strip")
    if extra:
        browser.eval(f"location.hash += {json.dumps(extra)}")


def subsequence(small: list, big: list) -> bool:
    it = iter(big)
    return all(x in it for x in small)


@pytest.mark.parametrize("width,height", SIZES)
def test_the_summary_header_shows_the_phase_strip_and_the_timeline_keeps_most_of_the_width(
        browser, ui, tmp_path, width, height):
    open_session(browser, ui(GOLDEN), width, height)
    browser.wait("document.querySelectorAll('#timeline .rec').length > 0", "the Session's timeline")
    strip = browser.eval("[...document.querySelectorAll('#phase-strip li')].map(li => li.dataset.phase)")
    reported = reported_phases()
    assert strip[0] == "Pending" and strip[-1] == reported[-1][0] == "Stopped"
    assert subsequence([p for p, _ in reported], strip), (strip, reported)
    cells = browser.eval("[...document.querySelectorAll('#phase-strip li')].map(li => li.innerText)")
    assert all(any(unit in c for unit in ("ms", " s", "min", " h")) for c in cells), cells   # each with its duration
    assert browser.text("#session-generation") == str(reported[-1][1])
    answers = [r for r in G.records if r["rec"] == "outcome" and r["result"] != "ok" and r["key"] == SESSION]
    assert answers and all(r["seq"] in expected_answers(G.records) for r in answers)   # adopted, already gone
    assert browser.text("#session-problem") == "no problem"
    assert browser.text("#session-ready").startswith(status_writes(G.records)[-1][1])   # Ready's reason: Stopped
    deltas = browser.eval("[...document.querySelectorAll('#timeline .delta')].map(d => d.innerText)")
    assert deltas and not any("+-" in d for d in deltas)
    if browser.eval("!document.body.classList.contains('side-closed')") and width < 1280:
        browser.click("#toggle-side")    # a narrow window folds the list away again once a Session is picked
    timeline = browser.eval("document.querySelector('#timeline-pane').getBoundingClientRect().width")
    viewport = browser.eval("window.innerWidth")
    assert viewport == width
    if width <= 1024:
        assert timeline >= 0.6 * width, f"the timeline gets {timeline} px of {width}"
    else:
        assert timeline >= 0.45 * width, f"the timeline gets {timeline} px of {width}"
    assert browser.eval("document.documentElement.scrollWidth") <= width, "nothing overflows sideways"
    shot(browser, tmp_path, f"session-{width}")


@pytest.mark.parametrize("width,height", SIZES)
def test_problems_only_keeps_the_failures_not_the_answers_the_machine_expected(browser, ui, tmp_path, width, height):
    records = records_of(NAME_TAKEN)
    failed = failed_writes(records)
    browser.viewport(width, height)
    browser.open(ui(NAME_TAKEN) + "#mode=timeline")
    browser.wait("document.querySelectorAll('#timeline .rec').length > 0", "the whole journal's timeline")
    expected = expected_answers(records)
    assert expected
    for seq in expected:   # AlreadyExists then adopted or refused, NotFound of a pod gone: not painted as problems
        card = f"#rec-{seq}"
        browser.wait(f"!!document.querySelector('{card}')", f"record {seq}")
        assert browser.eval(f"document.querySelector('{card}').classList.contains('problem')") is False
        assert "expected, " in browser.text(card) and "problem: " not in browser.text(card)
    browser.click("#problems")
    causes = sorted(c for c, _, _ in failed.values())
    browser.wait(f"document.querySelectorAll('#timeline .rec').length === {len(causes)} && "
                 f"!!document.querySelector('#rec-{causes[0]}')", "only the problem records")
    assert browser.eval("[...document.querySelectorAll('#timeline .rec')].map(c => Number(c.dataset.seq))") == causes
    for cause, reason, message in failed.values():
        text = browser.text(f"#rec-{cause}")
        assert f"problem: Session Failed: {reason}: {message}" in text
    assert "problems=1" in browser.eval("location.hash")
    shot(browser, tmp_path, f"problems-{width}")


def test_the_effects_view_pairs_each_effect_with_its_outcome_latency_and_retries(browser, ui, tmp_path):
    open_session(browser, ui(GOLDEN), 1024, 768)
    browser.click("#modes button[data-mode=effects]")
    pod = G.first("create", "Pod")
    browser.wait(f"!!document.querySelector('#effects tr[data-effect=\"{pod.id}\"]')", "the effect rows")
    row = browser.eval(f"[...document.querySelector('#effects tr[data-effect=\"{pod.id}\"]').cells].map(c => c.innerText)")
    latency = G.record(pod.outcome)["at"] - G.record(pod.issued)["at"]
    assert f"create Pod {pod.where}" in row[0] and row[1] == f"#{pod.cause}" and row[2] == f"#{pod.issued}"
    assert row[3].startswith(f"#{pod.outcome} ok") and row[4] == f"{latency} ms" and row[5] == "0"
    issued = [r["effect"]["id"] for r in G.records if r["rec"] == "effect"
              and r["effect"]["key"] in (SESSION,) + tuple(G.key(n) for k, n in G.created if k == "Pod")]
    shown = browser.eval("[...document.querySelectorAll('#effects tbody tr')].map(r => r.dataset.effect)")
    assert set(issued) <= set(shown)
    answered = {r["effect_id"]: r for r in G.records if r["rec"] == "outcome"}
    expected = expected_answers(G.records)
    for eid, r in answered.items():   # an expected answer is not shaded as a problem, and says why
        if r["seq"] in expected:
            row = f"#effects tr[data-effect=\"{eid}\"]"
            assert browser.eval(f"document.querySelector('{row}').classList.contains('problem')") is False
            assert "expected, " in browser.text(row)
    browser.click("#problems")
    bad = {e for e, r in answered.items() if r["result"] != "ok" and r["seq"] not in expected}
    empty = "true" if not bad else "false"   # golden_session: every non-ok answer was expected
    browser.wait(f"document.querySelectorAll('#effects tbody tr').length === {len(bad)} && "
                 f"!document.querySelector('#effects-empty').classList.contains('hidden') === {empty}",
                 "only effects not answered ok nor as expected")
    assert set(browser.eval("[...document.querySelectorAll('#effects tbody tr')].map(r => r.dataset.effect)")) == bad
    shot(browser, tmp_path, "effects-1024")


@pytest.mark.parametrize("width,height", SIZES)
def test_pending_now_lists_the_effects_in_flight_and_the_armed_deadline(browser, ui, tmp_path, width, height):
    service = G.first("create", "Service")
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(G.lines[:G.index(service.issued) + 1]) + "\n")
    kept = G.records[:G.index(service.issued) + 1]
    answered = {r["effect_id"] for r in kept if r["rec"] == "outcome"}
    issued = {r["effect"]["id"] for r in kept if r["rec"] == "effect"}
    in_flight = {r["effect"]["id"] for r in G.records if r["rec"] == "effect"
                 and int(r["effect"]["id"].split(".")[0]) <= service.issued} - answered
    open_session(browser, ui(cut), width, height)
    browser.wait("!!document.querySelector('#session-pending')", "the Session's pending count")
    assert browser.text("#session-pending") == f"pending at the end: {len(in_flight)} effects, 1 deadline"
    browser.click("#modes button[data-mode=pending]")
    browser.wait("document.querySelectorAll('#pending-effects tr.pend').length > 0", "the pending effects")
    rows = browser.eval("Object.fromEntries([...document.querySelectorAll('#pending-effects tr.pend')]"
                        ".map(r => [r.dataset.effect, r.innerText]))")
    assert set(rows) == in_flight and service.id in rows
    for eid, text in rows.items():
        assert ("issued, no outcome" if eid in issued else "emitted, never issued") in text
    _, due = G.ready_timer   # the pod is seen running when the Service's create is issued
    timers = browser.text("#pending-timers")
    assert "session ready" in timers and iso_ms(due) in timers and "due in" in timers
    shot(browser, tmp_path, f"pending-{width}")


def test_the_object_list_is_in_natural_order(browser, ui, tmp_path):
    observed = G.session_observed
    head = G.lines[:G.index(observed["seq"])]
    extra = [json.dumps(renamed(observed, len(head) + 1 + i, name)) for i, name in enumerate(["s10", "s2", "s0", "s1"])]
    journal = tmp_path / "names.jsonl"
    journal.write_text("\n".join(head + extra) + "\n")
    browser.viewport(1440, 900)
    browser.open(ui(journal))
    browser.wait("document.querySelectorAll('#objects li').length > 0", "the object list")
    names = browser.eval("[...document.querySelectorAll('#objects li')].filter(li => "
                         "li.querySelector('.kind').innerText === 'Session').map(li => "
                         "li.querySelector('.key').innerText.split('/').pop())")
    assert names == ["s0", "s1", "s2", "s10"]
    shot(browser, tmp_path, "natural-order")
