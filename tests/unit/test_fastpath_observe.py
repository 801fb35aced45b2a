"""The session machine's hot observe reduction gives exactly what its plain form gave (the pod
machine's: tests/unit/test_fastpath_pod_observe.py).

The plain forms below are the reductions as first written; the fast forms must agree on every
input, malformed ones included (same result, or the same exception type)."""
import random
from typing import Any

import pytest

from engine.machines.session import views as so


def _d(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list:
    return v if isinstance(v, list) else []


def plain_pod_view(obj):
    md, status = _d(obj.get("metadata")), _d(obj.get("status"))
    lbl = _d(md.get("labels"))
    containers = [_d(c) for c in _l(status.get("containerStatuses"))]
    return so.PodStatus(
        name=str(md.get("name", "")), uid=str(md.get("uid", "")), rv=str(md.get("resourceVersion", "")),
        session=str(lbl.get(so.SESSION_LABEL, "")), generation=so._int(lbl.get(so.GENERATION_LABEL)),
        phase=str(status.get("phase", "")), ip=str(status.get("podIP", "") or ""),
        node=str(_d(obj.get("spec")).get("nodeName", "") or ""),
        ready=any(c.get("name") == so.WORKSPACE and c.get("ready") is True for c in containers),
        detail=": ".join(str(status[k]) for k in ("reason", "message") if status.get(k)),
        provisioning=plain_provisioning(status), ended=plain_ended(containers),
        waiting=plain_waiting(status), workspace_ended=plain_workspace_ended(containers),
        deleting=bool(md.get("deletionTimestamp")))


def plain_waiting(status):
    """The reason ``plain_provisioning`` names: the scheduler's, or the first waiting container's."""
    for cond in _l(status.get("conditions")):
        cond = _d(cond)
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("reason") or "Unschedulable")
    for c in _l(status.get("initContainerStatuses")) + _l(status.get("containerStatuses")):
        reason = _d(_d(_d(c).get("state")).get("waiting")).get("reason")
        if reason and reason not in so._QUIET_WAITING:
            return str(reason)
    return ""


def plain_workspace_ended(containers):
    for c in containers:
        if c.get("name") == so.WORKSPACE:
            term = _d(_d(c.get("state")).get("terminated"))
            if not term:
                return ""
            code = term.get("exitCode") if isinstance(term.get("exitCode"), int) else "unknown"
            reason = term.get("reason")
            if reason and reason != "Completed":
                return f"workspace container {reason} (exit code {code})"
            return f"workspace container exited (code {code})"
    return ""


def plain_provisioning(status):
    for cond in _l(status.get("conditions")):
        cond = _d(cond)
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k)) or "Unschedulable"
    for c in _l(status.get("initContainerStatuses")) + _l(status.get("containerStatuses")):
        waiting = _d(_d(_d(c).get("state")).get("waiting"))
        reason = waiting.get("reason")
        if reason and reason not in so._QUIET_WAITING:
            tail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"container {_d(c).get('name', '?')}: {reason}{tail}"
    return None


def plain_ended(containers):
    out = []
    for c in containers:
        name = str(c.get("name", ""))
        term = _d(_d(c.get("state")).get("terminated"))
        if name.startswith("app-") and term:
            out.append(so._ended(name[len("app-"):], term))
    return tuple(out)


ODD = [None, 0, 7, "", "x", True, [], {}, ["a"], {"k": "v"}, 2.5]


def random_pod(rng: random.Random) -> dict:
    def pick(*good):
        return rng.choice(list(good) + ODD) if rng.random() < 0.3 else rng.choice(good)
    container = lambda: {"name": pick("workspace", "app-web", "app-job", "side"), "ready": pick(True, False),  # noqa: E731
                         "state": pick({"running": {}}, {"waiting": {"reason": pick("ErrImagePull", "PodInitializing"),
                                                                      "message": pick("boom", "")}},
                                       {"terminated": {"exitCode": pick(0, 3), "reason": pick("Completed", "OOMKilled")}})}
    return {
        "metadata": pick({"name": "p", "uid": pick("u1", "u2"), "resourceVersion": pick("1", "2"),
                          "labels": pick({"kfold.dev/session": pick("s"), "kfold.dev/generation": pick("1", "x"),
                                          "app.kubernetes.io/managed-by": pick("kfold", "other")}),
                          "deletionTimestamp": pick(None, "2030-01-01T00:00:00Z")}),
        "spec": pick({"nodeName": pick("n1", "")}),
        "status": pick({"phase": pick("Pending", "Running"), "podIP": pick("10.0.0.1", ""), "reason": pick("", "Evicted"),
                        "message": pick("", "low memory"),
                        "conditions": pick([{"type": "PodScheduled", "status": pick("False", "True"),
                                             "reason": pick("Unschedulable", ""), "message": pick("0/3 nodes", "")}]),
                        "initContainerStatuses": pick([container()]),
                        "containerStatuses": pick([container(), container()], [container(), "junk"])}),
    }


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # the same failure counts as the same result
        return ("raised", type(exc))


@pytest.mark.parametrize("seed", range(20))
def test_pod_view_equals_its_plain_form(seed):
    rng = random.Random(seed)
    for _ in range(300):
        pod = random_pod(rng)
        assert outcome(so.pod_view, pod) == outcome(plain_pod_view, pod)
