"""The labels kfold puts on what it creates, and selects what it owns by: defined here only.

Everything kfold creates carries ``MANAGED_BY: kfold`` (DESIGN "Names"); a session's objects carry
its ``SESSION_LABEL`` too, and its pods their ``GENERATION_LABEL`` (and, away from their Session,
``SESSION_NAMESPACE_LABEL``). Watches and sweeps select by
``MANAGED_SELECTOR``. Pure constants: imported by the machines and the daemon alike.
"""
from __future__ import annotations

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kfold"
MANAGED_LABELS = {MANAGED_BY: MANAGER}
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
SESSION_LABEL = "kfold.dev/session"
GENERATION_LABEL = "kfold.dev/generation"
# On a pod that runs away from its Session (another cluster or namespace: no ownerReference can
# reach the Session there): the Session's namespace, so the orphan-pod sweep can read the Session.
SESSION_NAMESPACE_LABEL = "kfold.dev/session-namespace"
SESSION_API_VERSION = "kfold.dev/v1alpha1"
