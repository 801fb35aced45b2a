"""Leader election on a Lease, judged on the apiserver's clock, and the daemon's fence (kfold.daemon.leader).

A tiny in-memory Lease endpoint stands in for the apiserver: resourceVersion preconditions (409
Conflict), AlreadyExists on a second create, and a ``Date`` header from its own clock, which runs
on the same fake monotonic clock as the replicas (one real second = one second everywhere).
"""
from __future__ import annotations

import asyncio
import copy
import datetime
import logging
import os
import subprocess
import sys
from email.utils import formatdate
from pathlib import Path
from typing import Any

import freezegun
import pytest

from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.transport import Request, Response, TransportError
from engine.effects.io.fake import T2030, FakeTransport
from journal.records import Command, EffectIssued
from kfold.daemon.config import MIN_MARGIN_S, ConfigError, parse_config
from kfold.daemon.loop import Daemon
from engine.rfc3339 import to_ms
from kfold.daemon.leader import Elector, Fence, FencedTransport, micro_time
from tests.journals import TestJournal as MemoryJournal
from tests.unit.test_daemon_recovery import MACHINES, fresh_server, settle

ROOT = Path(__file__).resolve().parents[2]


class Mono:
    def __init__(self) -> None:
        self.t = 5000.0

    def __call__(self) -> float:
        return self.t


class LeaseServer:
    """One Lease; the server's clock is ``T2030 + (mono - start)``."""

    def __init__(self, mono: Mono) -> None:
        self.mono, self.start = mono, mono.t
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.fail_puts = 0
        self.requests: list[tuple[str, str]] = []

    def now_ms(self) -> int:
        return T2030 + int((self.mono.t - self.start) * 1000)

    def transport(self) -> Any:
        server = self

        class T:
            async def call(self, req: Request) -> Response:
                await asyncio.sleep(0)   # lets two replicas interleave their requests
                return server.handle(req)

            async def close(self) -> None:
                pass
        return T()

    def handle(self, req: Request) -> Response:
        self.requests.append((req.method, req.path))
        headers = {"Date": formatdate(self.now_ms() / 1000, usegmt=True)}
        status = lambda code, reason: Response(code, headers, {"kind": "Status", "reason": reason, "code": code})  # noqa: E731
        if req.method == "GET":
            return Response(200, headers, copy.deepcopy(self.lease)) if self.lease else status(404, "NotFound")
        if req.method == "POST":
            if self.lease:
                return status(409, "AlreadyExists")
            return Response(201, headers, self._store(req.body))
        if req.method == "PUT":
            if self.fail_puts:
                self.fail_puts -= 1
                return status(500, "InternalError")
            if not self.lease:
                return status(404, "NotFound")
            if (req.body.get("metadata") or {}).get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return status(409, "Conflict")
            return Response(200, headers, self._store(req.body))
        return status(405, "MethodNotAllowed")

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"] = {**body.get("metadata", {}), "resourceVersion": str(self.rv)}
        return copy.deepcopy(self.lease)


@pytest.fixture
def mono():
    return Mono()


@pytest.fixture
def server(mono):
    return LeaseServer(mono)


def elector(server: LeaseServer, mono: Mono, holder: str, **kw: Any) -> Elector:
    return Elector(server.transport(), ServerClock(monotonic=mono), namespace="kfold", name="kfold",
                   holder=holder, monotonic=mono, **kw)


async def run_for(mono: Mono, seconds: float, *electors: Elector, step: float = 2.0) -> None:
    """Step every elector every ``step`` seconds of (fake) monotonic time."""
    t = 0.0
    while t < seconds:
        for e in electors:
            await e.step()
        mono.t += step
        t += step


async def test_the_first_replica_acquires_term_1_and_the_second_stays_standby(server, mono):
    a, b = elector(server, mono, "a"), elector(server, mono, "b")
    assert await a.step() == 1
    await run_for(mono, 60, a, b)
    assert a.term() == 1 and b.term() is None
    assert server.lease["spec"]["holderIdentity"] == "a" and server.lease["spec"]["leaseTransitions"] == 1
    assert b.observed_holder == "a"


