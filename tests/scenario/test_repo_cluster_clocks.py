"""Repos on a registered cluster: stamped and evicted on THAT cluster's server clock (issue 33 item 6).

Two fake apiservers whose clocks are an hour apart: the home cluster ``local`` and the registered
cluster ``edge@acme``. The real repo machine folds, the real ``Executor`` performs its effects on
the fake servers and stamps outcomes from one ``ServerClock`` per cluster (``ServerClocks``), as
``kfold run`` wires them. The monotonic clock is frozen, so every reading is a server's Date
exactly; the wall clock is frozen elsewhere (``frozen_world``) and decides nothing.

The oracle is the seed (000: "only an ensure stamps last-attached", gc dates a Repo from it) read
with DESIGN invariant 2 (the only now is the server time of the cluster concerned): a Repo on
``edge`` carries edge's time of the attach, and is evicted when edge's clock says it is past the
TTL, whatever the home cluster's clock says.
"""
from __future__ import annotations

from typing import Any

import pytest

from engine.core import Machines
from engine.effects.io.clock import ServerClocks
from engine.effects.io.executor import Executor
from engine.effects.io.fake import FakeApiServer, FakeTransport
from engine.machines.base import Machine, object_key
from engine.machines.repo.machine import RepoMachine
from engine.repo_names import ANNOTATION_LAST_ATTACHED, rfc3339
from journal.records import Command, Observed
from tests.harness import T0, Scenario

HOUR_MS = 3_600_000
HOME, EDGE = "local", "edge@acme"
HOME_NS, EDGE_NS = "team", "sb-acme"
URL, KEY = "https://github.com/org/app", "github-com-org-app"
TTL_S = 7 * 24 * 3600
REPO = ("kfold.dev/v1alpha1", "Repo")


class Attacher(Machine):
    """Stands in for the session machine: a Session observed on the HOME cluster (a record the home
    clock stamped) attaches a repository on the cluster its annotation names."""

    name = "attacher"
    observes = frozenset({"ConfigMap"})

    def on_observed(self, ctx: Any, rec: Observed) -> None:
        cluster, ns = rec.obj["data"]["cluster"], rec.obj["data"]["namespace"]
        ctx.tell("repo", object_key(cluster, ns, KEY), "ensure", url=URL, reply_to="attacher", reply_key=rec.name)

    def on_message(self, ctx: Any, key: str, message: str, args: dict[str, Any]) -> None:
        pass


class TwoClusters:
    def __init__(self, home_ms: int | None, edge_ms: int | None) -> None:
        self.servers = {HOME: FakeApiServer(server_ms=home_ms), EDGE: FakeApiServer(server_ms=edge_ms)}
        for cluster, ns in ((HOME, HOME_NS), (EDGE, EDGE_NS)):
            self.servers[cluster].seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self.clocks = ServerClocks(home=HOME, monotonic=lambda: 0.0)
        self.executor = Executor(FakeTransport(self.servers), self.clocks.for_cluster, self._sink, env={})
        self.s = Scenario(machines=Machines([RepoMachine(), Attacher()]))

    async def _sink(self, outcome: Any) -> None:
        raise AssertionError("the test runs each effect itself")

    async def settle(self) -> None:
        """Perform every pending effect on its cluster's server and fold its outcome, until none."""
        while self.s.pending():
            effect = min(self.s.pending(), key=lambda e: tuple(map(int, e.id.split("."))))
            self.s.feed(await self.executor.run(effect))

    def home_time(self) -> int | None:
        return self.clocks.now_ms(HOME)

    def attach_from_home(self, cluster: str, ns: str) -> None:
        self.s.feed(Observed(at=self.home_time(), cluster=HOME, api_version="v1", kind="ConfigMap",
                             namespace=HOME_NS, name=f"s-{cluster}", uid="u1", rv="1", event="ADDED",
                             obj={"kind": "ConfigMap", "metadata": {"name": f"s-{cluster}", "namespace": HOME_NS},
                                  "data": {"cluster": cluster, "namespace": ns}}))

    def repo(self, cluster: str, ns: str) -> dict | None:
        return self.servers[cluster].get(*REPO, ns, KEY)

    def stamp(self, cluster: str, ns: str) -> str | None:
        return ((self.repo(cluster, ns) or {}).get("metadata", {}).get("annotations") or {}).get(ANNOTATION_LAST_ATTACHED)

    def put_unbound(self, cluster: str, ns: str, last_attached: str) -> None:
        self.servers[cluster].seed({"apiVersion": REPO[0], "kind": REPO[1], "metadata": {
            "name": KEY, "namespace": ns, "annotations": {ANNOTATION_LAST_ATTACHED: last_attached,
                                                          "kfold.dev/repo-identity": "github.com/org/app"}},
            "spec": {"url": URL}})

    def gc(self, cluster: str, ns: str) -> None:
        self.s.feed(Command(at=self.home_time(), name="repo.gc", cluster=cluster, namespace=ns,
                            args={"cluster": cluster, "namespace": ns, "ttl_seconds": TTL_S}))


