"""``metadata.managedFields`` is dropped where objects enter kfold (observers: see
tests/contract/test_observer.py; the executor's replies: here; the real apiserver's objects:
tests/e2e/test_session_lifecycle.py), and nothing else is."""
from __future__ import annotations

import copy

from engine.effects.io.ops import done
from engine.effects.io.transport import Response
from engine.effects.object_trim import without_managed_fields

MANAGED = [{"manager": "kube-scheduler", "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": {}}}}]


def pod(**metadata):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7", **metadata},
            "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Running"}}


def test_only_managed_fields_go_and_the_input_is_left_as_it_was():
    obj = pod(managedFields=MANAGED, labels={"a": "b"})
    before = copy.deepcopy(obj)
    out = without_managed_fields(obj)
    assert obj == before
    assert out == {**before, "metadata": {k: v for k, v in before["metadata"].items() if k != "managedFields"}}
    assert out["spec"] is obj["spec"]   # shared, not copied


def test_an_object_without_them_is_returned_as_is():
    for obj in (pod(), {"kind": "Status", "code": 404}, {"metadata": None}, {"metadata": ["x"]}):
        assert without_managed_fields(obj) is obj


def test_a_reply_object_is_kept_without_managed_fields():
    out = done(Response(201, {"Date": "Tue, 01 Jan 2030 00:00:00 GMT"}, pod(managedFields=MANAGED)))
    assert out.result == "ok" and out.obj["metadata"]["uid"] == "u1"
    assert "managedFields" not in out.obj["metadata"]


def test_a_secret_reply_loses_its_payload_and_its_managed_fields():
    secret = {"apiVersion": "v1", "kind": "Secret", "data": {"token": "c2VjcmV0"},
              "metadata": {"name": "s", "managedFields": MANAGED}}
    out = done(Response(200, {}, secret))
    assert out.obj == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}


async def test_listed_items_are_kept_without_managed_fields():
    from engine.effects.io.ops import perform
    from engine.effects.models import ListObjects

    async def call(req):
        return Response(200, {}, {"kind": "PodList", "metadata": {"resourceVersion": "9"},
                                  "items": [pod(managedFields=MANAGED), pod(name="q")]})
    effect = ListObjects(id="1.0", machine="pod", key="local/ns/p", api_version="v1", kind="Pod", namespace="ns")
    out = await perform(effect, call, None)
    assert out.result == "ok" and [i["metadata"]["name"] for i in out.items] == ["p", "q"]
    assert all("managedFields" not in i["metadata"] for i in out.items)
