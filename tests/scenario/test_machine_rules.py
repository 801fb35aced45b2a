"""Rules of the machines pinned from the spec and the Kubernetes API contract (issue 34,
item 3: survivors of the mutation sample over engine/machines), driven through ``World``."""
from __future__ import annotations

from typing import Any

import pytest

from engine import snapshot
from engine.core import Machines
from engine.machines.base import Machine
from engine.machines.repo.machine import RepoMachine
from engine.machines.session.ahead import AHEAD_GRACE_MS
from tests.harness import LIVE, T0, of_type
from tests.scenario.test_repo_ensure import APP, ATTACH, attached
from tests.scenario.test_repo_world import CLUSTER, NS as REPO_NS, RepoWorld
from tests.scenario.test_pod_world import KEY as POD_KEY, SECOND, answers, ask, ask_create, one, pod, world as pod_world
from tests.scenario.test_pod_orphans import east_pod, pod_deletes, sweep, two_clusters
from tests.scenario.test_session_bringup import URL, _relay
from tests.scenario.test_session_support import ENV_SPEC, FINALIZER, KEY, NS, SPEC, World, at, owned_obj, pod_obj, session_obj
from tests.scenario.test_session_tenancy import EDGE, ON_EDGE, TWorld, _in

pytestmark = pytest.mark.usefixtures("frozen_world")


def _stopped_to_secret(w: World) -> None:
    """Stop a Ready Session with env: its pod, Service and Ingress go; the Secret read is next."""
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    w.answer("delete", "Pod", when=10)
    w.observe_pod(10, event="DELETED")
    w.tear_down(11, kinds=tuple(k for k in ("Service", "Ingress") if w.pending("get", k)))


def test_a_teardown_read_refused_says_it_cannot_read_and_is_evented_on_the_session():
    w = World().to_ready(ENV_SPEC)
    _stopped_to_secret(w)
    w.answer("get", "Secret", "forbidden", when=11, message="secrets is forbidden")
    cond = w.condition("TeardownComplete")
    assert cond["reason"] == "TeardownBlocked"
    assert cond["message"].startswith("cannot read Secret demo-env: forbidden")
    [event] = [e for e in w.effects("post_event") if e.reason == "TeardownBlocked"]
    assert event.key == f"{KEY}#events" and event.regarding["kind"] == "Session"


def test_an_ended_app_container_is_evented_on_its_pod():
    """An Event's involvedObject names the object by apiVersion, kind, name, uid and namespace."""
    w = World().to_ready()
    w.observe_pod(20, phase="Running", ip="10.0.0.7", node="node-a", ready=True, ended={"web": ("Error", 3)})
    [event] = [e for e in w.effects("event") if e.reason == "RunEnded"]
    assert event.involved == {"apiVersion": "v1", "kind": "Pod", "name": "demo-g1", "uid": "pod-uid-1",
                              "namespace": "team"}
    assert event.event_type == "Warning", "a non-zero exit code"


def test_an_endpoint_deleted_leaves_no_error_behind():
    w = World().to_ready()
    w.submit({**SPEC, "apps": [{"name": "web", "io": "tty"}]}, 20)   # nothing left to route
    w.answer("get", "Service", when=21, obj=owned_obj("Service"))
    w.answer("delete", "Service", when=22)
    if w.pending("get", "Ingress"):
        w.answer("get", "Ingress", when=22, obj=owned_obj("Ingress"))
        w.answer("delete", "Ingress", when=22)
    assert w.decision().service.error == "" and w.decision().ingress.error == ""
    assert not [c for c in w.status()["conditions"] if c["reason"] == "UpsertFailed"]


