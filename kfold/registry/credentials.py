"""The credential-store port and its implementations.

Contract of a ``CredentialStore`` (keys are ``records.credential_ref(tenant, name)``):
- ``get(ref)`` returns the ``Kubeconfig`` or None when there is none. An absent credential and an
  unreachable store are different answers: absence is None, an outage raises.
- ``put(ref, kubeconfig)`` replaces whatever was there; ``destroy(ref)`` removes it (absent is fine).
- Material is held only as ``Kubeconfig`` (redacting repr) and written with owner-only permissions.

Implementations: ``DirectoryCredentials`` (a directory, e.g. a mounted Secret: one file per ref),
``SecretCredentials`` (Kubernetes Secrets in kfold's own namespace, key ``kubeconfig``), and
``MemoryCredentials`` (the in-process fake used by tests).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, Protocol

from kubernetes.client import V1ObjectMeta, V1Secret
from kubernetes.client.exceptions import ApiException

from engine.labels import MANAGED_LABELS
from kfold.registry.index import atomic_write
from kfold.registry.kubeconfig import Kubeconfig

SECRET_KEY = "kubeconfig"
SECRET_PREFIX = "kfold-cluster."


class CredentialStore(Protocol):
    """Where kubeconfigs live; see the module contract."""

    def get(self, ref: str) -> Kubeconfig | None: ...

    def put(self, ref: str, kubeconfig: Kubeconfig) -> None: ...

    def destroy(self, ref: str) -> None: ...


class MemoryCredentials:
    """In-memory store: the fake for tests (same contract, no I/O)."""

    def __init__(self) -> None:
        self._items: dict[str, Kubeconfig] = {}

    def __repr__(self) -> str:
        return f"MemoryCredentials({len(self._items)} refs)"

    def get(self, ref: str) -> Kubeconfig | None:
        return self._items.get(ref)

    def put(self, ref: str, kubeconfig: Kubeconfig) -> None:
        self._items[ref] = kubeconfig

    def destroy(self, ref: str) -> None:
        self._items.pop(ref, None)

    def refs(self) -> tuple[str, ...]:
        return tuple(sorted(self._items))


class DirectoryCredentials:
    """One file per ref in ``path`` (0600 files, 0700 directory when kfold creates it).

    Caveat: a mounted Secret is read-only; ``put``/``destroy`` then raise ``OSError`` and the
    operator rotates the Secret instead."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._dir = Path(path)

    def __repr__(self) -> str:
        return f"DirectoryCredentials({str(self._dir)!r})"

    def get(self, ref: str) -> Kubeconfig | None:
        try:
            return Kubeconfig(self._file(ref).read_text())
        except FileNotFoundError:
            return None

    def put(self, ref: str, kubeconfig: Kubeconfig) -> None:
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self._file(ref), kubeconfig.reveal().encode(), mode=0o600)

    def destroy(self, ref: str) -> None:
        self._file(ref).unlink(missing_ok=True)

    def _file(self, ref: str) -> Path:
        if "/" in ref or ref.startswith("."):
            raise ValueError(f"not a credential reference: {ref!r}")
        return self._dir / ref


def status_reason(error: ApiException) -> str:
    """The Kubernetes Status ``reason`` of an API error (not the HTTP phrase)."""
    try:
        return str(json.loads(error.body or "{}").get("reason", ""))
    except (ValueError, AttributeError):
        return ""


class SecretCredentials:
    """Secrets ``kfold-cluster.<ref>`` in ``namespace``, labelled managed-by kfold, key ``kubeconfig``.

    ``core_api`` is a ``CoreV1Api`` on kfold's home cluster (``Registry.home``)."""

    def __init__(self, core_api: Any, namespace: str) -> None:
        self._api = core_api
        self._namespace = namespace

    def __repr__(self) -> str:
        return f"SecretCredentials(namespace={self._namespace!r})"

    def get(self, ref: str) -> Kubeconfig | None:
        try:
            secret = self._api.read_namespaced_secret(self._name(ref), self._namespace)
        except ApiException as e:
            if e.status == 404 and status_reason(e) == "NotFound":
                return None
            raise
        encoded = (secret.data or {}).get(SECRET_KEY)
        return Kubeconfig(base64.b64decode(encoded).decode()) if encoded else None

    def put(self, ref: str, kubeconfig: Kubeconfig) -> None:
        body = self._secret(ref, kubeconfig)
        try:
            self._api.create_namespaced_secret(self._namespace, body)
        except ApiException as e:
            if status_reason(e) != "AlreadyExists":
                raise
            self._api.replace_namespaced_secret(self._name(ref), self._namespace, body)

    def destroy(self, ref: str) -> None:
        try:
            self._api.delete_namespaced_secret(self._name(ref), self._namespace)
        except ApiException as e:
            if not (e.status == 404 and status_reason(e) == "NotFound"):
                raise

    def _name(self, ref: str) -> str:
        return SECRET_PREFIX + ref

    def _secret(self, ref: str, kubeconfig: Kubeconfig) -> V1Secret:
        tenant, _, cluster = ref.partition(".")
        labels = {**MANAGED_LABELS, "kfold.dev/tenant": tenant, "kfold.dev/cluster": cluster}
        data = {SECRET_KEY: base64.b64encode(kubeconfig.reveal().encode()).decode()}
        meta = V1ObjectMeta(name=self._name(ref), namespace=self._namespace, labels=labels)
        return V1Secret(metadata=meta, type="Opaque", data=data)
