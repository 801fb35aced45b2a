"""The table rows no other scenario reaches: what each machine does with an input that comes only
after a restart, from an older kfold's state, or late (``test_zz_table_rows.py`` holds every row
reached). A timer "from an earlier version" is put into the state as a snapshot would hold it."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from engine.core import Machines, Timer, default_machines
from engine.machines.base import Machine
from journal.records import Deadline
from tests import harness
from tests.harness import T0, Scenario
from tests.scenario.test_pod_world import KEY, SECOND, ask, ask_delete, pod, world
from tests.scenario.test_repo_world import RepoWorld

APP = "github-com-org-app"   # the cache key of https://github.com/org/app


def old_timer(s: Scenario, machine: str, key: str, name: str, due: int) -> None:
    """A timer an earlier kfold set and a snapshot still holds."""
    tid = f"{machine}:{key}:{name}"
    s.state = replace(s.state, timers=s.state.timers.set(tid, Timer(tid, due, machine, key, name)))


def fire(s: Scenario, machine: str, key: str, name: str, at: int) -> tuple[Any, ...]:
    old_timer(s, machine, key, name, at)
    return s.feed(Deadline(at=at, timer=f"{machine}:{key}:{name}", machine=machine, key=key, name=name, due=at))


def logs(effects: Any, text: str) -> list[Any]:
    return [e for e in effects if e.type == "log" and text in e.message]


# -- pod -------------------------------------------------------------------------------------------

def test_a_deleted_event_of_a_pod_kfold_does_not_track_changes_nothing():
    s = world()
    assert s.observe(pod("u9", "3"), T0, event="DELETED") == ()
    assert s.decision("pod", KEY) is None


def test_an_orphan_pod_sweep_asked_for_while_one_runs_is_skipped_with_a_note():
    s = world()
    s.command("pod.sweep_orphans", T0, cluster="local", namespace="ns", home="local")
    again = s.command("pod.sweep_orphans", T0 + SECOND, cluster="local", namespace="ns", home="local")
    assert [e.type for e in again] == ["log"] and logs(again, "the previous sweep is still running")


@pytest.mark.parametrize("operation", ["create", "delete"])
def test_a_quorum_read_in_doubt_after_a_restart_is_sent_again_never_a_write(operation):
    s = world()
    if operation == "create":
        ask(s, "create", T0, manifest={"spec": {}}, session="s1", generation=1)
        s.outcome(s.pending("create")[0], "already_exists", T0, status_reason="AlreadyExists")
    else:
        ask_delete(s, T0)   # no fence yet: a quorum read first
    read = s.pending("get")[0]
    again = s.command("effect.in_doubt", T0 + SECOND, effect_id=read.id)
    assert [e.type for e in again if e.type != "log"] == ["get"]
    assert s.decision("pod", KEY).phase == ("confirming" if operation == "create" else "reading")


def test_an_earlier_versions_retry_timer_sends_no_second_read_while_one_is_out():
    s = world()
    ask_delete(s, T0)
    assert [e.type for e in fire(s, "pod", KEY, "retry", T0 + SECOND)] == []
    assert len(s.pending("get")) == 1


def test_an_earlier_versions_timer_on_an_idle_pod_or_an_empty_sweep_key_decides_nothing():
    s = world()
    s.observe(pod("u1", "1"), T0)
    assert fire(s, "pod", KEY, "budget", T0 + SECOND) == ()
    assert fire(s, "pod", "local/ns/#sweep", "retry", T0 + SECOND) == ()
    assert s.decision("pod", KEY).phase == "idle"


def test_an_earlier_versions_namespace_retry_timer_waits_for_the_ensure_in_flight():
    s = world()
    ask(s, "ensure_namespace", T0, key="local/team/")
    assert fire(s, "pod", "local/team/", "retry", T0 + SECOND) == ()
    assert len(s.pending("ensure_namespace")) == 1


# -- repo ------------------------------------------------------------------------------------------

def test_a_deleted_repo_is_known_as_gone_and_its_status_rows_go():
    w = RepoWorld()
    w.put(APP, "https://github.com/org/app", nodes=[{"node": "n1", "present": True}])
    w.observe(APP)
    w.observe(APP, event="DELETED")
    entry = w.s.decision("repo", f"local/team/{APP}")
    assert not entry.exists and entry.uid == "" and entry.nodes == ()


def test_an_answer_no_repo_operation_awaits_is_noted_and_decides_nothing():
    """A Repo record whose operation awaits another request than the one answered (as an older
    kfold may have left it): the answer is logged and nothing moves."""
    w = RepoWorld()
    w.ensure("https://github.com/org/app", APP)
    sent = w.s.pending()[0]
    entry = w.s.decision("repo", f"local/team/{APP}")
    table = w.s.state.tables["repo"].set(entry.key, entry.but(op=entry.op.but(effect_id="0.0")))
    w.s.state = replace(w.s.state, tables=w.s.state.tables.set("repo", table))
    harness.LIVE.remove(w.s)   # an edited state: no journal folds to it, so no batch re-fold either
    effects = w.s.outcome(sent, "ok", w.at, obj=None)
    assert [e.type for e in effects] == ["log"] and logs(effects, "outcome for no operation in flight")
    assert w.s.decision("repo", entry.key).phase == entry.phase


# -- session ---------------------------------------------------------------------------------------

class Teller(Machine):
    """Tells the session machine what a reply from another machine would say."""

    name = "teller"
    commands = frozenset({"test.tell"})

    def on_command(self, ctx, rec):
        a = rec.args
        ctx.tell("session", a["key"], a["message"], **a["args"])


def session_world() -> Scenario:
    s = Scenario(Machines([*default_machines().all, Teller()]))
    s.command("session.configure", T0, clusters=["local"], base_domain="sessions.example.test")
    return s


GONE = "local/team/gone"
REPLIES = {
    "namespace_ready": {"namespace": "team"},
    "namespace_failed": {"namespace": "team", "reason": "forbidden"},
    "repo_ensured": {"repo": "local/team/app", "url": "https://github.com/org/app"},
    "repo_failed": {"repo": "local/team/app", "reason": "clone failed"},
    "pod_create_failed": {"pod": "local/team/gone-g1", "reason": "taken"},
    "pod_gone": {"pod": "local/team/gone-g1"},
    "pod_delete_failed": {"pod": "local/team/gone-g1", "reason": "forbidden"},
    "secret_listed": {"namespace": "team", "name": "gone-env", "uid": "u1", "rv": "1"},
}


@pytest.mark.parametrize("message", sorted(REPLIES))
def test_a_reply_about_a_session_kfold_no_longer_tracks_changes_nothing(message):
    s = session_world()
    effects = s.command("test.tell", T0, key=GONE, message=message, args=REPLIES[message])
    assert [e for e in effects if e.type != "log"] == []
    assert s.decision("session", GONE) is None


@pytest.mark.parametrize("name", ["ahead", "reread", "secret-retry", "pod-delete-retry", "start", "lists"])
def test_a_timer_of_a_session_kfold_no_longer_tracks_changes_nothing(name):
    s = session_world()
    assert fire(s, "session", GONE, name, T0 + SECOND) == ()
    assert s.decision("session", GONE) is None


def ready_world() -> Any:
    from tests.scenario.test_session_support import SPEC, World
    w = World().to_ready(SPEC)
    w.s.machines = Machines([*default_machines().all, Teller()])
    return w


@pytest.mark.parametrize("message", ["namespace_failed", "repo_failed"])
def test_a_late_failure_reply_to_a_ready_session_leaves_it_ready_and_sends_nothing(message):
    from tests.scenario.test_session_support import KEY
    w = ready_world()
    args = {**REPLIES[message], **({"repo": "local/team/app"} if message == "repo_failed" else {})}
    effects = w.s.command("test.tell", w.s.state.at, key=KEY, message=message, args=args)
    assert [e for e in effects if e.type != "log"] == []
    assert w.decision().phase == "Ready"


def test_an_earlier_versions_bring_up_deadline_on_a_ready_session_changes_nothing():
    from tests.scenario.test_session_support import KEY
    w = ready_world()
    assert fire(w.s, "session", KEY, "ready", w.s.state.at + SECOND) == ()
    assert w.decision().phase == "Ready"


def test_a_deleted_event_of_a_session_kfold_does_not_track_changes_nothing():
    from tests.scenario.test_session_support import session_obj
    s = session_world()
    assert s.observe(session_obj({"apps": []}, name="gone"), T0 + SECOND, event="DELETED") == ()
    assert s.decision("session", GONE) is None


@pytest.mark.parametrize("doubt", [False, True], ids=["answered", "in doubt"])
def test_an_answer_about_a_session_deleted_since_decides_nothing(doubt):
    """The finalizer patch sent at bring-up answers (or is in doubt after a restart) once the
    Session's DELETED was folded: nothing is sent, no record comes back."""
    from tests.scenario.test_session_support import SPEC, World, at, session_obj
    w = World()
    w.submit(SPEC)
    [patch] = w.pending("patch", "Session")
    w.s.observe(session_obj(SPEC, rv=str(w.rv)), at(1), event="DELETED")
    assert w.decision() is None
    effects = (w.s.command("effect.in_doubt", at(2), effect_id=patch.id) if doubt
               else w.s.outcome(patch, "ok", at(2), obj={}))
    assert [e for e in effects if e.type != "log"] == []
    assert w.decision() is None and not w.s.state.quarantine


def test_a_finalizer_patch_in_doubt_is_followed_by_a_quorum_read_of_the_session():
    """What the patch did is unknown after a restart: the Session is read (quorum GET), and the
    finalizer step waits for that answer."""
    from tests.scenario.test_session_support import SPEC, World, at
    w = World()
    w.submit(SPEC)
    [patch] = w.pending("patch", "Session")
    w.s.command("effect.in_doubt", at(1), effect_id=patch.id)
    [read] = w.pending("get", "Session")
    assert (read.namespace, read.name, read.cluster) == ("team", "demo", "local")
    assert w.decision().finalizer_step != "done"


def test_an_endpoint_create_in_doubt_is_sent_again():
    """A Service create in doubt after a restart is sent again (the next one meets AlreadyExists
    and reads, if the first landed): an endpoint upsert is harmless to repeat."""
    from tests.scenario.test_session_support import World, at
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    [create] = w.pending("create", "Service")
    w.s.command("effect.in_doubt", at(6), effect_id=create.id)
    [again] = w.pending("create", "Service")
    assert again.id != create.id and (again.namespace, again.name) == (create.namespace, create.name)
    assert w.decision().service.tries == 1
