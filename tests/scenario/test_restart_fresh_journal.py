"""A restart on a fresh journal over Ready Sessions writes nothing that is already right (issue 38, item 3).

The cluster is the source of truth (DESIGN invariant 9): kfold started on an empty journal, over
Sessions an earlier kfold brought to Ready, has lost only history. Like a controller that waits
for its caches to sync before it reconciles, it decides about each Session on what the first lists
of its pods, Services and Ingresses show: a pod that carries the Session's labels and generation is
adopted without a create or a read, a Service or Ingress that already says what the spec implies is
not written, and a status that already says what kfold would write is not written again. What the
lists do not show is created as before (absence in a list proves nothing: AlreadyExists is read).

The world: the real engine folds, the real ``Executor`` performs every effect on an in-memory
``FakeApiServer``; the lists and the watch are played from that apiserver's objects (a list:
``Observed`` ADDED per object, then its ``Relist``; the watch: every object whose resourceVersion
moved). The first life brings the Sessions up; the test stands in for the kubelet (the pod runs).
"""
from __future__ import annotations

from typing import Any

import pytest

from engine.effects.io.clock import ServerClocks
from engine.effects.io.executor import Executor
from engine.effects.io.fake import FakeApiServer, FakeTransport
from engine.effects.io.resources import path
from engine.labels import MANAGED_SELECTOR
from journal.records import Observed, Relist
from tests.harness import T0, Scenario
from tests.scenario.test_session_support import BASE, NS, SPEC, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

KINDS = {"Session": "kfold.dev/v1alpha1", "Pod": "v1", "Service": "v1", "Ingress": "networking.k8s.io/v1"}
TARGET_KINDS = ("Pod", "Service", "Ingress")   # what kfold run lists on a target (session.configure ``listed``)
WRITES = ("POST", "PUT", "PATCH", "DELETE")
NAMES = ("alpha", "beta", "gamma")


class Life:
    """One kfold process: its own journal (a Scenario), lists, a watch, the executor."""

    def __init__(self, api: FakeApiServer, listed: tuple[str, ...] = TARGET_KINDS) -> None:
        self.api = api
        self.s = Scenario()
        self.clocks = ServerClocks(home="local", monotonic=lambda: 0.0)
        self.executor = Executor(FakeTransport(api), self.clocks.for_cluster, self._sink, env={})
        self.rvs: dict[tuple[str, str], str] = {}   # (kind, name) -> resourceVersion the watch delivered
        self.s.command("session.configure", T0, clusters=["local"], base_domain=BASE, listed=list(listed))

    async def _sink(self, outcome: Any) -> None:
        raise AssertionError("the test runs each effect itself")

    def _items(self, kind: str) -> list[dict[str, Any]]:
        query = {} if kind == "Session" else {"labelSelector": MANAGED_SELECTOR}
        reply, _ = self.api.handle("GET", path(KINDS[kind], kind, NS), query)
        return reply.data["items"]

    def _observed(self, kind: str, event: str, obj: dict[str, Any]) -> Observed:
        md = obj["metadata"]
        return Observed(at=T0, cluster="local", api_version=KINDS[kind], kind=kind, namespace=NS, name=md["name"],
                        uid=md.get("uid", ""), rv=md.get("resourceVersion", ""), event=event, obj=obj)

    def list(self, kind: str) -> None:
        """The observer's first list: every object ADDED, then the complete key set."""
        items = self._items(kind)
        for obj in items:
            self.s.feed(self._observed(kind, "ADDED", obj))
            self.rvs[(kind, obj["metadata"]["name"])] = obj["metadata"]["resourceVersion"]
        self.s.feed(Relist(at=T0, cluster="local", api_version=KINDS[kind], kind=kind, scope=NS,
                           keys=[{"namespace": NS, "name": o["metadata"]["name"], "uid": o["metadata"]["uid"],
                                  "rv": o["metadata"]["resourceVersion"]} for o in items]))

    def watch(self, kinds: tuple[str, ...]) -> bool:
        """Deliver what changed since the list (or the last delivery); True if anything did."""
        moved = False
        for kind in kinds:
            now = {o["metadata"]["name"]: o for o in self._items(kind)}
            for name, obj in now.items():
                rv = obj["metadata"]["resourceVersion"]
                if self.rvs.get((kind, name)) != rv:
                    event = "MODIFIED" if (kind, name) in self.rvs else "ADDED"
                    self.rvs[(kind, name)] = rv
                    self.s.feed(self._observed(kind, event, obj))
                    moved = True
            for (k, name) in [key for key in self.rvs if key[0] == kind and key[1] not in now]:
                del self.rvs[(k, name)]
                self.s.feed(self._observed(kind, "DELETED", {"metadata": {"name": name, "namespace": NS}}))
                moved = True
        return moved

    async def settle(self, kinds: tuple[str, ...] = tuple(KINDS), kubelet: bool = False) -> None:
        """Perform every pending effect (oldest first) and fold its outcome; deliver the watch;
        until nothing is pending and nothing moves."""
        while True:
            while self.s.pending():
                effect = min(self.s.pending(), key=lambda e: tuple(map(int, e.id.split("."))))
                self.s.feed(await self.executor.run(effect))
            if kubelet:
                run_pods(self.api)
            if not self.watch(kinds) and not self.s.pending():
                return

    def phase(self, name: str) -> str:
        return self.s.decision("session", f"local/{NS}/{name}").phase