async def test_a_silent_leader_is_fenced_before_the_standby_can_acquire(server, mono):
    a, b = elector(server, mono, "a"), elector(server, mono, "b")
    await a.step()
    await b.step()
    acquired_at = mono.t
    fenced_at = took_at = None
    while took_at is None:   # ``a`` is frozen (never steps again); ``b`` keeps trying
        mono.t += 0.25
        if fenced_at is None and a.term() is None:
            fenced_at = mono.t
        if await b.step() is not None:
            took_at = mono.t
    assert b.term() == 2 and server.lease["spec"]["leaseTransitions"] == 2
    # the fence: acquire + lease - margin, on the monotonic clock; the standby: renewTime + lease + 1 s
    assert fenced_at == pytest.approx(acquired_at + 15 - 2, abs=0.25)
    assert took_at >= acquired_at + 15 + 1 and fenced_at < took_at
    assert a.term() is None   # frozen past its term: wakes up fenced, before any request


async def test_the_lease_never_expires_on_the_server_before_the_fence_ends(server, mono):
    """Found by ``kfold sim --seed 71643``: renewTime was the server clock's reading, which lags the
    server by up to the Date header's truncated second; the server's expiry (renewTime + lease)
    then came up to a second early and a request 100 ms past it, with clock steps of the size the
    margin is meant for, met an expired term. renewTime is now the latest time the server can be at."""
    server.start = mono.t - 0.9          # the server is at T+0.9 s: its Date says T
    a = elector(server, mono, "a")
    for _ in range(4):                  # acquire, then renewals, each sent at a .9 fraction
        sent_at = server.now_ms()
        assert await a.step() == 1
        renewed = to_ms(server.lease["spec"]["renewTime"])
        assert renewed >= sent_at, f"renewTime {renewed} is behind the server's time {sent_at} at the send"
        fence_ends = (a._term.valid_until - mono.t) * 1000 + server.now_ms()
        assert renewed + 15_000 - fence_ends >= 2_000 - 1, "the whole margin is left for clock steps and latency"
        mono.t += 2.0


@pytest.mark.parametrize("margin", [MIN_MARGIN_S - 1, MIN_MARGIN_S])
async def test_the_smallest_margin_the_config_takes_holds_a_term_through_a_one_second_clock_step(server, mono, margin):
    """Invariant 12: a request reaches the apiserver only while its term is unexpired there
    (renewTime + leaseDurationSeconds on the server's clock). Worst case for the fence: the Date
    read at the acquire lags the server by 999 ms, the server's clock then steps 1 s forward, and
    the last request the fence lets out takes 900 ms to arrive. The smallest margin the config
    accepts holds; one second less does not, and the config refuses it."""
    server.start = mono.t - 0.999
    a = elector(server, mono, "a", margin_seconds=margin)
    assert await a.step() == 1
    expiry = to_ms(server.lease["spec"]["renewTime"]) + 15_000
    server.start -= 1.0                          # the apiserver's clock steps 1 s forward
    mono.t = a._term.valid_until - 0.001         # the fence still lets a request out...
    assert a.term() == 1
    mono.t += 0.9                                # ... which arrives 900 ms later
    assert (server.now_ms() <= expiry) is (margin >= MIN_MARGIN_S)
    cfg = {"namespaces": ["a"], "base_domain": "s.example.com", "leader": {"enabled": True, "margin_seconds": margin}}
    if margin >= MIN_MARGIN_S:
        assert parse_config(cfg).leader.margin_seconds == margin
    else:
        with pytest.raises(ConfigError, match="leader.margin_seconds"):
            parse_config(cfg)


