"""What ``kfold ui`` explains about a Session (``kfold.offline.explain``, through the index and its API), on
the golden journal and on journals cut or made from it. Every expectation is worked out from the
journal's own records (the status phases kfold wrote, the outcomes' results and times, which
effect ids have an outcome), not from the code under test."""
from __future__ import annotations

import json

import pytest

from kfold.offline.explain import delta_text, duration_text, natural_key
from kfold.offline.ui.index import build
from kfold.offline.ui.server import Store
from tests.golden_facts import GOLDEN, golden

G = golden()
SESSION = G.session


def open_store(tmp_path, lines: list[str], name: str = "j") -> Store:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    build(str(path), tmp_path / f"{name}.index")
    return Store(tmp_path / f"{name}.index", str(path))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    index = tmp_path_factory.mktemp("explain") / "index.sqlite"
    build(str(GOLDEN), index)
    return Store(index, str(GOLDEN))


def session_id(store: Store, key: str = SESSION) -> int:
    return store.db().execute("SELECT id FROM objects WHERE kind = 'Session' AND key = ?", (key,)).fetchone()[0]


def status_writes(records) -> list[tuple[int, str, int, str | None]]:
    """(cause seq, status.phase, status.generation, status.podName) of every status write kfold
    journaled for the Session, in order: what it told the cluster the Session was."""
    out = []
    for r in records:
        e = r.get("effect") if r["rec"] == "effect" else None
        if e and e.get("kind") == "Session" and e.get("subresource") == "status":
            status = e["patch"]["status"]
            out.append((int(e["id"].split(".")[0]), status["phase"], status["generation"], status["podName"]))
    return out


def phase_at(phases: list[dict], seq: int) -> str:
    return [p for p in phases if p["seq"] <= seq][-1]["phase"]


def test_the_phase_strip_holds_every_phase_kfold_reported_with_durations_from_record_times(store):
    s = store.session(session_id(store))
    writes = status_writes(G.records)
    assert [w[1] for w in writes] == ["Ready", "Suspended", "Pending", "Ready", "Stopping", "Stopped"]
    for cause, phase, _, _ in writes:            # the phase in force when each status write was decided
        assert phase_at(s["phases"], cause) == phase, (cause, phase)
    phases = s["phases"]
    assert [p["phase"] for p in phases][0] == "Pending" and phases[-1]["phase"] == "Stopped"
    for here, after in zip(phases, phases[1:]):  # each lasts until the record that entered the next
        assert here["ms"] == G.record(after["seq"])["at"] - G.record(here["seq"])["at"] and not here["open"]
        assert here["took"] == duration_text(here["ms"])
    last = max(r["at"] for r in G.records if r["at"] is not None)
    assert phases[-1]["ms"] == last - G.record(phases[-1]["seq"])["at"]
    deleted = next(r["seq"] for r in G.records if r["rec"] == "observed" and r["kind"] == "Session"
                   and r["event"] == "DELETED")
    assert s["gone"] and not phases[-1]["open"] and deleted
    assert s["generation"] == writes[-1][2] == 2


EXPECTED_ANSWERS = {("create", "already_exists"), ("delete", "not_found"), ("get", "not_found")}
NAME_TAKEN = GOLDEN.with_name("golden_name_taken.jsonl")   # a Session whose Service name is taken, one InvalidSpec


def lines_of(path) -> list[str]:
    return path.read_text().splitlines()


def records_of(path) -> list[dict]:
    return [json.loads(line) for line in lines_of(path) if '"rec"' in line]


def expected_answers(records) -> dict[int, dict]:
    """Outcome seq -> outcome, for the non-ok answers a machine asks for and moves on from: an
    AlreadyExists to a create, a NotFound to a delete or a read."""
    types = {r["effect"]["id"]: r["effect"]["type"] for r in records if r["rec"] == "effect"}
    return {r["seq"]: r for r in records if r["rec"] == "outcome" and (types.get(r["effect_id"]), r["result"])
            in EXPECTED_ANSWERS}


def failed_writes(records) -> dict[str, tuple[int, str, str]]:
    """Session name -> (cause seq, Ready reason, Ready message) of its first Failed status write."""
    out = {}
    for r in records:
        e = r.get("effect") if r["rec"] == "effect" else None
        if e and e.get("kind") == "Session" and e.get("subresource") == "status" and e["patch"]["status"]["phase"] == "Failed":
            ready = next(c for c in e["patch"]["status"]["conditions"] if c["type"] == "Ready")
            out.setdefault(e["name"], (int(e["id"].split(".")[0]), ready["reason"], ready["message"]))
    return out


@pytest.fixture(scope="module")
def taken(tmp_path_factory):
    index = tmp_path_factory.mktemp("taken") / "index.sqlite"
    build(str(NAME_TAKEN), index)
    return Store(index, str(NAME_TAKEN))


