"""Registrations followed while kfold runs: a cluster registered or deregistered with ``kfold
cluster`` is picked up without a restart.

Expected flow: ``kfold run`` builds a ``Follower`` from the registrations it booted with, calls
``start()`` (the watches of those targets) and spawns ``Follower.run()``; every ``registry.rescan_seconds`` it re-reads the registry (the index files
``kfold cluster register`` writes; credentials are read when a client is built).

Guarantees, when the set of registrations (handle, tenant, bound namespaces) changed:
- A fresh ``session.configure`` is journaled first: the same command a restart appends, so the
  fold learns of the change at one point in the journal, Sessions waiting for a cluster are decided
  again, and a replay sees exactly what the daemon saw.
- With it, each new target's Repo statements (``repo.bind``, ``repo.reconcile_bound``) are
  journaled, as boot journals them for the targets it read.
- Then the observers follow: kfold's pods and Repos are watched on every new registered target
  (from a fresh list, journaled as a relist), and the observers of a target no longer registered are stopped.
  ``observers`` is the daemon's live list (``/readyz`` and ``/metrics`` read it), changed in place.
- The orphan-Secret sweep reads ``Follower.remote`` at each run, so it follows the same targets.
- An unreadable registry (a half-written file, a permission error) is logged with the reason and the
  registrations read before are kept; nothing is journaled for it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from engine.seams import SeamError
from journal.records import Command

log = logging.getLogger("kfold.daemon")

WatchTarget = tuple[str, str, str, str]   # (handle, tenant, name, namespace)


class Follower:
    def __init__(self, daemon: Any, registry: Any, interval_s: float,
                 read: Callable[[Any], tuple[dict[str, Any], list[WatchTarget]]],
                 configure: Callable[[dict[str, Any]], Command],
                 observe: Callable[[list[WatchTarget]], list[Any]], observers: list[Any],
                 initial: tuple[dict[str, Any], list[WatchTarget]] | None = None,
                 bind: Callable[[list[WatchTarget]], list[Command]] = lambda _targets: []):
        """``read(registry)`` -> (``session.configure`` tenancy args, remote targets);
        ``configure(args)`` -> the command to journal; ``bind(new targets)`` -> their Repo
        statements (``repo.bind``, as boot journals them for the targets it read);
        ``observe(targets)`` -> new observers; ``initial``: what boot journaled and watches (the
        same read), else read now."""
        self.daemon, self.registry, self.interval_s = daemon, registry, interval_s
        self._read, self._configure, self._observe, self._bind = read, configure, observe, bind
        self.observers = observers
        self.args, self.remote = initial if initial is not None else read(registry)
        self._running: dict[tuple[str, str], tuple[Any, asyncio.Task]] = {}
        self.changes = 0

    def start(self) -> None:
        """Watch the registered targets read at boot (before the first rescan)."""
        self._follow(self.remote)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.check()

    async def check(self) -> bool:
        """Re-read the registry; act on a change. True when something changed."""
        try:
            args, remote = self._read(self.registry)
        except Exception as exc:  # keep serving the registrations read before
            log.warning("cannot re-read the cluster registry (%s); keeping the %d registrations read before",
                        exc, len(self.args.get("registered", ())))
            return False
        if args == self.args and remote == self.remote:
            return False
        fresh = [t for t in remote if t not in self.remote]
        try:
            await self.daemon.submit([self._configure(args), *self._bind(fresh)])
        except SeamError:  # refused and logged by the daemon, nothing journaled: keep what was read before
            return False
        self.args, self.remote = args, remote
        self._follow(remote)
        self.changes += 1
        log.info("cluster registrations changed: now %s",
                 ", ".join(r["handle"] for r in args.get("registered", ())) or "none")
        return True

    def _follow(self, remote: list[WatchTarget]) -> None:
        wanted = {(handle, ns): (handle, tenant, name, ns) for handle, tenant, name, ns in remote}
        for key in [k for k in self._running if k[:2] not in wanted]:
            observer, task = self._running.pop(key)
            task.cancel()
            if observer in self.observers:
                self.observers.remove(observer)
        watched = {k[:2] for k in self._running}
        fresh = [t for k, t in wanted.items() if k not in watched]
        for observer in self._observe(fresh):
            task = self.daemon.spawn(observer.run(), f"observe:{observer.cluster}:{observer.kind}:{observer.namespace}")
            self._running[(observer.cluster, observer.namespace, observer.kind)] = (observer, task)
            self.observers.append(observer)
