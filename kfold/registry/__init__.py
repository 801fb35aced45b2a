"""The cluster registry: the only door from kfold to a cluster (issue 7).

Use ``Registry.reach(tenant, name)`` for a registered cluster and ``Registry.home(...)`` for kfold's
own; see ``kfold.registry.reach`` for the contract.
"""

from kfold.registry.bounds import ALL_NAMESPACES, classify, resolve, resolve_one, wire_problem
from kfold.registry.client import BoundedApiClient
from kfold.registry.credentials import (
    CredentialStore,
    DirectoryCredentials,
    MemoryCredentials,
    SecretCredentials,
)
from kfold.registry.errors import (
    CredentialMissing,
    HomeUnavailable,
    InvalidName,
    KubeconfigRefused,
    NotRegistered,
    OutOfBounds,
    RegistryCorrupt,
    RegistryError,
    Unreachable,
    UnsafePath,
)
from kfold.registry.home import HomeSource, home_configuration
from kfold.registry.index import RegistrationIndex
from kfold.registry.kubeconfig import Kubeconfig, select
from kfold.registry.limiter import UNLIMITED, Limits, TokenBucket
from kfold.registry.records import Inventory, Registration, check_name, credential_ref
from kfold.registry.reach import Registry

__all__ = [
    "ALL_NAMESPACES", "BoundedApiClient", "CredentialMissing", "CredentialStore",
    "DirectoryCredentials", "HomeSource", "HomeUnavailable", "InvalidName", "Inventory",
    "Kubeconfig", "KubeconfigRefused", "Limits", "MemoryCredentials", "NotRegistered", "OutOfBounds",
    "Registration", "RegistrationIndex", "Registry", "RegistryCorrupt", "RegistryError",
    "SecretCredentials", "TokenBucket", "UNLIMITED", "Unreachable", "check_name", "classify",
    "UnsafePath", "credential_ref", "home_configuration", "resolve", "resolve_one", "select",
    "wire_problem",
]