def test_kfold_run_refuses_a_margin_below_a_one_second_step_in_one_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("namespaces: [a]\nbase_domain: s.example.com\nleader:\n  enabled: true\n  margin_seconds: 1\n")
    proc = subprocess.run([sys.executable, "-m", "kfold", "run", "--config", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{path}: field leader.margin_seconds: 1 is too small" in err
    assert "set leader.margin_seconds to 2 or more" in err


@pytest.mark.parametrize("days", [1, -1])
async def test_moving_the_local_wall_clock_a_day_changes_nothing(server, mono, days):
    a, b = elector(server, mono, "a"), elector(server, mono, "b")
    with freezegun.freeze_time("2030-01-01T00:00:00Z", real_asyncio=True) as frozen:
        await run_for(mono, 20, a, b)
        assert a.term() == 1 and b.term() is None
        frozen.tick(datetime.timedelta(days=days))
        await run_for(mono, 20, a, b)
        assert a.term() == 1 and b.term() is None, "a wall-clock jump must neither expire nor extend the lease"
        renewed = server.lease["spec"]["renewTime"]
        assert renewed.startswith("2030-01-01T00:00:"), f"renewTime comes from the server clock, got {renewed}"


async def test_two_standbys_racing_for_a_free_lease_give_one_term(server, mono):
    a, b = elector(server, mono, "a"), elector(server, mono, "b")
    await a.step()
    mono.t += 30   # a is gone; both standbys read it expired, then both PUT on the same resourceVersion
    results = await asyncio.gather(b.step(), elector(server, mono, "c").step())
    assert sorted(r for r in results if r is not None) == [2], results
    assert server.lease["spec"]["leaseTransitions"] == 2
    puts = [m for m, _ in server.requests if m == "PUT"]
    assert len(puts) == 2, "both tried; the resourceVersion precondition let one through"


async def test_a_leader_that_cannot_renew_steps_down_at_its_renew_deadline(server, mono, caplog):
    a = elector(server, mono, "a")
    await a.step()
    server.fail_puts = 100
    with caplog.at_level(logging.INFO, logger="kfold.leader"):
        await run_for(mono, 14, a)
    assert a.term() is None and a.lost == 1
    assert any("lost lease kfold/kfold, term 1: renew deadline" in r.getMessage() for r in caplog.records)


async def test_a_clean_release_lets_a_standby_acquire_at_once(server, mono):
    a, b = elector(server, mono, "a"), elector(server, mono, "b")
    await a.step()
    await a.release()
    assert a.term() is None and await b.step() == 2


async def test_a_stopping_leader_keeps_its_term_until_it_releases_and_a_stopping_standby_takes_nothing(server, mono):
    a, b = elector(server, mono, "a"), elector(server, mono, "b")
    await a.step()
    a.stop_holding()
    b.stop_holding()
    await run_for(mono, 60, a, b)   # the daemon's drain, however long: renewed, never lapsed
    assert a.term() == 1 and a.lost == 0 and b.term() is None
    await a.release()
    await run_for(mono, 30, b)       # free, but b is stopping too
    assert b.term() is None and not server.lease["spec"].get("holderIdentity")


async def test_a_stopping_leader_whose_lease_was_written_free_by_another_does_not_take_it_back(server, mono):
    a = elector(server, mono, "a")
    await a.step()
    a.stop_holding()
    server._store({**server.lease, "spec": {**server.lease["spec"], "holderIdentity": ""}})   # e.g. kubectl edit
    mono.t += 2
    await a.step()   # the renewal conflicts; the Lease, read again, is free
    assert a.term() is None and not server.lease["spec"].get("holderIdentity")


async def test_the_fenced_transport_sends_nothing_outside_a_term():
    term = [3]
    sent = []

    class Inner:
        async def call(self, req):
            sent.append(req)
            return Response(200, {}, {})

    t = FencedTransport(Inner(), Fence(lambda: term[0]))
    await t.call(Request("", "", "GET", "/x"))
    term[0] = None
    with pytest.raises(TransportError, match="fenced"):
        await t.call(Request("", "", "GET", "/y"))
    assert [r.path for r in sent] == ["/x"] and t.fenced == 1


def test_a_micro_time_has_six_fraction_digits():
    assert micro_time(T2030 + 250) == "2030-01-01T00:00:00.250000Z"


def test_the_settings_have_defaults_and_refuse_an_unsafe_order():
    cfg = parse_config({"namespaces": ["a"], "base_domain": "s.example.com"})
    assert (cfg.leader.enabled, cfg.leader.lease_seconds, cfg.leader.renew_seconds, cfg.leader.margin_seconds) == (False, 15, 10, 2)
    with pytest.raises(ConfigError, match="renew_seconds"):
        parse_config({"namespaces": ["a"], "base_domain": "s.example.com",
                      "leader": {"enabled": True, "lease_seconds": 10, "renew_seconds": 10}})


async def standby_with_a_held_create() -> tuple[Daemon, MemoryJournal, Any, list[int | None]]:
    """A daemon standing by (its gate answers ``term[0]``, None) that decided a probe create."""
    journal, server = MemoryJournal(), fresh_server()
    clock = ServerClock()
    d = Daemon(journal, lambda sink: Executor(FakeTransport(server), clock, sink, env={}), clock,
               machines=MACHINES, snapshot_every=1000)
    term: list[int | None] = [None]
    d.gate = lambda: term[0]
    d.start_loops()
    await d.recover()
    await d.submit([Command(at=T2030, name="probe.create")])
    await settle(d)
    return d, journal, server, term


async def test_a_standby_issues_nothing_and_on_takeover_re_observes_what_it_held_under_its_term():
    d, journal, server, term = await standby_with_a_held_create()
    assert not [r for r in journal.records if isinstance(r, EffectIssued)] and not server.requests, \
        "a standby journals its inputs and issues nothing"
    term[0] = 7
    d.resume()
    await settle(d)
    # on takeover what was decided while standby is in doubt: re-observed (a quorum GET), not replayed
    doubts = [r for r in journal.records if isinstance(r, Command) and r.name == "effect.in_doubt"]
    assert len(doubts) == 1
    issued = [r for r in journal.records if isinstance(r, EffectIssued)]
    assert [(r.effect["type"], r.term) for r in issued] == [("get", 7)]
    assert [m for m, _ in server.requests] == ["GET"]
    await d.stop()


async def test_an_effect_is_stamped_no_later_than_the_term_check_that_let_it_out():
    """A process frozen (SIGSTOP, a GC pause) right as its term is checked wakes with the effect
    stamped from a reading taken before the check: its record never looks decided after the
    pause (the e2e pause test judges the woken leader by these stamps), and the fence answers it
    when it is sent."""
    d, journal, server, term = await standby_with_a_held_create()
    mono = [0.0]

    class Clock:   # the daemon's clock reads server time as a reading plus monotonic time elapsed
        def now_ms(self, cluster: str = "") -> int:
            return T2030 + int(mono[0] * 1000)
    d.clock = Clock()
    checks: list[int] = []   # the server time as each check of the term began

    def frozen_at_the_check() -> int:
        checks.append(d.clock.now_ms())
        mono[0] += 40.0   # the freeze: 40 s pass inside every check
        return 7
    d.gate = frozen_at_the_check
    let_out: list[tuple[int, int]] = []   # (stamp, start of the last check before it was sealed)
    seal = journal.seal

    def sealing(drafts):
        let_out.extend((r.at, checks[-1]) for r in drafts if isinstance(r, EffectIssued))
        return seal(drafts)
    journal.seal = sealing
    d.resume()
    await settle(d)
    assert let_out and all(at <= check for at, check in let_out), let_out
    await d.stop()


def test_an_old_effect_record_without_a_term_still_loads():
    from journal.records import parse_record
    rec = parse_record('{"rec": "effect", "seq": 4, "at": 1, "effect": {"id": "1.0"}}')
    assert isinstance(rec, EffectIssued) and rec.term is None


def test_replay_and_trace_say_which_term_issued_what():
    from engine.core import initial_state
    from engine.effects.models import GetObject
    from kfold.offline.replay import ReplayResult
    from kfold.offline.render import record_line
    from tests.unit.test_daemon_recovery import issued as issued_record
    rec = issued_record("1.0", GetObject).model_copy(update={"seq": 2, "term": 4})
    assert record_line(rec) == "issued 1.0 get Pod work/p [term 4]"
    r = ReplayResult(state=initial_state())
    r.terms.update({4: 2, None: 1})
    assert "issued per leadership term: none=1, term 4=2" in r.summary()


async def test_readyz_and_metrics_say_who_leads_under_which_term(server, mono):
    from kfold.daemon.http import leader_metrics, leader_text
    a, b = elector(server, mono, "a"), elector(server, mono, "b")
    await a.step()
    await b.step()
    assert leader_text(a) == "leader of lease kfold/kfold, term 1, as a\n"
    assert leader_text(b) == "standby for lease kfold/kfold (held by a), as b\n"
    assert 'kfold_leader{holder="a",lease="kfold/kfold",term="1"} 1.0' in leader_metrics(a)
    assert 'kfold_leader{holder="b",lease="kfold/kfold",term=""} 0.0' in leader_metrics(b)
    assert 'kfold_leader_transitions_total{lease="kfold/kfold",what="acquired"} 1.0' in leader_metrics(a)


async def test_an_unexpected_error_does_not_end_the_election(server, mono, caplog):
    a = elector(server, mono, "a")
    calls = []

    async def boom():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("registry refused")
        raise asyncio.CancelledError

    a.step = boom
    a.retry_s = 0
    with pytest.raises(asyncio.CancelledError):
        await a.run()
    assert len(calls) == 2 and "registry refused" in caplog.text


async def test_the_sending_thread_checks_the_term_again_right_before_the_request_leaves():
    from engine.effects.io.transport import KubeTransport
    sent, term = [], [None]

    class Client:
        def param_serialize(self, method, path, **k):
            return method, path, {}, None, None

        def call_api(self, *a, **k):
            sent.append(a)
            raise AssertionError("must not be sent")

    fence = Fence(lambda: term[0])
    t = KubeTransport(lambda cluster, tenant: Client(), before_send=fence.check)
    with pytest.raises(TransportError, match="fenced"):
        await t.call(Request("c", "", "PATCH", "/apis/kfold.dev/v1alpha1/namespaces/n/sessions/s/status"))
    await t.close()
    assert sent == [] and fence.fenced == 1


async def test_a_retry_due_while_standby_waits_for_a_term_and_is_re_observed_then():
    from engine.effects.io.executor import Backoff
    from engine.effects.io.fake import Fault
    journal, server = MemoryJournal(), fresh_server()
    clock = ServerClock()
    d = Daemon(journal, lambda sink: Executor(FakeTransport(server), clock, sink, env={}, backoff=Backoff(base_ms=50)),
               clock, machines=MACHINES, snapshot_every=1000)
    term: list[int | None] = [1]
    d.gate = lambda: term[0]
    d.start_loops()
    await d.recover()
    server.faults.append(Fault(status=500, method="GET"))
    await d.submit([Command(at=T2030, name="probe.get")])
    await settle(d)
    assert [m for m, _ in server.requests] == ["GET"]   # answered 500: a retry waits (safe to retry)
    term[0] = None                                      # the term ends before the retry is due
    await asyncio.sleep(0.5)
    assert [m for m, _ in server.requests] == ["GET"], "a standby re-issued a retry"
    term[0] = 2
    d.resume()
    await settle(d)
    issued = [(r.effect["type"], r.term) for r in journal.records if isinstance(r, EffectIssued)]
    assert issued == [("get", 1), ("get", 2)] and [m for m, _ in server.requests] == ["GET", "GET"]
    await d.stop()


def test_a_deadline_due_while_standby_is_not_journaled_and_is_due_again_once_a_term_begins():
    """kfold sim, soak seed 40120: a standby (its reads held) fired a Session's start deadline on
    what it last saw and failed a Session whose pod had long been Running. A standby journals no
    deadline; the ticker hands it out again when a term begins."""
    from immutables import Map
    from engine.core import State, Timer
    d = Daemon(MemoryJournal(), lambda sink: Executor(FakeTransport(fresh_server()), ServerClock(), sink, env={}),
               ServerClock(), machines=MACHINES, snapshot_every=1000)
    d.state = State(seq=1, timers=Map({"probe:local/work/p:start": Timer("probe:local/work/p:start", T2030,
                                                                           "probe", "local/work/p", "start")}))
    term: list[int | None] = [None]
    d.gate = lambda: term[0]
    assert d._fenced(d.ticker.due(d.state, T2030 + 1)) is None
    term[0] = 3
    again = d._fenced(d.ticker.due(d.state, T2030 + 2))
    assert [(r.rec, r.name) for r in again] == [("deadline", "start")]
    assert d.ticker.due(d.state, T2030 + 3) == [], "handed out once per term"


async def test_a_takeover_batched_with_other_drafts_still_puts_the_held_effects_in_doubt_first():
    """kfold sim, soak seed 50576: ``resume`` queues an empty entry, but the committer commits what
    is queued as one group; batched with an observation, the takeover was skipped and the
    standby's held (stale) effect went out as it was decided."""
    d, journal, server, term = await standby_with_a_held_create()
    term[0] = 7
    d.resume()
    await d.submit([Command(at=T2030, name="probe.get")])   # queued behind resume: one group
    await settle(d)
    issued = [(r.effect["type"], r.term) for r in journal.records if isinstance(r, EffectIssued)]
    assert ("create", 7) not in issued, "the create decided while standby was sent as it was"
    assert [r.name for r in journal.records if isinstance(r, Command)].count("effect.in_doubt") == 1
    await d.stop()