def run_pods(api: FakeApiServer) -> None:
    """The kubelet: every pod not yet running runs, its workspace container ready."""
    for (_, kind, _, _), obj in list(api.objects.items()):
        if kind == "Pod" and (obj.get("status") or {}).get("phase") != "Running":
            api.seed({**obj, "spec": {**obj.get("spec", {}), "nodeName": "node-a"},
                      "status": {"phase": "Running", "podIP": "10.0.0.7",
                                 "containerStatuses": [{"name": "workspace", "ready": True, "state": {"running": {}}}]}})


async def ready_cluster(names: tuple[str, ...] = NAMES) -> FakeApiServer:
    """Sessions brought to Ready by a first kfold life, with their pods, Services and Ingresses."""
    api = FakeApiServer(server_ms=T0)
    api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for name in names:
        obj = session_obj(SPEC, name=name)
        del obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]
        api.seed(obj)
    first = Life(api)
    for kind in KINDS:
        first.list(kind)
    await first.settle(kubelet=True)
    assert [first.phase(n) for n in names] == ["Ready"] * len(names), "the first life brings them up"
    return api


def writes(api: FakeApiServer, since: int) -> list[tuple[str, str]]:
    return [(m, p) for m, p in api.requests[since:] if m in WRITES]


def reads(api: FakeApiServer, since: int) -> list[str]:
    return [p for m, p in api.requests[since:] if m == "GET" and not p.rstrip("/").endswith(("pods", "services", "ingresses", "sessions"))]


ORDERS = {"sessions-first": ("Session", "Pod", "Service", "Ingress"),
          "sessions-last": ("Pod", "Service", "Ingress", "Session"),
          "sessions-between": ("Service", "Pod", "Session", "Ingress")}


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
async def test_a_fresh_journal_over_ready_sessions_writes_nothing_and_reads_nothing_per_session(order):
    api = await ready_cluster()
    uids = {k: o["metadata"]["uid"] for k, o in api.objects.items() if k[1] == "Pod"}
    since = len(api.requests)
    fresh = Life(api)
    for kind in order:   # the observers' first lists land in any order
        fresh.list(kind)
    await fresh.settle()
    assert writes(api, since) == [], "nothing already right is created, replaced or patched"
    assert reads(api, since) == [], "what the lists showed is not read again, object by object"
    assert [fresh.phase(n) for n in NAMES] == ["Ready"] * len(NAMES)
    assert {k: o["metadata"]["uid"] for k, o in api.objects.items() if k[1] == "Pod"} == uids, "the same pods run"


async def test_before_its_targets_first_pod_list_a_resumed_session_sends_nothing():
    api = await ready_cluster(("alpha",))
    fresh = Life(api)
    fresh.list("Session")
    assert not fresh.s.pending(), "no create, read or write before the pods have been listed"
    for kind in TARGET_KINDS:
        fresh.list(kind)
    assert not fresh.s.pending() and fresh.phase("alpha") == "Ready"


async def test_a_session_whose_pod_the_list_lacks_creates_it():
    api = await ready_cluster(("alpha",))
    pod = next(k for k in api.objects if k[1] == "Pod")
    del api.objects[pod]   # gone while no kfold ran
    since = len(api.requests)
    fresh = Life(api)
    for kind in KINDS:
        fresh.list(kind)
    await fresh.settle(kubelet=True)
    assert [p for m, p in writes(api, since) if m == "POST" and p.endswith("/pods")], "its pod is created again"
    assert fresh.phase("alpha") == "Ready"


