"""The exact kubernetes-client calls behind the pod machine's effects (executor side, does I/O).

Each function takes a ``CoreV1Api`` and an effect, makes exactly one kind of request (two for
``ensure_namespace``), and returns plain JSON data. Errors propagate as the client raises them;
``kube_errors.classify`` turns them into an outcome.

Guarantees:
- ``delete_pod`` sends ``preconditions {uid, resourceVersion}`` from the effect's fence and
  refuses (``ValueError``, nothing sent) an effect without one. No delete sets
  ``gracePeriodSeconds``: the object's own budget applies.
- Reads and lists never send ``resourceVersion``: they are quorum reads, proof of absence.
- ``list_secrets``/``list_pods`` return ``(items, at)``, where ``at`` is THAT response's Date
  header in epoch ms, ``None`` when missing or malformed: the sweep's only clock.
- ``ensure_namespace`` never touches any namespace but the effect's.
"""
from __future__ import annotations

import json
from typing import Any

from kubernetes.client import CoreV1Api, V1DeleteOptions, V1Namespace, V1ObjectMeta, V1Preconditions
from kubernetes.client.exceptions import ApiException

from engine.effects.kube_errors import classify, parse_http_date

RAW = {"_preload_content": False}   # keep the response: exact JSON and its headers


def delete_pod(api: CoreV1Api, eff: Any) -> dict[str, Any]:
    if not (eff.uid and eff.rv):
        raise ValueError(f"refusing to delete pod {eff.namespace}/{eff.name} without a uid+resourceVersion fence")
    body = V1DeleteOptions(preconditions=V1Preconditions(uid=eff.uid, resource_version=eff.rv),
                           propagation_policy=eff.propagation)
    return _json(api.delete_namespaced_pod(eff.name, eff.namespace, body=body, **RAW))


def delete_secret(api: CoreV1Api, eff: Any) -> dict[str, Any]:
    """A swept Secret: fenced by uid when the effect has one (a recreated Secret is not ours)."""
    pre = V1Preconditions(uid=eff.uid, resource_version=eff.rv or None) if eff.uid else None
    body = V1DeleteOptions(preconditions=pre, propagation_policy=eff.propagation)
    return _json(api.delete_namespaced_secret(eff.name, eff.namespace, body=body, **RAW))


def read_pod(api: CoreV1Api, eff: Any) -> dict[str, Any]:
    return _json(api.read_namespaced_pod(eff.name, eff.namespace, **RAW))


def create_pod(api: CoreV1Api, eff: Any) -> dict[str, Any]:
    return _json(api.create_namespaced_pod(eff.namespace, eff.manifest, **RAW))


def list_secrets(api: CoreV1Api, eff: Any) -> tuple[list[dict[str, Any]], int | None]:
    if eff.namespace:
        resp = api.list_namespaced_secret(eff.namespace, label_selector=eff.label_selector or None, **RAW)
    else:
        resp = api.list_secret_for_all_namespaces(label_selector=eff.label_selector or None, **RAW)
    return _items(resp)


def list_pods(api: CoreV1Api, eff: Any) -> tuple[list[dict[str, Any]], int | None]:
    if eff.namespace:
        resp = api.list_namespaced_pod(eff.namespace, label_selector=eff.label_selector or None, **RAW)
    else:
        resp = api.list_pod_for_all_namespaces(label_selector=eff.label_selector or None, **RAW)
    return _items(resp)


def ensure_namespace(api: CoreV1Api, eff: Any) -> dict[str, Any]:
    """GET the namespace; create it when absent (or when GET alone is forbidden); AlreadyExists
    is success. A Forbidden create propagates: the machine names ``kubectl create namespace``."""
    try:
        return _json(api.read_namespace(eff.namespace, **RAW))
    except ApiException as exc:
        if classify(exc).result not in ("not_found", "forbidden"):
            raise
    body = V1Namespace(metadata=V1ObjectMeta(name=eff.namespace, labels=dict(eff.labels) or None))
    try:
        return _json(api.create_namespace(body, **RAW))
    except ApiException as exc:
        if classify(exc).result != "already_exists":
            raise
        return {"metadata": {"name": eff.namespace}}


def _json(resp: Any) -> dict[str, Any]:
    data = resp.data
    return json.loads(data) if data else {}


def _items(resp: Any) -> tuple[list[dict[str, Any]], int | None]:
    return list(_json(resp).get("items") or []), parse_http_date(resp.headers.get("Date"))
