"""One contract, two ports: the in-memory fake and the real executor over HTTP to the stub.

Every test runs against both (``port`` is parametrized "fake" / "http-stub"); a behaviour the
machines depend on that differs between them fails here first.
"""
from __future__ import annotations

import base64

from engine.effects.io.fake import T2030
from engine.effects.models import (ApplySecret, CreateObject, DeleteObject, EnsureNamespace, GetObject,
                                   ListObjects, PatchObject, PostEvent, RecordEvent, ReplaceObject)
from tests.contract.exec_stub import ENV, port  # noqa: F401  (fixture)

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"kfold.dev/session": "s1"}},
       "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def pod_ref(effect_type, n=0, **kw):
    base = dict(id=f"1.{n}", machine="pod", key="local/work/s1-g1", api_version="v1", kind="Pod",
                namespace="work", name="s1-g1")
    return effect_type(**{**base, **kw})


async def create_pod(port, n=0):
    return await port.run(pod_ref(CreateObject, n, manifest=POD))


class TestCreate:
    async def test_a_new_object_is_created_with_a_uid(self, port):
        out = await create_pod(port)
        assert (out.result, out.code) == ("ok", 201)
        assert out.obj["metadata"]["uid"] and out.obj["metadata"]["resourceVersion"]
        assert out.effect_id == "1.0" and out.machine == "pod" and out.key == "local/work/s1-g1"

    async def test_an_existing_name_is_already_exists_not_success(self, port):
        await create_pod(port)
        out = await create_pod(port, 1)
        assert (out.result, out.status_reason, out.code) == ("already_exists", "AlreadyExists", 409)
        assert out.obj is None

    async def test_a_missing_namespace_is_not_found(self, port):
        out = await port.run(pod_ref(CreateObject, namespace="nowhere", manifest=POD))
        assert out.result == "not_found" and "nowhere" in out.message


class TestGet:
    async def test_an_existing_object_is_returned(self, port):
        made = await create_pod(port)
        out = await port.run(pod_ref(GetObject, 1))
        assert out.result == "ok" and out.obj["metadata"]["uid"] == made.obj["metadata"]["uid"]

    async def test_an_absent_object_is_not_found(self, port):
        out = await port.run(pod_ref(GetObject))
        assert (out.result, out.status_reason) == ("not_found", "NotFound")

    async def test_a_get_is_a_quorum_read(self, port):
        await port.run(pod_ref(GetObject))
        assert "resourceVersion" not in port.server.requests[-1][1]


class TestPatchAndReplace:
    async def test_a_merge_patch_sets_and_clears_fields(self, port):
        await create_pod(port)
        out = await port.run(pod_ref(PatchObject, 1, patch={"metadata": {"labels": {"kfold.dev/session": None, "x": "y"}}}))
        assert out.result == "ok" and out.obj["metadata"]["labels"] == {"x": "y"}

    async def test_a_status_patch_goes_to_the_status_subresource(self, port):
        await create_pod(port)
        out = await port.run(pod_ref(PatchObject, 1, patch={"status": {"phase": "Running"}}, subresource="status"))
        assert out.result == "ok" and out.obj["status"] == {"phase": "Running"}
        assert port.server.requests[-1][1].endswith("/status")

    async def test_a_patch_of_an_absent_object_is_not_found(self, port):
        out = await port.run(pod_ref(PatchObject, patch={"metadata": {"labels": {"a": "b"}}}))
        assert out.result == "not_found"

    async def test_a_replace_with_a_stale_resource_version_is_a_conflict(self, port):
        made = await create_pod(port)
        stale = {**POD, "metadata": {"resourceVersion": "1"}}
        out = await port.run(pod_ref(ReplaceObject, 1, manifest=stale))
        assert (out.result, out.status_reason) == ("conflict", "Conflict")
        fresh = {**POD, "metadata": {"resourceVersion": made.obj["metadata"]["resourceVersion"], "labels": {"v": "2"}}}
        out = await port.run(pod_ref(ReplaceObject, 2, manifest=fresh))
        assert out.result == "ok" and out.obj["metadata"]["labels"] == {"v": "2"}


class TestDelete:
    async def test_a_fenced_delete_with_the_observed_uid_and_rv_removes_the_object(self, port):
        md = (await create_pod(port)).obj["metadata"]
        out = await port.run(pod_ref(DeleteObject, 1, uid=md["uid"], rv=md["resourceVersion"]))
        assert out.result == "ok"
        assert (await port.run(pod_ref(GetObject, 2))).result == "not_found"

    async def test_a_delete_never_sets_a_grace_period_and_sends_its_preconditions(self, port):
        md = (await create_pod(port)).obj["metadata"]
        await port.run(pod_ref(DeleteObject, 1, uid=md["uid"], rv=md["resourceVersion"]))
        body = port.server.bodies[-1]
        assert "gracePeriodSeconds" not in body
        assert body["preconditions"] == {"uid": md["uid"], "resourceVersion": md["resourceVersion"]}

    async def test_a_delete_fenced_on_another_uid_is_a_conflict_and_deletes_nothing(self, port):
        md = (await create_pod(port)).obj["metadata"]
        out = await port.run(pod_ref(DeleteObject, 1, uid="someone-else", rv=md["resourceVersion"]))
        assert (out.result, out.status_reason, out.code) == ("conflict", "Conflict", 409)
        assert port.server.get("v1", "Pod", "work", "s1-g1") is not None

    async def test_a_delete_fenced_on_an_old_resource_version_is_a_conflict(self, port):
        md = (await create_pod(port)).obj["metadata"]
        out = await port.run(pod_ref(DeleteObject, 1, uid=md["uid"], rv="1"))
        assert out.result == "conflict"

    async def test_deleting_an_absent_object_is_not_found(self, port):
        assert (await port.run(pod_ref(DeleteObject, uid="u1", rv="1"))).result == "not_found"


