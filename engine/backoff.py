"""The one retry policy of the fold, and every bound on how a request is repeated.

One loop per request. A safe request (a read, a replace, a patch, a delete fenced by uid) has one
attempt counter (the fold's ``Pending.attempt``) and one schedule, ``delay_ms``: its first
``EXECUTOR_ATTEMPTS`` transient answers are retried by the executor's journaled decision (the
effect's ``safe_to_retry`` is the handler's standing "retry"; ``engine.effects.io.executor.Backoff``
adds jitter); the answer after them goes to the handler, which says only whether the failure is
terminal (it decides something else) or worth a retry. "Retry" is ``Ctx.retry(policy)``: the same
effect, same id, goes again as the next attempt of that same loop, when ``next_try`` says: the count
and the schedule go on, they never start over, and no request is ever sent again as a new one
because its answer was transient. An unsafe request (a create, an unfenced delete) is never
repeated by the executor; its handler re-observes, or creates again on its own ``Policy`` below
(``SESSION_CREATE``, ``POD_CREATE``), one loop too.

Guarantees:
- Failure ``n`` (1 for the first) of a request waits ``delay_ms(n + policy.step)`` ms of server
  time, or the server's own ``Retry-After`` (``hint_ms``) when it gave one: ``min(BASE_MS * 2**i,
  CAP_MS)``. Pure: the due time is on the clock of the cluster the request goes to; the fold never
  reads a clock.
- A request with a ``limit`` is terminal at its ``limit``-th failure, whatever the clock.
- Without server time there is nothing to wait on: a timed request is repeated at once at most
  ``policy.untimed`` times, then it fails (``then == FAIL``) or waits for the next record about
  its object (``then == WAIT``). An untimed policy (``timed`` False) repeats at once up to its limit.
"""
from __future__ import annotations

from typing import NamedTuple

BASE_MS = 1_000
CAP_MS = 30_000
MAX_UNTIMED = 5
EXECUTOR_ATTEMPTS = 6   # a safe effect's transient answers, repeated by the executor (journaled) before a machine sees one

AT_ONCE = "at once"     # send it again now
FAIL = "fail"           # terminal: the handler reports the failure
WAIT = "wait"           # nothing to wait on: the next record about the object decides


class Policy(NamedTuple):
    """How one kind of request is repeated after a failed answer."""

    name: str
    limit: int | None = None          # terminal at this failure (None: the operation's budget bounds it)
    timed: bool = True                # repeats wait on server time when the record carries one
    untimed: int | None = MAX_UNTIMED  # without server time: at most this many repeats at once (None: no bound)
    then: str = FAIL                  # after the untimed repeats: FAIL or WAIT
    step: int = -1                    # failure n waits delay_ms(n + step)


# Every request a machine repeats, with its bounds. A safe request's failures count its executor's
# attempts too (the first the handler hears is failure EXECUTOR_ATTEMPTS).
POD_READ = Policy("pod quorum read")                                    # the operation's budget bounds it
STATUS_WRITE = Policy("Session status write", then=WAIT)               # without server time: the next decision writes
OWNED = Policy("owned object read or fenced delete")                    # Secret, claim: teardown and drops
NAMESPACE = Policy("namespace ensure", limit=EXECUTOR_ATTEMPTS + 4, untimed=None, step=0)
SESSION_REREAD = Policy("Session re-read", then=WAIT)
SESSION_CREATE = Policy("Session Secret or workspace claim create")
POD_CREATE = Policy("pod create refused until its ServiceAccount exists")  # the create's budget bounds it
REPO_OP = Policy("Repo operation", limit=3, timed=False)                # in doubt, or absent after a patch
REPO_REQUEST = Policy("Repo read or patch", limit=EXECUTOR_ATTEMPTS + 2)  # a safe request's transient answers
ENDPOINT = Policy("Service or Ingress upsert", limit=4, timed=False)   # conflicts, and an unsafe create's or delete's
#   transient: a safe read's or replace's transient comes after EXECUTOR_ATTEMPTS and is not repeated
BLOCKED_TEARDOWN_MS = 60_000    # a teardown blocked by a failed pod delete asks again this much later


def delay_ms(n: int, hint_ms: int | None = None) -> int:
    """How long repeat ``n`` (0-based) of a request waits."""
    return hint_ms or min(BASE_MS * 2 ** max(n, 0), CAP_MS)


def next_try(policy: Policy, failures: int, now: int | None = None, hint_ms: int | None = None) -> int | str:
    """When a request that has met ``failures`` failed answers is sent again: a due time (server
    ms, on the clock ``now`` was read from), ``AT_ONCE``, ``FAIL`` or ``WAIT``."""
    if exhausted(policy, failures):
        return FAIL
    if policy.timed and now is not None:
        return now + delay_ms(failures + policy.step, hint_ms)
    if not policy.timed or policy.untimed is None or failures <= policy.untimed:
        return AT_ONCE
    return policy.then


def exhausted(policy: Policy, failures: int) -> bool:
    """The request has met its limit: terminal, whatever the clock."""
    return policy.limit is not None and failures >= policy.limit
