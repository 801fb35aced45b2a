"""The peer kfold is measured against (scripts/bench_peer.py, contestant ``kopf-async``): the same
Session job as scripts/peer_kopf_operator.py (``kopf-sync``), written the way kopf's documentation
steers its users: async handlers on kopf's event loop, the kubernetes_asyncio client. Not part of
kfold; kopf and kubernetes_asyncio are bench-only extras.

    pip install -c constraints.txt -e '.[bench]'
    KUBECONFIG=... python -m kopf run scripts/peer_kopf_async.py --standalone --namespace NS

The job (kfold's, reduced to its essentials; identical to the sync peer's):
- a Session gets kfold's finalizer ``kfold.dev/teardown`` (kopf adds it: the delete handler below);
- create: pod ``<session>-g1`` with kfold's labels, owned by the Session (``kopf.adopt``): a
  ``workspace`` container and one ``app-<name>`` container per app with its ports, all mounting one
  ``emptyDir`` at /workspace;
- the pod Running with a Ready condition (one pod watch, no polling): a ClusterIP Service
  ``<session>`` owned by the pod, then status ``phase: Ready`` with the pod name;
- delete: Service and pod deleted (concurrently), then kopf releases the finalizer.
Unlike the sync peer, no intermediate status (``phase: Starting``, a value the Session CRD's enum
does not have): kfold and the floor write a Session's status once, when it is Ready.

kopf's settings (``configure`` below), each chosen for what a tuned production operator runs and
so that kopf does no work kfold does not do:
- ``persistence.finalizer``: kfold's name, so the bench's teardown check is the same for all;
- ``posting.level = WARNING``: Kubernetes Events only for warnings and errors (none in a healthy
  run). At kopf's default (INFO) each handler's success is an Event: writes kfold does not make;
- ``scanning.disabled``: the resources and the namespace are fixed (``--namespace``), so kopf needs
  no CRD and namespace watches;
- ``watching.server_timeout = 300``: watches renewed every 5 minutes, as the floor and client-go's
  informers do; kopf's default lets the apiserver pick (its --min-request-timeout, randomised);
- everything else at kopf's defaults: progress in annotations (``SmartProgressStorage`` writes
  no ``status.kopf``), unbounded per-object workers, the 5 s consistency wait after its own patches,
  retries and backoffs.
One ``kubernetes_asyncio`` ApiClient, made at start-up and closed at clean-up, with a connection
pool as wide as the floor's (64): async handlers have no thread pool to bound their concurrency.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_job import MANAGED, pod_for, ready, service_for  # noqa: E402  (the job's objects, shared by both peers)

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
FINALIZER = "kfold.dev/teardown"
POOL = 64

_api: client.ApiClient | None = None
_served: set[str] = set()          # pod uids whose Service and Ready status are done (one event loop: no lock)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _api
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.WARNING
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    cfg = client.Configuration()
    await config.load_kube_config(client_configuration=cfg)    # $KUBECONFIG: this operator's identity
    cfg.connection_pool_maxsize = POOL
    _api = client.ApiClient(cfg)


@kopf.on.cleanup()
async def close(**_: Any) -> None:
    if _api is not None:
        await _api.close()


async def ignore(status: int, call: Any, *args: Any, **kwargs: Any) -> Any:
    """``await call(...)``; an ApiException with ``status`` (409: a retried create; 404: already
    gone) is success."""
    try:
        return await call(*args, **kwargs)
    except ApiException as exc:
        if exc.status != status:
            raise
        return None


@kopf.on.create(GROUP, VERSION, PLURAL)
async def create(name: str, namespace: str, spec: dict, body: kopf.Body, **_: Any) -> None:
    pod = pod_for(name, dict(spec))
    kopf.adopt(pod, owner=body)
    await ignore(409, client.CoreV1Api(_api).create_namespaced_pod, namespace, pod)   # 409: a retried handler


def serveable(type: str, body: kopf.Body, **_: Any) -> bool:
    """kopf's ``when=`` filter: a live pod, Running and Ready, not served yet."""
    return (type != "DELETED" and not body.metadata.get("deletionTimestamp")
            and ready(dict(body.get("status") or {})) and body.metadata["uid"] not in _served)


@kopf.on.event("", "v1", "pods", labels=MANAGED, when=serveable)
async def pod_ready(body: kopf.Body, namespace: str, **_: Any) -> None:
    uid, pod_name = body.metadata["uid"], body.metadata["name"]
    session = (body.metadata.get("labels") or {}).get("kfold.dev/session")
    if uid in _served or not session:
        return
    _served.add(uid)
    service = service_for(session, pod_name, uid, list(body.spec.get("containers", [])))
    try:   # Ready is said only once the Service exists
        await ignore(409, client.CoreV1Api(_api).create_namespaced_service, namespace, service)
        await ignore(404, client.CustomObjectsApi(_api).patch_namespaced_custom_object_status,
                     GROUP, VERSION, namespace, PLURAL, session, {"status": {"phase": "Ready", "podName": pod_name}},
                     _content_type="application/merge-patch+json")   # kubernetes_asyncio's default is a JSON patch
    except BaseException:
        _served.discard(uid)   # the next event of this pod tries again
        raise


@kopf.on.delete(GROUP, VERSION, PLURAL)
async def delete(name: str, namespace: str, **_: Any) -> None:
    core = client.CoreV1Api(_api)
    await asyncio.gather(ignore(404, core.delete_namespaced_service, name, namespace),
                         ignore(404, core.delete_namespaced_pod, f"{name}-g1", namespace))
