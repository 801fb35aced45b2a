"""kfold's own cluster ("home"): where its CRs, journal Secrets and credential Secrets live.

Expected flow: the daemon's validated config says either a kubeconfig file (and context), or
nothing, in which case kfold must be running in a pod. ``home_configuration`` never falls back to
an ambient ``~/.kube/config`` or ``$KUBECONFIG``: a client that could be built without saying
where it points would talk to whatever cluster the process happened to start next to.

Guarantees:
- kubeconfig file: validated like any kubeconfig (``kubeconfig.select``). Files it references are
  allowed by default (it is the operator's own file, and relative paths resolve against its
  directory); exec plugins only with ``allow_exec``.
- in-cluster: host from ``KUBERNETES_SERVICE_HOST``/``_PORT``, the service-account token (re-read
  as it rotates) and CA from ``service_account_dir``, the namespace from its ``namespace`` file.
- Neither available: ``HomeUnavailable`` saying what to pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader

from kfold.registry.client import configuration_for, tuned
from kfold.registry.errors import HomeUnavailable
from kfold.registry.kubeconfig import Kubeconfig, select

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class HomeSource:
    """Where the home client points: ``kind`` is "kubeconfig" or "in-cluster"."""

    kind: str
    endpoint: str
    namespace: str | None


def _from_kubeconfig(path: str, context: str | None, allow_exec: bool, allow_files: bool):
    try:
        text = Path(path).expanduser().read_text()
    except OSError as e:
        raise HomeUnavailable(f"cannot read home kubeconfig {path}: {e.strerror}") from None
    selected = select(Kubeconfig(text), context, allow_exec=allow_exec, allow_files=allow_files)
    base = str(Path(path).expanduser().resolve().parent)
    cfg = configuration_for(selected, base_path=base)
    return cfg, HomeSource("kubeconfig", cfg.host, selected.namespace)


def _in_cluster(service_account_dir: str, environ: Mapping[str, str]):
    sa = Path(service_account_dir)
    cfg = Configuration()
    try:
        InClusterConfigLoader(str(sa / "token"), str(sa / "ca.crt"), environ=environ).load_and_set(cfg)
    except ConfigException as e:
        raise HomeUnavailable(f"in-cluster service account unusable: {e}") from None
    namespace_file = sa / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else None
    return tuned(cfg), HomeSource("in-cluster", cfg.host, namespace)


def home_configuration(
    kubeconfig: str | None,
    context: str | None = None,
    *,
    allow_exec: bool = False,
    allow_files: bool = True,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
) -> tuple[Configuration, HomeSource]:
    """The home client's configuration and where it points (see module contract)."""
    if kubeconfig:
        return _from_kubeconfig(kubeconfig, context, allow_exec, allow_files)
    env = os.environ if environ is None else environ
    if env.get("KUBERNETES_SERVICE_HOST"):
        return _in_cluster(service_account_dir, env)
    raise HomeUnavailable(
        "no home cluster: pass a kubeconfig file (and context), or run kfold in a pod with a "
        "service account"
    )
