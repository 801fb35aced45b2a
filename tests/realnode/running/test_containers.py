"""Issue 48 items 2 and 3 on the real node: what its kubelet says of a Session's containers, as
kfold reports it. The Sessions of a test are applied together and waited for together (the set's
budget: scripts/test.sh).

- A pod that waits names its waiting reason in Ready's message and a Warning Event (an image no
  registry serves, an image absent under ``imagePullPolicy: Never``, an env key its Secret lacks);
  the start deadline fails the one whose image never comes, naming it; ``imagePullPolicy: Never`` on
  the node's own image runs.
- Apps that exit 0 and 1 are runs ended with seed 002's texts and exit codes, once per pod
  generation, the Session Ready throughout and nothing reported after a stop; the workspace
  container ending fails the Session.
"""
from __future__ import annotations

import json

from tests.realnode.running.conftest import START_SECONDS, events, get, ready, session, until
from tests.realnode.test_node import kubectl

WEB = {"name": "web", "ports": [{"port": 8080}]}


def _secret(kfold, name: str, **data: str) -> None:
    kubectl(kfold["node"], "create", "secret", "generic", name, "-n", kfold["ns"],
            *[f"--from-literal={k}={v}" for k, v in data.items()])


def _exit_env(secret: str) -> list[dict]:
    return [{"name": "TESTAPP_EXIT", "secretRef": {"name": secret, "key": "exit"}}]


def test_waiting_reasons_are_named_in_ready_and_events_and_the_start_deadline_fails_a_pull_that_never_comes(kfold):
    _secret(kfold, "creds", token="t")
    session(kfold, "pull", {"image": "localhost/kfold/absent:1", "apps": [WEB]})
    session(kfold, "never", {"image": "localhost/kfold/absent:1", "imagePullPolicy": "Never", "apps": [WEB]})
    session(kfold, "nokey", {"apps": [WEB], "env": [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "absent"}}]})
    session(kfold, "local", {"imagePullPolicy": "Never", "apps": [WEB]})
    want = {"pull": "ImagePullBackOff", "never": "ErrImageNeverPull", "nokey": "CreateContainerConfigError"}
    for name, reason in want.items():
        message = until(f"{name}: {reason} in Ready", lambda: reason in ready(get(kfold, "session", name)).get("message", "")
                        and ready(get(kfold, "session", name))["message"], timeout=START_SECONDS)
        assert message.startswith(f"waiting for pod {name}-g1 to serve: container app-web: {reason}: "), message
        assert get(kfold, "session", name)["status"]["phase"] == "Provisioning"
    assert "couldn't find key absent in Secret" in ready(get(kfold, "session", "nokey"))["message"]
    until("local Ready", lambda: ready(get(kfold, "session", "local")).get("status") == "True", timeout=30)
    pod = get(kfold, "pod", "local-g1")
    assert {c["name"]: c["imagePullPolicy"] for c in pod["spec"]["containers"]} == {"workspace": "Never", "app-web": "Never"}
    for name, reason in want.items():
        got = until(f"{name}'s {reason} Event", lambda: [e for e in events(kfold, name) if e["reason"] == reason])
        assert [(e["type"], e["action"]) for e in got] == [("Warning", "BringUp")], got
        assert got[0]["note"].startswith(f"generation 1: pod {name}-g1: container app-web: {reason}")
    # the start deadline fails each, naming what it waited for; the pod is deleted
    failed = until("pull Failed", lambda: get(kfold, "session", "pull")["status"]["phase"] == "Failed"
                   and ready(get(kfold, "session", "pull")), timeout=START_SECONDS + 20)
    assert failed["reason"] == "StartDeadlineExceeded"
    assert failed["message"].startswith(f"pod pull-g1 did not reach Running within the start deadline ({START_SECONDS} s): "
                                        "container app-web: ImagePullBackOff: Back-off pulling image"), failed
    until("pull-g1 deleted", lambda: not get(kfold, "pod", "pull-g1"), timeout=30)
    reasons = [e["reason"] for e in events(kfold, "pull")]
    assert reasons.count("ImagePullBackOff") == 1 and reasons[-1] == "StartDeadlineExceeded", reasons


def _runs(kfold, name: str) -> list[dict]:
    return (get(kfold, "session", name).get("status") or {}).get("runs") or []


def test_apps_that_end_are_reported_once_per_generation_and_never_after_a_stop_and_the_workspace_ending_fails(kfold):
    _secret(kfold, "ends", exit="app-done=0,app-bad=1")
    _secret(kfold, "ws-ends", exit="workspace=3")
    apps = [{"name": "done"}, {"name": "bad"}, WEB]
    session(kfold, "ends", {"apps": apps, "env": _exit_env("ends")})
    session(kfold, "wsend", {"apps": [WEB], "env": _exit_env("ws-ends")})
    until("ends Ready with two runs", lambda: ready(get(kfold, "session", "ends")).get("status") == "True"
          and len(_runs(kfold, "ends")) == 2, timeout=60)
    assert sorted(_runs(kfold, "ends"), key=lambda r: r["app"]) == [
        {"app": "bad", "generation": 1, "reason": "application container Error (exit code 1)", "exitCode": 1},
        {"app": "done", "generation": 1, "reason": "application container exited (code 0)", "exitCode": 0}]
    pod_events = json.loads(kubectl(kfold["node"], "get", "events", "-n", kfold["ns"], "-o", "json",
                                    "--field-selector", "involvedObject.name=ends-g1,reason=RunEnded"))["items"]
    assert sorted((e["type"], e["message"], e.get("count", 1)) for e in pod_events) == [
        ("Normal", "app done: application container exited (code 0)", 1),
        ("Warning", "app bad: application container Error (exit code 1)", 1)]
    assert get(kfold, "pod", "ends-g1")["status"]["phase"] == "Running", "the pod runs on without its ended apps"

    # a new pod generation (the app set changed): its apps end again, reported again, once
    kubectl(kfold["node"], "patch", "session", "ends", "-n", kfold["ns"], "--type=merge",
            "-p", json.dumps({"spec": {"apps": [*apps, {"name": "api"}]}}))
    until("ends-g2 Ready with its runs", lambda: get(kfold, "session", "ends")["status"].get("generation") == 2
          and ready(get(kfold, "session", "ends")).get("status") == "True"
          and len([r for r in _runs(kfold, "ends") if r["generation"] == 2]) == 2, timeout=60)
    assert len(_runs(kfold, "ends")) == 4

    # a stop: the containers its pod's deletion ends are not runs ended
    kubectl(kfold["node"], "patch", "session", "ends", "-n", kfold["ns"], "--type=merge", "-p", '{"spec":{"stopped":true}}')
    until("ends Stopped", lambda: get(kfold, "session", "ends")["status"]["phase"] == "Stopped", timeout=60)
    assert {r["app"] for r in _runs(kfold, "ends")} == {"done", "bad"}, _runs(kfold, "ends")

    failed = until("wsend Failed", lambda: get(kfold, "session", "wsend")["status"]["phase"] == "Failed"
                   and ready(get(kfold, "session", "wsend")), timeout=30)
    assert failed["reason"] == "WorkspaceEnded"
    assert failed["message"] in ("pod wsend-g1: workspace container Error (exit code 3) before serving",
                                 "pod wsend-g1: workspace container Error (exit code 3)"), failed
    assert [e["reason"] for e in events(kfold, "wsend") if e["type"] == "Warning"][-1:] == ["WorkspaceEnded"]
    until("wsend-g1 deleted", lambda: not get(kfold, "pod", "wsend-g1"), timeout=30)
