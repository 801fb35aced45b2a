"""Issue 14 item 4 on the real control plane: 3 replicas, 6 shards, 30 Sessions, one replica
SIGKILLed mid-run, then a fresh replica joining (``tests/e2e/shard_drill.py`` says what is checked;
``scripts/drill_shards.py`` runs the same with 300 Sessions)."""
from __future__ import annotations

import pytest

from tests.e2e.shard_drill import LEASE, shard_drill


@pytest.mark.timeout(900)
def test_three_replicas_share_thirty_sessions_and_survive_one_killed(cp, admin, namespace, tmp_path):
    figures = shard_drill(admin, cp, namespace, tmp_path, sessions=30, replicas=3, shards=6, rejoin=True)
    logs = figures.pop("logs")
    print(f"\nshard drill: {figures}")
    assert figures["shards_moved_s"] < LEASE["lease_seconds"] + 4 * LEASE["retry_seconds"] + 2   # as for one Lease
    assert figures["rejoin_spread_s"] < 3 * LEASE["lease_seconds"], "released shards are taken at once, not waited out"
    survivors = [n for n in logs if n != figures["victim"]]
    for shard in figures["victim_shards"]:   # every move is logged with its shard, term and reason
        assert any(f"(shard {shard}), term" in line and "acquired (expired, held by replica-" in line
                   for n in survivors for line in logs[n].splitlines()), f"no acquire logged for shard {shard}"
    assert any("rebalance:" in line and "over 3 replicas" in line for n in survivors for line in logs[n].splitlines())
