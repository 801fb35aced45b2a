"""kfold's RBAC is derived from the requests kfold sends, not from its own rule table: seeded
whole-system simulations (``kfold.sim``: the real machines, executor and leader election against
an apiserver model) record every request kfold makes; each one on the home cluster must be granted
by the rules ``kfold manifests`` ships, and none may need anything cluster-wide. The reviews a
secure ``/metrics`` sends (``kfold.daemon.secure``) are granted by ``METRICS_AUTH_RULES``, the only
cluster-wide rules, and need nothing else. The watches
(``Observer``, not in the model) are the observed kinds' list/watch. The same rules authorize every
e2e test that runs ``kfold run`` with the ServiceAccount on the real apiserver (no 403 in their
logs: tests/e2e/test_install.py, tests/e2e/test_without_repos.py)."""
from __future__ import annotations

import asyncio
import collections
import logging

import pytest

from engine.effects.io.resources import RESOURCES, parse_path
from kfold.daemon.manifests import LEASE_RULES, METRICS_AUTH_RULES, RULES
from kfold.sim.apiserver import SimApiServer
from kfold.sim.world import Options, Simulation

VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
LEASES = "/apis/coordination.k8s.io/v1/namespaces/"


def _verb(method: str, named: bool, query: dict | None) -> str:
    if method == "GET":
        return "watch" if (query or {}).get("watch") in ("true", True) else "get" if named else "list"
    return VERBS[method]


@pytest.fixture(scope="module")
def sent(request):
    """{(cluster, group, resource[/subresource], verb): count} over a few seeds."""
    seen: collections.Counter = collections.Counter()
    real = SimApiServer.handle

    def recording(self, method, path, query=None, body=None):
        if not self._user:
            p = parse_path(path)
            if p is not None:
                res = p.resource.plural + (f"/{p.subresource}" if p.subresource else "")
                seen[(self.name, p.resource.group, res, _verb(method, bool(p.name), query))] += 1
            elif path.startswith(LEASES):
                seen[(self.name, "coordination.k8s.io", "leases", _verb(method, "/leases/" in path, query))] += 1
            else:
                seen[(self.name, "?", path, method)] += 1
        return real(self, method, path, query, body)
    SimApiServer.handle = recording
    logging.disable(logging.CRITICAL)
    try:
        for seed in range(8):
            asyncio.run(Simulation(Options(seed=seed, steps=80, sessions=3)).run())
    finally:
        SimApiServer.handle = real
        logging.disable(logging.NOTSET)
    return seen


def granted(rules, group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def test_every_request_kfold_sends_home_is_granted_by_the_shipped_rules(sent):
    home = {k[1:]: n for k, n in sent.items() if k[0] == ""}
    assert home, "the simulation sent nothing"
    refused = [k for k in home if not granted(RULES + LEASE_RULES, *k)]
    assert refused == [], f"requests the install's RBAC would refuse: {refused}"
    # the kinds and verbs that carry a Session's life all show up, so the derivation has teeth
    assert {("", "pods", "create"), ("", "pods", "delete"), ("kfold.dev", "sessions/status", "patch"),
            ("kfold.dev", "sessions", "patch"), ("", "services", "update"),
            ("coordination.k8s.io", "leases", "update")} <= set(home)


def test_the_watches_are_granted_and_namespaces_are_asked_for_only_on_registered_clusters(sent):
    for r in RESOURCES:
        if r.kind in ("Pod", "Session", "Repo"):   # the observed kinds (daemon_boot.observed_kinds)
            assert granted(RULES, r.group, r.plural, "list") and granted(RULES, r.group, r.plural, "watch")
    assert not [k for k in sent if k[0] == "" and k[2] == "namespaces"]
    assert [k for k in sent if k[0] and k[2] == "namespaces"], "the registered-cluster path was not exercised"
    assert not [k for k in sent if k[1] == "?"], [k for k in sent if k[1] == "?"]


def test_nothing_granted_that_kfold_never_asks_for_in_a_way_the_rbac_table_does_not_explain():
    """What the simulation does not reach (env Secrets, workspace claims, Repos, Events) is granted
    by rules whose why names the request site; the verbs removed by the trim stay removed."""
    assert not granted(RULES, "", "secrets", "watch") and not granted(RULES, "", "pods", "patch")
    for verb in ("create", "update", "delete"):
        assert not granted(RULES, "kfold.dev", "sessions", verb)
    assert not granted(RULES, "kfold.dev", "repos/status", "patch") and not granted(RULES, "", "configmaps", "get")


def test_the_metrics_reviews_are_granted_by_the_metrics_auth_rules_alone():
    from engine.effects.io.transport import Response
    from kfold.daemon.secure import DelegatedAuth
    sent = []

    class Recording:
        async def call(self, req):
            sent.append((req.method, req.path))
            review = req.path.rsplit("/", 1)[1]
            return Response(201, {}, {"status": {"authenticated": True, "user": {"username": "u"}}
                                      if review == "tokenreviews" else {"allowed": True}})
    assert asyncio.run(DelegatedAuth(Recording(), "").check("GET", "/metrics", {"authorization": "Bearer t"})) is None
    asked = {(path.split("/")[2], path.rsplit("/", 1)[1], VERBS[method]) for method, path in sent}
    assert asked == {("authentication.k8s.io", "tokenreviews", "create"),
                     ("authorization.k8s.io", "subjectaccessreviews", "create")}
    assert all(granted(METRICS_AUTH_RULES, *k) for k in asked) and not any(granted(RULES + LEASE_RULES, *k) for k in asked)
