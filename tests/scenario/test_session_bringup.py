"""Session bring-up: create, provisioning messages, deadlines on the server clock, pod failures."""
from __future__ import annotations

import pytest

from engine.core import Machines
from engine.machines import all_machines
from engine.machines.base import Machine
from engine.repo_names import cache_key
from engine.machines.session.model import FINALIZER
from engine.machines.session.deadlines import READ_GRACE_MS
from tests.conftest import run_in_all_worlds
from tests.scenario.test_session_support import KEY, SPEC, World, at, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")


def test_a_session_comes_up_in_order_and_serves_on_its_endpoints():
    w = World()
    w.submit(SPEC)
    assert w.effects("patch", "Session")[0].patch["metadata"]["finalizers"] == [FINALIZER]
    assert w.pending("create", "Pod") and w.pending("patch", "Session"), "the pod create goes beside the finalizer patch"
    assert not w.effects("ensure_namespace"), "the pod runs beside its Session: its namespace exists"
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(SPEC, rv=str(w.rv), finalizers=(FINALIZER,)))
    w.answer("create", "Pod", when=1, obj=pod_obj(1))
    w.run_pod(5)
    w.publish_endpoints(6)
    pod = w.effects("create", "Pod")[0]
    assert pod.name == "demo-g1"
    assert pod.manifest["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kfold",
                                                  "kfold.dev/session": "demo", "kfold.dev/generation": "1"}
    assert pod.manifest["metadata"]["ownerReferences"] == [
        {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "name": "demo", "uid": "uid-demo"}], \
        "a Session deleted before its finalizer landed takes its pod with it"
    [service] = w.effects("create", "Service")
    selector = service.manifest["spec"]["selector"]
    assert selector == {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "demo", "kfold.dev/generation": "1"}
    assert selector.items() <= pod.manifest["metadata"]["labels"].items(), "the Service selects this generation's pod"
    assert w.phase == "Ready"
    assert w.status()["podName"] == "demo-g1"
    assert w.status()["endpoints"] == [{"app": "web", "port": 8080, "host": "8080-demo.sessions.example.test",
                                        "url": "http://8080-demo.sessions.example.test"}]
    written = [e.patch["status"]["phase"] for e in w.effects("patch", "Session") if e.subresource == "status"]
    assert written == ["Ready"], "generation 1 is written once: Ready, with its endpoints"
    assert not w.effects("create", "Secret"), "no env references: no Secret"


def test_endpoints_are_made_once_the_pod_runs_and_ready_waits_for_them():
    """Seed 002:481: the Service and Ingress are owned by the pod."""
    w = World().to_provisioning()
    w.observe_pod(2, phase="Pending", node="node-a")
    assert not w.pending("create"), "nothing routed to a pod that has no address yet"
    w.run_pod(5)
    assert [e.kind for e in w.pending("create")] == ["Service", "Ingress"], "routed once the pod runs"
    assert w.pending("create", "Service")[0].manifest["metadata"]["ownerReferences"][0]["uid"] == "pod-uid-1"
    assert w.phase == "Provisioning", "not Ready before its endpoints are published"
    w.publish_endpoints(6)
    assert w.phase == "Ready" and w.status()["endpoints"]


def test_the_session_secret_holds_references_never_values():
    w = World().to_creating({**SPEC, "env": [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "tok"}}]})
    secret = w.effects("create", "Secret")[0].manifest
    assert "data" not in secret and "stringData" not in secret
    pod = w.pending("create", "Pod")[0].manifest
    env = pod["spec"]["containers"][0]["env"]
    assert env == [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "tok"}}}]


def test_provisioning_messages_are_reported_each_once():
    w = World().to_provisioning()
    w.observe_pod(2, unscheduled="0/3 nodes are available: insufficient cpu")
    first = len(w.effects("patch", "Session"))
    w.observe_pod(3, unscheduled="0/3 nodes are available: insufficient cpu", rv="11")
    assert len(w.effects("patch", "Session")) == first, "the same message is not reported twice"
    w.observe_pod(4, waiting=("ImagePullBackOff", "Back-off pulling image"), rv="12")
    assert w.status()["provisioningMessage"] == "container workspace: ImagePullBackOff: Back-off pulling image"
    w.run_pod(5)
    assert w.status()["provisioningMessage"] is None


@pytest.mark.parametrize("late", [0, 30], ids=["exactly-at-due", "past-due"])
def test_a_pod_not_running_by_the_start_deadline_fails_the_session_once_a_read_confirms_it(late):
    w = World().to_provisioning(when=1)
    w.observe_pod(100, waiting=("ContainerCreating", ""))
    w.s.advance_to(at(1 + 180 + late))
    assert w.phase == "Provisioning", "first a quorum read of the pod, made after the deadline"
    w.answer("get", "Pod", when=1 + 181 + late, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="11"))
    w.s.advance_to(at(1 + 186 + late))
    assert w.phase == "Failed"
    assert w.condition("Ready")["reason"] == "StartDeadlineExceeded"
    assert w.pending("delete", "Pod"), "the abandoned pod is released through the pod machine"
    assert len(w.effects("get", "Pod")) == 1


