"""Rules the seeds state that one-line mutants broke with every test green (issue 49), each written
from the seed's words, driven through the fold's public entry points (records in, effects out).

Each docstring cites its rule as ``seed NNN:L`` (line L of the seed file ``NNN_*.txt``), the same
citation as its row in docs/testing.md's seed table."""
from __future__ import annotations

import os
import subprocess

import pytest

from engine.machines.session import manifests
from tests.scenario.test_session_support import FINALIZER, ENV_SPEC, SPEC, World, at, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

TWO_APPS = {**SPEC, "apps": [*SPEC["apps"], {"name": "api", "ports": [{"port": 9090}]}]}


def _pod_gone(w: World, gen: int, when: float) -> None:
    w.answer("delete", "Pod", when=when)
    w.observe_pod(when, gen=gen, event="DELETED")


# -- teardown --------------------------------------------------------------------------------------
def test_an_owned_secret_already_gone_at_its_delete_is_the_teardowns_end_state():
    """Seed 001:239-240: a Secret delete answered NotFound is "the desired end state", not a
    failure: the stop finishes and nothing is blocked."""
    w = World().to_ready(ENV_SPEC)
    w.submit({**ENV_SPEC, "stopped": True}, 10)
    w.tear_down(11, kinds=("Secret",), result="not_found")
    _pod_gone(w, 1, 12)
    assert w.phase == "Stopped"
    assert not w.decision().blocked, "a Secret already gone blocks nothing"
    assert all(c.get("reason") != "TeardownBlocked" for c in w.status()["conditions"])


def test_a_deleted_session_whose_secret_is_already_gone_has_its_finalizer_removed():
    """Seed 001:239-240 under deletion: the teardown's 404 lets the finalizer go."""
    w = World().to_ready(ENV_SPEC)
    w.submit(ENV_SPEC, 10, deleting=True)
    w.tear_down(11, kinds=("Secret",), result="not_found")
    _pod_gone(w, 1, 12)
    removal = w.effects("patch", "Session")[-1]
    assert isinstance(removal.patch, list) and removal.patch[-1]["op"] == "remove", "the finalizer is removed"


# -- ended app containers (seed 002 noteEndedContainers) --------------------------------------------
def test_no_run_is_recorded_for_an_app_that_ends_after_a_user_stop():
    """Seed 002:405 (``if (userStopped) return;``): an app container that ends once the user asked
    for a stop records no run and posts no RunEnded Event."""
    w = World().to_ready()
    w.submit({**SPEC, "stopped": True}, 10)
    w.observe_pod(11, phase="Running", ip="10.0.0.7", node="node-a", ended={"web": ("Error", 137)}, rv="11")
    assert not w.effects("event"), "no RunEnded after a stop"
    assert not w.decision().runs


def test_an_app_that_ends_in_the_next_pod_is_reported_again():
    """Seed 002:157 (and 388-390): the ended-app set is cleared when a pod is replaced, so the same app
    ending in the next generation's pod is a second run (generation 2), with its own Event."""
    w = World().to_ready()
    w.observe_pod(20, phase="Running", ip="10.0.0.7", node="node-a", ready=True, ended={"web": ("Error", 1)}, rv="11")
    w.submit(TWO_APPS, 30)                       # a set-apps: the next generation's pod
    _pod_gone(w, 1, 31)
    w.answer("create", "Pod", when=32, obj=pod_obj(2))
    w.observe_pod(33, gen=2, phase="Running", ip="10.0.0.8", node="node-a", ready=True, ended={"web": ("Error", 2)},
                  rv="21")
    assert [(r.app, r.generation, r.exitCode) for r in w.decision().runs] == [("web", 1, 1), ("web", 2, 2)]
    assert [e.event_name for e in w.effects("event")] == ["demo-g1.run-ended.web", "demo-g2.run-ended.web"]


# -- waitForRunning ---------------------------------------------------------------------------------
@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
def test_a_pod_that_ends_before_serving_fails_the_session_naming_its_phase(phase):
    """Seed 002:200-201: a pod that reaches Failed *or Succeeded* while the Session waits for it to
    run fails the start with "pod reached <phase> before serving"."""
    w = World().to_provisioning(when=1)
    w.observe_pod(5, phase=phase)
    assert w.phase == "Failed"
    assert w.condition("Ready")["message"] == f"session pod demo-g1 reached {phase} before serving"


def test_provisioning_messages_are_posted_each_once_and_again_after_another():
    """Seed 002:203-207: a provisioning message is posted when it differs from the last one posted:
    the same message twice is posted once; A, B, A posts three."""
    w = World().to_provisioning(when=1)
    a = "0/3 nodes are available: insufficient cpu"
    w.observe_pod(2, unscheduled=a, rv="11")
    w.observe_pod(3, unscheduled=a, rv="12")
    w.observe_pod(4, waiting=("ImagePullBackOff", "Back-off"), rv="13")
    w.observe_pod(5, unscheduled=a, rv="14")
    posted = [e.message for e in w.effects("log") if a in e.message or "ImagePullBackOff" in e.message]
    assert len(posted) == 3 and a in posted[0] and "ImagePullBackOff: Back-off" in posted[1] and a in posted[2]
    assert w.status()["provisioningMessage"].endswith(a)


