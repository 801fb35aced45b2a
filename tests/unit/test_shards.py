"""Scale-out (kfold.daemon.shards): which shard an effect belongs to, shards spread over the live replicas
and moved when one dies or joins, the daemon issuing each effect only under its shard's term.

An in-memory Lease endpoint (many Leases, list by label, delete with a resourceVersion
precondition) stands in for the apiserver; its ``Date`` runs on the same fake monotonic clock as
the replicas, like tests/unit/test_leader.py's.
"""
from __future__ import annotations

import asyncio
import copy
import logging
from collections import Counter
from email.utils import formatdate
from typing import Any

import pytest

from engine.core import Machines
from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.transport import Request, Response, TransportError
from engine.effects.io.fake import T2030, FakeTransport
from engine.effects.models import CreateObject, EnsureNamespace, GetObject, ListObjects, PatchObject
from engine.machines.base import Decision, Machine
from journal.records import Command, EffectIssued, Outcome
from kfold.daemon.http import leader_text
from kfold.daemon.loop import Daemon
from kfold.daemon.shards import ShardedTransport, ShardFence, ShardSet, count_gate, effect_shard, session_of_pod, shard_of
from tests.journals import TestJournal as MemoryJournal
from tests.unit.test_daemon_recovery import fresh_server, settle
from tests.unit.test_leader import Mono

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kfold/leases"


