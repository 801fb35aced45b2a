"""The daemon's journal: the contract-tested one (``journal.sqlite.SqliteJournal``) and the lock
that keeps one ``kfold run`` per journal file (its size for /metrics is ``Journal.stats``).

There is one journal interface, ``journal.store.Journal`` (``tests/contract/test_journal_contract.py``
runs the same contract over ``SqliteJournal`` and ``journal.memory.MemoryJournal``); the daemon
uses it as is. In particular the observers redact with the journal's own ``redactor`` (keyed with
the salt stored in the journal), so an equal value gives an equal digest before and after a
restart, and the digest an observer computes is the one the journal stores.
"""
from __future__ import annotations

import fcntl
import os
import socket
from typing import IO

from journal.sqlite import SqliteJournal
from journal.store import JournalError


def open_journal(path: str) -> SqliteJournal:
    """The SQLite journal at ``path`` (not yet opened); its directory is created."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return SqliteJournal(path)


def writer_lock(path: str) -> IO[str]:
    """Hold an exclusive lock on ``<path>.lock`` for as long as the returned file stays open.

    Two daemons on one journal would both act on the cluster before the store's primary key
    stopped one of them at its first append (deletes included). So ``kfold run`` takes this lock
    before it reads anything; a second one is refused with the holder's pid and host and the fix.
    Caveat: ``flock`` binds processes sharing one kernel and a local filesystem (two containers on
    one node mounting the same volume included), not over NFS: keep the journal on a local volume.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lock = open(f"{path}.lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "a process that left no pid"
        lock.close()
        raise JournalError(f"is in use by another kfold run ({holder}); one daemon per journal: stop that "
                           f"one first, or give this one its own journal.path") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    lock.flush()
    return lock
