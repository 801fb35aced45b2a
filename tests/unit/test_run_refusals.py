"""``kfold run`` refuses a corrupt journal, or one another daemon holds, with one line naming the
cause and the fix, exit 2, and appends nothing to it."""
import asyncio
import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

from journal.records import Command
from journal.sqlite import SqliteJournal

REPO = Path(__file__).resolve().parents[2]


def make_journal(path):
    async def go():
        j = SqliteJournal(str(path))
        await j.open()
        await j.append([Command(name="session.configure", args={"clusters": ["local"]}) for _ in range(5)])
        await j.close()
    asyncio.run(go())


def test_a_corrupt_journal_is_refused_at_its_seq_and_left_untouched(tmp_path):
    journal = tmp_path / "journal.db"
    make_journal(journal)
    db = sqlite3.connect(journal)
    (payload,) = db.execute("SELECT payload FROM journal WHERE seq = 3").fetchone()
    db.execute("UPDATE journal SET payload = ? WHERE seq = 3", (payload.replace(b"session", b"sessiom"),))
    db.commit()
    db.close()
    before = hashlib.sha256(journal.read_bytes()).hexdigest()
    proc = run_kfold(tmp_path, journal, 18097)
    assert proc.returncode == 2, proc.stderr
    assert "journal corrupt at seq 3" in proc.stderr and "--up-to-corruption" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == before
    assert sqlite3.connect(journal).execute("SELECT max(seq) FROM journal").fetchone() == (5,)


def test_a_second_kfold_run_on_the_same_journal_is_refused_before_it_reads_it(tmp_path):
    """Another daemon holds the journal (here: this test, through the same lock): the second is
    refused with the holder and the fix, and leaves the journal untouched."""
    import os

    from kfold.daemon.journal import writer_lock
    journal = tmp_path / "journal.db"
    make_journal(journal)
    before = hashlib.sha256(journal.read_bytes()).hexdigest()
    held = writer_lock(str(journal))
    try:
        proc = run_kfold(tmp_path, journal, 18098)
    finally:
        held.close()
    assert proc.returncode == 2, proc.stderr
    assert f"in use by another kfold run (pid {os.getpid()} on" in proc.stderr
    assert "one daemon per journal" in proc.stderr and "Traceback" not in proc.stderr
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == before
    again = writer_lock(str(journal))  # released with its holder: the next daemon may take it
    again.close()


def run_kfold(tmp_path, journal, port):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "x", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "cluster": {"name": "local", "kubeconfig": str(kubeconfig)}, "namespaces": ["ns"],
        "base_domain": "s.example.com", "journal": {"path": str(journal)}, "http": {"listen": f"127.0.0.1:{port}"}}))
    return subprocess.run([sys.executable, "-m", "kfold", "run", "--config", str(config)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
