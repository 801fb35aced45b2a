"""The workspace volume (config ``workspace.*``; seed 002: a workspace that outlives the pod).

With a storage class, a Session's workspace is one PersistentVolumeClaim ``<session>-workspace``
for all its generations: made before the first pod, met again (AlreadyExists, read, adopted as the
Session's own) by each later generation, mounted by every pod, never deleted by suspend, resume or
set-apps; deleted at teardown, read first and fenced by uid, only when it is the Session's. Without
one, each pod's workspace is an emptyDir. A seed ConfigMap is copied in by an init container that
skips a workspace already marked as seeded."""
from __future__ import annotations

from typing import Any

from tests.scenario.test_session_support import FINALIZER, NAME, NS, SPEC, World, at, pod_obj, session_obj

CLAIM = f"{NAME}-workspace"
OURS = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": NAME}


def _world(**ws: Any) -> World:
    return World(workspace_class="fast-ssd", workspace_size="5Gi", **ws)


def _claim_obj(labels: dict[str, str] | None = None, uid: str = "claim-uid") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": CLAIM, "namespace": NS, "uid": uid, "resourceVersion": "5",
                         "labels": OURS if labels is None else labels}}


def _to_claim(w: World, spec: dict[str, Any] = SPEC) -> Any:
    w.submit(spec, 0)
    w.rv += 1
    from tests.scenario.test_session_support import FINALIZER, session_obj
    w.answer("patch", "Session", when=0, obj=session_obj(spec, rv=str(w.rv), finalizers=(FINALIZER,)))
    [create] = w.pending("create", "PersistentVolumeClaim")
    return create


def _volumes(pod_create: Any) -> dict[str, Any]:
    return {v["name"]: v for v in pod_create.manifest["spec"]["volumes"]}


def test_without_a_storage_class_the_workspace_is_an_empty_dir_and_no_claim_is_made():
    w = World().to_creating()
    assert not w.effects("create", "PersistentVolumeClaim")
    [pod] = w.pending("create", "Pod")
    assert _volumes(pod)["workspace"] == {"name": "workspace", "emptyDir": {}}
    assert "initContainers" not in pod.manifest["spec"]


def test_the_claim_is_made_before_the_first_pod_with_the_configured_class_size_and_owner():
    w = _world()
    create = _to_claim(w)
    assert not w.pending("create", "Pod"), "the pod waits for its workspace"
    m = create.manifest
    assert (create.name, create.namespace, m["metadata"]["name"]) == (CLAIM, NS, CLAIM)
    assert (m["apiVersion"], m["kind"]) == ("v1", "PersistentVolumeClaim"), "what the apiserver is sent names its type"
    assert (create.api_version, create.kind) == ("v1", "PersistentVolumeClaim")
    assert m["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast-ssd",
                         "resources": {"requests": {"storage": "5Gi"}}}
    assert {k: m["metadata"]["labels"][k] for k in OURS} == OURS
    assert [(o["kind"], o["uid"]) for o in m["metadata"]["ownerReferences"]] == [("Session", f"uid-{NAME}")]
    w.s.outcome(create, "ok", at(1), obj=_claim_obj())
    [pod] = w.pending("create", "Pod")
    assert _volumes(pod)["workspace"] == {"name": "workspace", "persistentVolumeClaim": {"claimName": CLAIM}}


def test_suspend_resume_and_set_apps_keep_the_claim_and_the_next_pod_mounts_it_again():
    w = _world()
    w.s.outcome(_to_claim(w), "ok", at(1), obj=_claim_obj())
    w.answer("create", "Pod", when=2, obj=pod_obj(1))
    w.run_pod(3)
    w.publish_endpoints(4)
    w.submit({**SPEC, "suspended": True}, 10)
    w.answer("delete", "Pod", when=11)
    w.observe_pod(12, gen=1, event="DELETED")
    w.submit(SPEC, 20)
    again = w.pending("create", "PersistentVolumeClaim")
    assert len(again) == 1, "generation 2 asks for its workspace too"
    w.s.outcome(again[0], "already_exists", at(21), status_reason="AlreadyExists")
    [read] = w.pending("get", "PersistentVolumeClaim")
    w.s.outcome(read, "ok", at(21), obj=_claim_obj())
    [pod] = w.pending("create", "Pod")
    assert pod.name == f"{NAME}-g2" and _volumes(pod)["workspace"]["persistentVolumeClaim"]["claimName"] == CLAIM
    assert not [e for e in w.s.effects if getattr(e, "kind", "") == "PersistentVolumeClaim" and e.type == "delete"]


