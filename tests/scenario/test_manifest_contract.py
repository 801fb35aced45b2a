"""What the apiserver requires of every object kfold writes, checked on each request a bring-up
and a ports change send, whatever made the manifest.

- A create or a replace names its object twice, in the path (the effect's namespace and name) and
  in the body (``metadata``): the apiserver refuses a body whose name or namespace differs from the
  path's ("the name of the object (x) does not match the name on the URL (y)"; "the namespace of
  the provided object does not match the namespace sent on the request").
- Every field is one the API has: the body round-trips through the official client's model of its
  kind (``kubernetes.client.V1Pod`` ...) unchanged; a misspelt field (which the apiserver drops,
  at most with a warning) does not.
- A container gets ``stdin`` for ``io: tty | pipe | streams`` and a terminal (``tty``) for ``tty``
  only (docs/session-api.md, ``apps[].io``): ``kubectl attach -it`` needs both, ``-i`` stdin.
"""
from __future__ import annotations

import pytest

from engine.machines.session.model import FINALIZER
from tests.scenario.test_session_support import SPEC, World, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

ENV = [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "tok"}}]
APPS = [{"name": "web", "ports": [{"port": 8080}], "io": "tty"},
        {"name": "worker", "ports": [{"port": 9000, "protocol": "UDP"}], "io": "pipe"},
        {"name": "batch", "io": "none"}]


def _round_trip(manifest: dict) -> dict:
    """``manifest`` read into the official client's model of its kind and written back out."""
    import json
    from kubernetes import client

    api = client.ApiClient()
    return api.sanitize_for_serialization(api.deserialize(json.dumps(manifest), f"V1{manifest['kind']}", "application/json"))


def _written(w: World) -> list:
    return [e for e in w.s.effects if e.type in ("create", "replace")]


def _bring_up(spec: dict) -> World:
    w = World(workspace_class="fast-ssd", workspace_size="5Gi")
    w.submit(spec, 0)
    w.rv += 1
    w.answer("patch", "Session", when=0, obj=session_obj(spec, rv=str(w.rv), finalizers=(FINALIZER,)))
    if spec.get("env"):
        w.answer("create", "Secret", when=1)
    w.answer("create", "PersistentVolumeClaim", when=1)
    w.answer("create", "Pod", when=2, obj={"metadata": {"name": "demo-g1", "uid": "pod-uid-1", "resourceVersion": "5"}})
    w.run_pod(3)
    w.publish_endpoints(4)
    return w


def test_every_written_object_names_itself_as_its_request_does():
    spec = {**SPEC, "env": ENV, "apps": APPS}
    w = _bring_up(spec)
    kinds = {e.kind for e in _written(w)}
    assert kinds >= {"Secret", "PersistentVolumeClaim", "Pod", "Service", "Ingress"}, kinds
    w.submit({**spec, "apps": [{**APPS[0], "ports": [{"port": 8081}]}, *APPS[1:]]}, 10)   # re-routed: replaces
    for kind in ("Service", "Ingress"):
        if w.pending("replace", kind) or w.pending("create", kind):
            w.answer("replace" if w.pending("replace", kind) else "create", kind, when=11, obj={})
    for e in _written(w):
        md = e.manifest["metadata"]
        assert (md.get("name"), md.get("namespace")) == (e.name, e.namespace), \
            f"{e.type} {e.kind}: body names {md.get('namespace')}/{md.get('name')}, the path {e.namespace}/{e.name}"
        assert (e.manifest.get("kind"), e.manifest.get("apiVersion")) == (e.kind, e.api_version)
        assert _round_trip(e.manifest) == e.manifest, f"{e.type} {e.kind}: a field the API does not have"


def test_each_container_gets_stdin_and_a_terminal_as_its_io_asks():
    w = _bring_up({**SPEC, "apps": APPS})
    [pod] = [e for e in _written(w) if e.kind == "Pod"]
    io = {f"app-{a['name']}": a["io"] for a in APPS}
    containers = {c["name"]: c for c in pod.manifest["spec"]["containers"] if c["name"] in io}
    assert set(containers) == set(io)
    for name, c in containers.items():
        assert bool(c.get("stdin")) == (io[name] in ("tty", "pipe", "streams")), name
        assert bool(c.get("tty")) == (io[name] == "tty"), name