def test_a_refused_pod_create_fails_the_start_with_pod_create_failed():
    """Seed 002:121-130: a pod create the apiserver refuses fails the start ("failed to create pod:
    <why>"); kfold's Ready reason is PodCreateFailed and the message names the pod and the refusal."""
    w = World().to_creating()
    w.answer("create", "Pod", "invalid", when=1, status_reason="Invalid", message="spec.containers: Required value")
    assert w.phase == "Failed"
    ready = w.condition("Ready")
    assert ready["reason"] == "PodCreateFailed"
    assert ready["message"].startswith("could not create pod team/demo-g1: ") and "Required value" in ready["message"]


# -- the deadlines' defaults --------------------------------------------------------------------------
def test_with_no_deadline_configured_the_start_deadline_is_180_s():
    """Seed 002:38 (``START_DEADLINE_MS = 180_000``): ``session.configure`` without deadlines gives a
    pod 180 s to reach Running; a read confirms it and the start fails StartDeadlineExceeded."""
    w = World().to_provisioning(when=0)
    w.observe_pod(1, waiting=("ContainerCreating", ""), rv="11")
    w.s.advance_to(at(180) - 1)
    assert not w.pending("get", "Pod"), "not judged before 180 s"
    w.s.advance_to(at(180))
    w.answer("get", "Pod", when=181, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="12"))
    w.s.advance_to(at(187))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "StartDeadlineExceeded"
    assert w.condition("Ready")["message"].endswith("(180 s)")


def test_with_no_deadline_configured_the_ready_deadline_is_120_s():
    """Seed 002:43 (``WORKSPACE_READY_TIMEOUT_MS = 120_000``): ``session.configure`` without
    deadlines gives the workspace container 120 s from Running to become ready."""
    w = World().to_provisioning(when=0)
    w.run_pod(10, ready=False)
    w.s.advance_to(at(130) - 1)
    assert not w.pending("get", "Pod"), "not judged before 120 s"
    w.s.advance_to(at(130))
    w.answer("get", "Pod", when=131, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", rv="12"))
    w.s.advance_to(at(137))
    assert w.phase == "Failed" and w.condition("Ready")["message"].endswith("within the ready deadline (120 s)")


# -- the env Secret --------------------------------------------------------------------------------
def test_an_env_secret_gone_between_already_exists_and_its_read_is_created_again_at_once():
    """Seed 001:186-188 (a quorum read's NotFound is "absent") with seed 001:206-210 (a create race lost by
    name): the read after AlreadyExists finding the Secret gone means it is absent, so it is created
    again at once (no backoff, no retry Event), and the Session is not failed."""
    w = World()
    w.submit(ENV_SPEC)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(ENV_SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "Secret", "already_exists", when=1, status_reason="AlreadyExists")
    w.answer("get", "Secret", "not_found", when=2, status_reason="NotFound")
    assert len(w.pending("create", "Secret")) == 1, "created again at once, without waiting for a retry"
    assert not w.effects("event"), "an absent Secret is no failure to report"
    w.answer("create", "Secret", when=2)
    assert w.pending("create", "Pod") and w.phase == "Creating"


# -- the workspace-root marker ----------------------------------------------------------------------
def test_the_seed_bundle_is_written_once_with_the_workspace_root_marker(tmp_path):
    """Seed 002:142-155: the bundle is seeded at the first bring-up only (``bringUp(true)``; a
    set-apps brings up with ``false``), and the seed writes the workspace-root marker. The init
    container's own script, run twice by /bin/sh over a seed and a workspace directory: the first
    run copies the files and leaves the marker at the root; a user's edit then survives the second."""
    w = World(workspace_class="fast-ssd", workspace_seed="starter")
    w.submit(SPEC)
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "PersistentVolumeClaim", when=1, obj={"metadata": {"uid": "claim-uid"}})
    [pod] = w.pending("create", "Pod")
    [init] = pod.manifest["spec"]["initContainers"]
    seed, workspace = tmp_path / "seed", tmp_path / "workspace"
    seed.mkdir(), workspace.mkdir()
    (seed / "main.py").write_text("print('hello')\n")
    script = init["command"][-1].replace("/workspace", str(workspace)).replace("/seed", str(seed))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    subprocess.run(["/bin/sh", "-c", script], check=True, env=env)
    assert (workspace / "main.py").read_text() == "print('hello')\n"
    assert (workspace / manifests.SEED_MARKER).exists(), "the marker is at the workspace root"
    (workspace / "main.py").write_text("print('edited')\n")
    subprocess.run(["/bin/sh", "-c", script], check=True, env=env)
    assert (workspace / "main.py").read_text() == "print('edited')\n", "a seeded workspace is never seeded again"


# -- spec.cluster (seed 004's names) ---------------------------------------------------------------
def test_a_cluster_name_with_surrounding_blanks_places_the_session_on_that_cluster():
    """Seed 004:385 (``name = strings.TrimSpace(name)`` in ``Reach``): the cluster a Session names
    is trimmed before it is looked up, so " edge " is the tenant's registered cluster edge: no
    refusal, the pod made there."""
    from tests.scenario.test_session_tenancy import ON_EDGE, TWorld
    w = TWorld().to_creating({**ON_EDGE, "cluster": "  edge\t"}, 1)
    assert w.phase == "Creating"
    assert w.decision().target == "edge@acme"
    assert w.mine("create", "Pod", pending=True)[0].cluster == "edge@acme"
