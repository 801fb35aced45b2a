"""docs/journal.md "Upgrades" on a real control plane: ``kfold run`` as a process, given the journal
kfold ae4b05a wrote with its newest snapshot in a format newer than this kfold reads (what a newer
kfold leaves), refuses to start with exit 2 and one line naming both formats, and the journal
holds exactly what it held (records, snapshots, meta)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from engine import migrations
from scripts.record_golden import free_port
from tests.unit.test_upgrade import DATA, REPO, SNAPSHOTS, newer, rows

pytestmark = pytest.mark.timeout(120)


def test_kfold_run_refuses_a_newer_kfolds_journal_and_leaves_it_as_it_was(cp, namespace, tmp_path):
    journal = tmp_path / "journal.db"
    journal.write_bytes((DATA / "ae4b05a.sqlite").read_bytes())
    fmt = newer(journal)
    before = rows(journal)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"cluster": {"name": "local", "kubeconfig": cp["kubeconfig"]},
                                      "namespaces": [namespace], "journal": {"path": str(journal)},
                                      "http": {"listen": f"127.0.0.1:{free_port()}"}}))
    done = subprocess.run([sys.executable, "-m", "kfold", "run", "--config", str(config)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"kfold run: journal {journal}: the snapshot at seq {SNAPSHOTS[-1]} has format {fmt}, "
                                "written by a newer kfold; this kfold (") and "Traceback" not in done.stderr
    assert f"reads snapshot formats {migrations.OLDEST} to {migrations.FORMAT}" in lines[-1]
    assert lines[-1].endswith("nothing was written")
    assert rows(journal) == before