def test_a_pod_running_before_the_start_deadline_is_not_failed_by_it():
    """Seed 002:231-236: a workspace not ready in time: "workspace container did not become ready"."""
    w = World().to_provisioning(when=1)
    w.run_pod(180.999, ready=False)
    w.s.advance_to(at(181))
    assert w.phase == "Provisioning"
    w.s.advance_to(at(181 + 120))
    assert w.phase == "Provisioning", "first a quorum read of the pod, made after the deadline"
    w.answer("get", "Pod", when=302, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", rv="12"))
    w.s.advance_to(at(307))
    assert w.phase == "Failed"
    assert w.condition("Ready")["reason"] == "ReadyDeadlineExceeded"
    assert "workspace container" in w.condition("Ready")["message"]


def test_a_start_deadline_judged_on_a_stale_picture_reads_the_pod_and_keeps_a_running_one():
    """Soak seed 741061: a daemon resumed from two pauses (SIGSTOP) with its pod watch relisting
    after a compaction; the start deadline fired on its last picture of the pod (Pending) and failed
    the Session while the pod had been Running and Ready for a minute. A quorum read made after the
    deadline now decides."""
    w = World(start_seconds=60).to_provisioning(when=1)
    w.s.advance_to(at(61))
    assert w.phase == "Provisioning" and w.decision().pod.reading
    w.answer("get", "Pod", when=62, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", ready=True, rv="30"))
    w.s.advance_to(at(70))
    assert w.phase != "Failed" and w.decision().pod.phase == "Running"


def test_a_read_already_in_flight_when_the_deadline_passes_is_not_taken_for_one_made_after_it():
    """The ready deadline passes while a read of the pod, sent before it (a relist that lacked the
    pod), is still unanswered: that answer may predate the deadline, so the Session is judged only
    on a second read, sent once the first has answered."""
    w = World().to_provisioning(when=1)
    w.run_pod(10, ready=False)
    w.s.relist("Pod", [], at(129))
    assert w.decision().pod.reading and len(w.effects("get", "Pod")) == 1
    w.s.advance_to(at(131))
    w.answer("get", "Pod", when=132, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", rv="12"))
    w.s.advance_to(at(137))
    assert w.phase == "Provisioning" and len(w.effects("get", "Pod")) == 2, "read again, after the deadline"
    w.answer("get", "Pod", when=138, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", rv="13"))
    w.s.advance_to(at(143))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "ReadyDeadlineExceeded"


def test_a_failed_read_at_the_deadline_is_made_again_before_the_session_is_judged():
    w = World(start_seconds=60).to_provisioning(when=1)
    w.s.advance_to(at(61))
    w.answer("get", "Pod", "transient", when=62)
    w.s.advance_to(at(67))
    assert w.phase == "Provisioning" and len(w.effects("get", "Pod")) == 2, "read again, not failed unread"
    w.answer("get", "Pod", when=68, obj=pod_obj(1, waiting=("ContainerCreating", ""), rv="31"))
    w.s.advance_to(at(73))
    assert w.phase == "Failed" and w.condition("Ready")["reason"] == "StartDeadlineExceeded"


def test_deadlines_wait_for_a_server_time_rather_than_guess():
    w = World().to_creating()
    w.s.outcome(w.pending("create", "Pod")[0], "ok", None, obj=pod_obj(1))
    assert not [t for t in w.s.state.timers.values() if t.machine == "session"]
    w.observe_pod(50)
    assert w.s.state.next_due() == at(50 + 180)


def test_a_pod_gone_before_running_fails_with_that_reason_not_a_timeout():
    """Seed 002:193: a pod gone while waiting: "disappeared before reaching Running", not a timeout."""
    w = World().to_provisioning()
    w.observe_pod(2, event="DELETED")
    assert w.phase == "Failed"
    assert w.condition("Ready") == {"type": "Ready", "status": "False", "reason": "PodGone",
                                    "message": "pod demo-g1 disappeared before reaching Running",
                                    "lastTransitionTime": "2030-01-01T00:00:02Z"}   # the pod's DELETED, on its clock
    assert not [t for t in w.s.state.timers.values() if t.machine == "session"]


def test_a_pod_failed_before_ready_fails_the_bring_up_with_the_pods_reason():
    w = World().to_provisioning()
    w.observe_pod(2, phase="Failed")
    assert w.phase == "Failed"
    assert w.condition("Ready")["reason"] == "PodFailed"
    assert "reached Failed before serving" in w.condition("Ready")["message"]


URL = "https://github.com/org/app.git"


def _with_repository(w: World) -> str:
    """Bring up to the pod create with one repository; the repo machine's answers are relayed."""
    w.submit({**SPEC, "repositories": [{"url": URL}]})
    w.rv += 1
    w.answer("patch", "Session", obj=session_obj(w.spec, rv=str(w.rv), finalizers=(FINALIZER,)))
    repo = w.decision().repos[0].key
    assert repo == f"local/team/{cache_key(URL)}"
    _relay(w, "repo_ensured", repo=repo, url=URL)
    w.answer("create", "Pod", obj=pod_obj(1))
    w.run_pod(5, node="node-a")
    w.publish_endpoints(5)
    return repo


def test_ready_waits_for_each_repository_synced_on_the_pods_node():
    w = World()
    repo = _with_repository(w)
    assert w.phase == "Provisioning", "the workspace is ready but the repository is not synced yet"
    _relay(w, "repo_status", repo=repo, nodes={"node-b": {"present": True, "synced": True}})
    assert w.phase == "Provisioning", "synced on another node does not count"
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"present": True, "synced": True}})
    assert w.phase == "Ready"


def test_a_failed_clone_on_the_pods_node_fails_with_gits_own_error():
    """Seed 000:50-51: only a failed Clone fails a Session waiting on its node."""
    w = World()
    repo = _with_repository(w)
    git = "fatal: repository 'https://github.com/org/app.git/' not found"
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"present": False, "synced": False, "attempted": "Clone",
                                                          "lastError": git}})
    assert w.phase == "Failed"
    assert w.condition("Ready")["reason"] == "CloneFailed"
    assert git in w.condition("Ready")["message"]


