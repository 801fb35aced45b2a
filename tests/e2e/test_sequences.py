"""Seeded operation sequences on the real control plane, each step checked against what the spec
alone implies (tests/e2e/sequences.py has the oracle and says where it comes from). CI runs these
fixed seeds; ``python scripts/sequences.py --seeds N`` runs many."""
from __future__ import annotations

import pytest

from tests.e2e.conftest import install_rbac, service_account_kubeconfig
from tests.e2e.driver import replay_check
from tests.e2e.sequences import Driver, run

pytestmark = pytest.mark.timeout(900)
SEEDS = [11, 12]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seeded_sequence_of_spec_changes_matches_the_spec_after_every_step(admin, cp, namespace, daemon_factory,
                                                                              tmp_path, seed):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon = daemon_factory(str(kubeconfig), [namespace]).start()
    try:
        run(Driver(admin, namespace), seed, sessions=2, steps=8, on_step=print)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\njournal: {daemon.journal}\nkfold log (tail):\n"
                             f"{daemon.log.read_text()[-4000:]}") from None
    assert daemon.stop() == 0
    replay_check(daemon.journal)
