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

import yaml

from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader

from kfold.registry.client import configuration_for, tuned
from kfold.registry.errors import HomeUnavailable, KubeconfigRefused
from kfold.registry.kubeconfig import Kubeconfig, select

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class HomeSource:
    """Where the home client points: ``kind`` is "kubeconfig" or "in-cluster"."""

    kind: str
    endpoint: str
    namespace: str | None
    context: str | None = None   # the kubeconfig context used (kind "kubeconfig")
    path: str | None = None      # the kubeconfig file used

    def describe(self) -> str:
        """Where the home client points, for messages: ``context kind-dev of /home/me/.kube/config``."""
        return f"context {self.context} of {self.path}" if self.kind == "kubeconfig" else "in-cluster service account"


def _from_kubeconfig(path: str, context: str | None, allow_exec: bool, allow_files: bool):
    try:
        text = Path(path).expanduser().read_text()
    except OSError as e:
        raise HomeUnavailable(f"cannot read home kubeconfig {path}: {e.strerror}; pass --kubeconfig PATH "
                              "(or cluster.kubeconfig) naming a readable file") from None
    base = str(Path(path).expanduser().resolve().parent)
    try:
        selected = select(Kubeconfig(text), context, allow_exec=allow_exec, allow_files=allow_files)
        cfg = configuration_for(selected, base_path=base)   # runs an allowed exec plugin: its failure too
    except KubeconfigRefused as e:   # the same refusal, saying which file and what to pass
        e.args = (f"home kubeconfig {path}: refused: {'; '.join(e.problems)}{_contexts(text, e)}",)
        raise e from None
    return cfg, HomeSource("kubeconfig", cfg.host, selected.namespace, selected.context, path)


def _contexts(text: str, refused: KubeconfigRefused) -> str:
    """For an unknown context: the ones the file defines (names only), and the flag that picks one."""
    if not any(p.startswith("context ") for p in refused.problems):
        return ""
    try:
        doc = yaml.safe_load(text)
        names = [str(c.get("name")) for c in doc.get("contexts") or () if isinstance(c, dict)]
    except (yaml.YAMLError, AttributeError):
        return ""
    return f"; its contexts: {', '.join(names) or '(none)'}; pick one with --context NAME (or cluster.context)"


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


def kubeconfig_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(path, how it was chosen)`` from ``$KUBECONFIG``: its first existing file (kubectl merges
    the colon-separated list; kfold reads one file and says which), or None when it is unset.
    Set but naming no existing file: ``HomeUnavailable``."""
    value = (os.environ if environ is None else environ).get("KUBECONFIG", "")
    paths = [p for p in value.split(os.pathsep) if p]
    if not paths:
        return None
    for p in paths:
        if Path(p).expanduser().is_file():
            rest = f", the first existing of {len(paths)}; the others are not merged" if len(paths) > 1 else ""
            return p, f"$KUBECONFIG ({p}{rest})"
    raise HomeUnavailable(f"$KUBECONFIG names no existing file ({value}); fix it, unset it, or pass --kubeconfig PATH")
