"""The soak's CI sibling (issue 51 item 5; the long runs are ``scripts/soak.py``, docs/testing.md
"Soak"): 150 s of seeded churn over 20 Sessions at 1 operation/s on one ``kfold run``, SIGKILLed
at 45 s and with the kube-apiserver restarted at 95 s under it (under 4 minutes in all). Every oracle of
``tests/e2e/soak.py`` must hold: never two live pods of a Session, nothing that is not kfold's
deleted, every operation settled to what its spec asks within 90 s (plus the fault's downtime),
nothing left after the deletes, ``kfold replay --check`` clean. The growth targets need the long
run's samples and are not judged here; the figures are computed (and must be computable)."""
from __future__ import annotations

import pytest

from tests.e2e.conftest import Daemon
from tests.e2e.soak import Soak, lifetimes, summarize

SEED = 51


@pytest.mark.timeout(300)
def test_churn_with_a_kill_and_an_apiserver_restart_keep_every_oracle(cp, admin, namespace,
                                                                                          tmp_path):
    daemon = Daemon(tmp_path, cp["kubeconfig"], [namespace], extra={
        "journal": {"path": str(tmp_path / "journal.db"), "snapshot_every": 1000, "retention": {"keep_snapshots": 2}},
        "log": {"format": "plain", "level": "warning"}})
    soak = Soak(admin, namespace, daemon.start, SEED, sessions=20, rate=1.0, duration_s=150, sample_s=5,
                fault_plan=[(45, "kill9"), (95, "apiserver")], log=lambda _m: None)
    result = soak.run()
    assert [f["kind"] for f in result["faults"]] == ["kill9", "apiserver"], result["faults"]
    assert not result["violations"], "\n".join(result["violations"])
    assert not result["failures"], "\n".join(result["failures"])
    assert result["ops"] >= 110, f"only {result['ops']} operations in 150 s at 1/s"
    assert len(lifetimes(soak.samples)) == 2, "one kfold lifetime before the kill, one after"
    summary = summarize(soak.samples, 10, 20, 2, 1000, soak.settles, faults=[f["t"] for f in result["faults"]])
    assert summary["journal"]["ok"], summary["journal"]
    assert summary["windows"] and any(w.get("cpu_s_per_op") for w in summary["windows"])
