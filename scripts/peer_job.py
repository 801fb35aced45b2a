"""The Session job's objects as both kopf peers (scripts/peer_kopf_async.py, scripts/peer_kopf_operator.py)
make them: the pod kfold makes of a Session's spec, its ClusterIP Service, and when a pod counts as
Ready. Plain dicts, no client: each peer sends them with its own."""
from __future__ import annotations

from typing import Any, Mapping

MANAGED = {"app.kubernetes.io/managed-by": "kfold"}


def labels(session: str, generation: int | None = None) -> dict[str, str]:
    out = {**MANAGED, "kfold.dev/session": session}
    if generation is not None:
        out["kfold.dev/generation"] = str(generation)
    return out


def pod_for(session: str, spec: Mapping[str, Any]) -> dict:
    """Pod ``<session>-g1``: a ``workspace`` container and one ``app-<name>`` container per app with
    its ports, all mounting one ``emptyDir`` at /workspace."""
    mount = [{"name": "workspace", "mountPath": "/workspace"}]
    apps = [{"name": f"app-{app['name']}", "image": spec["image"], "volumeMounts": mount,
             "ports": [{"containerPort": p["port"], "protocol": p.get("protocol", "TCP")} for p in app.get("ports", [])]}
            for app in spec.get("apps", [])]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{session}-g1", "labels": labels(session, 1)},
            "spec": {"restartPolicy": "Never", "volumes": [{"name": "workspace", "emptyDir": {}}],
                     "containers": [{"name": "workspace", "image": spec["image"], "volumeMounts": mount}, *apps]}}


def ready(status: Mapping[str, Any]) -> bool:
    """A pod Running with condition Ready=True."""
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return status.get("phase") == "Running" and conditions.get("Ready") == "True"


def service_for(session: str, pod_name: str, pod_uid: str, containers: list) -> dict:
    """ClusterIP Service ``<session>`` owned by the pod, one port per container port."""
    ports = [{"name": f"{p.get('protocol', 'TCP').lower()}-{p['containerPort']}", "port": p["containerPort"],
              "targetPort": p["containerPort"], "protocol": p.get("protocol", "TCP")}
             for c in containers for p in c.get("ports", [])]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": session, "labels": labels(session),
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}]},
            "spec": {"type": "ClusterIP", "selector": labels(session, 1), "ports": ports}}
