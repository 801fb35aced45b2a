"""A poison record never stops kfold: the fold quarantines its object (or refuses its command),
every other object goes on, and a restart or a replay reproduces exactly the same quarantine.

The poison here is what issue 12 found: ``pod.sweep_secrets`` with ``grace_seconds: "ten"``
(durable, so every restart used to hit it again), and a Pod whose ``kfold.dev/session`` label is
not a string (the pod machine's reduction refuses it)."""
from __future__ import annotations

import asyncio

import pytest

from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.fake import T2030, FakeApiServer, FakeTransport
from engine.seams import SeamError
from journal.memory import MemoryJournal
from journal.records import Command, Observed
from kfold.daemon.loop import Daemon
from kfold.daemon.http import Metrics
from kfold.cli.commands.trace import step_lines
from kfold.offline.replay import replay
from kfold.offline.timeline import walk

LABELS = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "s", "kfold.dev/generation": "1"}


def pod(name: str, at: int, **labels) -> Observed:
    md = {"name": name, "namespace": "work", "uid": f"uid-{name}", "resourceVersion": str(at % 1000),
          "labels": {**LABELS, **labels}}
    return Observed(at=at, cluster="local", api_version="v1", kind="Pod", namespace="work", name=name,
                    uid=md["uid"], rv=md["resourceVersion"], event="ADDED", obj={"metadata": md})


POISON = [
    Command(at=T2030, name="pod.sweep_secrets", cluster="local", namespace="work",
            args={"cluster": "local", "namespace": "work", "grace_seconds": "ten"}),
    pod("bad", T2030 + 1, **{"kfold.dev/session": 7}),
    pod("good", T2030 + 2),
]


def daemon_on(journal) -> Daemon:
    clock = ServerClock()
    return Daemon(journal, lambda sink: Executor(FakeTransport(FakeApiServer()), clock, sink, env={}), clock,
                  metrics=Metrics())


async def poisoned_journal() -> MemoryJournal:
    """A journal that already holds the poison (written by an older kfold that did not check)."""
    j = MemoryJournal()
    await j.open()
    await j.append(POISON)
    return j


def quarantine_of(state) -> dict[str, str]:
    return {k: q.error for k, q in state.quarantine.items()}


async def test_a_daemon_recovers_over_a_poison_journal_and_other_objects_go_on():
    j = await poisoned_journal()
    d = daemon_on(j)
    d.start_loops()
    await d.recover()  # used to raise ValueError: invalid literal for int() with base 10: 'ten'
    q = quarantine_of(d.state)
    assert "field grace_seconds" in q["local/work/#pod.sweep_secrets"] and "'ten'" in q["local/work/#pod.sweep_secrets"]
    assert "kfold.dev/session" in q["local/work/bad"] or "session" in q["local/work/bad"]
    assert d.state.table("pod").get("local/work/good") is not None  # the good pod is tracked
    assert d.state.table("pod").get("local/work/bad") is None        # the bad one frozen as it was (absent)

    await d.submit([pod("later", T2030 + 3)])                         # the daemon keeps folding
    assert d.state.table("pod").get("local/work/later") is not None
    await d.submit([pod("bad", T2030 + 4)])                           # a quarantined key hears nothing
    assert d.state.table("pod").get("local/work/bad") is None
    body = d.metrics.render([], 0, None, d.state.seq, d.state.quarantine)
    assert 'kfold_quarantined{what="object"} 1.0' in body and 'kfold_quarantined{what="command"} 1.0' in body
    await d.stop()

    again = daemon_on(await MemoryJournal(j.store).open())  # a restart on the same journal
    again.start_loops()
    await again.recover()
    assert quarantine_of(again.state) == q
    records = [r async for r in again.journal.read()]
    assert quarantine_of(replay(records, check=True).state) == q     # and replay reproduces it
    shown = [line for step in walk(records) for line in step_lines(step, "local/work/bad")]
    assert any("QUARANTINED by machine pod" in line for line in shown)
    await again.stop()


async def test_a_bad_command_is_refused_before_it_is_journaled_with_the_field_named():
    j = MemoryJournal()
    await j.open()
    d = daemon_on(j)
    d.start_loops()
    await d.recover()
    with pytest.raises(SeamError, match=r"pod.sweep_secrets refused: field grace_seconds: .*'ten'"):
        await d.submit([POISON[0]])
    with pytest.raises(SeamError, match="no machine takes it"):
        await d.submit([Command(at=T2030, name="pod.sweep_secret", args={})])
    await asyncio.sleep(0)
    assert j.last_seq == 0 and not d.state.quarantine  # nothing journaled, nothing to quarantine
    await d.stop()


def test_a_quarantined_session_says_so_in_its_status_and_its_decision_stays(monkeypatch):
    from engine.machines.session import observed as session_observed
    from tests.harness import LIVE
    from tests.scenario.test_session_support import SPEC, World, at, session_obj

    w = World()
    w.submit(SPEC)
    before = w.decision()

    def boom(obj):
        raise KeyError("metadata.uid")

    monkeypatch.setattr(session_observed, "session_view", boom)
    effects = w.s.observe(session_obj(SPEC, rv="9"), at(1))
    assert [e.type for e in effects] == ["log", "patch", "post_event"]
    assert effects[2].reason == "Quarantined" and effects[2].event_type == "Warning" and "KeyError" in effects[2].note
    ready = next(c for c in effects[1].patch["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "Quarantined" and "KeyError" in ready["message"]
    assert w.decision() == before  # frozen as it was
    monkeypatch.undo()
    w.s.observe(session_obj({**SPEC, "image": "other:2"}, rv="10"), at(2))
    assert w.decision() == before  # later records about it are skipped
    LIVE.remove(w.s)  # refolded in batches after the test, the probe would be gone


def test_kfold_run_refuses_a_boot_command_the_fold_cannot_take_in_one_line():
    from kfold.cli.commands.run import _refusal
    error = SeamError("command pod.sweep_secrets refused: field grace_seconds: Input should be a valid integer")
    from types import SimpleNamespace
    cfg = SimpleNamespace(journal=SimpleNamespace(path="/var/lib/kfold/journal.db"),
                          http=SimpleNamespace(listen="0.0.0.0:8080"))
    line = _refusal(error, cfg)
    assert line.startswith("command pod.sweep_secrets refused: field grace_seconds") and "nothing was journaled" in line
