"""Cluster handles and what the daemon watches and tells the fold about registered clusters."""
from types import SimpleNamespace

from kfold.daemon.config import Config
from kfold.daemon.clusters import client_for, configure_args, remote_targets, split_handle

CFG = Config(namespaces=("sb-acme", "sb-globex", "sb-free"), base_domain="s.example.com",
             tenants={"sb-acme": "acme", "sb-globex": "globex"})


def reg(name, tenant, namespaces=()):
    return SimpleNamespace(name=name, tenant=tenant, namespaces=tuple(namespaces))


class FakeRegistry:
    def __init__(self, records):
        self.records = records
        self.reached = []

    def list_all(self):
        return tuple(self.records)

    def reach(self, tenant, name):
        self.reached.append((tenant, name))
        return f"client:{tenant}:{name}"


def test_a_handle_names_the_tenant_and_the_home_cluster_has_none():
    assert split_handle("edge@acme", "local") == ("acme", "edge")
    assert split_handle("local", "local") == (None, "local")
    assert split_handle("", "local") == (None, "local")


def test_two_orgs_clusters_with_one_name_are_two_clients():
    registry = FakeRegistry([])
    reach = client_for(registry, "local")
    reach("edge@acme", "acme"), reach("edge@globex", "globex"), reach("local", "")
    assert registry.reached == [("acme", "edge"), ("globex", "edge"), (None, "local")]


def test_bounded_clusters_are_watched_in_their_bound_and_unbounded_in_their_tenants_namespaces():
    registry = FakeRegistry([reg("edge", "acme", ["edge-sb"]), reg("gpu", "globex")])
    assert remote_targets(CFG, registry) == [("edge@acme", "acme", "edge", "edge-sb"),
                                             ("gpu@globex", "globex", "gpu", "sb-globex")]


def test_the_fold_learns_handles_bounds_and_tenants_but_no_credential():
    registry = FakeRegistry([reg("edge", "acme", ["edge-sb"])])
    args = configure_args(CFG, registry)
    assert args == {"home": "local", "tenants": {"sb-acme": "acme", "sb-globex": "globex"},
                    "registered": [{"handle": "edge@acme", "name": "edge", "tenant": "acme", "namespaces": ["edge-sb"]}]}