async def learn_home_clock(w: TwoClusters, expected: int = T0) -> None:
    """The home clock has seen a Date (kfold run's observers list first): one home read."""
    w.s.feed(Command(at=None, name="repo.reconcile_bound", cluster=HOME, namespace=HOME_NS,
                     args={"cluster": HOME, "namespace": HOME_NS, "bindings": []}))
    await w.settle()
    assert w.home_time() == expected


@pytest.mark.parametrize("offset_ms", [HOUR_MS, -HOUR_MS], ids=["edge-an-hour-ahead", "edge-an-hour-behind"])
async def test_an_attach_on_a_registered_cluster_is_stamped_on_that_clusters_clock(frozen_world, offset_ms):
    w = TwoClusters(T0, T0 + offset_ms)
    await learn_home_clock(w)
    w.attach_from_home(EDGE, EDGE_NS)
    w.attach_from_home(HOME, HOME_NS)
    await w.settle()
    assert w.stamp(EDGE, EDGE_NS) == rfc3339(T0 + offset_ms), "edge's Repo carries edge's time of the attach"
    assert w.stamp(HOME, HOME_NS) == rfc3339(T0), "the home Repo carries the home cluster's"


async def test_an_existing_repo_on_a_registered_cluster_has_its_clock_moved_on_that_clusters_time(frozen_world):
    w = TwoClusters(T0, T0 + HOUR_MS)
    w.put_unbound(EDGE, EDGE_NS, "2029-12-01T00:00:00Z")
    await learn_home_clock(w)
    w.attach_from_home(EDGE, EDGE_NS)
    await w.settle()
    assert w.stamp(EDGE, EDGE_NS) == rfc3339(T0 + HOUR_MS)


async def test_with_no_date_seen_from_the_registered_cluster_the_attach_stamps_no_guess(frozen_world):
    """No time on edge's clock: the Repo is created without ``last-attached`` (gc then dates it from
    the creationTimestamp edge writes), never with the home cluster's time."""
    w = TwoClusters(T0, None)
    await learn_home_clock(w)
    w.attach_from_home(EDGE, EDGE_NS)
    await w.settle()
    assert w.repo(EDGE, EDGE_NS) is not None
    assert w.stamp(EDGE, EDGE_NS) is None


@pytest.mark.parametrize("edge_offset_ms, home_evicted, edge_evicted", [
    (HOUR_MS, False, True), (-HOUR_MS, True, False)], ids=["edge-ahead", "edge-behind"])
async def test_each_clusters_repos_are_evicted_on_that_clusters_own_clock(
        frozen_world, edge_offset_ms, home_evicted, edge_evicted):
    """Both Repos were last attached at the same instant. Half an hour before (or after) the TTL on
    the home clock is half an hour after (or before) it on edge's: one is evicted, the other kept."""
    attached = T0 - TTL_S * 1000
    home_ms = T0 - HOUR_MS // 2 if edge_offset_ms > 0 else T0 + HOUR_MS // 2
    w = TwoClusters(home_ms, home_ms + edge_offset_ms)
    w.put_unbound(HOME, HOME_NS, rfc3339(attached))
    w.put_unbound(EDGE, EDGE_NS, rfc3339(attached))
    await learn_home_clock(w, home_ms)
    w.gc(HOME, HOME_NS)
    w.gc(EDGE, EDGE_NS)
    await w.settle()
    assert (w.repo(HOME, HOME_NS) is None, w.repo(EDGE, EDGE_NS) is None) == (home_evicted, edge_evicted)


async def test_a_gc_on_a_cluster_that_sent_no_date_evicts_nothing(frozen_world):
    w = TwoClusters(T0, None)
    w.put_unbound(EDGE, EDGE_NS, "2000-01-01T00:00:00Z")
    await learn_home_clock(w)
    w.gc(EDGE, EDGE_NS)
    await w.settle()
    assert w.repo(EDGE, EDGE_NS) is not None

