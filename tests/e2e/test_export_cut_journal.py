"""Invariant 14 through ``kfold run`` on the real control plane: a config with small retention
settings, a Session taken through its phases, so retention cuts the journal's head while it runs;
then ``kfold export`` of that journal opens in ``kfold replay --check``, ``kfold trace`` and the
UI's loader, with the decisions a replay of the journal itself reports."""
from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import install_rbac, service_account_kubeconfig
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, World, session_manifest

REPO = Path(__file__).resolve().parents[2]


def kfold(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfold", *argv], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_export_of_a_journal_retention_cut_while_running_opens_everywhere(admin, cp, namespace, daemon_factory,
                                                                             tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    journal = tmp_path / "journal.db"
    daemon = daemon_factory(str(kubeconfig), [namespace], extra={"journal": {
        "path": str(journal), "snapshot_every": 10, "retention": {"keep_snapshots": 2}}}).start()
    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    w.phase_is("Ready", 1)
    w.patch_spec(suspended=True)
    w.phase_is("Suspended")
    w.patch_spec(suspended=False)
    w.phase_is("Ready", 2)
    w.patch_spec(stopped=True)
    w.phase_is("Stopped")
    assert daemon.stop() == 0

    with sqlite3.connect(journal) as db:
        base = db.execute("SELECT value FROM meta WHERE key = 'base'").fetchone()
    assert base is not None, "retention cut the journal's head"
    first = int((base[0].decode() if isinstance(base[0], bytes) else base[0]).split()[0]) + 1

    out = tmp_path / "x.jsonl"
    exported = kfold("export", str(journal), "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    direct, replayed = kfold("replay", str(journal), "--check"), kfold("replay", str(out), "--check")
    assert direct.returncode == 0, direct.stdout + direct.stderr
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.startswith(f"history begins at seq {first}: ")
    assert replayed.stdout.splitlines()[1:] == direct.stdout.splitlines()[1:]   # the same decisions
    assert "check: every journaled effect matches the current code" in replayed.stdout
    assert "machine session: 1 objects (Stopped=1)" in replayed.stdout, "what the cluster was told last"

    traced = kfold("trace", str(out), f"local/{namespace}/demo")
    assert traced.returncode == 0, traced.stderr
    # trace omits non-changes: Stopped is said by a change after the cut, or by the snapshot it starts from
    assert re.search(r"-> Stopped|\(still Stopped\)|^  session: Stopped$", traced.stdout, re.M), traced.stdout

    from kfold.offline.ui.index import build
    from kfold.offline.ui.server import Store
    meta = build(str(out), tmp_path / "index.sqlite")
    assert meta["first_seq"] == first and meta["records"] > 0
    objects = Store(tmp_path / "index.sqlite", str(out)).objects(q="demo", kind="Session")["objects"]
    assert [o["key"] for o in objects] == [f"local/{namespace}/demo"] and objects[0]["state"] == "Stopped"