async def test_a_service_that_says_something_else_is_replaced_with_what_the_spec_implies():
    api = await ready_cluster(("alpha",))
    key = next(k for k in api.objects if k[1] == "Service")
    svc = api.objects[key]
    api.seed({**svc, "spec": {**svc["spec"], "ports": [{**svc["spec"]["ports"][0], "targetPort": 9999}]}})
    since = len(api.requests)
    fresh = Life(api)
    for kind in KINDS:
        fresh.list(kind)
    await fresh.settle()
    assert [m for m, p in writes(api, since)] == ["PUT"], "the Service alone is written, once"
    assert api.objects[key]["spec"]["ports"][0]["targetPort"] == 8080


async def test_a_listed_pod_of_another_generation_is_not_adopted():
    api = await ready_cluster(("alpha",))
    key = next(k for k in api.objects if k[1] == "Pod")
    pod = api.objects[key]
    api.seed({**pod, "metadata": {**pod["metadata"], "labels": {**pod["metadata"]["labels"], "kfold.dev/generation": "7"}}})
    since = len(api.requests)
    fresh = Life(api)
    for kind in KINDS:
        fresh.list(kind)
    await fresh.settle()
    creates = [p for m, p in writes(api, since) if m == "POST" and p.endswith("/pods")]
    assert creates, "the name is asked for with a create (AlreadyExists, then a read decides), never adopted unread"
    assert fresh.phase("alpha") == "Failed", "a pod that is not this generation's holds its name: NameTaken"


async def test_a_first_list_that_never_comes_holds_a_resumed_session_only_for_a_while():
    api = await ready_cluster(("alpha",))
    fresh = Life(api)
    fresh.list("Session")
    fresh.list("Pod")   # no Service or Ingress list comes
    assert not fresh.s.pending()
    fresh.s.advance_to(T0 + 61_000)
    await fresh.settle(kinds=("Session", "Pod"))
    assert fresh.phase("alpha") == "Ready", "decided without those lists after the wait"


async def test_a_listed_service_deleted_before_the_session_decides_is_created_again():
    """What a list showed and the watch then reported DELETED is gone: a resumed Session does not
    adopt it but creates its Service again."""
    api = await ready_cluster(("alpha",))
    fresh = Life(api)
    for kind in ("Service", "Ingress"):
        fresh.list(kind)
    del api.objects[next(k for k in api.objects if k[1] == "Service")]
    assert fresh.watch(("Service",)), "the watch delivers its DELETED"
    since = len(api.requests)
    for kind in ("Pod", "Session"):
        fresh.list(kind)
    await fresh.settle()
    assert [m for m, p in writes(api, since) if p.endswith("/services")] == ["POST"], "created again, once"
    assert fresh.phase("alpha") == "Ready"


async def test_a_listed_pod_that_failed_while_no_kfold_ran_fails_its_session_in_the_pods_own_words():
    """The list shows this generation's pod, Failed (the kubelet evicted it): it is adopted as it
    stands, and the Session fails PodFailed with the pod's status.reason and status.message, as a
    watched pod failing would."""
    api = await ready_cluster(("alpha",))
    key = next(k for k in api.objects if k[1] == "Pod")
    pod = api.objects[key]
    api.seed({**pod, "status": {"phase": "Failed", "reason": "Evicted",
                                "message": "The node was low on resource: memory."}})
    since = len(api.requests)
    fresh = Life(api)
    for kind in KINDS:
        fresh.list(kind)
    await fresh.settle()
    assert fresh.phase("alpha") == "Failed"
    assert not [p for m, p in writes(api, since) if m == "POST" and p.endswith("/pods")], "adopted, not created"
    ready = next(c for c in api.objects[("kfold.dev/v1alpha1", "Session", NS, "alpha")]["status"]["conditions"]
                 if c["type"] == "Ready")
    assert ready["reason"] == "PodFailed" and ready["message"].startswith("session pod alpha-g1 reached Failed")
    assert ready["message"].endswith(" (Evicted: The node was low on resource: memory.)")


async def test_a_listed_pod_is_adopted_on_the_node_its_spec_names_and_on_none_before_it_is_scheduled():
    """The adopted pod's node is its ``spec.nodeName`` (a repository's per-node status is read
    under it), and empty while the scheduler has not bound it: no node is made up."""
    api = await ready_cluster(("alpha", "beta"))
    pending = next(o for k, o in api.objects.items() if k[1] == "Pod" and o["metadata"]["name"] == "beta-g1")
    api.seed({**pending, "spec": {k: v for k, v in pending["spec"].items() if k != "nodeName"},
              "status": {"phase": "Pending"}})
    fresh = Life(api)
    for kind in KINDS:
        fresh.list(kind)
    await fresh.settle()
    nodes = {n: fresh.s.decision("session", f"local/{NS}/{n}").pod.node for n in ("alpha", "beta")}
    assert nodes == {"alpha": "node-a", "beta": ""}