def test_a_stop_deletes_the_claim_fenced_by_the_uid_its_read_found():
    w = _world()
    w.s.outcome(_to_claim(w), "ok", at(1), obj=_claim_obj())
    w.answer("create", "Pod", when=2, obj=pod_obj(1))
    w.submit({**SPEC, "stopped": True}, 5)
    [read] = w.pending("get", "PersistentVolumeClaim")
    w.s.outcome(read, "ok", at(6), obj=_claim_obj(uid="claim-uid-7"))
    [delete] = w.pending("delete", "PersistentVolumeClaim")
    assert (delete.name, delete.uid) == (CLAIM, "claim-uid-7")
    w.s.outcome(delete, "ok", at(7))
    w.answer("delete", "Pod", when=8)
    w.observe_pod(9, gen=1, event="DELETED")
    assert w.phase == "Stopped"


def test_a_same_name_claim_that_is_not_the_sessions_fails_it_and_is_never_deleted():
    w = _world()
    w.s.outcome(_to_claim(w), "already_exists", at(1), status_reason="AlreadyExists")
    [read] = w.pending("get", "PersistentVolumeClaim")
    w.s.outcome(read, "ok", at(2), obj=_claim_obj(labels={"app": "someone-else"}))
    assert w.phase == "Failed" and not w.pending("create", "Pod")
    assert "PersistentVolumeClaim team/demo-workspace already exists and is not Session demo's" in \
        w.condition("Ready")["message"]
    w.submit({**SPEC, "stopped": True}, 5)
    for read in w.pending("get", "PersistentVolumeClaim"):
        w.s.outcome(read, "ok", at(6), obj=_claim_obj(labels={"app": "someone-else"}))
    assert not w.effects("delete", "PersistentVolumeClaim"), "someone else's claim is left alone"


def test_a_seed_configmap_is_copied_in_by_an_init_container_that_skips_a_seeded_workspace():
    w = _world(workspace_seed="starter-files")
    w.s.outcome(_to_claim(w), "ok", at(1), obj=_claim_obj())
    [pod] = w.pending("create", "Pod")
    spec = pod.manifest["spec"]
    assert _volumes(pod)["workspace-seed"] == {"name": "workspace-seed", "configMap": {"name": "starter-files"}}
    [init] = spec["initContainers"]
    assert init["image"] == SPEC["image"]
    script = init["command"][-1]
    assert "/workspace/.kfold-workspace-root" in script and script.startswith("test -e /workspace/.kfold-workspace-root ||")
    assert {m["mountPath"]: m.get("readOnly", False) for m in init["volumeMounts"]} == {"/workspace": False, "/seed": True}


def test_a_sessions_own_seed_configmap_overrides_the_configs():
    w = _world(workspace_seed="starter-files")
    w.s.outcome(_to_claim(w, {**SPEC, "workspace": {"seedConfigMap": "my-files"}}), "ok", at(1), obj=_claim_obj())
    [pod] = w.pending("create", "Pod")
    assert _volumes(pod)["workspace-seed"]["configMap"] == {"name": "my-files"}


def test_an_invalid_seed_configmap_name_fails_the_session_naming_the_field():
    w = _world()
    w.submit({**SPEC, "workspace": {"seedConfigMap": "Not A Name"}}, 0)
    assert w.phase == "Failed"
    assert "spec.workspace.seedConfigMap" in w.condition("Ready")["message"] + str(w.status())


def test_a_stop_met_on_a_fresh_journal_reads_the_claim_an_earlier_life_made():
    """With a storage class every Session may have a claim, made by a life whose journal is lost:
    a Session first seen stopped (its record never sent a create) still has it read, then deleted."""
    w = _world()
    obj = session_obj({**SPEC, "stopped": True}, rv="500", finalizers=(FINALIZER,))
    obj["status"] = {"phase": "Ready", "generation": 2, "podName": "demo-g2"}
    w.s.observe(obj, at(0))
    [read] = w.pending("get", "PersistentVolumeClaim")
    w.s.outcome(read, "ok", at(1), obj=_claim_obj())
    [delete] = w.pending("delete", "PersistentVolumeClaim")
    assert (delete.name, delete.uid) == (CLAIM, "claim-uid")