def test_a_session_whose_only_non_ok_answers_were_expected_has_no_problem(store):
    bad = [r for r in G.records if r["rec"] == "outcome" and r["result"] != "ok"]
    assert bad and all(r["seq"] in expected_answers(G.records) for r in bad)   # AlreadyExists adopted, NotFound gone
    s = store.session(session_id(store))
    assert s["problem"] is None and s["failure"] is None


@pytest.mark.parametrize("name, reason", [("demo", "NameTaken"), ("bad", "InvalidSpec")])
def test_the_last_problem_of_a_failed_session_is_its_failure_reason(taken, name, reason):
    records = records_of(NAME_TAKEN)
    cause, written, message = failed_writes(records)[name]
    assert written == reason
    seen = next(r for r in records if r["rec"] == "observed" and r["kind"] == "Session" and r["name"] == name)
    key = f"{seen['cluster']}/{seen['namespace']}/{name}"
    s = taken.session(session_id(taken, key))
    assert s["failure"] == {"seq": cause, "reason": reason, "message": message}
    assert s["problem"] == {"seq": cause, "text": f"{reason}: {message}"}
    assert (s["reason"], s["message"]) == (reason, message)     # what kubectl shows: the Ready condition written
    later = [r["seq"] for r in records if r["rec"] == "outcome" and r["result"] != "ok" and r["seq"] > cause]
    assert name != "demo" or later, "an ordinary teardown answer comes after the failure: it must not hide it"


def test_the_landing_list_has_each_session_with_its_phase_reason_and_message(taken):
    records = records_of(NAME_TAKEN)
    failed = failed_writes(records)
    listed = taken.sessions()
    assert [s["key"].rsplit("/", 1)[1] for s in listed["sessions"]] == sorted(failed)   # natural order: bad, demo
    for s in listed["sessions"]:
        _, reason, message = failed[s["key"].rsplit("/", 1)[1]]
        assert (s["reason"], s["message"], s["problem"]["text"]) == (reason, message, f"{reason}: {message}")
        assert "phases" not in s and s["gone"]
    assert listed["total"] == listed["with_problem"] == 2 and sum(listed["phases"].values()) == 2
    assert [s["key"] for s in taken.sessions(problems=True)["sessions"]] == [s["key"] for s in listed["sessions"]]


def test_bookkeeping_rows_are_left_out_on_request_and_counted(taken):
    every = taken.objects(limit=200)
    plain = taken.objects(limit=200, bookkeeping=False)
    kept = [o for o in every["objects"] if not o["kind"].endswith(" bookkeeping")]
    assert plain["objects"] == kept and plain["bookkeeping_hidden"] == every["total"] - len(kept) > 0


def test_a_session_cut_while_ready_shows_its_generation_pod_and_open_phase(tmp_path):
    cause, phase, generation, pod = [w for w in status_writes(G.records) if w[1] == "Ready"][-1]
    cut = open_store(tmp_path, G.lines[:G.index(cause) + 3])
    s = cut.session(session_id(cut))
    assert (s["phase"], s["generation"], s["pod"]) == (phase, generation, pod) == ("Ready", 2, pod)
    assert s["phases"][-1]["open"] and not s["gone"]


def test_problems_only_leaves_out_the_answers_the_machine_expected(store):
    expected = expected_answers(G.records)
    assert store.records(problems=True, limit=200)["records"] == []
    marked = {r["seq"]: r["expected"] for r in store.records(limit=200)["records"] if r["expected"]}
    assert set(marked) == set(expected)
    for seq, text in marked.items():
        assert text.startswith(expected[seq]["status_reason"] + ": ")


def test_problems_only_keeps_the_failures_and_the_outcomes_not_expected(taken, tmp_path):
    records = records_of(NAME_TAKEN)
    causes = sorted(c for c, _, _ in failed_writes(records).values())
    got = taken.records(problems=True, limit=200)["records"]
    assert [r["seq"] for r in got] == causes
    assert all(r["problem"].startswith("Session Failed: ") for r in got)
    # a Conflict answering a delete is no expected answer: it stays a problem
    fenced = GOLDEN.with_name("golden_fenced_409.jsonl")
    conflicts = [r["seq"] for r in records_of(fenced) if r["rec"] == "outcome" and r["result"] == "conflict"]
    build(str(fenced), tmp_path / "fenced.index")
    problems = Store(tmp_path / "fenced.index", str(fenced)).records(problems=True, limit=200)["records"]
    assert conflicts and set(conflicts) <= {r["seq"] for r in problems}


