"""When ``kfold run`` asks for the orphan Secret sweep (``pod.sweep_secrets``): after a reason.

What the sweep is for (``engine.machines.pod.sweep``, seed 001): a Session's Secret that outlived
every pod of its Session, older than ``sweep.grace_seconds`` on the apiserver's clock, is deleted
(fenced by uid); its list also tells each Session a Secret an earlier spec made
(``engine.machines.session.secret``). Such a Secret is left only by a Secret write whose follow-up
never came: kfold's own create or replace landing after its Session went (a re-sent create after a
takeover, a crash between the Secret and the pod), or a previous life of kfold whose journal this
one does not hold (a lost journal, another replica's term). A restart on its own journal knows
every write of its previous life: each one without an outcome is in doubt and re-observed by its
machine (``kfold.daemon.loop``), so it needs no sweep.

Rules (``SweepSchedule``; times are the daemon's monotonic clock: they choose when to ask, the
fold decides with the list's server time):
- Reasons: a Secret create, replace or patch kfold sent in a namespace (``secret_written``); a
  fresh journal at boot, and a leadership term that began (``everywhere``: every namespace swept).
- A namespace is swept at the first tick at least ``grace + slack`` after its latest reason not
  yet covered (a Secret written then is past its grace by that list; ``slack`` covers a request
  landing after it was sent); one sweep covers every reason up to ``grace + slack`` before it.
- Every ``resync_s`` (``sweep.resync_seconds``, default 10 hours as controller-runtime's
  ``SyncPeriod``) every namespace is swept whatever happened: the safety net for what no reason
  names (e.g. a sweep whose list failed; its machine logs it).
- Ticks come every ``sweep.interval_seconds``; at rest (no reason) a tick sends nothing.

Caveat: a reason is covered by the sweep issued for it even if that sweep's list fails; the next
reason or the resync sweeps again.
"""
from __future__ import annotations

from typing import Any, Iterable

Where = tuple[str, str]   # (cluster, namespace)
SLACK_S = 60.0
_WRITES = frozenset({"create", "replace", "patch"})


class SweepSchedule:
    """Which namespaces the orphan Secret sweep lists at a tick; see the module docstring."""

    def __init__(self, grace_s: float, resync_s: float, now: float, slack_s: float = SLACK_S):
        self.wait_s, self.resync_s = grace_s + slack_s, resync_s
        # per namespace: (the oldest reason not yet covered, the latest reason)
        self._reasons: dict[Where, tuple[float, float]] = {}
        self._everywhere: float | None = None   # applied to every namespace of the next tick
        self._resynced = now

    def secret_written(self, effect: Any, now: float) -> None:
        """``effect`` went to the executor: a Secret create, replace or patch is a reason there."""
        if getattr(effect, "kind", "") == "Secret" and getattr(effect, "type", "") in _WRITES:
            self._note((effect.cluster, effect.namespace), now)

    def everywhere(self, now: float) -> None:
        """A reason in every namespace (a fresh journal, a term begun)."""
        self._everywhere = now if self._everywhere is None else min(self._everywhere, now)

    def due(self, where: Iterable[Where], now: float) -> list[Where]:
        """The namespaces of ``where`` to sweep at this tick. A sweep covers the reasons at least
        ``grace + slack`` before it; a later one waits to be covered by the next sweep."""
        where = list(where)
        if self._everywhere is not None:
            for w in where:
                self._note(w, self._everywhere)
            self._everywhere = None
        ripe = now - self.wait_s
        if now - self._resynced >= self.resync_s:
            self._resynced, out = now, where
        else:
            out = [w for w in where if w in self._reasons and self._reasons[w][0] <= ripe]
        for w in out:
            latest = self._reasons.pop(w, (ripe, ripe))[1]
            if latest > ripe:
                self._reasons[w] = (latest, latest)
        return out

    def _note(self, w: Where, t: float) -> None:
        oldest, latest = self._reasons.get(w, (t, t))
        self._reasons[w] = (min(oldest, t), max(latest, t))
