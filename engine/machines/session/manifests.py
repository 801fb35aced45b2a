"""Pure builders for what a session creates: its pod, Service, Ingress and Secret.

Guarantees:
- Every manifest carries ``app.kubernetes.io/managed-by: kfold`` and ``kfold.dev/session``; the
  pod also ``kfold.dev/generation``, and, away from its Session, ``kfold.dev/session-namespace``. Names are deterministic: pod ``<session>-g<N>``, Service and
  Ingress ``<session>``, Secret ``<session>-env``.
- No manifest carries a secret value. Env entries become ``valueFrom.secretKeyRef``; the session
  Secret holds only the list of referenced names (an annotation), never data.
- Service and Ingress are owner-referenced to the pod (by uid), so they go with it; a new
  generation re-points them through the endpoints upsert. The pod is owner-referenced to its
  Session when it runs in the Session's namespace on the Session's cluster.
- The Service selects the pod by session AND generation, never a terminating predecessor.
- Every container knows what it is (docs/session-api.md "Container identity"): its env ends with
  ``KFOLD_CONTAINER`` (``workspace`` or ``app-<name>``) and, in an app, ``KFOLD_APP`` (its name) and
  ``KFOLD_APP_PORTS`` (its declared ports when the pod was made, ``8080/TCP,9000/UDP``), after the
  spec's env, so a Secret reference of the same name cannot hide them.
- Every container (workspace, apps and the seed's init container) gets ``imagePullPolicy`` when the
  spec names one (``spec.imagePullPolicy``); without one, none is set and the manifest is the one
  kfold made before the field.
- Every container (workspace and apps) gets the same ``resources``: the spec's limits and requests
  clamped to the configured ceilings (``session.spec``). App containers with ``io`` tty, pipe
  or streams have ``stdin`` (tty also ``tty``), so ``kubectl attach -i[t]`` reaches them.
"""
from __future__ import annotations

from typing import Any

from engine.machines.session.spec import App, Port, Spec

from engine.labels import GENERATION_LABEL, MANAGED_LABELS, SESSION_LABEL  # noqa: F401 - re-exported
from engine.labels import SESSION_NAMESPACE_LABEL
WORKSPACE = "workspace"
API_VERSION = "kfold.dev/v1alpha1"   # the Session custom resource's group/version


def pod_name(session: str, generation: int) -> str:
    return f"{session}-g{generation}"


def secret_name(session: str) -> str:
    return f"{session}-env"


def labels(session: str, generation: int | None = None) -> dict[str, str]:
    out = {**MANAGED_LABELS, SESSION_LABEL: session}
    if generation is not None:
        out[GENERATION_LABEL] = str(generation)
    return out


def host(port: Port, session: str, base_domain: str) -> str:
    return f"{port.port}-{session}.{base_domain}"


def claim_name(session: str) -> str:
    return f"{session}-workspace"


SEED_MARKER = ".kfold-workspace-root"   # at the workspace root: seeded once, never again
_SEED_SCRIPT = (f'test -e /workspace/{SEED_MARKER} || {{ cp -R /seed/. /workspace/ '
                f'&& touch /workspace/{SEED_MARKER}; }}')