def test_a_target_namespace_that_cannot_be_ensured_fails_the_session_with_namespace_failed():
    """Seed 001:171: a namespace create refused otherwise than Forbidden fails with "could not
    create namespace <ns>: <cause>"."""
    w = TWorld(registered=({**EDGE, "namespaces": []},))
    w.submit(ON_EDGE)
    w.answer("patch", "Session", obj=_in(session_obj(ON_EDGE, rv="3", finalizers=(FINALIZER,)), "sb-acme"))
    w.answer("ensure_namespace", None, "invalid", when=1, status_reason="Invalid", message="bad namespace")
    assert w.phase == "Failed"
    cond = w.condition("Ready")
    assert cond["reason"] == "NamespaceFailed"
    assert cond["message"].startswith("could not create namespace sb-acme: invalid")
    assert not w.mine("create", "Pod")


def _repo_bring_up(w: World) -> str:
    """Bring-up with one repository, ensured by the repo machine (relayed): the pod create is next."""
    w.submit({**SPEC, "repositories": [{"url": URL}]})
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(w.spec, rv=str(w.rv), finalizers=(FINALIZER,)))
    return w.decision().repos[0].key


def test_a_repository_the_repo_machine_cannot_ensure_fails_the_session_naming_it():
    w = World()
    repo = _repo_bring_up(w)
    _relay(w, "repo_failed", repo=repo, reason="credentials refused")
    assert w.phase == "Failed"
    cond = w.condition("Ready")
    assert cond["reason"] == "RepoFailed" and cond["message"] == f"repository {URL}: credentials refused"


def _past_the_ready_deadline(w: World, ready: bool) -> None:
    """The ready deadline (60 s from the pod Running at 5 s) fires; its read of the pod is answered
    with the pod as it is, and the read's grace passes."""
    w.s.advance_to(at(5 + 60 + 1))
    for read in [e for e in w.pending("get", "Pod") if e.machine == "session"]:
        w.s.outcome(read, "ok", at(5 + 60 + 2), obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a",
                                                          ready=ready, rv="12"))
    w.s.advance_to(at(5 + 60 + 30))


def _repo_pod_running(ready: bool) -> tuple[World, str]:
    w = World(ready_seconds=60)
    repo = _repo_bring_up(w)
    _relay(w, "repo_ensured", repo=repo, url=URL)
    w.answer("create", "Pod", obj=pod_obj(1))
    w.run_pod(5, ready=ready, node="node-a")
    return w, repo


def test_a_ready_deadline_with_only_kfolds_endpoint_requests_outstanding_does_not_fail_the_session():
    """The workspace is ready and its repository synced on the pod's node: what is missing is
    kfold's own Service/Ingress, so the deadline is judged again later, not failed."""
    w, repo = _repo_pod_running(ready=True)
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"present": True, "synced": True}})
    _past_the_ready_deadline(w, ready=True)
    assert w.phase == "Provisioning"


def test_a_ready_deadline_missed_by_the_workspace_container_blames_only_it():
    w, _ = _repo_pod_running(ready=False)
    _past_the_ready_deadline(w, ready=False)
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"] == ("the workspace container of pod demo-g1 did not become ready "
                                               "within the ready deadline (60 s)")


def test_a_ready_deadline_missed_by_a_repository_names_it_and_the_node():
    w, _ = _repo_pod_running(ready=True)
    _past_the_ready_deadline(w, ready=True)
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"] == (f"repositories not synced on node node-a: {URL} "
                                               "within the ready deadline (60 s)")


# -- the orphan-pod sweep ----------------------------------------------------------------------

def test_an_orphan_pod_deleted_is_not_reported_as_a_failure():
    s = two_clusters()
    _, [read] = sweep(s, [east_pod()])
    [delete] = [e for e in s.outcome(read, "not_found", at(3)) if e.type == "delete"]
    after = s.outcome(delete, "ok", at(4))
    assert not [e for e in of_type(after, "log") if e.level == "warning"]


