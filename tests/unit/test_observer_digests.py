"""``kfold run``'s observers redact with the journal's salt: an equal value gives an equal digest
across restarts, and the digest an observer computes is the one the journal stores (issue 12
item 5: the daemon wrapped the SQLite journal in an adapter with no ``redactor``, so observers fell
back to ``journal.redact.redact`` and its per-process random salt)."""
from __future__ import annotations

from engine.effects.io.clock import ServerClock
from journal.records import Observed
from kfold.daemon.config import Config
from kfold.daemon.loop import Daemon
from kfold.daemon.boot import make_observers
from kfold.daemon.journal import open_journal

SECRET = {"apiVersion": "v1", "kind": "Secret",
          "metadata": {"name": "s-env", "namespace": "work", "uid": "u1", "resourceVersion": "3"},
          "data": {"TOKEN": "aHVudGVyMg=="}}
CFG = Config(namespaces=("work",), base_domain="sessions.example.com")


async def one_run(path: str) -> tuple[str, str]:
    """Boot's observers on the journal at ``path``: the digest the Secret observer makes, and the
    one the journal stores for the same object."""
    journal = open_journal(path)
    await journal.open()
    try:
        daemon = Daemon(journal, lambda sink: None, ServerClock())
        observers = make_observers(CFG, daemon, None, daemon.clock)
        assert observers and len({o.redact for o in observers}) == 1
        seen = observers[0].redact("Secret", SECRET)["data"]["TOKEN"]
        (stored,) = await journal.append([Observed(cluster="local", api_version="v1", kind="Secret",
                                                   namespace="work", name="s-env", event="ADDED", obj=SECRET)])
    finally:
        await journal.close()
    return seen, stored.obj["data"]["TOKEN"]


async def test_equal_values_give_equal_digests_across_a_restart(tmp_path):
    path = str(tmp_path / "journal.db")
    first, second = await one_run(path), await one_run(path)
    assert first[0].startswith("redacted:") and "aHVudGVyMg" not in first[0]
    assert first[0] == first[1]                 # what the observer computes is what the journal keeps
    assert first == second                      # and a restart computes the same
