"""The daemon's clusters: the registry built from config, cluster handles, per-cluster observers.

Contract (shared with the session machine and the executor):
- The home cluster is known by ``cluster.name`` (tenant ""). A registered cluster is known inside
  kfold by its handle ``"<name>@<tenant>"``: in observed records, object keys and effects. Cluster
  names are per tenant, so the handle is what makes two tenants' "edge" two different clusters.
- Every client comes from the registry: ``client_for(handle, tenant)`` maps a handle to
  ``registry.reach(tenant, name)`` and the home name to the home client. A handle whose
  registration is gone is refused by the registry before any request is sent.
- Registrations are read at start and re-read every ``registry.rescan_seconds`` while the daemon
  runs (``kfold.daemon.follow``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kfold.daemon.config import Config


def handle(name: str, tenant: str) -> str:
    return f"{name}@{tenant}"


def split_handle(cluster: str, home: str) -> tuple[str | None, str]:
    """``(tenant, name)`` of a cluster handle; the home cluster has no tenant."""
    if "@" in cluster:
        name, tenant = cluster.split("@", 1)
        return tenant, name
    return None, cluster or home


def registry_dir(cfg: Config) -> Path:
    if cfg.registry.dir:
        return Path(cfg.registry.dir).expanduser()
    return Path(cfg.journal.path).expanduser().resolve().parent / "registry"


def open_registry(cfg: Config) -> tuple[Any, Any]:
    """``(registry, home client)``. With ``registry.credentials: secrets`` the kubeconfigs are
    Secrets in kfold's own namespace, read through the home client (the one client kfold has for
    its cluster: its Secret reads are on /metrics with the rest). A held credential is read again
    every ``registry.credential_refresh_seconds`` and after a 401 (``kfold.registry.reach``)."""
    from kfold.registry import DirectoryCredentials, MemoryCredentials, RegistrationIndex, Registry
    root = registry_dir(cfg)
    home_args = dict(kubeconfig=cfg.cluster.kubeconfig, context=cfg.cluster.context, allow_exec=cfg.cluster.allow_exec,
                     service_account_dir=cfg.cluster.service_account_dir)
    secrets = cfg.registry.credentials == "secrets"
    registry = Registry(RegistrationIndex(root / "index"),
                        MemoryCredentials() if secrets else DirectoryCredentials(root / "credentials"),
                        tenants=cfg.tenants, home_name=cfg.cluster.name,
                        home_limits=cfg.cluster.limits(), default_limits=cfg.registry.default_limits(),
                        limits={h: r.limits() for h, r in cfg.registry.limits.items()},
                        pool_size=pool_width(cfg),
                        credential_refresh_s=float(cfg.registry.credential_refresh_seconds))
    home = registry.home(**home_args)
    if secrets:
        from kubernetes.client import CoreV1Api
        from kfold.registry import SecretCredentials
        namespace = cfg.registry.secrets_namespace or (registry.home_source.namespace if registry.home_source else None)
        if not namespace:
            from kfold.registry import RegistryError
            raise RegistryError("registry.credentials is 'secrets' but no namespace is known: "
                                "set registry.secrets_namespace")
        registry.set_credentials(SecretCredentials(CoreV1Api(home), namespace))
    return registry, home


def pool_width(cfg: Config) -> int:
    """How many connections each cluster's client pool keeps: one per executor thread, plus one
    for each watch held open beside them (every observed kind in every watched namespace) and a
    few for the Lease and one-off reads. A request that finds the pool full opens a connection and
    urllib3 discards it afterwards (a TLS handshake per request, and a warning in the log)."""
    from engine.core import default_machines
    watches = len(default_machines().by_kind) * max(1, len(cfg.namespaces))
    return cfg.executor.threads + watches + 8


def client_for(registry: Any, home: str) -> Callable[[str, str], Any]:
    def client(cluster: str, tenant: str) -> Any:
        t, name = split_handle(cluster, home)
        return registry.reach(t, name)
    return client


def configure_args(cfg: Config, registry: Any, records: Any = None) -> dict[str, Any]:
    """What ``session.configure`` needs to decide tenancy and target namespaces (no credentials)."""
    return {
        "home": cfg.cluster.name,
        "tenants": dict(cfg.tenants),
        "registered": [{"handle": handle(r.name, r.tenant), "name": r.name, "tenant": r.tenant,
                        "namespaces": list(r.namespaces)} for r in (registry.list_all() if records is None else records)],
    }


def remote_targets(cfg: Config, registry: Any, records: Any = None) -> list[tuple[str, str, str, str]]:
    """``(handle, tenant, name, namespace)`` to watch on registered clusters: a bounded
    registration's bound, or else the Session namespaces mapped to its tenant."""
    out = []
    for r in (registry.list_all() if records is None else records):
        namespaces = r.namespaces or tuple(ns for ns in cfg.namespaces if cfg.tenants.get(ns) == r.tenant)
        out += [(handle(r.name, r.tenant), r.tenant, r.name, ns) for ns in namespaces]
    return out


def registrations(cfg: Config, registry: Any) -> tuple[dict[str, Any], list[tuple[str, str, str, str]]]:
    """``(configure_args, remote_targets)`` from ONE read of the registry, so the two agree."""
    records = registry.list_all()
    return configure_args(cfg, registry, records), remote_targets(cfg, registry, records)
