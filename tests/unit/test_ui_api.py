"""``kfold ui``'s index and JSON API on the golden journal: pages never exceed their limit and
walk a timeline without gaps or repeats, filters narrow by object, machine and record kind, an
effect is linked to the records that issued and answered it, the raw record comes back from the
journal file (SQLite or JSONL), and the HTTP server is read-only and refuses foreign Host headers."""
from __future__ import annotations

import asyncio
import http.client
import json
import re
import sqlite3
import threading

import pytest

from journal.jsonl import read_jsonl
from journal.records import Observed
from journal.sqlite import SqliteJournal
from kfold.cli import main
from kfold.offline.timeline import Change, Step
from kfold.offline.ui.index import SCHEMA, Builder, build
from kfold.offline.ui.server import MAX_PAGE, ApiError, Store, serve
from tests.golden_facts import GOLDEN, golden

G = golden()
SESSION = G.session


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    index = tmp_path_factory.mktemp("ui") / "index.sqlite"
    build(str(GOLDEN), index)
    return Store(index, str(GOLDEN))


def obj_id(store, kind, key):
    return store.db().execute("SELECT id FROM objects WHERE kind = ? AND key = ?", (kind, key)).fetchone()[0]


def walk_pages(store, **filters):
    seqs, start = [], None
    while True:
        page = store.records(start=start, limit=7, **filters)
        assert len(page["records"]) <= 7
        seqs += [r["seq"] for r in page["records"]]
        if not page["more_after"]:
            return seqs
        start = page["records"][-1]["seq"] + 1


def test_the_summary_counts_the_journal_and_names_its_kinds_and_machines(store):
    s = store.summary()
    assert s["records"] == len(G) and s["divergence"] is None
    assert s["kinds"] == G.kinds == ["command", "effect", "observed", "outcome", "relist"]
    assert s["machines"] == ["pod", "repo", "session"]


def test_a_session_is_listed_first_with_its_pods_service_ingress_and_secret(store):
    top = store.objects(top=True)["objects"]
    assert (top[0]["kind"], top[0]["key"]) == ("Session", SESSION)
    family = store.object(top[0]["id"])
    children = sorted((c["kind"], c["key"]) for c in family["children"])
    assert children == sorted((kind, G.key(name)) for kind, name in G.created)
    assert {kind for kind, _ in children} == {"Ingress", "Pod", "Secret", "Service"}
    assert family["state"] == "Stopped (removed)"
    assert not any(o["kind"] == "Pod" for o in top)


def test_pages_walk_a_timeline_in_order_without_gaps_or_repeats(store):
    everything = walk_pages(store)
    assert everything == [r["seq"] for r in G.records] == list(range(1, len(G) + 1))
    session = obj_id(store, "Session", SESSION)
    own, family = walk_pages(store, obj=session), walk_pages(store, obj=session, related=True)
    assert own == sorted(set(own)) and family == sorted(set(family))
    assert set(own) < set(family)
    back = store.records(start=50, direction="prev", limit=5)["records"]
    assert [r["seq"] for r in back] == [45, 46, 47, 48, 49]
    around = store.records(start=50, direction="around", limit=8)["records"]
    assert [r["seq"] for r in around] == list(range(48, 56))  # a quarter before, the rest after
    assert len(store.records(limit=10_000)["records"]) == min(MAX_PAGE, len(G))


def test_filters_narrow_by_record_kind_and_machine(store):
    outcomes = store.records(kinds=["outcome"], limit=100)["records"]
    assert outcomes and {r["kind"] for r in outcomes} == {"outcome"}
    repo = walk_pages(store, machine="repo")
    assert repo == G.machine_seqs("repo") and len(repo) >= 3


def test_an_effect_links_to_the_records_that_issued_and_answered_it(store):
    pod = G.first("create", "Pod")   # the pod's creation, answered by the outcome that moves the Session on
    assert G.record(pod.outcome)["result"] == "ok"
    row = store.effect(pod.id)
    assert {k: row[k] for k in ("id", "cause", "issued", "outcome", "result", "attempts", "obj", "latency_ms")} == \
        {"id": pod.id, "cause": pod.cause, "issued": pod.issued, "outcome": pod.outcome, "result": "ok", "attempts": 1,
         "obj": obj_id(store, "Pod", pod.body["key"]),
         "latency_ms": G.record(pod.outcome)["at"] - G.record(pod.issued)["at"]}
    page = store.records(start=pod.outcome, limit=1)
    rec = page["records"][0]
    assert rec["answers"] == pod.id and page["effects"][pod.id]["cause"] == pod.cause
    change = next(c for c in rec["detail"]["changes"] if c["m"] == "session")
    assert (change["from"], change["to"]) == ("Creating", "Provisioning")
    assert ["pod.created", False, True] in change["diff"]
    with pytest.raises(ApiError, match="no effect"):
        store.effect("999.9")


def test_the_raw_record_is_read_back_from_a_jsonl_export_and_from_a_sqlite_journal(store, tmp_path):
    path = tmp_path / "golden.sqlite"

    async def write():
        async with SqliteJournal(path) as j:
            await j.append(list(read_jsonl(GOLDEN)))
    asyncio.run(write())
    build(str(path), tmp_path / "index.sqlite")
    from_sqlite = Store(tmp_path / "index.sqlite", str(path))
    seq = G.first("create", "Pod").outcome
    assert from_sqlite.raw(seq) == store.raw(seq) == G.record(seq)
    assert from_sqlite.records(start=seq, limit=1)["records"][0]["detail"] == \
        store.records(start=seq, limit=1)["records"][0]["detail"]


