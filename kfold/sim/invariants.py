"""The simulator's invariants, each a named function that raises ``SimFailure``.

Checked after every step (``check_step``), over every cluster:
- ``delete_has_uid_precondition``, ``no_write_to_foreign_object``, ``no_failed_while_pod_healthy``:
  judged by the apiserver model at the moment each request of kfold's arrives (``violations``);
- with leader election (``second_daemon``): ``one_leader_per_term`` (a Lease term is only ever
  written by one holder), ``issued_in_own_term`` (an effect is handed to the executor only in a
  term the Lease gives that replica), ``effect_in_a_live_term`` (a request reaches the apiserver
  only while its sender's term is unexpired on the server's clock: renewTime + duration);
- ``one_live_pod_per_generation``: never two live (not terminating) pods for one Session generation.

Checked once faults and users stop (``check_settled``, after at most ``settle_ms`` simulated time):
- ``liveness``: every Session reached what its spec asks (Ready with a healthy pod; Suspended or
  Stopped with no live pod; deleted and gone); a Session whose names a foreign object held first
  may instead be Failed (kfold must not take the object over);
- ``no_leak``: nothing of kfold's remains for a Session that no longer exists.

Checked on every journal of the run once it is closed (``check_replays``):
- ``replays``: ``kfold replay --check`` finds no divergence: refolding the journal with the current
  code emits every effect the daemon journaled as issued, the same, and none it owed but never
  issued (kfold.offline.replay). The simulated daemon and the check run in one process; tests run
  the check in another one too, with another ``PYTHONHASHSEED``.
"""
from __future__ import annotations

from typing import Any

from kfold.sim.apiserver import GEN_LABEL, NS, SESSION_LABEL, healthy_pod, owned_by_kfold


class SimFailure(Exception):
    def __init__(self, invariant: str, detail: str, step: int):
        super().__init__(f"{invariant}: {detail} (step {step})")
        self.invariant, self.detail, self.step = invariant, detail, step


def _fail(sim: Any, invariant: str, detail: str) -> None:
    raise SimFailure(invariant, detail, sim.step)


def check_step(sim: Any) -> None:
    for api in sim.apis.values():
        if api.violations:
            _fail(sim, *api.violations[0])
    one_live_pod_per_generation(sim)


def _objects(sim: Any) -> list[tuple[tuple[str, str, str, str], dict[str, Any]]]:
    """Every cluster's objects (home first), each cluster's in key order."""
    return [item for api in sim.apis.values() for item in sorted(api.objects.items())]


def one_live_pod_per_generation(sim: Any) -> None:
    seen: dict[tuple[str, str], str] = {}
    for (_, kind, _, name), obj in _objects(sim):
        md = obj["metadata"]
        if kind != "Pod" or md.get("deletionTimestamp") or not owned_by_kfold(obj):
            continue
        labels = md.get("labels") or {}
        gen = (labels.get(SESSION_LABEL, ""), labels.get(GEN_LABEL, ""))
        if gen in seen:
            _fail(sim, "one_live_pod_per_generation",
                  f"pods {seen[gen]} and {name} are both live for Session {gen[0]} generation {gen[1]}")
        seen[gen] = name


def _session(sim: Any, name: str) -> dict[str, Any] | None:
    return sim.api.get("kfold.dev/v1alpha1", "Session", NS, name)


def _live_pods(sim: Any, name: str) -> list[dict[str, Any]]:
    return [o for o in sim.api._pods_of(NS, name) if not o["metadata"].get("deletionTimestamp")]


def unmet(sim: Any) -> list[str]:
    """Sessions not (yet) where their spec asks, each with why."""
    out = []
    for name, spec in sorted(sim.sessions.items()):
        obj = _session(sim, name)
        if spec is None:
            if obj is not None:
                out.append(f"{name}: deleted by its user but still present (finalizers {obj['metadata'].get('finalizers')})")
            continue
        if obj is None:
            out.append(f"{name}: the Session is gone though its user never deleted it")
            continue
        phase = (obj.get("status") or {}).get("phase")
        pods = _live_pods(sim, name)
        if name in sim.foreign and phase == "Failed":
            continue
        if spec.get("stopped") or spec.get("suspended"):
            want = "Stopped" if spec.get("stopped") else "Suspended"
            if phase != want or pods:
                out.append(f"{name}: wants {want}, is {phase} with live pods {[p['metadata']['name'] for p in pods]}")
        elif phase != "Ready" or not any(healthy_pod(p) for p in pods):
            out.append(f"{name}: wants Ready, is {phase} with live pods {[p['metadata']['name'] for p in pods]}"
                       + _why(obj))
    return out


def _why(obj: dict[str, Any]) -> str:
    ready = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    return f" ({ready.get('reason')}: {ready.get('message')})" if ready and ready.get("status") != "True" else ""


def leaks(sim: Any) -> list[str]:
    out = []
    for (_, kind, ns, name), obj in _objects(sim):
        session = (obj["metadata"].get("labels") or {}).get(SESSION_LABEL)
        if owned_by_kfold(obj) and session and _session(sim, session) is None:
            out.append(f"{kind} {ns}/{name} of Session {session}")
    return out


def settled(sim: Any) -> bool:
    return not unmet(sim) and not leaks(sim)


def check_settled(sim: Any) -> None:
    bad = unmet(sim)
    if bad:
        _fail(sim, "liveness", f"after {sim.opts.settle_ms // 1000}s without faults: " + "; ".join(bad))
    left = leaks(sim)
    if left:
        _fail(sim, "no_leak", "left behind: " + ", ".join(left))


def check_replays(sim: Any) -> None:
    from journal.records import parse_record
    from kfold.offline.replay import replay
    for i, store in enumerate(s for r in sim.replicas for s in (*r.lost, r.store)):
        records = [parse_record(store.rows[seq][3]) for seq in sorted(store.rows)]
        result = replay(records, check=True)
        if result.divergence is not None:
            _fail(sim, "replays", f"journal {i}: " + result.divergence.describe().replace("\n", "; "))
