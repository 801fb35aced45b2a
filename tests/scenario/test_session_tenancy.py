"""Sessions on registered clusters, per tenant: placement, target namespaces, refusals, pod matching.

The daemon configures ``home``, ``tenants`` {namespace: tenant} and ``registered`` clusters (handle
``<name>@<tenant>``); a Session runs on its tenant's cluster, and another tenant's cluster is "not
found" exactly like a cluster nobody registered.
"""
from __future__ import annotations

from typing import Any

import pytest

from engine import snapshot
from engine.machines.session import pods as session_pods_mod
from engine.machines.session.model import FINALIZER, SessionConfig
from engine.seams import SessionConfigure
from engine.machines.session.tenancy import PlacementRefused, Placement, configure, place
from tests.harness import LIVE, Scenario
from tests.scenario.test_session_support import BASE, ENV_SPEC, SPEC, at, owned_obj, pod_obj, session_obj

pytestmark = pytest.mark.usefixtures("frozen_world")

EDGE = {"handle": "edge@acme", "name": "edge", "tenant": "acme", "namespaces": ["sb-acme"]}
TENANTS = {"sb-acme": "acme", "team-acme": "acme", "sb-other": "other"}


def _in(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}


class TWorld:
    """One Session in ``namespace`` on home cluster "local", its pods on wherever it is placed."""

    def __init__(self, namespace: str = "sb-acme", registered: tuple[dict[str, Any], ...] = (EDGE,),
                 tenants: dict[str, str] | None = None, old_form: tuple[str, ...] | None = None,
                 scenario: Scenario | None = None, name: str = "demo"):
        self.ns, self.name = namespace, name
        self.key = f"local/{namespace}/{name}"
        self.rv = 1
        if scenario is not None:
            self.s = scenario
            return
        self.s = Scenario()
        if old_form is not None:
            self.s.command("session.configure", at(0), clusters=list(old_form), base_domain=BASE)
        else:
            self.s.command("session.configure", at(0), clusters=["local"], home="local", base_domain=BASE,
                           tenants=TENANTS if tenants is None else tenants, registered=list(registered))

    def submit(self, spec: dict[str, Any], when: float = 0, fins: tuple[str, ...] = ()) -> None:
        self.rv += 1
        self.s.observe(_in(session_obj(spec, rv=str(self.rv), finalizers=fins, name=self.name), self.ns), at(when))

    def decision(self) -> Any:
        return self.s.decision("session", self.key)

    @property
    def phase(self) -> str:
        return self.decision().phase

    def mine(self, type_: str, kind: str | None = None, pending: bool = False) -> list[Any]:
        pool = self.s.pending() if pending else self.s.effects
        out = [e for e in pool if e.type == type_ and kind in (None, getattr(e, "kind", None))
               and getattr(e, "subresource", "") != "status"]
        return sorted(out, key=lambda e: tuple(int(p) for p in e.id.split(".")))

    def answer(self, type_: str, kind: str | None, result: str = "ok", when: float = 0, **fields: Any) -> Any:
        found = self.mine(type_, kind, pending=True)
        assert found, f"no pending {type_} {kind}: {[(e.type, getattr(e, 'kind', '')) for e in self.s.pending()]}"
        self.s.outcome(found[0], result, at(when), **fields)
        return found[0]

    def status(self) -> dict[str, Any]:
        return [e for e in self.s.effects if e.type == "patch" and e.subresource == "status"
                and e.key == self.key][-1].patch["status"]

    def condition(self, type_: str) -> dict[str, str]:
        return next(c for c in self.status()["conditions"] if c["type"] == type_)

    def pod(self, gen: int = 1, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        return _in(pod_obj(gen, name=self.name, **kw), namespace or self.ns)

    def to_creating(self, spec: dict[str, Any], when: float = 0) -> "TWorld":
        self.submit(spec, when)
        self.rv += 1
        self.answer("patch", "Session", when=when,
                    obj=_in(session_obj(spec, rv=str(self.rv), finalizers=(FINALIZER,), name=self.name), self.ns))
        if self.mine("ensure_namespace", pending=True):
            self.answer("ensure_namespace", None, when=when)
        if self.mine("create", "Secret", pending=True):
            self.answer("create", "Secret", when=when)
        return self


ON_EDGE = {**ENV_SPEC, "cluster": "edge"}   # with env references: its Secret goes to the target too


def test_a_tenant_session_runs_its_pod_on_its_registered_cluster_and_comes_up_from_that_clusters_pods():
    w = TWorld().to_creating(ON_EDGE, 1)
    assert w.decision().target == "edge@acme" and w.decision().target_tenant == "acme"
    create = w.mine("create", "Pod", pending=True)[0]
    assert create.key == "edge@acme/sb-acme/demo-g1" and create.cluster == "edge@acme"
    assert (create.namespace, create.name, create.machine, create.tenant) == ("sb-acme", "demo-g1", "pod", "acme"), \
        "the pod machine's own effect on a registered cluster names its tenant too"
    secret = w.mine("create", "Secret")[0]
    assert (secret.cluster, secret.tenant, secret.namespace) == ("edge@acme", "acme", "sb-acme")
    w.answer("create", "Pod", when=2, obj=w.pod(1))
    assert w.phase == "Provisioning"

    running = w.pod(1, phase="Running", ip="10.1.0.7", node="edge-node", ready=True)
    w.s.observe(running, at(3), cluster="local")
    assert w.phase == "Provisioning" and not w.decision().pod.ip, "the same labels on another cluster are not its pod"

    w.s.observe(running, at(4), cluster="edge@acme")
    for kind in ("Service", "Ingress"):
        e = w.mine("create", kind, pending=True)[0]
        assert (e.cluster, e.tenant, e.namespace) == ("edge@acme", "acme", "sb-acme")
        w.answer("create", kind, when=5, obj={})
    assert w.phase == "Ready"
    assert w.status()["podName"] == "demo-g1"
    home = [e for e in w.s.effects if e.type == "patch" and e.kind == "Session"]
    assert {(e.cluster, e.tenant, e.namespace) for e in home} == {("local", "", "sb-acme")}, \
        "the Session's own finalizer and status stay on the home cluster"

    w.s.observe(w.pod(1, phase="Running", ip="10.1.0.7", node="edge-node", ready=True,
                      ended={"web": ("Error", 2)}, rv="11"), at(6), cluster="edge@acme")
    event = w.mine("event")[0]
    assert (event.cluster, event.tenant, event.namespace) == ("edge@acme", "acme", "sb-acme")

    w.submit({**ON_EDGE, "stopped": True}, 10, fins=(FINALIZER,))
    read = w.answer("get", "Secret", when=11, obj=owned_obj("Secret"))   # Service and Ingress go with the pod
    assert (read.cluster, read.tenant, read.namespace) == ("edge@acme", "acme", "sb-acme")
    deletes = w.mine("delete")
    assert {(e.kind, e.cluster, e.namespace) for e in deletes} == {
        ("Pod", "edge@acme", "sb-acme"), ("Secret", "edge@acme", "sb-acme")}
    assert all(e.tenant == "acme" for e in deletes if e.machine == "session")
    assert next(e for e in deletes if e.kind == "Pod").key == "edge@acme/sb-acme/demo-g1"


def test_no_namespace_is_ensured_on_a_bounded_registration_but_one_is_on_an_unbounded_one():
    bounded = TWorld()
    bounded.submit(ON_EDGE)
    bounded.answer("patch", "Session", obj=_in(session_obj(ON_EDGE, rv="3", finalizers=(FINALIZER,)), "sb-acme"))
    assert not bounded.mine("ensure_namespace"), "namespaces are cluster-scoped: refused on a bounded registration"
    assert bounded.mine("create", "Secret", pending=True)

    free = TWorld(registered=({**EDGE, "namespaces": []},))
    free.submit(ON_EDGE)
    free.answer("patch", "Session", obj=_in(session_obj(ON_EDGE, rv="3", finalizers=(FINALIZER,)), "sb-acme"))
    ensure = free.mine("ensure_namespace", pending=True)[0]
    assert (ensure.cluster, ensure.tenant, ensure.namespace) == ("edge@acme", "acme", "sb-acme")


def _refusal(namespace: str, registered: tuple[dict[str, Any], ...], cluster: str) -> TWorld:
    w = TWorld(namespace=namespace, registered=registered)
    w.submit({**SPEC, "cluster": cluster})
    return w


NOT_FOUND = "no cluster named 'edge' is registered for this tenant"


def test_another_tenants_cluster_is_refused_exactly_like_one_nobody_registered():
    theirs = _refusal("sb-other", (EDGE,), "edge")
    nobodys = _refusal("sb-other", (), "edge")
    assert theirs.phase == "Failed"
    cond = theirs.condition("SpecValid")
    assert cond["status"] == "False" and cond["message"] == f"spec.cluster: {NOT_FOUND}"
    assert theirs.condition("Ready")["message"] == f"spec.cluster: {NOT_FOUND}"
    assert theirs.s.transcript() == nobodys.s.transcript(), "the refusal must not reveal that 'edge' exists"
    assert [e.type for e in theirs.s.effects if e.type != "log"] == ["patch", "post_event"], "nothing is created (the status and its Failed Event)"

    nowhere = _refusal("sb-other", (EDGE,), "nowhere")
    text = nowhere.condition("SpecValid")["message"]
    assert text == "spec.cluster: no cluster named 'nowhere' is registered for this tenant"
    assert text.replace("nowhere", "edge") == cond["message"]
    other_names = [e for e in theirs.s.effects if "acme" in str(e.model_dump())]
    assert not other_names, "nothing about the owning tenant leaks"


def test_a_session_in_an_unmapped_namespace_may_use_only_the_home_cluster():
    w = _refusal("unmapped", (EDGE,), "edge")
    assert w.condition("SpecValid")["message"] == f"spec.cluster: {NOT_FOUND}"
    home = TWorld(namespace="unmapped").to_creating({**SPEC, "cluster": "local"})
    assert home.mine("create", "Pod", pending=True)[0].key == "local/unmapped/demo-g1"


def test_a_session_outside_a_single_namespace_bound_runs_in_that_namespace():
    w = TWorld(namespace="team-acme").to_creating(ON_EDGE)
    assert w.decision().target_ns == "sb-acme"
    create = w.mine("create", "Pod", pending=True)[0]
    assert create.key == "edge@acme/sb-acme/demo-g1"
    assert create.manifest["metadata"]["namespace"] == "sb-acme"
    assert w.mine("create", "Secret")[0].manifest["metadata"]["namespace"] == "sb-acme"
    w.answer("create", "Pod", when=1, obj=w.pod(1, namespace="sb-acme"))
    w.s.observe(w.pod(1, namespace="team-acme", phase="Running", ip="10.1.0.7", ready=True), at(2),
                cluster="edge@acme")
    assert not w.decision().pod.ip, "a pod with its labels in another namespace is not its pod"
    w.s.observe(w.pod(1, namespace="sb-acme", phase="Running", ip="10.1.0.7", ready=True), at(3),
                cluster="edge@acme")
    assert w.decision().pod.ip == "10.1.0.7"


def test_a_session_outside_a_wider_bound_fails_naming_the_bound_and_creates_nothing():
    w = _refusal("team-acme", ({**EDGE, "namespaces": ["sb-a", "sb-b"]},), "edge")
    assert w.phase == "Failed"
    assert w.condition("SpecValid")["message"] == (
        "spec.cluster: cluster 'edge' is bounded to namespaces sb-a, sb-b; create the Session in one of them")
    assert [e.type for e in w.s.effects if e.type != "log"] == ["patch", "post_event"]


def test_two_sessions_of_one_tenant_sent_to_the_same_target_namespace_do_not_share_a_pod():
    first = TWorld(namespace="sb-acme").to_creating(ON_EDGE)
    second = TWorld(namespace="team-acme", scenario=first.s)
    second.submit(ON_EDGE, 2)
    assert second.phase == "Failed"
    assert second.condition("Ready")["reason"] == "TargetTaken"
    assert [e.key for e in first.s.effects if e.type == "create" and e.kind == "Pod"] == ["edge@acme/sb-acme/demo-g1"]


def test_the_old_form_clusters_list_still_places_sessions_on_those_clusters():
    w = TWorld(namespace="team", old_form=("local", "edge")).to_creating(ON_EDGE)
    create = w.mine("create", "Pod", pending=True)[0]
    assert (create.key, create.cluster, create.tenant) == ("edge/team/demo-g1", "edge", "")
    assert w.mine("ensure_namespace")[0].cluster == "edge"
    refused = TWorld(namespace="team", old_form=("local",))
    refused.submit({**SPEC, "cluster": "edge"})
    assert refused.condition("SpecValid")["message"] == f"spec.cluster: {NOT_FOUND}"


def test_a_pod_of_no_tracked_session_is_dropped_before_it_is_reduced(monkeypatch):
    w = TWorld().to_creating(ON_EDGE)
    w.answer("create", "Pod", when=1, obj=w.pod(1))

    def boom(obj: Any) -> Any:
        raise AssertionError("reduced a pod that is no session's")

    monkeypatch.setattr(session_pods_mod, "pod_view", boom)
    stranger = _in(pod_obj(1, name="someone-else"), "sb-acme")
    w.s.observe(stranger, at(2), cluster="edge@acme")
    w.s.observe(w.pod(1), at(2), cluster="local")
    w.s.observe(w.pod(1, namespace="elsewhere"), at(2), cluster="edge@acme")
    assert not w.s.state.quarantine  # none of those was reduced
    w.s.observe(w.pod(1), at(3), cluster="edge@acme")
    (q,) = w.s.state.quarantine.values()  # this one was (and the probe raised: quarantined)
    assert "reduced a pod that is no session's" in q.error
    LIVE.remove(w.s)  # refolded in batches after the test, the probe would be gone


def test_a_session_on_a_registered_cluster_round_trips_through_a_snapshot():
    w = TWorld(namespace="team-acme").to_creating(ON_EDGE)
    w.answer("create", "Pod", when=1, obj=w.pod(1, namespace="sb-acme"))
    data = snapshot.dump(w.s.state)
    loaded = snapshot.load(data)
    assert snapshot.dump(loaded) == data
    assert loaded.table("session") == w.s.state.table("session")


def test_a_snapshot_without_the_target_index_rebuilds_it():
    w = TWorld().to_creating(ON_EDGE)
    w.answer("create", "Pod", when=1, obj=w.pod(1))
    table = w.s.state.table("session")
    w.s.state = w.s.state.__class__(seq=w.s.state.seq, at=w.s.state.at,
                                    tables=w.s.state.tables.set("session", table.delete("#targets")),
                                    timers=w.s.state.timers, pending=w.s.state.pending)
    w.s.observe(w.pod(1, phase="Running", ip="10.1.0.7", ready=True), at(2), cluster="edge@acme")
    assert w.decision().pod.ip == "10.1.0.7"


# -- placement, directly ----------------------------------------------------------------------------

CFG = SessionConfig(clusters=("local",), **configure(SessionConfigure.model_validate({
    "home": "local", "tenants": {**TENANTS, "a": "acme"},
    "registered": [EDGE, {"handle": "wide@acme", "name": "wide", "tenant": "acme", "namespaces": ["a", "b"]},
                   {"handle": "free@acme", "name": "free", "tenant": "acme", "namespaces": []}]})))


@pytest.mark.parametrize("namespace, wanted, expected", [
    ("sb-acme", None, Placement("local", "", "", False)),
    ("sb-acme", "local", Placement("local", "", "", False)),
    ("sb-acme", "edge", Placement("edge@acme", "acme", "", True)),
    ("team-acme", "edge", Placement("edge@acme", "acme", "sb-acme", True)),
    ("a", "wide", Placement("wide@acme", "acme", "", True)),
    ("team-acme", "free", Placement("free@acme", "acme", "", False)),
], ids=["default-home", "named-home", "inside-bound", "single-bound", "inside-wide-bound", "unbounded"])
def test_placement(namespace, wanted, expected):
    assert place(CFG, "local", namespace, wanted) == expected


def test_placement_refusals():
    with pytest.raises(PlacementRefused, match=r"^cluster 'wide' is bounded to namespaces a, b; create the Session in one"):
        place(CFG, "local", "sb-acme", "wide")
    for namespace, wanted in (("sb-other", "edge"), ("unmapped", "edge"), ("sb-acme", "nope"), ("sb-acme", 7)):
        with pytest.raises(PlacementRefused) as no:
            place(CFG, "local", namespace, wanted)
        assert no.value.reason == f"no cluster named {wanted!r} is registered for this tenant"


def _finalized(w: TWorld, spec: dict[str, Any]) -> TWorld:
    """Submitted and its finalizer written (its target namespace ensured where one is): the
    Session's own objects are asked for next."""
    w.submit(spec, 1)
    w.rv += 1
    w.answer("patch", "Session", when=1,
             obj=_in(session_obj(spec, rv=str(w.rv), finalizers=(FINALIZER,), name=w.name), w.ns))
    if w.mine("ensure_namespace", pending=True):
        w.answer("ensure_namespace", None, when=1)
    return w

def test_a_tenant_sessions_secret_met_by_alreadyexists_is_read_on_its_cluster_as_its_tenant():
    """Every request for a tenant Session's objects names the tenant (the registered cluster's
    identity for it), the read after a create's AlreadyExists too."""
    w = _finalized(TWorld(), ON_EDGE)
    w.answer("create", "Secret", "already_exists", when=2, status_reason="AlreadyExists")
    [read] = w.mine("get", "Secret", pending=True)
    assert (read.cluster, read.tenant, read.namespace, read.name) == ("edge@acme", "acme", "sb-acme", "demo-env")


def test_a_workspace_claim_on_another_cluster_names_no_owner():
    """An ownerReference names an object in the same cluster and namespace (Kubernetes garbage
    collection): a claim made on a registered cluster must not name the Session on the home one,
    or that cluster's collector would delete it as an orphan."""
    s = Scenario()
    s.command("session.configure", at(0), clusters=["local"], home="local", base_domain=BASE, tenants=TENANTS,
              registered=[EDGE], workspace_class="fast-ssd", workspace_size="5Gi")
    w = _finalized(TWorld(scenario=s), {**SPEC, "cluster": "edge"})
    [claim] = w.mine("create", "PersistentVolumeClaim", pending=True)
    assert claim.cluster == "edge@acme" and "ownerReferences" not in claim.manifest["metadata"]
