"""Issue 48 item 5 on the real node: the node itself under a Ready Session.

- The kubelet restarted (``node.sh kubelet-stop`` then ``kubelet-start``): the pod runs on, its app
  answers through the Service, and kfold changes nothing (no status write, no Event, the same pod).
- The kubelet down for longer than the start deadline (the node NotReady once the controller
  manager's 50 s grace passes, tainted unreachable): the Ready Session's pod is kfold's and stays
  (kfold deletes nothing, the Session stays Ready: kfold reads the containers' states, which the
  node controller does not change); a Session brought up meanwhile is unschedulable, says so in
  Ready, fails at its start deadline, and only its own pod is deleted. The kubelet back, the first
  Session still answers.
- A pod evicted (the Eviction API, as a drain does): the Session fails as for a pod deleted by
  someone else (``PodGone``, "disappeared after serving"); a spec change brings up a new generation.
"""
from __future__ import annotations

import json
import time

from tests.realnode.conftest import SCRIPTS, _run
from tests.realnode.running.conftest import START_SECONDS, events, get, ready, session, until
from tests.realnode.test_node import in_node, kubectl

WEB = {"name": "web", "ports": [{"port": 8080}]}


def _answers(kfold, name: str) -> str:
    ip = get(kfold, "service", name)["spec"]["clusterIP"]
    return until(f"{name}'s app answering", lambda: in_node(kfold["node"], "curl", "-sS", "-m", "2",
                                                            f"http://{ip}:8080/").stdout, timeout=30)


def _up(kfold, name: str) -> dict:
    session(kfold, name, {"apps": [WEB]})
    until(f"{name} Ready", lambda: ready(get(kfold, "session", name)).get("status") == "True", timeout=60)
    assert _answers(kfold, name) == "app-web 8080\n"
    return get(kfold, "session", name)


def _node(kfold, verb: str) -> None:
    _run("bash", str(SCRIPTS / "node.sh"), verb, env=kfold["node"]["env"], timeout=120)


def test_a_kubelet_restart_changes_nothing_kfold_wrote(kfold):
    before = _up(kfold, "steady")
    pod = get(kfold, "pod", "steady-g1")["metadata"]["uid"]
    noted = len(events(kfold, "steady"))
    _node(kfold, "kubelet-stop")
    _node(kfold, "kubelet-start")
    until("the pod's status synced again", lambda: get(kfold, "pod", "steady-g1")["status"].get("phase") == "Running")
    assert _answers(kfold, "steady") == "app-web 8080\n"
    time.sleep(3)   # what kfold would do on the pod's re-synced status, it has done by now
    after = get(kfold, "session", "steady")
    assert get(kfold, "pod", "steady-g1")["metadata"]["uid"] == pod
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "no status write"
    assert len(events(kfold, "steady")) == noted, "no Event"


def test_a_node_notready_past_the_start_deadline_fails_only_what_it_keeps_from_starting(kfold):
    node = kfold["node"]
    if not get(kfold, "session", "steady"):
        _up(kfold, "steady")
    pod = get(kfold, "pod", "steady-g1")["metadata"]["uid"]
    _node(kfold, "kubelet-stop")
    try:
        until("the node NotReady", lambda: "NotReady" in kubectl(node, "get", "node", node["KFOLD_NODE_NAME"]),
              timeout=90, interval=2)
        session(kfold, "late", {"apps": [WEB]})
        waiting = until("late waiting on the node", lambda: "Unschedulable" in ready(get(kfold, "session", "late")).get(
            "message", "") and ready(get(kfold, "session", "late"))["message"], timeout=20)
        assert "1 node(s) had untolerated taint(s)" in waiting, waiting
        taints = json.loads(kubectl(node, "get", "node", node["KFOLD_NODE_NAME"], "-o", "jsonpath={.spec.taints}"))
        assert "node.kubernetes.io/unreachable" in {t["key"] for t in taints}
        failed = until("late Failed", lambda: get(kfold, "session", "late")["status"]["phase"] == "Failed"
                       and ready(get(kfold, "session", "late")), timeout=START_SECONDS + 20)
        assert failed["reason"] == "StartDeadlineExceeded" and "Unschedulable" in failed["message"], failed
        until("late-g1 deleted", lambda: not get(kfold, "pod", "late-g1"), timeout=30)
        steady = get(kfold, "pod", "steady-g1")
        assert steady["metadata"]["uid"] == pod and not steady["metadata"].get("deletionTimestamp"), \
            "kfold deleted nothing it keeps serving"
        assert ready(get(kfold, "session", "steady"))["status"] == "True"
    finally:
        _node(kfold, "kubelet-start")
    assert _answers(kfold, "steady") == "app-web 8080\n"


def test_an_evicted_pod_fails_its_session_as_a_pod_deleted_by_someone_else_and_a_change_brings_it_back(kfold):
    node, ns = kfold["node"], kfold["ns"]
    _up(kfold, "evicted")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evicted-g1", "namespace": ns}}
    kubectl(node, "create", "--raw", f"/api/v1/namespaces/{ns}/pods/evicted-g1/eviction", "-f", "-",
            stdin=json.dumps(eviction))
    failed = until("evicted Failed", lambda: get(kfold, "session", "evicted")["status"]["phase"] == "Failed"
                   and ready(get(kfold, "session", "evicted")), timeout=60)
    assert (failed["reason"], failed["message"]) == ("PodGone", "pod evicted-g1 disappeared after serving")
    kubectl(node, "patch", "session", "evicted", "-n", ns, "--type=merge",
            "-p", json.dumps({"spec": {"apps": [{**WEB, "io": "pipe"}]}}))
    until("evicted-g2 Ready", lambda: get(kfold, "session", "evicted")["status"].get("generation") == 2
          and ready(get(kfold, "session", "evicted")).get("status") == "True", timeout=60)
    assert _answers(kfold, "evicted") == "app-web 8080\n"