def test_effect_rows_pair_each_effect_with_its_outcome_latency_and_retries(store):
    issued = {r["effect"]["id"]: r for r in G.records if r["rec"] == "effect"}
    outcomes: dict[str, list] = {}
    for r in G.records:
        if r["rec"] == "outcome":
            outcomes.setdefault(r["effect_id"], []).append(r)
    rows = store.effect_rows(limit=200)["effects"]
    assert {e["id"] for e in rows} == set(issued)
    assert [e["cause"] for e in rows] == sorted(e["cause"] for e in rows)  # in the order they were emitted
    for e in rows:
        last = outcomes[e["id"]][-1]
        assert (e["issued"], e["outcome"], e["result"]) == (issued[e["id"]]["seq"], last["seq"], last["result"])
        if issued[e["id"]]["at"] is not None:
            assert e["latency_ms"] == last["at"] - issued[e["id"]]["at"]
        assert e["retries"] == sum(1 for o in outcomes[e["id"]] if o["result"] == "transient")
    bad = store.effect_rows(problems=True, limit=200)["effects"]
    expected = expected_answers(G.records)
    assert {e["id"] for e in bad} == {i for i, outs in outcomes.items()
                                      if outs[-1]["result"] != "ok" and outs[-1]["seq"] not in expected}
    own = store.effect_rows(obj=session_id(store), related=True, limit=200)["effects"]
    pod = G.first("create", "Pod")
    assert pod.id in {e["id"] for e in own}   # the pod machine's effects belong to the Session's family


def test_pending_now_lists_the_effects_without_an_outcome_and_the_armed_ready_deadline(tmp_path):
    arms, due = G.ready_timer
    service = G.first("create", "Service")
    cut_at = service.issued                 # the Service's create is issued, its answer not yet journaled,
    assert arms < cut_at < service.outcome  # the pod seen running (the ready deadline armed), not yet Ready
    cut = open_store(tmp_path, G.lines[:G.index(cut_at) + 1])
    answered = {r["effect_id"] for r in G.records[:G.index(cut_at) + 1] if r["rec"] == "outcome"}
    issued_by_cut = {r["effect"]["id"] for r in G.records[:G.index(cut_at) + 1] if r["rec"] == "effect"}
    emitted = {r["effect"]["id"] for r in G.records if r["rec"] == "effect"
               and int(r["effect"]["id"].split(".")[0]) <= cut_at}
    p = cut.pending()
    got = {e["id"]: e for e in p["effects"]}
    assert set(got) == emitted - answered and service.id in got
    assert all(got[i]["issued"] == (i in issued_by_cut) for i in got)
    session = session_id(cut)
    assert all(e["session"] == session for e in p["effects"])   # every effect in flight is the Session's
    ready = [t for t in p["timers"] if t["due"] == due]
    assert ready and ready[0]["key"] == SESSION and ready[0]["in_text"].startswith("due in ")
    assert open_store(tmp_path, G.lines, "whole").pending()["effects"] == []


def test_a_second_clusters_clock_is_never_subtracted_from_the_home_clock(tmp_path):
    """Records stamped on another cluster's clock (an hour behind) get a delta on that clock,
    signed and tagged with the cluster; the home clock's deltas skip over them."""
    pod = next(r for r in G.records if r["rec"] == "observed" and r["kind"] == "Pod")
    assert pod["cluster"] == "local"
    head = G.lines[:G.index(pod["seq"])]
    seq, at = len(head), G.record(len(head))["at"]
    extra = []
    for n, (cluster, when) in enumerate([("edge", at - 3_600_000), ("edge", at - 3_600_000 + 250),
                                         ("local", at + 10), ("edge", at - 3_600_000 + 240)]):
        extra.append(json.dumps({**renamed(pod, seq + 1 + n, f"other-{n}"), "at": when, "cluster": cluster}))
    s = open_store(tmp_path, head + extra)
    got = [(r["clock"], r["delta"]) for r in s.records(start=seq + 1, limit=4)["records"]]
    assert got == [("edge", ""), ("edge", "+0.250s on edge"), ("local", "+0.010s"), ("edge", "-0.010s on edge")]


def renamed(observed: dict, seq: int, name: str) -> dict:
    """An observation of the same object under another name and uid."""
    meta = {**observed["obj"]["metadata"], "name": name, "uid": f"uid-{name}"}
    return {**observed, "seq": seq, "name": name, "uid": f"uid-{name}", "obj": {**observed["obj"], "metadata": meta}}


def test_natural_order_counts_digits_by_value(tmp_path):
    names = ["s10", "s2", "s0", "s1", "s1a", "s01b"]
    assert sorted(names, key=natural_key) == ["s0", "s1", "s1a", "s01b", "s2", "s10"]
    observed = json.loads(G.lines[G.index(G.session_observed["seq"])])
    head = G.lines[:G.index(observed["seq"])]
    extra = [json.dumps(renamed(observed, len(head) + 1 + i, name)) for i, name in enumerate(["s10", "s2", "s0", "s1"])]
    s = open_store(tmp_path, head + extra)
    listed = [o["key"].rsplit("/", 1)[1] for o in s.objects(kind="Session")["objects"]]
    assert listed == ["s0", "s1", "s2", "s10"]


def test_words_for_times():
    assert [delta_text(x, "local", "local") for x in (12, -1, 3000, None)] == ["+0.012s", "-0.001s", "+3.000s", ""]
    assert delta_text(-5, "edge", "local") == "-0.005s on edge"
    assert [duration_text(x) for x in (12, 3400, 125_000, 3 * 3600_000 + 120_000)] == \
        ["12 ms", "3.4 s", "2 min 05 s", "3 h 02 min"]
