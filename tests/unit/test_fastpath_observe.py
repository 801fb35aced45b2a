"""The hot observe path (pod machine and session reducers) gives exactly what its plain form gave.

The plain forms below are the reductions as first written; the fast forms must agree on every
input, malformed ones included (same result, or the same exception type)."""
import random
from typing import Any

import pytest

from engine.machines import session_observe as so
from engine.machines.pod_records import PodOp, PodView, revise, view_of


def _d(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list:
    return v if isinstance(v, list) else []


def plain_pod_view(obj):
    md, status = _d(obj.get("metadata")), _d(obj.get("status"))
    lbl = _d(md.get("labels"))
    containers = [_d(c) for c in _l(status.get("containerStatuses"))]
    return so.PodView(
        name=str(md.get("name", "")), uid=str(md.get("uid", "")), rv=str(md.get("resourceVersion", "")),
        session=str(lbl.get(so.SESSION_LABEL, "")), generation=so._int(lbl.get(so.GENERATION_LABEL)),
        phase=str(status.get("phase", "")), ip=str(status.get("podIP", "") or ""),
        node=str(_d(obj.get("spec")).get("nodeName", "") or ""),
        ready=any(c.get("name") == so.WORKSPACE and c.get("ready") is True for c in containers),
        detail=": ".join(str(status[k]) for k in ("reason", "message") if status.get(k)),
        provisioning=plain_provisioning(status), ended=plain_ended(containers))


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


def plain_view_of(obj, uid="", rv=""):
    md = (obj or {}).get("metadata") or {}
    labels = md.get("labels") or {}
    return PodView(uid=md.get("uid") or uid, rv=md.get("resourceVersion") or rv,
                   managed=labels.get("app.kubernetes.io/managed-by") == "kfold",
                   session=labels.get("kfold.dev/session", ""), generation=labels.get("kfold.dev/generation", ""),
                   terminating=bool(md.get("deletionTimestamp")))


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


@pytest.mark.parametrize("seed", range(20))
def test_view_of_equals_its_validated_form(seed):
    rng = random.Random(seed)
    for _ in range(300):
        pod = random_pod(rng)
        fast, slow = outcome(view_of, pod, "u0", "r0"), outcome(plain_view_of, pod, "u0", "r0")
        assert fast[0] == slow[0] and (fast[1] == slow[1] if fast[0] == "ok" else True), pod
        if fast[0] == "ok":
            assert fast[1].__pydantic_fields_set__ == slow[1].__pydantic_fields_set__


def test_revise_equals_but():
    e = PodOp(uid="u", rv="1", op="create", session="s", generation=1)
    fast, slow = revise(e, uid="u2", rv="2", terminating=True), e.but(uid="u2", rv="2", terminating=True)
    assert fast == slow and type(fast) is PodOp and e.rv == "1"
    assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
    assert fast.model_dump() == slow.model_dump()
