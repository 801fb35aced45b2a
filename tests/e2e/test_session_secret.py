"""Issue 33 item 5 on the real control plane: a Session's ``<session>-env`` Secret always says what
the current spec's env implies, and is gone (with no pod referencing it) when the spec has no env.

The expected contents are derived here from the spec: annotation ``kfold.dev/env-refs`` lists the
references as ``NAME=secret/key`` joined by commas, the Secret holds no data, and it carries
kfold's labels for the Session."""
from __future__ import annotations

import json

from tests.e2e.conftest import wait_for
from tests.e2e.drills import Cluster

NAME = "sx"
TWO = [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}},
       {"name": "DB", "secretRef": {"name": "db", "key": "url"}}]
ONE = [{"name": "DB", "secretRef": {"name": "db2", "key": "url"}}]


def _expected(env: list[dict]) -> dict:
    return {"annotation": ",".join(f"{e['name']}={e['secretRef']['name']}/{e['secretRef']['key']}" for e in env),
            "data": None, "labels": {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": NAME}}


def _secret(cluster: Cluster) -> dict | None:
    s = cluster.read_or_none(cluster.core.read_namespaced_secret, f"{NAME}-env")
    if s is None:
        return None
    return {"annotation": (s.metadata.annotations or {}).get("kfold.dev/env-refs"), "data": s.data or None,
            "labels": {k: v for k, v in (s.metadata.labels or {}).items() if k.startswith(("app.kubernetes.io/", "kfold.dev/"))}}


def _status(cluster: Cluster) -> dict:
    s = next(x for x in cluster.sessions() if x["metadata"]["name"] == NAME)
    return s.get("status") or {}


def _ready_at(cluster: Cluster, generation: int) -> None:
    wait_for(lambda: (_status(cluster).get("phase"), _status(cluster).get("generation")) == ("Ready", generation),
             timeout=90, what=f"the Session Ready at generation {generation}")


def test_the_env_secret_follows_the_spec_and_goes_with_its_env(cp, admin, namespace, daemon_factory):
    cluster = Cluster(admin, namespace)
    d = daemon_factory(cp["kubeconfig"], [namespace]).start()
    cluster.create_session(NAME, env=TWO)
    _ready_at(cluster, 1)
    assert _secret(cluster) == _expected(TWO)

    cluster.patch_spec(NAME, env=ONE)    # the refs shrink and change
    _ready_at(cluster, 2)
    assert _secret(cluster) == _expected(ONE)

    cluster.patch_spec(NAME, env=None)   # no env at all
    _ready_at(cluster, 3)
    assert _secret(cluster) is None, "the Secret outlived the env that made it"
    pod = cluster.core.read_namespaced_pod(f"{NAME}-g3", namespace)
    assert f"{NAME}-env" not in json.dumps(cluster.core.api_client.sanitize_for_serialization(pod.spec))

    cluster.patch_spec(NAME, image="registry.example/sandbox:2")   # a later generation: still none
    _ready_at(cluster, 4)
    assert _secret(cluster) is None
    assert d.stop() == 0
