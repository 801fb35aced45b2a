"""kfold's executor and pod machine against the REAL apiserver's answers (issue 8 item 3).

What the fakes can only imitate is checked here on the wire: a stale uid/resourceVersion fence
gets the apiserver's own 409 ``Conflict`` and deletes nothing; a create race gets a 409
``AlreadyExists`` told apart by reason; the pod machine's fenced delete (and its conflict ->
quorum read -> delete again path) driven by ``engine.core.fold`` + ``Executor``; quorum reads
send no resourceVersion; the orphan Secret sweep decides on the list response's own Date.
"""
from __future__ import annotations

from engine.effects.models import CreateObject, DeleteObject
from engine.machines.base import object_key
from tests.e2e.conftest import wait_for
from engine.rfc3339 import to_ms as rfc3339_ms
from tests.e2e.driver import Driver, get, ok, pod_manifest, pod_path, replay_check, running, server_date_ms


def _ref(ns: str, name: str) -> dict:
    return dict(machine="pod", key=object_key("local", ns, name), cluster="local", api_version="v1",
                kind="Pod", namespace=ns, name=name)


def _start_pod(admin, ns: str, name: str, labels: dict | None = None) -> dict:
    ok(admin, "POST", pod_path(ns), pod_manifest(name, labels))
    # kwok makes it Running+Ready; on a loaded 2-core machine its stage can lag (seen once past
    # 30 s), so wait longer and name the pod's last status if it never comes.
    try:
        return wait_for(lambda: running(admin, ns, name), timeout=90, what=f"pod {name} Running+Ready")
    except AssertionError as exc:
        last = get(admin, pod_path(ns, name)) or {}
        raise AssertionError(f"{exc}; pod status: {last.get('status')!r}; node: {last.get('spec', {}).get('nodeName')!r}") from None


def _relabel(admin, ns: str, name: str, value: str) -> dict:
    return ok(admin, "PATCH", pod_path(ns, name), {"metadata": {"labels": {"touched": value}}})


def _gone(admin, ns: str, name: str) -> bool:
    return get(admin, pod_path(ns, name)) is None


async def test_stale_fence_gets_real_409_conflict_and_deletes_nothing(admin, namespace):
    old = _start_pod(admin, namespace, "fenced")
    uid, old_rv = old["metadata"]["uid"], old["metadata"]["resourceVersion"]
    fresh_rv = _relabel(admin, namespace, "fenced", "1")["metadata"]["resourceVersion"]
    assert fresh_rv != old_rv

    d = Driver(admin)
    try:
        stale = await d.executor.run(DeleteObject(id="t.0", uid=uid, rv=old_rv, **_ref(namespace, "fenced")))
        assert (stale.result, stale.status_reason, stale.code) == ("conflict", "Conflict", 409), stale
        req = d.transport.requests[-1]
        assert req.method == "DELETE" and req.body["preconditions"] == {"uid": uid, "resourceVersion": old_rv}
        assert "gracePeriodSeconds" not in req.body
        still = get(admin, pod_path(namespace, "fenced"))
        assert still is not None and still["metadata"]["uid"] == uid
        assert not still["metadata"].get("deletionTimestamp")

        # the current rv (kwok may have written the pod's status since the relabel: that moves it too)
        current_rv = still["metadata"]["resourceVersion"]
        accepted = await d.executor.run(DeleteObject(id="t.1", uid=uid, rv=current_rv, **_ref(namespace, "fenced")))
        assert (accepted.result, accepted.code) == ("ok", 200), accepted
        assert accepted.obj["metadata"]["uid"] == uid
        wait_for(lambda: _gone(admin, namespace, "fenced"), timeout=30, what="fenced pod gone")
    finally:
        await d.close()


async def test_create_race_gets_real_already_exists_not_conflict(admin, namespace):
    d = Driver(admin)
    try:
        manifest = pod_manifest("racer")
        first = await d.executor.run(CreateObject(id="t.0", manifest=manifest, **_ref(namespace, "racer")))
        assert (first.result, first.code) == ("ok", 201), first
        second = await d.executor.run(CreateObject(id="t.1", manifest=manifest, **_ref(namespace, "racer")))
        assert (second.result, second.status_reason, second.code) == ("already_exists", "AlreadyExists", 409), second
        # same HTTP code as a failed precondition; only the Status reason tells them apart
        conflict = await d.executor.run(DeleteObject(id="t.2", uid="00000000-0000-0000-0000-000000000000",
                                                     rv=first.obj["metadata"]["resourceVersion"],
                                                     **_ref(namespace, "racer")))
        assert (conflict.result, conflict.status_reason, conflict.code) == ("conflict", "Conflict", 409), conflict
        assert get(admin, pod_path(namespace, "racer"))["metadata"]["uid"] == first.obj["metadata"]["uid"]
    finally:
        await d.close()