@pytest.mark.parametrize("attempted", ["Probe", "Fetch"])
def test_a_failed_probe_or_fetch_is_a_status_signal_not_a_failure(attempted):
    """Seed 000: only a failed Clone fails a session waiting on the node.

    Seed table: seed 000:50."""
    w = World()
    repo = _with_repository(w)
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"present": attempted == "Fetch", "synced": False,
                                                          "attempted": attempted, "lastError": "host unreachable"}})
    assert w.phase == "Provisioning"
    signal = w.condition("RepositoriesSynced")
    assert signal["status"] == "False" and f"{attempted} failed on node node-a: host unreachable" in signal["message"]
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"present": True, "synced": True, "attempted": "Clone"}})
    assert w.phase == "Ready"
    assert "RepositoriesSynced" not in {c["type"] for c in w.status()["conditions"]}


def test_a_repo_status_outside_the_crd_is_refused_on_the_record_that_sent_it():
    """``attempted`` is one of the CRD's values (kfold/data/crds/repos.yaml): a message carrying
    anything else is refused by its model, and the session is not decided on it."""
    w = World()
    repo = _with_repository(w)
    _relay(w, "repo_status", repo=repo, nodes={"node-a": {"synced": False, "attempted": True, "lastError": "x"}})
    assert w.phase == "Provisioning"
    (q,) = w.s.state.quarantine.values()
    assert "attempted" in q.error


def _relay(w: World, message: str, **args) -> None:
    """Deliver a repo machine reply to the session, as the repo machine would within a fold step."""

    class Relay(Machine):
        name = "relay"
        commands = frozenset({"test.relay"})

        def on_command(self, ctx, rec):
            ctx.tell("session", KEY, message, **args)

    w.s.machines = Machines([*all_machines(), Relay()])
    w.s.command("test.relay", at(7))


def test_bring_up_is_identical_whatever_the_wall_clock_says():
    def scenario():
        w = World().to_provisioning(when=1)
        w.observe_pod(2, waiting=("ErrImagePull", "pull access denied"))
        w.s.advance_to(at(1 + 180))
        return w.s.transcript()
    run_in_all_worlds(scenario)


def test_a_ready_pod_waiting_only_on_kfolds_own_endpoint_requests_is_not_failed_by_the_ready_deadline():
    """The workspace is Running and Ready; only the Service/Ingress creates are unanswered (the
    apiserver slow or failing): the ready deadline is judged again later instead of failing a
    Session whose pod is healthy (kfold sim soak seeds 70081-70247); once the endpoints answer, it
    is Ready."""
    w = World().to_provisioning(when=1)
    w.run_pod(5)
    assert w.pending("create", "Service"), "the Service create is outstanding"
    w.s.advance_to(at(5 + 120 + 30))
    assert w.phase == "Provisioning", "not Failed: only kfold's own requests are outstanding"
    w.publish_endpoints(160)
    assert w.phase == "Ready"


def test_regression_a_ready_deadline_waits_for_its_read_of_the_pod_even_past_the_grace():
    """The ready deadline passes with the pod Running, not ready; the quorum read it makes is
    answered only after READ_GRACE_MS (a slow apiserver: the request timeout is longer), and says
    the pod is ready. The Session was failed on its picture from before the deadline while the read
    was in flight; it is judged on the read's answer."""
    w = World().to_provisioning(when=1)
    w.run_pod(10, ready=False)
    w.publish_endpoints(10)
    w.s.advance_to(at(131))
    assert w.decision().pod.reading and len(w.effects("get", "Pod")) == 1
    w.s.advance_to(at(131 + 3 * READ_GRACE_MS // 1000))
    assert w.phase == "Provisioning", "the read has not answered: nothing to judge on yet"
    assert len(w.effects("get", "Pod")) == 1, "one read at a time"
    w.answer("get", "Pod", when=150, obj=pod_obj(1, phase="Running", ip="10.0.0.7", node="node-a", ready=True, rv="40"))
    w.s.advance_to(at(160))
    assert w.phase == "Ready"
