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


BOUND_S = 60   # the first lists of a fresh journal, then one Secret list (the boot sweep), on a 2-vCPU box


def test_after_a_lost_journal_the_secret_of_an_earlier_env_goes_with_a_spec_without_env(
        cp, admin, namespace, daemon_factory):
    """kfold stopped, its journal deleted, the env removed meanwhile: the fresh journal rebuilds the
    Session from its status (and adopts its pod); the Secret an earlier spec made is deleted within
    ``BOUND_S`` while no pod is replaced. The sweep interval is left long (600 s) so only the sweep at
    boot can make the bound."""
    from pathlib import Path
    cluster = Cluster(admin, namespace)
    extra = {"sweep": {"interval_seconds": 600}}
    d = daemon_factory(cp["kubeconfig"], [namespace], extra).start()
    cluster.create_session(NAME, env=TWO)
    _ready_at(cluster, 1)
    assert _secret(cluster) == _expected(TWO)
    pods = {p.metadata.name: p.metadata.uid for p in cluster.pods()}
    d.kill9()
    for suffix in ("", "-wal", "-shm"):
        Path(str(d.journal) + suffix).unlink(missing_ok=True)

    cluster.patch_spec(NAME, env=None)   # while kfold runs without its journal
    d2 = daemon_factory(cp["kubeconfig"], [namespace], extra).start()
    wait_for(lambda: _secret(cluster) is None, timeout=BOUND_S, interval=0.5,
             what="the Secret of the earlier env gone after the lost journal")
    assert {p.metadata.name: p.metadata.uid for p in cluster.pods()} == pods, "a pod was replaced"
    assert (_status(cluster).get("phase"), _status(cluster).get("generation")) == ("Ready", 1)
    assert d2.stop() == 0