def test_an_orphan_sweep_whose_list_fails_is_skipped_with_a_warning():
    s = two_clusters()
    [listed] = of_type(s.command("pod.sweep_orphans", at(1), cluster="east", namespace=NS, home="local"), "list")
    after = s.outcome(listed, "forbidden", at(2), status_reason="Forbidden")
    [log] = of_type(after, "log")
    assert log.level == "warning" and log.message.startswith("orphan-pod sweep skipped: listing pods failed")
    assert pod_deletes(s) == []


# -- replies and doubts ------------------------------------------------------------------------

def test_a_reply_for_a_session_kfold_does_not_track_is_ignored_without_error():
    w = World()
    _relay(w, "repo_status", repo="local/team/x", nodes={})
    assert w.decision() is None
    assert not w.s.state.quarantine
    [log] = [e for e in w.s.effects if e.type == "log" and e.key == KEY]
    assert log.level == "debug" and "no longer tracks" in log.message


def test_a_teardown_read_in_doubt_is_sent_again():
    w = World().to_ready(ENV_SPEC)
    _stopped_to_secret(w)
    [read] = w.pending("get", "Secret")
    w.s.command("effect.in_doubt", at(12), effect_id=read.id)
    [again] = w.pending("get", "Secret")
    assert again.id != read.id and (again.namespace, again.name) == (read.namespace, read.name)
    w.answer("get", "Secret", when=13, obj=owned_obj("Secret"))
    assert [e.uid for e in w.pending("delete", "Secret")] == ["secret-uid"]


# -- the finalizer and the Secret no longer wanted ---------------------------------------------

def test_a_finalizer_added_without_the_object_in_the_answer_still_lets_the_bring_up_go_on():
    w = World()
    w.submit(SPEC)
    w.answer("patch", "Session", obj={})
    assert w.decision().finalizer_step == "done", "the patch answered 200: the finalizer is on"


def test_a_session_deleted_before_its_finalizer_is_added_is_gone_not_failed():
    w = World()
    w.submit(SPEC)
    w.answer("patch", "Session", "not_found", status_reason="NotFound")
    d = w.decision()
    assert d is None or d.gone, "a 404: the Session is gone"
    assert not [e for e in w.effects("patch", "Session") if e.subresource == "status"], "no failure reported"


def test_a_foreign_secret_met_when_env_is_dropped_is_left_with_a_warning():
    w = World().to_ready(ENV_SPEC)
    w.submit(SPEC, 10)
    w.answer("get", "Secret", when=11, obj=owned_obj("Secret", labels={"app": "billing"}))
    assert not w.pending("delete", "Secret")
    logs = [e for e in w.s.effects if e.type == "log" and e.level == "warning" and "demo-env" in e.message]
    assert len(logs) == 1 and "is not Session demo's" in logs[0].message


# -- the repo machine's subscribers -----------------------------------------------------------

def test_a_session_that_releases_a_repository_hears_no_more_of_it_and_the_others_still_do():
    class Releaser(Machine):
        name = "releaser"
        commands = frozenset({"test.release"})

        def on_command(self, ctx, rec):
            ctx.tell("repo", rec.args["key"], "release", reply_to="probe", reply_key=rec.args["session"])

    w = RepoWorld()
    attached(w, "https://github.com/org/app", session="s1")
    attached(w, "https://github.com/org/app", session="s2")
    w.s.machines = Machines([RepoMachine(), w.probe, Releaser()])
    w.s.command("test.release", w.at, key=f"{CLUSTER}/{REPO_NS}/{APP}", session="s1")
    w.objs[APP]["status"] = {"nodes": [{"node": "n1", "present": True, "synced": True}]}
    w.observe(APP)
    assert [k for k, _, _ in w.replies("repo_status")] == ["s2"]