class TestList:
    async def test_a_list_returns_matching_items_and_the_server_time_of_that_response(self, port):
        await create_pod(port)
        port.server.seed({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other", "namespace": "work"}})
        port.server.server_ms = T2030 + 42_000
        out = await port.run(ListObjects(id="2.0", machine="pod", key="local/work/", api_version="v1", kind="Pod",
                                         namespace="work", label_selector="kfold.dev/session=s1"))
        assert out.result == "ok" and [i["metadata"]["name"] for i in out.items] == ["s1-g1"]
        assert out.items[0]["kind"] == "Pod"
        assert out.at == T2030 + 42_000


class TestEnsureNamespace:
    async def test_an_absent_namespace_is_created_with_its_labels(self, port):
        out = await port.run(EnsureNamespace(id="1.0", machine="pod", key="local/fresh/", namespace="fresh",
                                             labels={"app.kubernetes.io/managed-by": "kfold"}))
        assert out.result == "ok"
        assert port.server.get("v1", "Namespace", "", "fresh")["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kfold"}

    async def test_an_existing_namespace_is_fine(self, port):
        out = await port.run(EnsureNamespace(id="1.0", machine="pod", key="local/work/", namespace="work"))
        assert out.result == "ok" and [m for m, _ in port.server.requests] == ["GET"]

    async def test_a_namespace_kfold_may_not_create_is_forbidden(self, port):
        port.server.forbid("create", "Namespace")
        out = await port.run(EnsureNamespace(id="1.0", machine="pod", key="local/fresh/", namespace="fresh"))
        assert (out.result, out.status_reason) == ("forbidden", "Forbidden")


class TestEvent:
    async def test_an_event_is_recorded_about_its_object(self, port):
        out = await port.run(RecordEvent(id="1.0", machine="session", key="local/work/s1", namespace="work",
                                         involved={"kind": "Session", "name": "s1", "namespace": "work"},
                                         reason="AppEnded", message="app web ended", event_name="s1.app-web"))
        assert out.result == "ok"
        ev = port.server.get("v1", "Event", "work", "s1.app-web")
        assert (ev["reason"], ev["involvedObject"]["name"], ev["type"]) == ("AppEnded", "s1", "Normal")


class TestPostEvent:
    async def test_an_events_k8s_io_event_is_posted_then_its_series_patched(self, port):
        ev = dict(machine="session", key="local/work/s1#events", namespace="work", reason="Ready", action="BringUp",
                  note="generation 1: pod s1-g1 is serving",
                  regarding={"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "name": "s1", "namespace": "work",
                             "uid": "u1"})
        assert (await port.run(PostEvent(id="1.0", **ev))).result == "ok"
        assert (await port.run(PostEvent(id="2.0", **ev))).result == "ok"
        [stored] = [o for k, o in port.server.objects.items() if k[0] == "events.k8s.io/v1"]
        assert (stored["reason"], stored["action"], stored["regarding"]["uid"]) == ("Ready", "BringUp", "u1")
        assert stored["reportingController"] == "kfold.dev/kfold" and stored["series"]["count"] == 2


def secret(n=0, **kw):
    base = dict(id=f"1.{n}", machine="repo", key="local/work/cache", namespace="work", name="git-creds",
                literal={"username": "kfold"}, values_from_env={"password": "KFOLD_TEST_TOKEN"})
    return ApplySecret(**{**base, **kw})


class TestApplySecret:
    async def test_the_value_is_resolved_from_the_environment_at_apply_time(self, port):
        out = await port.run(secret())
        assert out.result == "ok"
        stored = port.server.get("v1", "Secret", "work", "git-creds")["data"]
        assert base64.b64decode(stored["password"]).decode() == ENV["KFOLD_TEST_TOKEN"]
        assert base64.b64decode(stored["username"]).decode() == "kfold"

    async def test_the_value_never_reaches_the_outcome(self, port):
        out = await port.run(secret())
        assert "data" not in out.obj
        assert ENV["KFOLD_TEST_TOKEN"] not in out.model_dump_json()
        assert base64.b64encode(ENV["KFOLD_TEST_TOKEN"].encode()).decode() not in out.model_dump_json()

    async def test_an_existing_secret_is_replaced(self, port):
        await port.run(secret())
        out = await port.run(secret(1, literal={"username": "other"}))
        assert out.result == "ok"
        stored = port.server.get("v1", "Secret", "work", "git-creds")["data"]
        assert base64.b64decode(stored["username"]).decode() == "other"

    async def test_an_unset_variable_is_refused_before_any_request(self, port):
        out = await port.run(secret(values_from_env={"password": "KFOLD_NOT_SET"}))
        assert out.result == "refused" and "KFOLD_NOT_SET" in out.message
        assert port.server.requests == []
