"""What a real kubelet answers about kfold's pods, and what kfold reports from it: each case's pod
statuses as the real node gave them (tests/data/kubelet/, scripts/record_kubelet.py: kubelet and
containerd of the real node, pods built by kfold's own builder) fed to the session machine as watch
events, in the order they came.

- A pod that waits (an image that cannot be pulled, an env key its Secret lacks) names its waiting
  reason in the Ready condition's message and in an Event, once per change; the start deadline
  still fails the Session, naming what it waited for.
- An app container that ends (exit 0, exit 1) is a run's end, reported with seed 002's texts and
  exit code, once per generation; the Session serves on.
- The workspace container ending fails the Session (the pod stays Running on its apps).
- A journal written before kfold reported containers' states (``session.configure`` without
  ``status_rules`` 3) refolds as it was decided: none of the above.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from engine.seams import STATUS_RULES
from tests.scenario.test_session_support import NAME, NS, SPEC, World, at, pod_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

DATA = Path(__file__).resolve().parents[1] / "data" / "kubelet"


def answers(case: str) -> list[dict[str, Any]]:
    """The case's pod statuses as generation 1's pod of the World's Session (``demo-g1`` in ``team``):
    only the names, labels, uid and resourceVersions are the World's; the rest is the kubelet's."""
    recorded = json.loads((DATA / f"{case}.json").read_text())
    out = []
    for i, obj in enumerate(recorded["observations"]):
        obj = copy.deepcopy(obj)
        md = obj["metadata"]
        md.update(name=f"{NAME}-g1", namespace=NS, uid="pod-uid-1", resourceVersion=str(100 + i))
        md["labels"] = {**md["labels"], "kfold.dev/session": NAME}
        md.pop("ownerReferences", None)
        out.append(obj)
    return out


def world(spec: dict[str, Any] | None = None, states: bool = True) -> World:
    """``states``: ``session.configure`` states ``status_rules`` 3 or later, as kfold run's boot does
    (else 2: the rules before containers' states were reported)."""
    w = World(status_rules=STATUS_RULES if states else 2)
    return w.to_provisioning(spec, when=1)


def feed(w: World, objs: list[dict[str, Any]], start: float = 2) -> None:
    for i, obj in enumerate(objs):
        w.s.observe(obj, at(start + i))


def waiting_events(w: World) -> list[tuple[str, str]]:
    return [(e.event_type, e.reason) for e in w.effects("post_event") if e.action == "BringUp"
            and e.reason not in ("Ready", "StartDeadlineExceeded")]


def test_an_image_that_cannot_be_pulled_is_named_in_ready_and_an_event_once_per_change():
    w = world()
    feed(w, answers("image_missing"))
    ready = w.condition("Ready")
    assert ready["reason"] == "Provisioning" and ready["status"] == "False"
    assert ready["message"].startswith("waiting for pod demo-g1 to serve: container app-web: ImagePullBackOff: "
                                       'Back-off pulling image "localhost/kfold/absent:1": ErrImagePull: ')
    assert "connection refused" in ready["message"], "the kubelet's own words"
    assert w.status()["provisioningMessage"] == ready["message"].split(": ", 1)[1]
    # the kubelet's answers change the first waiting container's reason twice (ContainerCreating,
    # then ImagePullBackOff while the workspace container turns between ErrImagePull and
    # ImagePullBackOff under it): one Event each
    assert waiting_events(w) == [("Normal", "ContainerCreating"), ("Warning", "ImagePullBackOff")]
    note = w.effects("post_event")[-1].note
    assert note.startswith("generation 1: pod demo-g1: container app-web: ImagePullBackOff: Back-off pulling image")
    writes = len(w.effects("patch", "Session"))
    feed(w, answers("image_missing")[-1:], start=20)   # the same answer again (a relist, a re-watch)
    assert len(w.effects("patch", "Session")) == writes and len(waiting_events(w)) == 2, "each once"


def test_the_start_deadline_still_fails_a_pod_waiting_on_its_image_and_names_what_it_waited_for():
    w = world()
    last = answers("image_missing")
    feed(w, last)
    w.s.advance_to(at(1 + 180))
    assert w.phase == "Provisioning", "first a quorum read of the pod, made after the deadline"
    w.answer("get", "Pod", when=182, obj=last[-1])
    w.s.advance_to(at(1 + 186))
    assert w.phase == "Failed"
    ready = w.condition("Ready")
    assert ready["reason"] == "StartDeadlineExceeded"
    assert ready["message"].startswith("pod demo-g1 did not reach Running within the start deadline (180 s): "
                                       "container app-web: ImagePullBackOff: Back-off pulling image")
    assert w.pending("delete", "Pod"), "the pod is released"


def test_image_pull_policy_never_is_on_every_container_and_its_error_is_reported():
    w = world({**SPEC, "imagePullPolicy": "Never"})
    pod = w.effects("create", "Pod")[0].manifest
    assert {c["name"]: c["imagePullPolicy"] for c in pod["spec"]["containers"]} == {"workspace": "Never", "app-web": "Never"}
    feed(w, answers("image_never_pulled"))
    assert w.condition("Ready")["message"] == (
        'waiting for pod demo-g1 to serve: container app-web: ErrImageNeverPull: Container image '
        '"localhost/kfold/absent:1" is not present with pull policy of Never')
    assert waiting_events(w) == [("Normal", "ContainerCreating"), ("Warning", "ErrImageNeverPull")]


def test_an_env_key_its_secret_lacks_is_named_in_ready_and_an_event():
    w = world()
    feed(w, answers("secret_key_missing"))
    assert w.condition("Ready")["message"] == (
        "waiting for pod demo-g1 to serve: container app-web: CreateContainerConfigError: "
        "couldn't find key absent in Secret kubelet-secret-key-missing/rec-env")
    assert waiting_events(w) == [("Normal", "ContainerCreating"), ("Warning", "CreateContainerConfigError")]


def test_at_events_level_warning_only_the_waiting_reasons_that_are_warnings_are_posted():
    w = World(status_rules=STATUS_RULES, event_level="Warning").to_provisioning(when=1)
    feed(w, answers("image_missing"))
    assert waiting_events(w) == [("Warning", "ImagePullBackOff")]


def _serve(w: World, objs: list[dict[str, Any]]) -> None:
    feed(w, objs)
    if w.pending("create", "Service"):
        w.publish_endpoints(10)


def test_apps_that_exit_0_and_1_are_runs_ended_with_the_seeds_texts_and_the_session_serves_on():
    spec = {**SPEC, "apps": [{"name": "done"}, {"name": "bad"}, {"name": "web", "ports": [{"port": 8080}]}]}
    w = world(spec)
    _serve(w, answers("apps_end"))
    assert w.phase == "Ready", "an app's run ending is not the Session's end"
    assert w.status()["runs"] == [
        {"app": "bad", "generation": 1, "reason": "application container Error (exit code 1)", "exitCode": 1},
        {"app": "done", "generation": 1, "reason": "application container exited (code 0)", "exitCode": 0}]
    events = [(e.event_type, e.reason, e.message) for e in w.effects("event")]
    assert events == [("Warning", "RunEnded", "app bad: application container Error (exit code 1)"),
                      ("Normal", "RunEnded", "app done: application container exited (code 0)")]
    feed(w, answers("apps_end")[-1:], start=20)   # the same status again
    assert len(w.effects("event")) == 2 and len(w.status()["runs"]) == 2, "once per generation"


def test_an_app_that_ends_after_a_stop_is_not_reported():
    spec = {**SPEC, "apps": [{"name": "done"}, {"name": "bad"}, {"name": "web", "ports": [{"port": 8080}]}]}
    w = world(spec)
    objs = answers("apps_end")
    feed(w, objs[:-1])
    w.submit({**spec, "stopped": True}, 5)
    feed(w, objs[-1:], start=6)
    assert w.phase == "Stopping"
    assert not w.effects("event") and w.decision().runs == ()


def test_the_workspace_container_ending_fails_the_session_while_its_pod_runs_on():
    w = world()
    objs = answers("workspace_ends")
    assert objs[-1]["status"]["phase"] == "Running", "restartPolicy Never: the app keeps the pod Running"
    feed(w, objs)
    assert w.phase == "Failed"
    ready = w.condition("Ready")
    assert (ready["reason"], ready["message"]) == (
        "WorkspaceEnded", "pod demo-g1: workspace container Error (exit code 3) before serving")
    assert w.pending("delete", "Pod"), "the pod is released"
    assert [e.reason for e in w.effects("post_event") if e.event_type == "Warning"][-1] == "WorkspaceEnded"


def test_a_ready_sessions_workspace_ending_fails_it_without_before_serving():
    w = world()
    objs = answers("workspace_ends")
    running = copy.deepcopy(objs[-1])
    for c in running["status"]["containerStatuses"]:
        c["state"], c["ready"] = {"running": {"startedAt": "2030-01-01T00:00:03Z"}}, True
    _serve(w, [*objs[:-1], running])
    assert w.phase == "Ready"
    feed(w, objs[-1:], start=20)
    assert (w.condition("Ready")["reason"], w.condition("Ready")["message"]) == (
        "WorkspaceEnded", "pod demo-g1: workspace container Error (exit code 3)")


def test_every_container_ending_fails_on_the_workspace_first_as_the_kubelet_reports_it():
    w = world()
    feed(w, answers("all_end"))
    assert w.condition("Ready")["reason"] == "WorkspaceEnded"
    assert w.condition("Ready")["message"] == "pod demo-g1: workspace container exited (code 0) before serving"


def test_a_journal_written_before_containers_states_were_reported_refolds_as_it_was_decided():
    w = world(states=False)
    feed(w, answers("image_missing"))
    assert w.condition("Ready")["message"] == "waiting for pod demo-g1 to serve"
    assert w.status()["provisioningMessage"].startswith("container app-web: ImagePullBackOff")
    assert waiting_events(w) == []
    old = world(states=False)
    feed(old, answers("workspace_ends"))
    assert old.phase == "Provisioning", "the workspace's end was not a verdict then"


def test_the_daemons_configure_asks_for_containers_states():
    from kfold.daemon.boot import configure_command
    from kfold.daemon.config import Config
    cmd = configure_command(Config.model_validate({"namespaces": ["team"]}), None)
    assert cmd.args["status_rules"] == STATUS_RULES >= 3


def test_a_pod_someone_else_deletes_is_gone_at_once_not_failed_when_its_containers_stop():
    """An eviction or ``kubectl delete`` of a serving pod on a real node: its deletionTimestamp
    comes first, then the kubelet stops its containers (the test app exits 0 on SIGTERM) and reports
    the pod Succeeded before it is removed. The Session fails as for a pod that disappeared, on the
    first of these, and kfold sends no delete of its own."""
    w = World(status_rules=STATUS_RULES).to_ready()
    going = pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", ready=True, rv="20")
    going["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:20Z"
    w.s.observe(going, at(20))
    assert (w.phase, w.condition("Ready")["reason"], w.condition("Ready")["message"]) == (
        "Failed", "PodGone", "pod demo-g1 disappeared after serving")
    assert not w.effects("delete", "Pod"), "it is being deleted already"
    ended = pod_obj(1, phase="Succeeded", ended={"web": ("Completed", 0)}, rv="21")
    ended["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:20Z"
    w.s.observe(ended, at(21))
    w.s.observe(ended, at(22), event="DELETED")
    assert w.condition("Ready")["reason"] == "PodGone" and not w.effects("event"), "no run ended after it went"
    old = World(status_rules=2).to_ready()
    old.s.observe(going, at(20))
    assert old.phase == "Ready", "before status_rules 3 it waited for the pod's end"