def _pods(admin, ns: str) -> dict:
    return get(admin, pod_path(ns), query=[("labelSelector", "app.kubernetes.io/managed-by=kfold")])


async def _relist_until_gone(d: Driver, admin, ns: str, name: str) -> None:
    """Wait for the real deletion, then fold a Relist built from a real quorum LIST. The list alone
    proves nothing (issue 12 item 1): the pod it lacks is re-read, and the real 404 decides."""
    wait_for(lambda: _gone(admin, ns, name), timeout=30, what=f"pod {name} gone")
    listed = _pods(admin, ns)
    assert name not in {p["metadata"]["name"] for p in listed["items"]}
    done = await d.feed(d.relist("v1", "Pod", ns, listed["items"], listed["metadata"]["resourceVersion"]))
    assert [(e.type, e.name, o.result) for e, o in done] == [("get", name, "not_found")]


async def test_pod_machine_fenced_delete_accepted_then_gone(admin, namespace):
    obj = _start_pod(admin, namespace, "calm")
    key = object_key("local", namespace, "calm")
    d = Driver(admin)
    try:
        await d.prime()
        assert await d.feed(d.observed({"apiVersion": "v1", "kind": "Pod", **obj})) == []
        assert d.state.table("pod")[key].uid == obj["metadata"]["uid"]

        done = await d.tell("pod", key, "delete", reason="e2e")
        assert [(e.type, o.result) for e, o in done] == [("delete", "ok")]
        sent = done[0][0]
        assert (sent.uid, sent.rv) == (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])
        assert d.state.table("pod")[key].phase == "terminating"
        assert d.replies() == ()  # accepted is not gone: nobody is told yet

        await _relist_until_gone(d, admin, namespace, "calm")
        assert [m for m, _ in d.replies()] == ["pod_gone"]
        assert key not in d.state.table("pod")
        assert not d.state.pending
    finally:
        await d.close()


async def test_pod_machine_stale_fence_conflict_quorum_read_delete_again(admin, namespace):
    obj = _start_pod(admin, namespace, "moved")
    key = object_key("local", namespace, "moved")
    d = Driver(admin)
    try:
        await d.prime()
        await d.feed(d.observed({"apiVersion": "v1", "kind": "Pod", **obj}))
        moved = _relabel(admin, namespace, "moved", "behind-kfolds-back")  # kfold did not see this
        new_rv = moved["metadata"]["resourceVersion"]

        done = await d.tell("pod", key, "delete", reason="e2e")
        assert [(e.type, o.result, o.status_reason) for e, o in done] == [
            ("delete", "conflict", "Conflict"), ("get", "ok", ""), ("delete", "ok", "")]
        (first, _), (read, got), (again, _) = done
        assert first.rv == obj["metadata"]["resourceVersion"]
        assert got.obj["metadata"]["resourceVersion"] == new_rv     # the quorum read saw the latest
        assert (again.uid, again.rv) == (obj["metadata"]["uid"], new_rv)  # re-fenced, same uid
        assert d.state.table("pod")[key].phase == "terminating"

        await _relist_until_gone(d, admin, namespace, "moved")
        assert [m for m, _ in d.replies()] == ["pod_gone"]
    finally:
        await d.close()


async def test_quorum_read_sends_no_resource_version(admin, namespace):
    """GetObject / ListObjects are quorum reads: no resourceVersion (nor resourceVersionMatch)."""
    obj = _start_pod(admin, namespace, "q")
    key = object_key("local", namespace, "q")
    d = Driver(admin)
    try:
        await d.prime()
        # kfold never saw the pod: a delete starts with a quorum read to learn the fence
        done = await d.tell("pod", key, "delete", reason="e2e")
        assert [(e.type, o.result) for e, o in done] == [("get", "ok"), ("delete", "ok")]
        await d.command("pod.sweep_secrets", cluster="local", namespace=namespace, grace_seconds=0)
        reads = [r for r in d.transport.requests if r.method == "GET" and r.path != "/version"]
        assert {r.path for r in reads} == {pod_path(namespace, "q"), f"/api/v1/namespaces/{namespace}/secrets"}
        for r in reads:
            names = {k for k, _ in r.query}
            assert not names & {"resourceVersion", "resourceVersionMatch"}, r
        assert done[0][1].obj["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    finally:
        await d.close()


def _secret(admin, ns: str, name: str, session: str) -> dict:
    return ok(admin, "POST", f"/api/v1/namespaces/{ns}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": {
            "app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": session}},
        "stringData": {"k": "v"}})