def _own_secret_met_holding(field: str) -> World:
    """The env Secret's create met AlreadyExists; the read finds this Session's Secret (uid
    ``secret-uid``) holding ``field``."""
    w = World()
    w.submit(ENV_SPEC)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(ENV_SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    [create] = w.pending("create", "Secret")
    w.answer("create", "Secret", "already_exists", status_reason="AlreadyExists")
    met = {**create.manifest, field: {"token": "c2VjcmV0"},
           "metadata": {**create.manifest["metadata"], "uid": "secret-uid", "resourceVersion": "9"}}
    w.answer("get", "Secret", obj=met)
    return w


@pytest.mark.parametrize("field", ["data", "stringData"])
def test_an_own_secret_met_holding_any_data_is_replaced(field):
    """kfold's env Secret holds only its env references (an annotation), never data."""
    [replace] = _own_secret_met_holding(field).pending("replace", "Secret")
    assert field not in replace.manifest


def test_a_secret_replaced_after_its_read_is_deleted_by_the_uid_it_was_read_with():
    """A replace (PUT) keeps the object's uid: the Secret kfold mended is deleted at the stop
    fenced by the uid its read found, with no read first, even when the replace's answer carries
    no object."""
    w = _own_secret_met_holding("data")
    w.answer("replace", "Secret", obj={})
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    assert not w.pending("get", "Secret"), "its uid is known from the read it was replaced after: no read"
    assert [d.uid for d in w.pending("delete", "Secret")] == ["secret-uid"]



OBJECT_META = {"name", "namespace", "labels", "annotations", "ownerReferences", "finalizers"}   # what kfold may set


@pytest.mark.parametrize("io, stdin, tty", [("tty", True, True), ("pipe", True, False), ("none", False, False)])
def test_what_is_created_is_named_where_it_lives_and_an_apps_terminal_is_what_its_io_asks(io, stdin, tty):
    """The apiserver takes a create's name and namespace from its body (a namespace other than the
    URL's is refused), whose metadata holds only ObjectMeta fields; an app with ``io: tty`` gets a
    terminal and stdin (Kubernetes: ``tty`` needs ``stdin``), ``pipe`` stdin alone, ``none`` neither.
    Seed table: seed 002:274."""
    spec = {**SPEC, "apps": [{"name": "web", "ports": [{"port": 8080}], "io": io}]}
    w = World().to_provisioning(spec, when=1)
    [pod] = w.effects("create", "Pod")
    assert (pod.manifest["metadata"]["name"], pod.manifest["metadata"]["namespace"]) == ("demo-g1", NS)
    assert set(pod.manifest["metadata"]) <= OBJECT_META
    [app] = [c for c in pod.manifest["spec"]["containers"] if c["name"] == "app-web"]
    assert (app["stdin"], app["tty"]) == (stdin, tty)
    w.run_pod(5)
    [service] = w.effects("create", "Service")
    assert (service.manifest["metadata"]["name"], service.manifest["metadata"]["namespace"]) == ("demo", NS)
    assert set(service.manifest["metadata"]) <= OBJECT_META


# -- the pod machine ---------------------------------------------------------------------------

def test_a_second_create_for_the_same_generation_joins_the_first_and_both_callers_hear():
    s = pod_world()
    create = one(ask_create(s, T0), "create")
    again = ask(s, "create", T0, POD_KEY, "again", manifest=create.manifest, session="s1", generation=1)
    assert not [e for e in again if e.type == "create"], "one request"
    s.outcome(create, "ok", T0 + SECOND, obj=pod("A", "1"))
    assert answers(s, "s1") == answers(s, "again") == [("pod_created", {"pod": POD_KEY, "uid": "A", "adopted": False})]


def test_a_repo_create_in_doubt_found_absent_by_the_quorum_read_is_created():
    w = RepoWorld()
    w.at = ATTACH
    w.ensure("https://github.com/org/app", APP)
    (create,) = w.s.pending()
    w.s.outcome(create, "transient", ATTACH)   # lost, and it did not happen
    (get,) = w.s.pending()
    assert get.type == "get"
    w.settle()
    assert APP in w.objs and w.replies("repo_ensured")


def _settling_read() -> tuple[World, Any]:
    """A suspended Session's record sees another replica's pod of generation 2; after the grace its
    quorum read of the Session (``session.ahead``) is in flight."""
    w = World().to_ready()
    w.submit({**SPEC, "suspended": True}, 10)
    w.answer("delete", "Pod", when=10)
    w.observe_pod(11, gen=1, event="DELETED")
    w.s.observe(pod_obj(2, phase="Running", ip="10.0.0.9", node="n", ready=True, rv="102"), at(20), event="ADDED")
    w.s.advance_to(at(20 + AHEAD_GRACE_MS / 1000))
    [read] = w.pending("get", "Session")
    return w, read


def test_a_settling_read_that_finds_the_session_recreated_keeps_it_on_its_home_cluster():
    """A new uid under the same name is another Session: its record starts over, still on the
    cluster the Session lives on, and what it asks for goes there."""
    w, read = _settling_read()
    w.rv += 1
    fresh = session_obj(SPEC, rv=str(w.rv))
    fresh["metadata"]["uid"] = "uid-demo-2"
    w.s.outcome(read, "ok", at(20 + AHEAD_GRACE_MS / 1000 + 1), obj=fresh)
    assert not w.s.state.quarantine
    d = w.decision()
    assert (d.uid, d.home) == ("uid-demo-2", "local")
    assert {e.cluster for e in w.s.effects[-3:] if hasattr(e, "cluster")} <= {"local"}


# -- the session machine: records that survive a restart, requests repeated ---------------------

def _loads_back_equal(w: World) -> None:
    """A snapshot of the state loads back equal (engine.snapshot: ``load(dump(s)) == s`` for every
    state the fold can produce), so a restart from it decides as this process would."""
    data = snapshot.dump(w.s.state)
    assert snapshot.load(data).table("session") == w.s.state.table("session")


def test_a_status_write_in_doubt_leaves_a_record_a_snapshot_loads_back():
    """A provisioning message is written; the pod runs (a step in passing: not written) and the
    write is in doubt after a restart: what was written is unknown, and the record says so."""
    w = World().to_provisioning()
    w.observe_pod(2, waiting=("ContainerCreating", ""))
    [write] = [e for e in w.s.pending("patch") if e.subresource == "status"]
    w.run_pod(3, ready=False)
    w.s.command("effect.in_doubt", at(4), effect_id=write.id)
    assert w.decision().status_written == "", "written again on the next decision that says something"
    _loads_back_equal(w)


def test_a_settling_read_answered_leaves_a_record_a_snapshot_loads_back():
    w, read = _settling_read()
    w.rv += 1
    w.s.outcome(read, "ok", at(20 + AHEAD_GRACE_MS / 1000 + 1),
                obj=session_obj({**SPEC, "suspended": True}, rv=str(w.rv), finalizers=(FINALIZER,)))
    assert w.decision().ahead_read == ""
    _loads_back_equal(w)


def test_the_pod_created_log_line_names_the_pods_uid():
    w = World().to_provisioning()
    [log] = [e for e in w.s.effects if e.type == "log" and e.key == KEY and e.message == "session demo: pod demo-g1 created"]
    assert log.fields["uid"] == "pod-uid-1"


def test_a_teardown_read_that_fails_transiently_is_sent_again():
    w = World().to_ready(ENV_SPEC)
    _stopped_to_secret(w)
    [read] = w.pending("get", "Secret")
    w.answer("get", "Secret", "transient", when=12, message="connection reset")
    assert [p.effect.id for p in w.s.waiting_retries()] == [read.id], "the same read waits for its retry"
    assert [e.id for e in w.s.advance_to(at(13)) if e.type == "get"] == [read.id]
    assert [e.id for e in w.pending("get", "Secret")] == [read.id], "no second read beside it"
    assert not w.s.state.quarantine


def test_a_workspace_claim_read_in_doubt_is_created_again():
    """The claim's create met AlreadyExists and its read is in doubt after a restart: kfold knows
    nothing of the claim, so it creates it again (AlreadyExists reads it again)."""
    w = World(workspace_class="fast-ssd", workspace_size="5Gi")
    w.submit(SPEC, 0)
    w.rv += 1
    w.answer("patch", "Session", when=0, obj=session_obj(SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "PersistentVolumeClaim", "already_exists", when=1, status_reason="AlreadyExists")
    [read] = w.pending("get", "PersistentVolumeClaim")
    w.s.command("effect.in_doubt", at(2), effect_id=read.id)
    assert len(w.pending("create", "PersistentVolumeClaim")) == 1, "created again"
    assert not w.pending("create", "Pod"), "the pod still waits for its workspace"


def test_a_pod_delete_retry_due_once_the_session_is_no_longer_stopping_sends_nothing():
    """The retry of a blocked pod delete asks only while Stopping; due in any other phase (its
    timer not yet cancelled), it drops the blocked pod and sends nothing."""
    from dataclasses import replace
    from engine.core import Timer
    w = World().to_ready()
    LIVE.remove(w.s)   # its state is set by hand below: no journal folds to it
    d = w.decision()
    pk = f"local/{NS}/demo-g1"
    tid = f"session:{KEY}:pod-delete-retry"
    w.s.state = replace(w.s.state, tables=w.s.state.tables.set("session", w.s.state.table("session").set(
        KEY, d.but(blocked_pod=pk))), timers=w.s.state.timers.set(
        tid, Timer(id=tid, due=at(30), machine="session", key=KEY, name="pod-delete-retry", cluster="local")))
    before = len(w.s.effects)
    w.s.advance_to(at(30))
    assert not w.s.state.quarantine
    after = w.decision()
    assert after.phase == "Ready" and after.blocked_pod == ""
    assert not [e for e in w.s.effects[before:] if e.type in ("delete", "get", "create")]


def test_a_reread_due_while_the_finalizer_removal_is_in_flight_leaves_the_removal_its_answer():
    """A re-read of the Session (``retry.REREAD``) comes due while the finalizer's removal patch is
    in flight: the Session is read, and the patch still answers as the removal it is: its 422 (the
    list changed under its ``test`` op) means read again and retry, never "cannot add finalizer"."""
    from dataclasses import replace
    from engine.core import Timer
    w = World().to_ready()
    w.submit(SPEC, 10, deleting=True)
    w.answer("delete", "Pod", when=11)
    w.observe_pod(12, event="DELETED")
    assert w.phase == "Stopped" and w.decision().finalizer_step == "removing"
    LIVE.remove(w.s)   # its state is set by hand below: no journal folds to it
    tid = f"session:{KEY}:reread"
    w.s.state = replace(w.s.state, timers=w.s.state.timers.set(
        tid, Timer(id=tid, due=at(20), machine="session", key=KEY, name="reread", cluster="local")))
    w.s.advance_to(at(20))
    assert len(w.pending("get", "Session")) == 1, "read"
    w.answer("patch", "Session", "invalid", when=21, status_reason="Invalid", message="the test operation failed")
    assert not [e for e in w.s.effects if e.type == "log" and "cannot add finalizer" in e.message]
    assert w.phase == "Stopped" and not w.decision().failure


def test_a_failed_session_given_another_invalid_spec_reports_the_new_fault():
    """The Ready condition of a Session failed on an invalid spec names what is wrong with the spec
    it holds now, not with the one it failed on first (DESIGN 13: the status is about the spec)."""
    w = World()
    w.submit({**SPEC, "image": 3})
    assert w.phase == "Failed" and w.condition("Ready")["message"].startswith("spec.image")
    w.submit({**SPEC, "apps": [{"name": "Web!"}]}, 5)
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"].startswith("spec.apps[0].name"), w.condition("Ready")
    assert w.decision().failure.message.startswith("spec.apps[0].name")
