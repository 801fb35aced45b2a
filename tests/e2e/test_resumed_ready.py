"""Issue 33 item 2 on the real control plane: a Session resumed from a Ready status (a fresh
journal) whose pod is gone and cannot come back up leaves Ready within the start deadline, as a
fresh bring-up would: Failed, reason StartDeadlineExceeded.

The re-created pod is made unschedulable by the Session's own spec (a cpu limit, hence request,
larger than any kwok node's 32 cpu): nothing shared (nodes) is touched."""
from __future__ import annotations

import time

from tests.e2e.conftest import wait_for
from tests.e2e.drills import Cluster

NAME = "rr"
START_S, READY_S = 8, 8
BOUND_S = 20   # the read the judgement is made on (5 s), a status write, and a slow shared machine


def _status(cluster: Cluster) -> dict:
    s = next(x for x in cluster.sessions() if x["metadata"]["name"] == NAME)
    return s.get("status") or {}


def test_a_ready_status_over_a_pod_that_cannot_come_back_fails_at_the_start_deadline(
        cp, admin, namespace, daemon_factory):
    cluster = Cluster(admin, namespace)
    first = daemon_factory(cp["kubeconfig"], [namespace]).start()
    cluster.create_session(NAME)
    wait_for(lambda: _status(cluster).get("phase") == "Ready", timeout=90, what="the Session Ready")
    assert first.stop() == 0
    for suffix in ("", "-wal", "-shm"):
        first.journal.with_name(first.journal.name + suffix).unlink(missing_ok=True)

    cluster.patch_spec(NAME, resources={"limits": {"cpu": "64"}})   # no node can hold its pod
    cluster.core.delete_namespaced_pod(f"{NAME}-g1", namespace)
    wait_for(lambda: cluster.read_or_none(cluster.core.read_namespaced_pod, f"{NAME}-g1") is None,
             timeout=60, what="the pod gone")
    assert (_status(cluster).get("phase"), _status(cluster).get("generation")) == ("Ready", 1)

    fresh = daemon_factory(cp["kubeconfig"], [namespace],
                           {"deadlines": {"start_seconds": START_S, "ready_seconds": READY_S}}).start()
    started = time.monotonic()
    wait_for(lambda: cluster.read_or_none(cluster.core.read_namespaced_pod, f"{NAME}-g1") is not None,
             timeout=30, what="the pod re-created")
    wait_for(lambda: _status(cluster).get("phase") != "Ready", timeout=START_S + BOUND_S,
             what="the Session no longer Ready")
    took = time.monotonic() - started
    st = _status(cluster)
    ready = next(c for c in st.get("conditions") or [] if c["type"] == "Ready")
    assert st.get("phase") == "Failed" and ready["reason"] == "StartDeadlineExceeded", st
    assert took >= START_S - 1, f"failed before its start deadline ({took:.1f} s)"
    pod = cluster.read_or_none(cluster.core.read_namespaced_pod, f"{NAME}-g1")   # released by the failure
    assert pod is None or pod.metadata.deletion_timestamp or pod.status.phase == "Pending", "the pod never ran"
    assert fresh.stop() == 0
