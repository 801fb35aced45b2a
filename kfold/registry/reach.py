"""The cluster registry: the only door from kfold to a Kubernetes apiserver.

A cluster is a registered entity: a name, in ONE tenant's index, with a credential in the
credential store under a reference derived from (tenant, name). Every client kfold uses comes from
``reach(tenant, name)`` (registered clusters) or ``home(...)`` (kfold's own cluster, the tenant-less
entry ``home_name``); nothing else in kfold constructs one (tests/unit/test_layering_clients.py).

Guarantees:
- Tenancy: a name is looked up only in the calling tenant's index; another tenant's cluster answers
  exactly like a missing one (``NotRegistered``, same message).
- Register validates the name and kubeconfig, probes the cluster (15 s) and refuses one it cannot
  reach with the reason; only then is the credential stored and the record written. Re-registering
  a name replaces the credential and refreshes the inventory; the next ``reach`` sees the new
  credential's digest and builds a new client (the same credential keeps its cached client).
- Deregister removes the record and destroys the credential.
- Names are trimmed of surrounding whitespace by register, get, reach and deregister (seed 004's
  ``Register``/``Reach``); a name blank after trimming is not registered.
- Reach reuses one client per (tenant, name, credential digest), but that client reads the FRESH
  record on every request: a tightened bound or a deregistration applies to the next request.
- Reach does not read the credential store per call (with ``SecretCredentials`` that would be a
  Secret GET on the home apiserver per request to a registered cluster). The credential read is
  held and read again, on the next reach, only when (1) ``credential_refresh_s`` (config
  ``registry.credential_refresh_seconds``) have passed since it was read, (2) the cluster answered
  401 since, and ``UNAUTHORIZED_REREAD_S`` have passed since the read (so a lasting 401 costs one
  read per that interval, never one per request), or (3) the record was re-registered
  (``registered_at`` moved; ``register`` in this process drops it at once). Concurrent reaches that
  find the read due make one read between them. A new digest builds a new client and closes the
  old one; the same digest keeps the client. So a rotation (the Secret or file replaced) is used
  within ``credential_refresh_s``, and at once (after ``UNAUTHORIZED_REREAD_S``) when the old
  credential was revoked first. Why not a watch on the Secrets: it needs ``list``/``watch`` on
  Secrets in kfold's namespace, which RBAC cannot narrow to kfold's own Secrets, where ``get``
  (what ``kfold manifests`` grants) is all a bounded re-read needs; and the 401 is the moment a
  rotation matters. A deregistration is read from the index on every reach, so it applies at once.
  Nothing of the credential is logged; the digest is not either.
- Records hold no credential; ``repr`` of the registry and its clients shows none.
- Checked is sent (DESIGN invariant 11). A bound check and the request that goes out cannot
  disagree, by construction, in two ways that each suffice on their own:
  1. Where: the check runs on the request line itself. Every client's urllib3 pools make
     connections whose ``putrequest`` (the call that writes ``METHOD <target> HTTP/1.1``) first
     runs ``bounds.admit`` on that exact ``<target>``, after everything the kubernetes client and
     urllib3 did to it (dot-segment removal, percent-encoding, proxy absolute form, redirects).
     There is no later rewrite to disagree with: the bytes written are the string checked. This
     covers every door, including callers that skip ``call_api`` (kfold's watch reader uses the
     pool manager directly). Checks in ``param_serialize``/``call_api`` come first only to fail
     early and to cover websocket streams, which do not go through urllib3.
  2. What: ``bounds.admit`` accepts only a target in canonical wire form (``bounds.wire_problem``):
     no ``.``/``..`` segments, no ``//``, no backslash, no fragment, no escape that decodes to
     ``/``, ``\\``, ``%``, ``?``, ``#``, control or non-ASCII, and each segment spelled exactly as
     ``quote(decoded, safe="")`` spells it. Normalisation leaves such a target unchanged, and the
     apiserver's own decoding splits it into the segments the check classified. Anything else is
     refused (``UnsafePath``), on bounded and unbounded clients alike, before a byte is written.
  Names are checked before they become paths as well (the executor's ``resources.path``
  applies Kubernetes' own name rules), so a refusal there names the bad name and the rule.
  Tested by tests/contract/test_registry_wire_fuzz.py; the threat model is docs/registry-threat-model.md.
- Pacing (``Limits``): the home client uses ``home_limits`` (unlimited unless configured: see
  docs/config.md), a registered cluster ``limits[handle]`` if given, else ``default_limits``
  (seed 004: 50 QPS / burst 100). Handles are ``"<name>@<tenant>"``.
Caveats: ``credential_refresh_s=0`` reads the store on every reach (what tests of a store want).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from kfold.registry import bounds
from kfold.registry.client import BoundedApiClient, configuration_for
from kfold.registry.credentials import CredentialStore
from kfold.registry.errors import CredentialMissing, NotRegistered
from kfold.registry.home import HomeSource, home_configuration
from kfold.registry.index import RegistrationIndex, Records
from kfold.registry.kubeconfig import Kubeconfig, select
from kfold.registry.limiter import UNLIMITED, Limits
from kfold.registry.probe import probe
from kfold.registry.records import (
    Registration,
    check_name,
    clean_namespaces,
    credential_ref,
    name_problem,
)

CacheKey = tuple[str, str, str]
log = logging.getLogger("kfold.registry")
CREDENTIAL_REFRESH_S = 60.0     # a held credential is read again after this long (module contract)
UNAUTHORIZED_REREAD_S = 5.0     # after a 401, read again once this long after the last read


@dataclass
class _Held:
    """The last credential read for one (tenant, name): which client it made, when (monotonic),
    for which registration, and whether the cluster has answered 401 since."""

    key: CacheKey
    read_at: float
    registered_at: int | None
    unauthorized: bool = False


def _upsert(records: Records, new: Registration) -> Records:
    kept = [r for r in records if r.name != new.name]
    if new.default:
        kept = [r.model_copy(update={"default": False}) for r in kept]
    return (*kept, new)


class Registry:
    """Per-deployment cluster registry (see module contract)."""

    def __init__(
        self,
        index: RegistrationIndex,
        credentials: CredentialStore,
        *,
        tenants: Mapping[str, str] | None = None,
        home_name: str = "local",
        home_limits: Limits = UNLIMITED,
        default_limits: Limits = Limits(),
        limits: Mapping[str, Limits] | None = None,
        pool_size: int = 0,
        credential_refresh_s: float = CREDENTIAL_REFRESH_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._index = index
        self.credential_refresh_s, self.monotonic = credential_refresh_s, monotonic
        self.pool_size = pool_size   # every client's connection pool is at least this wide (the executor's threads)
        self.home_limits, self.default_limits = home_limits, default_limits
        self._limits = dict(limits or {})
        self._credentials = credentials
        self._tenants = dict(tenants or {})
        self.home_name = check_name(home_name)
        self._clients: dict[CacheKey, BoundedApiClient] = {}
        self._held: dict[tuple[str, str], _Held] = {}
        self._readers: dict[tuple[str, str], threading.Lock] = {}
        self._home: BoundedApiClient | None = None
        self.home_source: HomeSource | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Registry({self._index!r}, {self._credentials!r}, home={self.home_name!r})"

    # -- lookups -------------------------------------------------------------------------------

    def tenant_for_namespace(self, namespace: str) -> str | None:
        """The tenant a Session in ``namespace`` (on the home cluster) acts for; None if unmapped."""
        return self._tenants.get(namespace)

    def list(self, tenant: str) -> Records:
        """The tenant's registrations."""
        return self._index.read(tenant)

    def list_all(self) -> Records:
        """Every tenant's registrations (operator view, e.g. the CLI)."""
        return tuple(r for t in self._index.tenants() for r in self._index.read(t))

    def get(self, tenant: str | None, name: str) -> Registration:
        """The tenant's record named ``name`` (trimmed of surrounding whitespace, seed 004's
        ``Reach``; blank is no name), or ``NotRegistered``."""
        name = name.strip()
        if tenant is None or name_problem(name) is not None:
            raise NotRegistered(name)
        for record in self._index.read(tenant):
            if record.name == name:
                return record
        raise NotRegistered(name)

    def resolve_namespace(self, tenant: str, name: str, namespace: str | None) -> tuple[str, ...]:
        """``bounds.resolve`` against the tenant's fresh record of ``name``."""
        return bounds.resolve(self.get(tenant, name), namespace)

    # -- register / deregister -----------------------------------------------------------------

    def register(
        self,
        tenant: str,
        name: str,
        kubeconfig_text: str,
        *,
        provider: str = "byo",
        namespaces: tuple[str, ...] | list[str] = (),
        default: bool = False,
        allow_exec: bool = False,
        allow_files: bool = False,
    ) -> Registration:
        """Validate, probe, store the credential, write the record (see module contract). The name
        is trimmed of surrounding whitespace first (seed 004's ``Register``)."""
        name = name.strip()
        draft = Registration(
            name=check_name(name), tenant=check_name(tenant, "tenant"), provider=provider or "byo",
            namespaces=clean_namespaces(namespaces), default=default, allow_exec=allow_exec,
            allow_files=allow_files,
        )
        kubeconfig = Kubeconfig(kubeconfig_text)
        record = self._probed(draft, kubeconfig)
        self._credentials.put(credential_ref(tenant, name), kubeconfig)
        self._index.update(tenant, lambda records: _upsert(records, record))
        with self._lock:
            self._held.pop((tenant, name), None)   # the next reach reads the new credential
        log.info("registered cluster %s/%s at %s (bound: %s, inventory: %s)", tenant, name,
                 record.endpoint, ",".join(record.namespaces) or "whole cluster", record.inventory)
        return record

    def _probed(self, draft: Registration, kubeconfig: Kubeconfig) -> Registration:
        """``draft`` completed from a probe made with ``kubeconfig`` (no retries, 15 s bound)."""
        selected = select(kubeconfig, allow_exec=draft.allow_exec, allow_files=draft.allow_files)
        config = configuration_for(selected)
        config.retries = 0
        prober = BoundedApiClient(config, label=f"{draft.tenant}/{draft.name}", record_source=lambda: draft)
        try:
            result = probe(draft.name, prober, draft.namespaces)
        finally:
            prober.close()
        return draft.model_copy(update={
            "endpoint": config.host, "inventory": result.inventory,
            "registered_at": result.server_time_ms,
        })

    def deregister(self, tenant: str, name: str) -> Registration:
        """Remove the record and destroy the credential; ``NotRegistered`` if there is none."""
        record = self.get(tenant, name)
        name = record.name
        self._index.update(tenant, lambda records: tuple(r for r in records if r.name != name))
        self._credentials.destroy(credential_ref(tenant, name))
        self._forget(tenant, name)
        log.info("deregistered cluster %s/%s; credential destroyed", tenant, name)
        return record

    # -- clients -------------------------------------------------------------------------------

    def reach(self, tenant: str | None, name: str) -> BoundedApiClient:
        """The client for the tenant's cluster ``name`` (``tenant=None``: the home entry only); the
        name is trimmed of surrounding whitespace, as ``get`` does."""
        name = name.strip()
        if tenant is None:
            return self._reach_home(name)
        record = self.get(tenant, name)
        held = self._held_client(record)
        if held is not None:
            return held
        with self._reader(tenant, name):   # one store read for every reach that found it due
            return self._held_client(record) or self._read_and_hold(record)

    def set_credentials(self, credentials: CredentialStore) -> None:
        """Use ``credentials`` from now on (e.g. Secrets read through this registry's home client)."""
        with self._lock:
            self._credentials = credentials
            self._held.clear()

    def _held_client(self, record: Registration) -> BoundedApiClient | None:
        """The client of the held credential read, unless a read is due (module contract)."""
        with self._lock:
            held = self._held.get((record.tenant, record.name))
            if held is None or held.registered_at != record.registered_at:
                return None
            age = self.monotonic() - held.read_at
            if age >= self.credential_refresh_s or (held.unauthorized and age >= UNAUTHORIZED_REREAD_S):
                return None
            return self._clients.get(held.key)

    def _read_and_hold(self, record: Registration) -> BoundedApiClient:
        tenant, name = record.tenant, record.name
        read_at = self.monotonic()
        kubeconfig = self._credentials.get(credential_ref(tenant, name))
        if kubeconfig is None:
            self._forget(tenant, name)
            raise CredentialMissing(name)
        key = (tenant, name, kubeconfig.digest)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._build(record, kubeconfig)
                self._forget_locked(tenant, name)
                self._clients[key] = client
            self._held[(tenant, name)] = _Held(key, read_at, record.registered_at)
            return client

    def _reader(self, tenant: str, name: str) -> threading.Lock:
        with self._lock:
            return self._readers.setdefault((tenant, name), threading.Lock())

    def _unauthorized(self, tenant: str, name: str) -> None:
        """The cluster answered 401: the held credential may have been rotated (module contract)."""
        with self._lock:
            held = self._held.get((tenant, name))
            if held is not None:
                held.unauthorized = True

    def home(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        allow_exec: bool = False,
        allow_files: bool = True,
        **source: object,
    ) -> BoundedApiClient:
        """kfold's own cluster: a kubeconfig file/context, or in-cluster; built once, then reused.

        Extra keywords (``service_account_dir``, ``environ``) go to ``home_configuration``."""
        with self._lock:
            if self._home is None:
                config, self.home_source = home_configuration(
                    kubeconfig, context, allow_exec=allow_exec, allow_files=allow_files, **source
                )
                self._home = BoundedApiClient(config, label=self.home_name, record_source=lambda: None,
                                              limits=self.home_limits, pool_size=self.pool_size)
            return self._home

    def clients(self) -> list[BoundedApiClient]:
        """The clients built so far (home first), e.g. for their limiters on /metrics."""
        with self._lock:
            return ([self._home] if self._home is not None else []) + list(self._clients.values())

    def close(self) -> None:
        """Close every cached client's pools."""
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
            self._held.clear()

    def _reach_home(self, name: str) -> BoundedApiClient:
        if name != self.home_name or self._home is None:
            raise NotRegistered(name)
        return self._home

    def _build(self, record: Registration, kubeconfig: Kubeconfig) -> BoundedApiClient:
        selected = select(kubeconfig, allow_exec=record.allow_exec, allow_files=record.allow_files)
        tenant, name = record.tenant, record.name
        log.debug("new client for cluster %s/%s at %s", tenant, name, selected.server)
        return BoundedApiClient(
            configuration_for(selected),
            label=f"{tenant}/{name}",
            record_source=lambda: self.get(tenant, name),
            limits=self.limits_for(tenant, name),
            pool_size=self.pool_size,
            on_unauthorized=lambda: self._unauthorized(tenant, name),
        )

    def limits_for(self, tenant: str, name: str) -> Limits:
        """The pacing of the tenant's cluster ``name`` (its handle's entry, else the default)."""
        return self._limits.get(f"{name}@{tenant}", self.default_limits)

    def _forget(self, tenant: str, name: str) -> None:
        with self._lock:
            self._forget_locked(tenant, name)

    def _forget_locked(self, tenant: str, name: str) -> None:
        self._held.pop((tenant, name), None)
        for key in [k for k in self._clients if k[:2] == (tenant, name)]:
            self._clients.pop(key).close()