class Leases:
    """Leases by name; the server's clock is ``T2030 + (mono - start)``."""

    def __init__(self, mono: Mono) -> None:
        self.mono, self.start = mono, mono.t
        self.items: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.down: set[str] = set()    # holders whose requests fail (a partition)

    def transport(self, holder: str = "") -> Any:
        server = self

        class T:
            async def call(self, req: Request) -> Response:
                await asyncio.sleep(0)
                if holder in server.down:
                    raise TransportError("connection refused")
                return server.handle(req)

            async def close(self) -> None:
                pass
        return T()

    def handle(self, req: Request) -> Response:
        headers = {"Date": formatdate((T2030 + int((self.mono.t - self.start) * 1000)) / 1000, usegmt=True)}
        status = lambda code, reason: Response(code, headers, {"kind": "Status", "reason": reason, "code": code})  # noqa: E731
        name = req.path[len(LEASES) + 1:] if req.path.startswith(LEASES + "/") else ""
        if req.method == "GET" and not name:
            sel = dict(req.query).get("labelSelector", "")
            k, _, v = sel.partition("=")
            items = [copy.deepcopy(x) for x in self.items.values() if not sel or (x["metadata"].get("labels") or {}).get(k) == v]
            return Response(200, headers, {"items": items})
        if req.method == "GET":
            return Response(200, headers, copy.deepcopy(self.items[name])) if name in self.items else status(404, "NotFound")
        if req.method == "POST":
            name = req.body["metadata"]["name"]
            if name in self.items:
                return status(409, "AlreadyExists")
            return Response(201, headers, self._store(name, req.body))
        if name not in self.items:
            return status(404, "NotFound")
        if req.method == "PUT":
            if (req.body.get("metadata") or {}).get("resourceVersion") != self.items[name]["metadata"]["resourceVersion"]:
                return status(409, "Conflict")
            return Response(200, headers, self._store(name, req.body))
        if req.method == "DELETE":
            want = ((req.body or {}).get("preconditions") or {}).get("resourceVersion")
            if want and want != self.items[name]["metadata"]["resourceVersion"]:
                return status(409, "Conflict")
            del self.items[name]
            return Response(200, headers, {"kind": "Status", "status": "Success"})
        return status(405, "MethodNotAllowed")

    def _store(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        item = copy.deepcopy(body)
        item["metadata"] = {**body.get("metadata", {}), "resourceVersion": str(self.rv)}
        self.items[name] = item
        return copy.deepcopy(item)


SHARDS = 6


def replica(server: Leases, mono: Mono, holder: str, shards: int = SHARDS) -> ShardSet:
    return ShardSet(server.transport(holder), ServerClock(monotonic=mono), namespace="kfold", lease_name="kfold",
                    shards=shards, holder=holder, lease_seconds=8, renew_seconds=5, retry_seconds=1,
                    margin_seconds=2, monotonic=mono)


def holders(sets: list[ShardSet]) -> dict[int, list[str]]:
    """Shard -> the replicas whose term of it is valid now (never more than one)."""
    return {i: [s.holder for s in sets if s.electors[i].term() is not None] for i in range(sets[0].shards)}


async def rounds(mono: Mono, n: int, *sets: ShardSet, every: float = 1.0) -> None:
    """``n`` rounds of every replica, checking at each that no shard has two valid terms."""
    for _ in range(n):
        for s in sets:
            await s.step()
        assert all(len(h) <= 1 for h in holders(list(sets)).values()), holders(list(sets))
        mono.t += every


@pytest.fixture
def mono():
    return Mono()


@pytest.fixture
def server(mono):
    return Leases(mono)


def test_a_sessions_shard_is_a_stable_hash_of_namespace_and_name_spread_over_the_shards():
    assert shard_of("team-a", "s1", 12) == shard_of("team-a", "s1", 12)   # not Python's salted hash
    assert shard_of("team-a", "s1", 12) == int.from_bytes(
        __import__("hashlib").sha256(b"team-a/s1").digest()[:8], "big") % 12
    spread = Counter(shard_of("ns", f"s{i}", 6) for i in range(600))
    assert set(spread) == set(range(6)) and min(spread.values()) > 60


def test_a_sessions_pod_service_and_status_follow_the_sessions_shard():
    s = shard_of("ns", "demo-g2", 8)   # a Session whose name itself ends like a generation
    ref = dict(cluster="local", namespace="ns")
    status = PatchObject(id="1.0", machine="session", key="local/ns/demo-g2", api_version="kfold.dev/v1alpha1",
                         kind="Session", name="demo-g2", patch={}, subresource="status", **ref)
    service = CreateObject(id="1.1", machine="session", key="local/ns/demo-g2", api_version="v1", kind="Service",
                           name="demo-g2", manifest={}, **ref)
    pod = GetObject(id="1.2", machine="pod", key="local/ns/demo-g2-g3", api_version="v1", kind="Pod", name="demo-g2-g3", **ref)
    assert session_of_pod("demo-g2-g3") == "demo-g2" and session_of_pod("plain") == "plain"
    assert {effect_shard(e, None, 8) for e in (status, service, pod)} == {s}
    ensure = EnsureNamespace(id="1.3", machine="pod", key="local/ns/", cluster="local", namespace="ns")
    repo = GetObject(id="1.4", machine="repo", key="local/ns/r-abc", api_version="kfold.dev/v1alpha1", kind="Repo",
                     name="r-abc", **ref)
    sweep = ListObjects(id="1.5", machine="pod", key="local/ns/#sweep", api_version="v1", kind="Secret", **ref)
    repo_list = ListObjects(id="1.6", machine="repo", key="local/ns/", api_version="kfold.dev/v1alpha1", kind="Repo", **ref)
    # shared statements; the Repo list shares the namespace's key with the ensure: one answer per key
    assert {effect_shard(e, None, 8) for e in (ensure, repo, repo_list)} == {None}
    assert effect_shard(sweep, None, 8) == shard_of("ns", "#sweep", 8)                     # one replica sweeps
    assert effect_shard(status, None, 1) == 0


async def test_three_replicas_share_the_shards_fairly_and_never_hold_one_twice(server, mono):
    a, b, c = (replica(server, mono, h) for h in "abc")
    await rounds(mono, 4, a, b, c)
    await rounds(mono, 6, a, b, c)
    assert sorted(len(s.held()) for s in (a, b, c)) == [2, 2, 2]
    assert all(len(h) == 1 for h in holders([a, b, c]).values())
    assert {s.live for s in (a, b, c)} == {3}
    names = sorted(server.items)
    assert [n for n in names if "-shard-" in n] == [f"kfold-shard-{i}" for i in range(SHARDS)]
    assert len([n for n in names if "-member-" in n]) == 3


async def test_a_dead_replicas_shards_move_to_the_others_within_the_lease_time(server, mono, caplog):
    a, b, c = (replica(server, mono, h) for h in "abc")
    await rounds(mono, 10, a, b, c)
    lost = c.held()
    terms = {i: c.electors[i].term() for i in lost}
    died = mono.t
    moved_at = None
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kfold.leader"):
        for _ in range(20):   # c is dead: it never steps again
            await rounds(mono, 1, a, b)
            if moved_at is None and all(len(holders([a, b])[i]) == 1 for i in range(SHARDS)):
                moved_at = mono.t
    assert moved_at is not None and moved_at - died <= 8 + 3, f"shards {lost} moved after {moved_at - died}s"
    assert sorted(len(s.held()) for s in (a, b)) == [3, 3] and a.live == b.live == 2
    assert "kfold-member-" not in " ".join(n for n in server.items if c.member == n), "the dead member's Lease is deleted"
    taken = [r for r in caplog.records if "acquired lease" in r.getMessage()]
    assert {r.shard for r in taken} == set(lost)
    assert all("expired, held by c" in r.getMessage() and r.term == terms[r.shard] + 1 for r in taken), \
        [r.getMessage() for r in taken]


async def test_a_joining_replica_gets_shards_released_cleanly_by_those_over_their_share(server, mono, caplog):
    a, b = replica(server, mono, "a"), replica(server, mono, "b")
    await rounds(mono, 6, a, b)
    assert sorted(len(s.held()) for s in (a, b)) == [3, 3]
    c = replica(server, mono, "c")
    with caplog.at_level(logging.INFO, logger="kfold.leader"):
        await rounds(mono, 6, a, b, c)
    assert sorted(len(s.held()) for s in (a, b, c)) == [2, 2, 2]
    released = [r for r in caplog.records if "lost lease" in r.getMessage() and "over 3 replicas" in r.getMessage()]
    assert len(released) == 2 and all("rebalance: 3 shards held, fair share 2 of 6 over 3 replicas" in r.reason
                                      for r in released)
    for r in released:   # released free: c took it at once, without waiting out the lease
        assert server.items[f"kfold-shard-{r.shard}"]["spec"]["holderIdentity"] == "c"


async def test_a_clean_stop_releases_every_shard_and_leaves_the_members(server, mono):
    a, b = replica(server, mono, "a"), replica(server, mono, "b")
    await rounds(mono, 6, a, b)
    await b.release()
    assert b.held() == [] and b.member not in server.items
    await rounds(mono, 3, a)
    assert len(a.held()) == SHARDS and a.live == 1


async def test_a_stopping_replica_renews_its_shards_through_a_long_drain_takes_none_then_frees_all_at_once(server, mono):
    """boot.stop_in_order: the daemon drains (here 12 s, longer than a lease) while the election
    task goes on renewing; a free shard is not taken meanwhile; then every shard is released, a
    shard whose requests are still draining not holding the others back."""
    from kfold.daemon.boot import stop_in_order
    a = ShardSet(server.transport("a"), ServerClock(monotonic=mono), namespace="kfold", lease_name="kfold",
                 shards=SHARDS, holder="a", lease_seconds=8, renew_seconds=5, retry_seconds=0.01,
                 margin_seconds=2, monotonic=mono)
    b = replica(server, mono, "b")
    await rounds(mono, 6, a, b)
    mine, theirs = a.held(), b.held()
    assert len(mine) == len(theirs) == SHARDS // 2
    await b.release()   # b's shards are free: a, stopping, must not take them
    a.live = 1          # even with a fair share of every shard (as if a had counted itself alone)
    terms = {i: a.electors[i].term() for i in mine}
    slow = mine[0]
    stuck = object()
    a.fence._sending[stuck] = (slow, terms[slow])   # a request of that shard, answered 2 s after the drain
    freed_at: dict[int, float] = {}

    class Draining:
        async def stop(self):
            for _ in range(12):
                mono.t += 1
                await asyncio.sleep(0.05)   # the election task's rounds run meanwhile
                assert {i: a.electors[i].term() for i in mine} == terms, "a term lapsed while draining"
                assert a.held() == mine, "a stopping replica took a shard"
            asyncio.get_running_loop().call_later(2.0, a.fence._sending.pop, stuck)

    election = asyncio.create_task(a.run())
    real_handle = server.handle

    def watch(req):
        reply = real_handle(req)
        if req.method == "PUT" and "-shard-" in req.path and not req.body["spec"].get("holderIdentity"):
            freed_at[int(req.path.rsplit("-", 1)[1])] = asyncio.get_running_loop().time()
        return reply
    server.handle = watch
    await stop_in_order(Draining(), a, election)
    assert election.done() and a.held() == []
    assert all(not server.items[f"kfold-shard-{i}"]["spec"].get("holderIdentity") for i in range(SHARDS))
    assert a.member not in server.items
    others = [freed_at[i] for i in mine if i != slow]
    assert set(freed_at) == set(mine) and max(others) < freed_at[slow] - 1, freed_at   # not behind the slow drain


async def test_the_sharded_transport_sends_only_under_the_term_the_effect_was_issued_under(server, mono):
    a = replica(server, mono, "a", shards=2)
    await rounds(mono, 2, a)
    sent = []

    class Inner:
        async def call(self, req):
            a.fence.check(req)   # the sending thread's check (KubeTransport before_send)
            sent.append(req.path)
            return Response(200, {}, {})

    t = ShardedTransport(Inner(), a.fence)
    eff = GetObject(id="9.0", machine="session", key="local/ns/s", cluster="local", api_version="v1", kind="Pod",
                    namespace="ns", name="s")
    shard, term = a.stamp(eff)
    from kfold.daemon.shards import _CURRENT
    _CURRENT.set("9.0")
    await t.call(Request("local", "", "GET", "/x"))
    mono.t += 8   # a froze: its term of that shard ended (lease 8 - margin 2 < 8)
    with pytest.raises(TransportError, match=f"shard {shard} ended"):
        await t.call(Request("local", "", "GET", "/y"))
    assert sent == ["/x"] and t.fenced == 1


# -- the daemon ---------------------------------------------------------------------------------

class Seen(Decision):
    n: int = 0


class Multi(Machine):
    """Emits a quorum GET on ``local/work/<name>``; re-reads one in doubt."""
    name = "multi"
    decision = Seen
    commands = frozenset({"multi.get"})

    def on_command(self, ctx: Any, rec: Command) -> None:
        for name in rec.args["names"]:
            ctx.emit(GetObject, f"local/work/{name}", cluster="local", api_version="v1", kind="Namespace",
                     namespace="", name="work")

    def on_in_doubt(self, ctx: Any, effect: Any) -> None:
        ctx.emit(GetObject, effect.key, **effect.model_dump(exclude={"id", "machine", "key", "type"}))

    def on_outcome(self, ctx: Any, rec: Outcome, effect: Any) -> None:
        ctx.put(effect.key, (ctx.get(effect.key) or Seen()).but(n=1))


class Held:
    """``ShardSet``'s face to the daemon: terms by shard, set by the test."""

    def __init__(self, shards: int) -> None:
        self.shards, self.terms = shards, {}

    def shard_for(self, effect: Any) -> int | None:
        return effect_shard(effect, None, self.shards)

    def stamp(self, effect: Any) -> tuple[int | None, int | None]:
        s = self.shard_for(effect)
        return s, self.terms.get(s)

    def term(self, shard: int) -> int | None:
        return self.terms.get(shard)

    def holding(self, shard: int) -> int | None:
        return self.terms.get(shard)


def multi_daemon(shards: Held) -> tuple[Daemon, MemoryJournal, Any]:
    journal, server = MemoryJournal(), fresh_server()
    clock = ServerClock()
    d = Daemon(journal, lambda sink: Executor(FakeTransport(server), clock, sink, env={}), clock,
               machines=Machines([Multi()]), snapshot_every=1000)
    d.shards = shards
    return d, journal, server


async def test_the_daemon_issues_each_effect_under_its_shards_term_and_re_observes_a_shard_it_takes_over():
    names = ["s1", "s2", "s3", "s7", "s8", "s9"]
    by = {n: shard_of("work", n, 2) for n in names}
    assert set(by.values()) == {0, 1}
    d, journal, server = multi_daemon(Held(2))
    d.shards.terms = {0: 4}
    d.start_loops()
    await d.recover()
    d.resume({0, None})   # as ShardSet.on_change does on an acquire
    await d.submit([Command(at=T2030, name="multi.get", args={"names": names})])
    await settle(d)
    issued = [r for r in journal.records if isinstance(r, EffectIssued)]
    assert sorted(r.effect["key"].rsplit("/", 1)[1] for r in issued) == sorted(n for n in names if by[n] == 0)
    assert {(r.shard, r.term) for r in issued} == {(0, 4)}
    d.shards.terms[1] = 7    # shard 1 acquired: what was held for it is in doubt, re-read under term 7
    d.resume({1})
    await settle(d)
    doubts = [r.args["effect_id"] for r in journal.records if isinstance(r, Command) and r.name == "effect.in_doubt"]
    assert len(doubts) == len([n for n in names if by[n] == 1])
    later = [r for r in journal.records if isinstance(r, EffectIssued)][len(issued):]
    assert sorted(r.effect["key"].rsplit("/", 1)[1] for r in later) == sorted(n for n in names if by[n] == 1)
    assert {(r.shard, r.term) for r in later} == {(1, 7)}
    assert len(server.requests) == len(names)
    await d.stop()


def test_trace_and_replay_name_the_shard_and_term():
    from engine.core import initial_state
    from kfold.offline.replay import ReplayResult
    from kfold.offline.render import record_line
    from tests.unit.test_daemon_recovery import issued as issued_record
    rec = issued_record("1.0", GetObject).model_copy(update={"seq": 2, "term": 4, "shard": 3})
    assert record_line(rec) == "issued 1.0 get Pod work/p [shard 3 term 4]"
    r = ReplayResult(state=initial_state())
    r.shard_terms.update({(3, 4): 2, (0, 1): 5})
    assert "issued per shard and term: shard 0 term 1=5, shard 3 term 4=2" in r.summary()


async def test_readyz_and_metrics_show_each_shard(server, mono):
    from kfold.daemon.http import leader_metrics
    a, b = replica(server, mono, "a", shards=2), replica(server, mono, "b", shards=2)
    await rounds(mono, 5, a, b)
    text = leader_text(a)
    assert text.startswith(f"shards: 1 of 2 held ({a.held()[0]}), 2 live replicas, as a\n")
    mine, other = a.held()[0], 1 - a.held()[0]
    assert f"shard {mine}: leader of lease kfold/kfold-shard-{mine}, term" in text
    assert f"shard {other}: standby for lease kfold/kfold-shard-{other} (held by b), as a" in text
    m = leader_metrics(a)
    assert f'kfold_leader{{holder="a",lease="kfold/kfold-shard-{mine}",shard="{mine}",term="' in m
    assert "kfold_shards_held 1.0" in m and "kfold_replicas_live 2.0" in m
    assert "kfold_leader_fenced_requests_total 0.0" in m


def test_the_shards_setting_defaults_to_one_lease():
    from kfold.daemon.config import ConfigError, parse_config
    base = {"namespaces": ["a"], "base_domain": "s.example.com"}
    assert parse_config(base).leader.shards == 1
    assert parse_config({**base, "leader": {"enabled": True, "shards": 12}}).leader.shards == 12
    with pytest.raises(ConfigError, match="shards"):
        parse_config({**base, "leader": {"enabled": True, "shards": 0}})


def test_the_count_gate_lets_in_only_the_count_in_force_or_one_alone():
    # nothing held, nobody else: take
    assert count_gate(6, "d", [], {"d": "6"}) is None
    # the old count holds a shard: the new count stands by; the old count keeps taking beside new members
    assert "another leader.shards are held (a: 4)" in count_gate(6, "d", [("a", "4")], {"a": "4", "d": "6"})
    assert count_gate(4, "b", [("a", "4")], {"a": "4", "b": "4", "d": "6"}) is None
    # nothing held yet, a live replica of another count: neither starts (of two starting together, one waits)
    assert "live replicas run another leader.shards (a: 4)" in count_gate(6, "d", [], {"a": "4", "d": "6"})
    # a shard Lease without a recorded count (an older kfold): its holder's member count, else unknown
    assert count_gate(4, "b", [("a", None)], {"a": "4", "b": "4"}) is None
    assert "(x: unknown)" in count_gate(4, "b", [("x", None)], {"b": "4"})
    assert count_gate(4, "b", [("b", None)], {}) is None     # its own


def covering(sets: list[ShardSet], sessions: list[str]) -> dict[str, list[str]]:
    """Session -> the replicas whose valid term covers it now (a term of shard i under count N covers
    the Sessions with ``shard_of(.., N) == i``)."""
    return {s: [r.holder for r in sets for i in r.held() if shard_of("ns", s, r.shards) == i] for s in sessions}


async def test_a_rolling_change_of_the_shard_count_never_covers_a_session_twice_nor_leaves_one_a_lease(server, mono, caplog):
    sessions = [f"s{i}" for i in range(40)]
    live = {h: replica(server, mono, h, shards=4) for h in "abc"}
    uncovered_since: dict[str, float] = {}
    longest = 0.0

    async def run(n: int) -> None:
        nonlocal longest
        for _ in range(n):
            for r in list(live.values()):
                await r.step()
            cover = covering(list(live.values()), sessions)
            assert all(len(h) <= 1 for h in cover.values()), {s: h for s, h in cover.items() if len(h) > 1}
            for s, h in cover.items():
                if h:
                    longest = max(longest, mono.t - uncovered_since.pop(s, mono.t))
                else:
                    uncovered_since.setdefault(s, mono.t)
            mono.t += 1
    await run(6)
    with caplog.at_level(logging.INFO, logger="kfold.leader"):
        for h in "cba":    # a StatefulSet's order: each restarted with shards=6 once the previous is up
            await live[h].release()
            live[h] = replica(server, mono, h, shards=6)
            await run(4)
        await run(4)
    assert all(len(r.held()) == 2 for r in live.values()), {h: r.held() for h, r in live.items()}
    assert not uncovered_since and longest <= 2, f"a Session went {longest}s without a holder"
    assert server.items["kfold-shard-5"]["metadata"]["annotations"]["kfold.dev/shards"] == "6"
    assert "taking no shard (leader.shards 6): shard Leases of another leader.shards are held" in caplog.text


async def test_a_killed_last_replica_of_the_old_count_hands_over_at_its_lease_expiry(server, mono):
    old, new = replica(server, mono, "a", shards=4), replica(server, mono, "b", shards=6)
    for _ in range(4):
        await old.step()
        await new.step()
        mono.t += 1
    assert len(old.held()) == 4 and new.held() == [] and new.foreign == {"a": "4"}
    assert "taking no shard: shard Leases of another leader.shards are held (a: 4)\n" in leader_text(new)
    died = mono.t    # a is SIGKILLed: its Leases run out
    while not new.held():
        await new.step()
        mono.t += 1
        assert mono.t - died <= 8 + 3
    await rounds(mono, 2, new)
    assert len(new.held()) == 6


async def test_replicas_of_two_counts_started_together_never_both_take_shards(server, mono):
    a, b = replica(server, mono, "a", shards=4), replica(server, mono, "b", shards=6)
    for _ in range(6):
        await asyncio.gather(a.step(), b.step())
        mono.t += 1
        assert not (a.held() and b.held()), (a.held(), b.held())
    assert not a.held() and not b.held()    # both stand by while the other lives: stop one
    await b.release()
    await rounds(mono, 3, a)
    assert len(a.held()) == 4


async def test_an_upgrade_at_the_same_count_takes_over_shard_leases_written_without_a_count(server, mono):
    a, b = replica(server, mono, "a", shards=4), replica(server, mono, "b", shards=4)
    await rounds(mono, 5, a, b)
    for name, item in server.items.items():   # as an older kfold writes them
        if "-shard-" in name:
            item["metadata"].pop("annotations", None)
    c, d = replica(server, mono, "c", shards=4), replica(server, mono, "d", shards=6)
    await rounds(mono, 3, a, b, c, d)
    assert c.gate is None and sum(len(r.held()) for r in (a, b, c)) == 4     # counted as their holders' count
    assert d.held() == [] and "(a: 4, b: 4)" in d.gate


async def test_what_is_held_while_a_term_lapses_goes_out_when_the_same_term_is_renewed():
    names = ["s1", "s2", "s3"]
    assert {shard_of("work", n, 2) for n in names} == {0}
    d, journal, server = multi_daemon(Held(2))
    d.shards.terms = {0: 4}
    d.start_loops()
    await d.recover()
    d.resume({0, None})
    await settle(d)
    d.shards.terms = {}      # the renewal is late: shard 0's term is past its fence
    await d.submit([Command(at=T2030, name="multi.get", args={"names": names})])
    await settle(d)
    assert not [r for r in journal.records if isinstance(r, EffectIssued)], "nothing is issued in a lapse"
    d.shards.terms = {0: 4}  # renewed under the same term: nobody else held it meanwhile
    d.resume(set())          # ShardSet's "renewed after a lapse"
    await settle(d)
    issued = [r for r in journal.records if isinstance(r, EffectIssued)]
    assert {(r.shard, r.term) for r in issued} == {(0, 4)} and len(issued) == 3
    assert not [r for r in journal.records if isinstance(r, Command) and r.name == "effect.in_doubt"], \
        "the same term: nothing to re-observe"
    await d.stop()


async def test_a_term_acquired_issues_nothing_until_its_takeover_is_re_observed():
    d, journal, _server = multi_daemon(Held(2))
    d.shards.terms = {0: 4}          # acquired, but the committer has not run the takeover yet
    d.start_loops()
    await d.recover()
    await d.submit([Command(at=T2030, name="multi.get", args={"names": ["s1"]})])
    await settle(d)
    assert not [r for r in journal.records if isinstance(r, EffectIssued)]
    d.resume({0})
    await settle(d)
    doubts = [r for r in journal.records if isinstance(r, Command) and r.name == "effect.in_doubt"]
    issued = [r for r in journal.records if isinstance(r, EffectIssued)]
    assert len(doubts) == 1 and [(r.shard, r.term) for r in issued] == [(0, 4)]
    await d.stop()


async def test_a_replica_tells_the_daemon_when_a_lapsed_term_is_renewed(server, mono):
    from kfold.daemon.leader import Term
    a = replica(server, mono, "a", shards=2)
    await rounds(mono, 2, a)
    told = []
    a.on_change = lambda acquired, reason: told.append((acquired, reason))
    (i, j) = a.held()
    e = a.electors[i]
    e._term = Term(e._term.number, "a", mono.t - 0.1)      # its renewal was late: past the fence
    eff = GetObject(id="1.0", machine="session", key=f"local/ns/{next(n for n in map(str, range(99)) if shard_of('ns', n, 2) == i)}",
                    cluster="local", api_version="v1", kind="Pod", namespace="ns", name="x")
    assert a.stamp(eff) == (i, None)
    e._took(e._lease, mono.t)                            # the renewal answered: the same term again
    a._renewed_after_lapse()
    assert told == [(set(), f"term of shards [{i}] renewed after a lapse")] and a.stamp(eff)[1] == e.term()
