"""A kopf peer kfold is measured against (scripts/bench_peer.py, contestant ``kopf-sync``; the peer
the ratios use is the async one, scripts/peer_kopf_async.py): the same essential Session job, with
kopf's sync handlers and the sync client. Not part of kfold; kopf is the bench-only extra.

    pip install -c constraints.txt -e '.[bench]'
    KUBECONFIG=... python -m kopf run scripts/peer_kopf_operator.py --standalone --namespace NS

The job (kfold's, reduced to its essentials):
- a Session gets kfold's finalizer ``kfold.dev/teardown`` (kopf adds it: the delete handler below);
- create: pod ``<session>-g1`` with kfold's labels, owned by the Session (``kopf.adopt``), the pod
  kfold makes of the Session's spec (a ``workspace`` container and one ``app-<name>`` container per
  app with its ports, all mounting one ``emptyDir`` at /workspace: the same object for the
  apiserver, etcd and kwok to store and run as kfold's). Until issue 38 it also wrote status
  ``phase: Starting``, a value the Session CRD's enum rejects (422): kopf retried the create
  handler after 1 s, every Session paid it;
- the pod Running with a Ready condition (one pod watch, no polling): a ClusterIP Service
  ``<session>`` owned by the pod, then status ``phase: Ready``;
- delete: Service and pod deleted, then kopf releases the finalizer.

kopf's defaults are kept except: the finalizer's name is kfold's; Kubernetes Events for handler
progress are not posted (three extra writes per Session that kfold does not make either); sync
handlers get a pool as wide as the benchmark's 16 creating threads.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import kopf
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_job import MANAGED, pod_for, ready, service_for  # noqa: E402  (the job's objects, shared by both peers)

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
FINALIZER = "kfold.dev/teardown"

_api: client.ApiClient | None = None
_served: set[str] = set()          # pod uids whose Service and Ready status are done
_lock = threading.Lock()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_) -> None:
    global _api
    settings.persistence.finalizer = FINALIZER
    settings.posting.enabled = False
    settings.execution.max_workers = 16
    cfg = client.Configuration()
    config.load_kube_config(client_configuration=cfg)      # $KUBECONFIG: this operator's identity
    cfg.connection_pool_maxsize = 32
    _api = client.ApiClient(cfg)


def ignore(status: int, call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except ApiException as exc:
        if exc.status != status:
            raise
        return None


@kopf.on.create(GROUP, VERSION, PLURAL)
def create(name: str, namespace: str, spec: dict, body: kopf.Body, **_) -> None:
    pod = pod_for(name, spec)
    kopf.adopt(pod, owner=body)
    ignore(409, client.CoreV1Api(_api).create_namespaced_pod, namespace, pod)   # a retried handler


@kopf.on.event("", "v1", "pods", labels=MANAGED)
def pod_event(type: str, body: kopf.Body, namespace: str, **_) -> None:
    if type == "DELETED" or body.metadata.get("deletionTimestamp") or not ready(body.get("status", {})):
        return
    uid, pod_name = body.metadata["uid"], body.metadata["name"]
    session = body.metadata.get("labels", {}).get("kfold.dev/session")
    with _lock:
        if uid in _served or not session:
            return
        _served.add(uid)
    service = service_for(session, pod_name, uid, list(body.spec.get("containers", [])))
    ignore(409, client.CoreV1Api(_api).create_namespaced_service, namespace, service)
    ignore(404, client.CustomObjectsApi(_api).patch_namespaced_custom_object_status,
           GROUP, VERSION, namespace, PLURAL, session, {"status": {"phase": "Ready", "podName": pod_name}})


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete(name: str, namespace: str, **_) -> None:
    core = client.CoreV1Api(_api)
    ignore(404, core.delete_namespaced_service, name, namespace)
    ignore(404, core.delete_namespaced_pod, f"{name}-g1", namespace)
