"""The client-side limiter is a setting: the config's ``cluster.qps``/``burst`` reach the home client
that ``kfold run`` boots with (``open_registry``), ``registry.qps``/``burst``/``limits`` reach the
registered clusters' clients, and qps null or 0 sends unpaced. Requests go to a stub apiserver."""
from __future__ import annotations

import re

import pytest
import yaml
from kubernetes.client import CoreV1Api

from kfold.daemon.config import ConfigError, ExecutorConfig, parse_config, read_config
from kfold.daemon.clusters import open_registry, pool_width
from tests.contract.registry_stub import api_stub  # noqa: F401


def config_file(tmp_path, api_stub, **fields):
    (tmp_path / "home.kubeconfig").write_text(api_stub.kubeconfig())
    cfg = {"namespaces": ["team-a"], "base_domain": "sessions.test",
           "journal": {"path": str(tmp_path / "journal.db")},
           **fields}
    cfg["cluster"] = {"kubeconfig": str(tmp_path / "home.kubeconfig"), **fields.get("cluster", {})}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return read_config(path)


def test_the_home_client_is_unpaced_by_default_and_registered_clusters_keep_50_100(tmp_path, api_stub):
    cfg = config_file(tmp_path, api_stub)
    registry, home = open_registry(cfg)
    assert home.limiter is None and str(home.limits) == "unlimited"
    assert len(CoreV1Api(home).list_namespaced_pod("team-a").items) == 0   # sends without a bucket
    registry.register("acme", "edge", api_stub.kubeconfig())
    edge = registry.reach("acme", "edge")
    assert (edge.limiter.qps, edge.limiter.burst) == (50.0, 100)
    assert edge.configuration.connection_pool_maxsize == max(100, pool_width(cfg))
    assert pool_width(cfg) > ExecutorConfig().threads


def test_configured_home_pacing_reaches_the_client_and_holds_requests_back(tmp_path, api_stub):
    registry, home = open_registry(config_file(tmp_path, api_stub, cluster={"qps": 2, "burst": 1}))
    assert (home.limiter.qps, home.limiter.burst) == (2.0, 1)
    assert home.configuration.connection_pool_maxsize > ExecutorConfig().threads, "the pool holds the executor's threads and the watches"
    core = CoreV1Api(home)
    for _ in range(3):     # burst 1, then one token per 500 ms: ~1 s of waiting in all
        core.list_namespaced_pod("team-a")
    assert 0.5 < home.limiter.waited_s <= 1.0
    assert home.requests == {("list", "pods", "200"): 3}, "each request is counted by verb, resource, status"


def test_registered_clusters_take_the_registry_default_or_their_handle_entry(tmp_path, api_stub):
    cfg = config_file(tmp_path, api_stub, registry={"qps": 10, "burst": 5, "limits": {"edge@acme": {"qps": 0}}})
    registry, _ = open_registry(cfg)
    registry.register("acme", "edge", api_stub.kubeconfig())
    registry.register("acme", "core", api_stub.kubeconfig())
    assert registry.reach("acme", "edge").limiter is None
    assert (registry.reach("acme", "core").limiter.qps, registry.reach("acme", "core").limiter.burst) == (10.0, 5)


@pytest.mark.parametrize("fields, message", [
    ({"cluster": {"qps": -1}}, "field cluster.qps: must be 0 or more (got -1)"),
    ({"registry": {"burst": 0}}, "field registry.burst: must be 1 or more (got 0)"),
    ({"registry": {"limits": {"edge": {"qps": 5}}}}, "is not a cluster handle '<name>@<tenant>'"),
])
def test_a_bad_limit_is_refused_naming_the_field(fields, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({"namespaces": ["a"], "base_domain": "sessions.test", **fields})


@pytest.mark.parametrize("method, path, query, kind", [
    ("GET", "/api/v1/namespaces/ns/pods", "watch=true&resourceVersion=5", ("watch", "pods")),
    ("GET", "/api/v1/namespaces/ns/pods", "labelSelector=a", ("list", "pods")),
    ("GET", "/api/v1/namespaces/ns", "", ("get", "namespaces")),
    ("PATCH", "/apis/kfold.dev/v1alpha1/namespaces/ns/sessions/s/status", "", ("patch", "sessions/status")),
    ("DELETE", "/apis/networking.k8s.io/v1/namespaces/ns/ingresses/s", "", ("delete", "ingresses")),
    ("POST", "/api/v1/namespaces/ns/pods", "", ("create", "pods")),
    ("GET", "/version", "", ("get", "/version")),
])
def test_requests_are_named_as_the_apiserver_names_them(method, path, query, kind):
    from kfold.registry.client import request_kind
    assert request_kind(method, path, query) == kind


def test_every_connection_pool_holds_the_executor_threads_and_the_watches(tmp_path, api_stub):
    """A thread finding no idle connection opens one that urllib3 discards after the request when
    the pool is full: a pool narrower than the executor's threads plus the watches held open beside
    them would pay a TLS handshake per request (``kfold.daemon.clusters.pool_width``)."""
    cfg = config_file(tmp_path, api_stub, cluster={"burst": 4}, executor={"threads": 24},
                      registry={"limits": {"edge@acme": {"qps": 5, "burst": 2}, "far@acme": {"qps": 5, "burst": 200}}})
    registry, home = open_registry(cfg)
    for name in ("edge", "far"):
        registry.register("acme", name, api_stub.kubeconfig())
    pools = {c.label: c.configuration.connection_pool_maxsize for c in (home, *(registry.reach("acme", n) for n in ("edge", "far")))}
    width = pool_width(cfg)
    assert width > 24
    assert pools == {"local": width, "acme/edge": width, "acme/far": 200}
    assert registry.reach("acme", "edge").limiter.burst == 2, "the limiter keeps its own burst"