def test_every_record_trace_prints_for_a_key_is_on_that_objects_timeline(store, capsys):
    assert main(["trace", str(GOLDEN), SESSION]) == 0
    printed = {int(m) for m in re.findall(r"^#(\d+) ", capsys.readouterr().out, re.M)}
    assert printed <= set(walk_pages(store, obj=obj_id(store, "Session", SESSION)))


@pytest.fixture(scope="module")
def http_server(store):
    server = serve(store, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def request(port, path, method="GET", host=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers={"Host": host or f"127.0.0.1:{port}"})
    resp = conn.getresponse()
    return resp.status, dict(resp.getheaders()), resp.read()


def test_the_server_serves_the_page_and_the_api(http_server):
    status, headers, body = request(http_server, "/")
    assert status == 200 and b"/static/app.js" in body and "default-src 'self'" in headers["Content-Security-Policy"]
    status, _, body = request(http_server, "/api/records?kinds=outcome&limit=2")
    assert status == 200 and len(json.loads(body)["records"]) == 2
    status, headers, body = request(http_server, "/api/diagram/session.svg?state=Ready")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    assert b'class="node state current" data-state="Ready"' in body


@pytest.mark.parametrize("method,path,host,status", [
    ("POST", "/api/summary", None, 405),
    ("DELETE", "/api/records", None, 405),
    ("GET", "/api/summary", "evil.example:80", 403),
    ("GET", "/api/nothing", None, 404),
    ("GET", "/static/../index.py", None, 404),
    ("GET", "/api/records?limit=many", None, 400),
    ("GET", "/api/object/9999", None, 404),
], ids=["post", "delete", "foreign-host", "unknown-route", "path-escape", "bad-number", "no-object"])
def test_the_server_is_read_only_and_refuses_what_it_does_not_serve(http_server, method, path, host, status):
    got, _, body = request(http_server, path, method, host)
    assert got == status and json.loads(body)["error"]


def test_kfold_ui_names_a_bad_listen_address_and_an_unreadable_journal(tmp_path, capsys):
    assert main(["ui", str(GOLDEN), "--listen", "nowhere"]) == 2
    assert "expected HOST:PORT" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rec":"gossip","seq":1}\n')
    assert main(["ui", str(bad), "--listen", "127.0.0.1:0"]) == 2
    assert "unknown record kind 'gossip'" in capsys.readouterr().err


def test_the_index_marks_the_divergence_replay_check_reports(tmp_path, capsys):
    service = G.first("create", "Service")
    rec = G.record(service.issued)
    port = rec["effect"]["manifest"]["spec"]["ports"][0]["port"]
    rec = json.loads(json.dumps(rec))
    rec["effect"]["manifest"]["spec"]["ports"][0]["port"] = 9999
    bug = tmp_path / "bug.jsonl"
    bug.write_text(G.with_record(service.issued, rec))
    assert main(["replay", str(bug), "--check"]) == 1
    assert f"divergence at record {service.issued}: effect {service.id}" in capsys.readouterr().err
    meta = build(str(bug), tmp_path / "index.sqlite")
    div = meta["divergence"]
    assert (div["seq"], div["effect_id"], div["cause"]) == (service.issued, service.id, service.cause)
    assert div["diff"] == [["manifest.spec.ports[0].port", 9999, port]]
    marked = Store(tmp_path / "index.sqlite", str(bug)).records(start=service.issued, limit=1)["records"][0]
    assert marked["detail"]["divergence"]["effect_id"] == service.id


def test_deadlines_show_when_they_fired_and_timers_when_they_were_due(tmp_path):
    from tests.unit.test_trace_cli import deadline_journal
    path = deadline_journal(tmp_path)
    build(str(path), tmp_path / "index.sqlite")
    s = Store(tmp_path / "index.sqlite", str(path))
    arms, due = G.start_timer
    armed, fired, stale = s.records(start=arms, limit=3)["records"]
    assert armed["seq"] == arms
    assert {"m": "session", "key": SESSION, "name": "start", "due": due} in armed["detail"]["timers"]
    assert (fired["kind"], fired["fired"], stale["fired"]) == ("deadline", 1, 0)
    assert any(c["to"] == "Provisioning" for c in fired["detail"]["changes"])   # it reads the pod first
    assert [r["seq"] for r in s.records(obj=obj_id(s, "Session", SESSION), kinds=["deadline"])["records"]] == \
        [arms + 1, arms + 2]


def test_an_object_observed_before_its_machine_decides_still_gets_its_machine(tmp_path):
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    b = Builder(db)
    seen = Observed(seq=1, cluster="local", api_version="v1", kind="Pod", namespace="ns", name="p", event="ADDED")
    b.add(Step(seen), None)
    b.add(Step(seen.model_copy(update={"seq": 2}), changes=[Change("pod", "local/ns/p", None, None)]), None)
    assert [(o.kind, o.machine, o.n) for o in b.objects.values()] == [("Pod", "pod", 2)]


def test_while_the_index_is_built_the_page_is_served_and_the_api_says_how_far_it_got(store):
    from kfold.offline.ui.server import Indexing
    serving = Indexing(str(GOLDEN), total=len(G))
    server = serve(serving, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        assert request(port, "/")[0] == 200
        serving.builder = type("Partial", (), {"count": 40})()
        status, _, body = request(port, "/api/summary")
        assert status == 503 and json.loads(body) | {"source": None} == {
            "error": "the journal is still being indexed", "indexing": True, "source": None, "done": 40,
            "total": len(G)}
        serving.store = store
        status, _, body = request(port, "/api/summary")
        assert status == 200 and json.loads(body)["records"] == len(G)
    finally:
        server.shutdown()
        server.server_close()