def workspace_claim(session: str, namespace: str, storage_class: str, size: str, access: str,
                    session_uid: str = "") -> dict[str, Any]:
    """The PersistentVolumeClaim that holds a Session's workspace across its generations; owned by
    the Session where an ownerReference reaches it (deleted with it by the garbage collector too)."""
    md: dict[str, Any] = {"name": claim_name(session), "namespace": namespace, "labels": labels(session)}
    if session_uid:
        md["ownerReferences"] = [{"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "name": session,
                                  "uid": session_uid}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md,
            "spec": {"accessModes": [access], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}


def pod(session: str, namespace: str, generation: int, spec: Spec, session_uid: str = "",
        session_namespace: str = "", claim: str = "", seed: str = "", identity: bool = True) -> dict[str, Any]:
    """``session_uid``: the Session's, when the pod runs beside it (an ownerReference cannot cross
    namespaces or clusters): the garbage collector then takes the pod with the Session.
    ``session.namespace``: the Session's, when the pod runs away from it: labelled, so the
    orphan-pod sweep (``pod.orphans``) knows which Session to read.
    ``claim``: the workspace's PersistentVolumeClaim ("" = an emptyDir of this pod). ``seed``: a
    ConfigMap whose files an init container copies into a workspace that has no ``SEED_MARKER``.
    ``identity``: each container's identity in its env (``session.configure``'s
    ``container_identity``; off only when refolding a journal kfold wrote before it stated it)."""
    containers = [_workspace(spec, identity)] + [_app(app, spec, identity) for app in spec.apps]
    md: dict[str, Any] = {"name": pod_name(session, generation), "namespace": namespace,
                          "labels": labels(session, generation)}
    if session_namespace:
        md["labels"][SESSION_NAMESPACE_LABEL] = session_namespace
    if session_uid:
        md["ownerReferences"] = [{"apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "name": session,
                                  "uid": session_uid}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": md,
        "spec": _pod_spec(spec, containers, claim, seed),
    }


def _pod_spec(spec: Spec, containers: list[dict[str, Any]], claim: str, seed: str) -> dict[str, Any]:
    volume: dict[str, Any] = {"persistentVolumeClaim": {"claimName": claim}} if claim else {"emptyDir": {}}
    out: dict[str, Any] = {"restartPolicy": "Never", "containers": containers,
                           "volumes": [{"name": WORKSPACE, **volume}]}
    if seed:
        out["volumes"].append({"name": "workspace-seed", "configMap": {"name": seed}})
        out["initContainers"] = [{
            "name": "seed-workspace", "image": spec.image, "command": ["sh", "-c", _SEED_SCRIPT],
            "volumeMounts": [{"name": WORKSPACE, "mountPath": "/workspace"},
                             {"name": "workspace-seed", "mountPath": "/seed", "readOnly": True}]}]
    if spec.pull_policy:
        for c in out["containers"] + out.get("initContainers", []):
            c["imagePullPolicy"] = spec.pull_policy
    return out


def _resources(spec: Spec) -> dict[str, Any]:
    """Every container's ``resources``: the spec's, already clamped to the configured ceilings."""
    out: dict[str, Any] = {}
    if spec.limits:
        out["limits"] = dict(spec.limits)
    if spec.requests:
        out["requests"] = dict(spec.requests)
    return out


def _workspace(spec: Spec, identity: bool) -> dict[str, Any]:
    return {"name": WORKSPACE, "image": spec.image, "env": _env(spec) + (_identity(WORKSPACE) if identity else []),
            "resources": _resources(spec),
            "volumeMounts": [{"name": WORKSPACE, "mountPath": "/workspace"}]}


def _app(app: App, spec: Spec, identity: bool) -> dict[str, Any]:
    interactive = app.io in ("tty", "pipe", "streams")
    env = _env(spec) + (_identity(f"app-{app.name}", app) if identity else [])
    out = {"name": f"app-{app.name}", "image": spec.image, "env": env,
           "ports": [{"containerPort": p.port, "protocol": p.protocol} for p in app.ports],
           "stdin": interactive, "tty": app.io == "tty",
           "volumeMounts": [{"name": WORKSPACE, "mountPath": "/workspace"}]}
    resources = _resources(spec)
    if resources:  # left out when empty, as before ceilings applied to app containers
        out["resources"] = resources
    return out


def _env(spec: Spec) -> list[dict[str, Any]]:
    return [{"name": e.name, "valueFrom": {"secretKeyRef": {"name": e.secret, "key": e.key}}} for e in spec.env]


def _identity(container: str, app: App | None = None) -> list[dict[str, Any]]:
    """The container's identity in its env (plain values: names and port numbers, never a secret)."""
    out = [{"name": "KFOLD_CONTAINER", "value": container}]
    if app is not None:
        out += [{"name": "KFOLD_APP", "value": app.name},
                {"name": "KFOLD_APP_PORTS", "value": ",".join(f"{p.port}/{p.protocol}" for p in app.ports)}]
    return out


def secret(session: str, namespace: str, spec: Spec) -> dict[str, Any]:
    refs = ",".join(f"{e.name}={e.secret}/{e.key}" for e in spec.env)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret_name(session), "namespace": namespace, "labels": labels(session),
                         "annotations": {"kfold.dev/env-refs": refs}}}


def _owner(pod: str, uid: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}]


def service(session: str, namespace: str, generation: int, uid: str,
            routed: tuple[tuple[str, Port], ...]) -> dict[str, Any]:
    ports = [{"name": f"{p.protocol.lower()}-{p.port}", "port": p.port, "targetPort": p.port,
              "protocol": p.protocol} for _, p in routed]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": session, "namespace": namespace, "labels": labels(session),
                         "ownerReferences": _owner(pod_name(session, generation), uid)},
            "spec": {"type": "ClusterIP", "selector": labels(session, generation), "ports": ports}}


def ingress(session: str, namespace: str, generation: int, uid: str,
            routed: tuple[tuple[str, Port], ...], base_domain: str) -> dict[str, Any]:
    rules = [_rule(session, p, base_domain) for _, p in routed if p.protocol == "TCP"]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": session, "namespace": namespace, "labels": labels(session),
                         "ownerReferences": _owner(pod_name(session, generation), uid)},
            "spec": {"rules": rules}}


def _rule(session: str, port: Port, base_domain: str) -> dict[str, Any]:
    backend = {"service": {"name": session, "port": {"number": port.port}}}
    return {"host": host(port, session, base_domain),
            "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}


def for_replace(manifest: dict[str, Any], existing: dict[str, Any]) -> dict[str, Any]:
    """The manifest to PUT over ``existing``: its resourceVersion (the write conflicts rather than
    clobbers) and, for a Service, its assigned ``clusterIP``/``clusterIPs`` (immutable)."""
    md = {**manifest["metadata"], "resourceVersion": existing.get("metadata", {}).get("resourceVersion", "")}
    out = {**manifest, "metadata": md}
    if manifest["kind"] == "Service":
        have = existing.get("spec", {})
        out["spec"] = {**manifest["spec"], **{k: have[k] for k in ("clusterIP", "clusterIPs") if k in have}}
    return out
