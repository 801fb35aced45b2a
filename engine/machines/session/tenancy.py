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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.machines.session.model import SessionConfig
from engine.seams import RegisteredCluster, SessionConfigure

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
    # Never list or hint at known names: another tenant's cluster answers exactly like a missing one.
    return f"no cluster named {wanted!r} is registered for this tenant"


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
