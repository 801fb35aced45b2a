"""Where a Session runs: its tenant, the cluster handle its ``spec.cluster`` names, the namespace.

Contract (shared with the daemon, see kfold/daemon/clusters.py):
- The home cluster is the Session's own cluster (config ``home``, e.g. "local"), tenant "". A
  registered cluster is its handle ``"<name>@<tenant>"`` in keys and effects.
- A Session's tenant is ``tenants[<its namespace>]``; an unmapped namespace has no tenant and may
  use only the home cluster (and old-form ``clusters``, usable by every Session).
- ``spec.cluster`` is trimmed of surrounding whitespace; empty (or blank) or the home name -> home. Otherwise the registration with that name AND
  the Session's tenant; anything else is refused with one message, byte-identical for a name
  another tenant registered and a name nobody registered (the refusal is not an oracle).
- Placement namespace: home and unbounded -> the Session's namespace. Bounded -> the Session's
  namespace when inside the bound, else the bound's only namespace when it has exactly one, else
  refused naming the bound. Never silently narrowed to some other namespace.

Pure: config and Session facts in, a ``Placement`` or a ``SpecError`` out.

Which Session's pods live where: ``"<handle>/<namespace>/<session name>"`` -> Session key.

Expected flow: ``session.save`` calls ``update`` whenever a Session's target changes (a new
generation placed elsewhere, a Session dropped); a Pod observation looks its
``kfold.dev/session`` label up with ``lookup`` before anything is reduced, after ``none_tracked``
has said that some Session is placed at all.

Guarantees:
- A slot names one Session at a time: ``lookup`` tells a Session that another Session already
  runs its pods under the same name in the same target namespace (two Session namespaces of one
  tenant sent to a single-namespace bound), so it can refuse instead of adopting the other's pod.
- The index is derived state: missing (a snapshot written before it existed) it is rebuilt from
  the Session records, so it can never disagree with them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.machines.session.model import INDEX_KEY, SessionConfig, SessionDecision, TargetIndex
from engine.seams import RegisteredCluster, SessionConfigure
from engine.machines.base import Ctx

FIELD = "spec.cluster"


@dataclass(frozen=True, slots=True)
class Placement:
    handle: str          # cluster handle for keys and effects
    tenant: str          # effects' ``tenant`` ("" = home / old-form)
    namespace: str       # "" = the Session's own namespace
    bounded: bool        # a namespace-bounded registration: no cluster-scoped requests


class PlacementRefused(Exception):
    """``spec.cluster`` cannot be placed; ``reason`` is the condition text (no field prefix)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def not_found(wanted: Any) -> str:
    # Never list or hint at known names: another org's cluster answers exactly like a missing one.
    return f"no cluster named {wanted!r} is registered for this org"


def tenant_of(cfg: SessionConfig, namespace: str) -> str | None:
    return cfg.tenants.get(namespace)


def place(cfg: SessionConfig, home: str, namespace: str, wanted: Any) -> Placement:
    """The target of a Session in ``namespace`` on cluster ``home`` asking for ``wanted``
    (trimmed of surrounding whitespace first, as seed 004 trims every name it reaches)."""
    wanted = wanted.strip() if isinstance(wanted, str) else wanted
    if wanted in (None, "") or wanted == home or (cfg.home != "" and wanted == cfg.home):
        return Placement(home, "", "", False)
    if not isinstance(wanted, str):
        raise PlacementRefused(not_found(wanted))
    tenant = tenant_of(cfg, namespace)
    if tenant is not None:
        for reg in cfg.registered:
            if reg.name == wanted and reg.tenant == tenant:
                return Placement(reg.handle, reg.tenant, _namespace(reg, namespace), bool(reg.namespaces))
    if wanted in cfg.clusters:  # old form: every tenant, unbounded, reached by its name
        return Placement(wanted, "", "", False)
    raise PlacementRefused(not_found(wanted))


def _namespace(reg: RegisteredCluster, namespace: str) -> str:
    if not reg.namespaces or namespace in reg.namespaces:
        return ""
    if len(reg.namespaces) == 1:
        return reg.namespaces[0]
    raise PlacementRefused(f"cluster {reg.name!r} is bounded to namespaces {', '.join(reg.namespaces)}; "
                  "create the Session in one of them")


def configure(cmd: SessionConfigure) -> dict[str, Any]:
    """The tenancy fields of ``SessionConfig`` from ``session.configure``'s model (validated once, at the seam)."""
    registered = tuple(RegisteredCluster(
        handle=r.handle or f"{r.name}@{r.tenant}", name=r.name, tenant=r.tenant,
        namespaces=tuple(dict.fromkeys(n.strip() for n in r.namespaces if n.strip()))) for r in cmd.registered)
    return {"home": cmd.home, "tenants": dict(cmd.tenants), "registered": registered}


_EMPTY = TargetIndex(slots={})


def owner(table: Any, handle: str, namespace: str, session: str) -> str | None:
    """``lookup`` as another machine asks it (``Ctx.ask("session", "owner", ...)``: the pod
    machine's sweeps): from the session machine's index, or its records when there is none."""
    want = slot(handle, namespace, session)
    got = table.get(INDEX_KEY)
    if isinstance(got, TargetIndex):
        return got.slots.get(want)
    return next((key for key, d in table.items() if slot_of(d) == want), None)


def slot(handle: str, namespace: str, session: str) -> str:
    return f"{handle}/{namespace}/{session}"


def slot_of(d: SessionDecision | None) -> str | None:
    if not isinstance(d, SessionDecision) or not d.target:
        return None
    return slot(d.target, d.target_ns, d.name)


def _index(ctx: Ctx) -> TargetIndex:
    got = ctx.get(INDEX_KEY)
    if isinstance(got, TargetIndex):
        return got
    slots: dict[str, str] = {}
    any_session = False
    for key, d in ctx.items():
        any_session = any_session or isinstance(d, SessionDecision)
        s = slot_of(d)
        if s is not None and s not in slots:
            slots[s] = key
    if not any_session:  # nothing to index; an empty table stays empty (and this stays cheap)
        return _EMPTY
    index = TargetIndex(slots=slots)
    ctx.put(INDEX_KEY, index)
    return index


def lookup(ctx: Ctx, handle: str, namespace: str, session: str) -> str | None:
    return _index(ctx).slots.get(slot(handle, namespace, session))


def none_tracked(ctx: Ctx) -> bool:
    """True when ``lookup`` answers None for every slot and changes nothing: the index is empty,
    or there is no index and no Session to build one from. Reads only (``_index`` would store a
    rebuilt index): a Pod of no Session is dropped without reading its labels or building a slot."""
    got = ctx.get(INDEX_KEY)
    if isinstance(got, TargetIndex):
        return not got.slots
    for _, d in ctx.items():
        if isinstance(d, SessionDecision):
            return False
    return True


def update(ctx: Ctx, key: str, before: SessionDecision | None, after: SessionDecision | None) -> None:
    """Move ``key``'s slot from where ``before`` ran to where ``after`` runs (None: dropped)."""
    old, new = slot_of(before), slot_of(after)
    index = _index(ctx)
    if old == new and (new is None or new in index.slots):
        return
    slots = dict(index.slots)
    if old is not None and slots.get(old) == key:
        del slots[old]
    if new is not None:
        slots.setdefault(new, key)
    if slots != index.slots:
        ctx.put(INDEX_KEY, index.but(slots=slots))
