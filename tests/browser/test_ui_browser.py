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

from tests.browser.conftest import shot
from tests.golden_facts import GOLDEN, golden, iso_ms

G = golden()
SESSION = G.session


def test_open_a_session_follow_an_effect_to_its_outcome_and_see_the_diff(browser, ui, tmp_path):
    url = ui(GOLDEN)
    browser.open(url)
    browser.wait("document.querySelectorAll('#objects li').length > 0", "the object list")
    assert f"{len(G)} records" in browser.text("#journal")
    browser.wait("document.querySelectorAll('#sessions tr.session').length === 1", "the landing list of Sessions")
    browser.click("#modes button[data-mode=timeline]")
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
    first = G.session_observed
    browser.wait(f"!!document.querySelector('#rec-{first['seq']}')", "the Session's first record")
    head = browser.text("#object")
    assert "Stopped" in head and "Pod" in head and "Service" in head and "Ingress" in head and "Secret" in head
    assert iso_ms(first["at"]) in browser.text(f"#rec-{first['seq']}")
    shot(browser, tmp_path, "2-session")

    # the effect that creates the pod, from the record that emitted it to the outcome that answers it
    pod = G.first("create", "Pod")
    effect = browser.text(f"#rec-{pod.cause}")
    assert f"effect {pod.id} create Pod {pod.where}" in effect and f"→ outcome #{pod.outcome} ok" in effect
    browser.click(f"#rec-{pod.cause} a.outcome-link[data-effect='{pod.id}']")
    browser.wait(f"!!document.querySelector('#rec-{pod.outcome}.selected')", "the outcome record selected")
    outcome = browser.text(f"#rec-{pod.outcome}")
    assert f"answers effect {pod.id} create Pod {pod.where} emitted by #{pod.cause}" in outcome
    assert "Creating → Provisioning" in outcome                     # the decision it changed...
    assert "pod.created\nfalse\ntrue" in outcome or "pod.created\tfalse\ttrue" in outcome   # ...field by field
    browser.wait(f"!!document.querySelector('#raw').innerText.includes('\"effect_id\": \"{pod.id}\"')", "the raw record")
    browser.wait("!!document.querySelector('#diagram .state.current')", "the diagram")
    assert browser.eval("document.querySelector('#diagram .state.current').dataset.state") == "Provisioning"
    shot(browser, tmp_path, "3-outcome")


def test_a_journal_with_an_edited_effect_shows_its_first_divergence(browser, ui, tmp_path):
    service = G.first("create", "Service")
    rec = json.loads(G.lines[G.index(service.issued)])
    port = rec["effect"]["manifest"]["spec"]["ports"][0]["port"]
    rec["effect"]["manifest"]["spec"]["ports"][0]["port"] = 9999
    bug = tmp_path / "bug.jsonl"
    bug.write_text(G.with_record(service.issued, rec))

    browser.open(ui(bug))
    banner = browser.wait("(() => { const b = document.querySelector('#divergence'); "
                          "return b && !b.classList.contains('hidden') && b.innerText; })()", "the divergence banner")
    assert banner == f"first divergence at #{service.issued}: effect {service.id}"
    browser.click("#divergence")
    browser.wait(f"!!document.querySelector('#rec-{service.issued}.divergent.selected')", "the divergent record, selected")
    text = browser.text(f"#rec-{service.issued}")
    assert f"DIVERGENCE: effect {service.id} caused by #{service.cause}" in text
    assert f"manifest.spec.ports[0].port\n9999\n{port}" in text or f"manifest.spec.ports[0].port\t9999\t{port}" in text
    shot(browser, tmp_path, "4-divergence")


def test_the_export_of_a_journal_retention_cut_opens_from_the_snapshot_it_carries(browser, ui, tmp_path):
    from tests.unit.test_export_cut import cut_journal, scenario
    journal, export = tmp_path / "j.sqlite", tmp_path / "cut.jsonl"
    first = cut_journal(journal)
    assert first > 1
    subprocess.run([sys.executable, "-m", "kfold", "export", str(journal), "-o", str(export)], check=True,
                   capture_output=True)
    browser.open(ui(export))
    browser.wait("document.querySelectorAll('#objects li').length > 0", "the object list")
    kept = len(scenario().records) - first + 1
    assert f"{kept} records from #{first} (the snapshot at #{first - 1} before it)" in browser.text("#journal")
    assert browser.eval("[...document.querySelectorAll('#objects li')].some(li => li.innerText.includes('local/ns/demo') "
                        "&& li.querySelector('.kind').innerText === 'Session')")
