"""Issue 12 item 1 on the real control plane: SIGKILL during a burst bring-up, restart on the same
journal. A relist taken before a create and journaled after it must not make a pod "disappear":
every Session Ready, exactly one pod each, none Failed, nothing leaked once they are deleted.

CI runs a few fixed seeds; ``python scripts/drill_kill9.py --seeds 16`` runs many.
"""
from __future__ import annotations

import pytest

from tests.e2e.drills import Cluster, burst_kill9


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_during_a_burst_bring_up_leaves_one_pod_per_session_and_no_leak(
        cp, admin, namespace, daemon_factory, seed):
    cluster = Cluster(admin, namespace)
    figures = burst_kill9(cluster, lambda env: daemon_factory(cp["kubeconfig"], [namespace]).start(env=env), seed)
    print(figures)