async def test_orphan_secret_sweep_on_the_real_date_header(admin, cp, namespace, tmp_path):
    secrets = f"/api/v1/namespaces/{namespace}/secrets"
    orphan = _secret(admin, namespace, "orphan", "gone")
    _secret(admin, namespace, "kept", "alive")
    _start_pod(admin, namespace, "alive-pod", {"kfold.dev/session": "alive"})
    created = rfc3339_ms(orphan["metadata"]["creationTimestamp"])
    # the grace is "strictly older than": wait until the server clock is past the creation second
    wait_for(lambda: server_date_ms(cp) > created, timeout=5, interval=0.1, what="server time past creation")

    d = Driver(admin)
    try:
        before = server_date_ms(cp)
        done = await d.command("pod.sweep_secrets", cluster="local", namespace=namespace, grace_seconds=86_400)
        after = server_date_ms(cp)
        assert [(e.type, e.kind, o.result) for e, o in done] == [("list", "Secret", "ok")]
        at = done[0][1].at
        assert at is not None and at % 1000 == 0 and before <= at <= after, (before, at, after)
        assert "data" not in done[0][1].items[0]  # Secret payloads never reach an outcome
        assert get(admin, f"{secrets}/orphan") is not None

        before = server_date_ms(cp)
        done = await d.command("pod.sweep_secrets", cluster="local", namespace=namespace, grace_seconds=0)
        after = server_date_ms(cp)
        assert [(e.type, e.kind, o.result) for e, o in done] == [
            ("list", "Secret", "ok"), ("list", "Pod", "ok"), ("delete", "Secret", "ok")]
        at = done[0][1].at
        assert at is not None and before <= at <= after, (before, at, after)
        assert done[2][0].name == "orphan" and done[2][0].uid == orphan["metadata"]["uid"]
        assert get(admin, f"{secrets}/orphan") is None
        assert get(admin, f"{secrets}/kept") is not None  # its session still has a pod
        assert object_key("local", namespace, "#sweep") not in d.state.table("pod")
        replay_check(await d.write_journal(tmp_path / "journal.db"))  # the journal refolds to the same effects
    finally:
        await d.close()


def test_metadata_generation_moves_with_the_spec_alone_on_the_real_apiserver_and_the_fake(admin, namespace):
    """A Failed status names the spec that failed by ``metadata.generation`` (``session.from_status``);
    the fakes the simulator and the unit tests run on must keep that counter as the apiserver does:
    1 at create, +1 for a spec change, unchanged by a status or a label change. And the Session CRD
    keeps ``observedGeneration`` in a condition (a field the CRD lacked would be pruned)."""
    from engine.effects.io.fake import FakeApiServer
    path = f"/apis/kfold.dev/v1alpha1/namespaces/{namespace}/sessions"
    body = {"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": {"name": "gen"},
            "spec": {"image": "registry.example/ws:1", "apps": [{"name": "web"}]}}
    failed = {"status": {"phase": "Failed", "conditions": [
        {"type": "Ready", "status": "False", "reason": "StartDeadlineExceeded", "message": "m", "observedGeneration": 1}]}}
    steps = [("PATCH", "/gen/status", failed), ("PATCH", "/gen", {"metadata": {"labels": {"x": "1"}}}),
             ("PATCH", "/gen", {"spec": {"image": "registry.example/ws:2"}}), ("PATCH", "/gen/status", {"status": {"phase": "Failed"}})]

    real = [ok(admin, "POST", path, body)["metadata"]["generation"]]
    for method, sub, patch in steps:
        real.append(ok(admin, method, path + sub, patch)["metadata"]["generation"])
    fake_api = FakeApiServer()
    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    fake = [fake_api.handle("POST", path, {}, body)[0].data["metadata"]["generation"]]
    for method, sub, patch in steps:
        fake.append(fake_api.handle(method, path + sub, {}, patch)[0].data["metadata"]["generation"])
    assert real == fake == [1, 1, 1, 2, 2]
    ready = next(c for c in get(admin, path + "/gen")["status"]["conditions"] if c["type"] == "Ready")
    assert ready["observedGeneration"] == 1
