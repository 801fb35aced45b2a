"""The labels kfold puts on what it creates, and selects what it owns by: defined here only.

Everything kfold creates carries ``MANAGED_BY: kfold`` (DESIGN "Names"); a session's objects carry
its ``SESSION_LABEL`` too, and its pods their ``GENERATION_LABEL``. Watches and sweeps select by
``MANAGED_SELECTOR``. Pure constants: imported by the machines and the daemon alike.
"""
from __future__ import annotations

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kfold"
MANAGED_LABELS = {MANAGED_BY: MANAGER}
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
SESSION_LABEL = "kfold.dev/session"
GENERATION_LABEL = "kfold.dev/generation"
