"""The observer: one (cluster, kind) of the apiserver turned into journal drafts, forever.

Expected flow (``run()``, until cancelled):
1. Quorum LIST (``resourceVersion`` unset, so the answer is proof of absence). Every item this
   observer has not journaled at that uid and resourceVersion becomes an ``Observed`` ADDED draft
   (all of them at the first list of a process), followed by one ``Relist`` draft holding the
   complete key set; the fold treats every key it tracks that the Relist no longer holds as a
   suspect (``engine.machines.base.missing_after_relist``).
2. WATCH from the list's resourceVersion with ``allowWatchBookmarks=true``, the server-side
   ``timeoutSeconds`` and a client read timeout always set. ADDED/MODIFIED/DELETED become drafts;
   a BOOKMARK only moves the resume resourceVersion.
3. The stream ends normally (server timeout) -> re-watch from the last resourceVersion. An ERROR
   event with code 410, or a 410 answer to the watch request -> back to 1 (fresh list + Relist).
   Nothing at all (not even a bookmark) for ``idle_timeout_s`` -> the watch is restarted.
4. Any other failure backs off exponentially with jitter (``backoff=(floor, cap)``, reset after
   ``backoff_reset_s`` without failures); a 429 waits exactly its ``Retry-After`` when given.
5. ``may_be_absent`` (a kind whose CRD a cluster may lack, e.g. Repo): a 404 to the list or watch
   (the apiserver does not serve the resource) marks the observer ``absent``: one WARNING, no
   drafts, /readyz does not wait for it, and the list is retried every ``absent_recheck_s``
   (quietly) until the resource is served; then one INFO line and back to 1.

Guarantees:
- Every response's ``Date`` feeds the ``ServerClock``; every draft is stamped
  ``at=clock.now_ms()`` (``None`` while no Date was ever seen).
- Every object loses its ``metadata.managedFields`` (``object_trim``), then goes through
  ``redact(kind, obj)``, before it becomes a draft; with ``prepare`` (``kfold run``: the journal's
  ``prepare_one``) each draft is then prepared for the journal as soon as it is made, while its
  object is still in the CPU's cache, and the draft ``prepare`` returns is the one sunk.
- ``sink(drafts)`` is awaited before the resume resourceVersion moves past those events: a failed
  sink re-delivers them (the fold tolerates repeats by resourceVersion), never skips them. A watch
  that is behind keeps two batches in flight (the sink of one runs while the next is decoded);
  the resourceVersion moves past each only once its sink returned, in order.
- Drafts of one list arrive in order, with the Relist last.
- A relist journals only what changed: an item whose (uid, resourceVersion) equals the last
  ``Observed`` this observer journaled for its key (and no DELETED since) is in the Relist's keys
  but not journaled again. A resourceVersion names one version of one object (the API contract),
  so the fold has folded exactly that object already; an item without a resourceVersion is always
  journaled. The memory (``journaled``) holds only what a sink returned for, and after a list
  exactly the listed keys: a key the list lacks is the fold's to judge, and is journaled again if
  it ever reappears.
- Nothing else lists: there is no periodic resync. A watch that keeps going (events, bookmarks,
  renewals from the last resourceVersion) never relists; only a 410 (or a first start) does.
- Cancelling ``run()`` always ends it, also when a watch batch lands in the same instant (the
  pump's read must not use ``asyncio.wait_for``, which swallows such a cancel on Python 3.11).

Caveats:
- An apiserver without its watch cache (``--watch-cache=false``) sends no BOOKMARKs: the resume
  resourceVersion of a kind with no events stays at its list's until etcd compacts it (the
  apiserver compacts every 5 minutes by default), and the next renewal answers 410 and relists.
  With the watch cache (the apiserver's default) bookmarks about once a minute keep it current.
- ``journaled`` costs one entry per listed object (key, uid, resourceVersion).
- The LIST is not paginated (no ``limit``/``continue``): one response holds every object of the
  kind in scope. Fine for thousands of sessions; paginate before watching very large kinds.
- The blocking kubernetes client runs in worker threads (see ``watch`` for why).
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Awaitable, Callable

from urllib3 import BaseHTTPResponse
from urllib3.exceptions import ReadTimeoutError

from engine.effects.io.clock import ServerClock
from engine.effects.object_trim import without_managed_fields
from engine.effects.io.watch import (
    HttpStatusError, LinePump, Redactor, StreamEnd, decode_event, open_get, raise_for_status,
    read_json, resource_path,
)
from journal.records import ListedKey, Observed, Record, Relist, observed_draft

log = logging.getLogger("kfold.observer")
REMIND_S = 300.0   # an apiserver still unreachable is mentioned again at most this often
# cluster -> [monotonic time of the first failure, of the last line logged]: every observer of a
# cluster shares it, so an unreachable apiserver is one ERROR, not one per watch
_UNREACHABLE: dict[str, list[float]] = {}
_ANSWERED: dict[str, float] = {}   # cluster -> monotonic time it answered again after being unreachable

Sink = Callable[[list[Record]], Awaitable[Any]]
CHANGE_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
# Lines decoded and prepared between two turns of the event loop (~5 ms of work on a realistic Pod):
# with a batch committing meanwhile, its effects wait for the turn after it became durable.
YIELD_EVERY = 64
# A batch this large means the watch is behind (the reader merged what queued up while the last one
# committed): the next batch is decoded while it commits. A smaller one lands before the next is read,
# so a watch that keeps up never has its decoding delay the issuing of a commit's effects.
PIPELINE_FROM = 256


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


class Gone(Exception):
    """The resume resourceVersion is too old (410): only a fresh list can continue."""


class WatchError(Exception):
    """The watch stream said something we cannot continue from (ERROR event, bad line)."""


class WatchBackoff:
    """Exponential backoff with full jitter above a floor: attempt n waits uniformly in
    ``[floor, min(cap, floor * 2**(n+1))]``. The attempt count resets when the last failure is
    ``reset_after_s`` or more ago (a quiet period)."""

    def __init__(self, floor: float, cap: float, reset_after_s: float,
                 rng: Callable[[], float], monotonic: Callable[[], float]):
        self.floor, self.cap, self.reset_after_s = floor, cap, reset_after_s
        self._rng, self._monotonic = rng, monotonic
        self.attempt = 0
        self._last_failure: float | None = None

    def next_delay(self) -> float:
        now = self._monotonic()
        if self._last_failure is not None and now - self._last_failure >= self.reset_after_s:
            self.attempt = 0
        self._last_failure = now
        ceiling = min(self.cap, self.floor * 2 ** (self.attempt + 1))
        self.attempt = min(self.attempt + 1, 64)
        return self.floor + self._rng() * (ceiling - self.floor)


def default_redact() -> Redactor:
    """``journal.redact.redact`` when present; else a fallback that drops Secret payloads."""
    try:
        from journal.redact import redact  # type: ignore[import-not-found]
        return redact
    except ImportError:
        return _drop_secret_payload


def _drop_secret_payload(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    if kind != "Secret":
        return obj
    return {k: v for k, v in obj.items() if k not in ("data", "stringData")}


class Observer:
    """Lists then watches one kind on one cluster; see the module docstring for the contract.

    Counters (plain attributes, read by /metrics): ``events``, ``listed``, ``unchanged`` (listed,
    not journaled again), ``bookmarks``, ``relists``, ``restarts`` (by reason: timeout, idle, gone, throttled, error), ``failures``,
    ``watch_requests``; ``synced`` is True once the first list is journaled; ``progressed_at``
    (``monotonic``, None before the first list) when it last heard from the apiserver: a list
    journaled, a watch request answered, a batch of events or bookmarks read, a watch ended on time."""

    def __init__(self, client_factory: Callable[[], Any], cluster: str, api_version: str,
                 kind: str, plural: str, namespace: str, sink: Sink, clock: ServerClock,
                 redact: Redactor | None = None, idle_timeout_s: float = 70.0,
                 server_timeout_s: int = 300, read_timeout_s: float | None = None,
                 backoff: tuple[float, float] = (0.8, 30.0), label_selector: str = "", *,
                 connect_timeout_s: float = 10.0, backoff_reset_s: float = 60.0,
                 list_batch: int = 1000, optional: bool = False, may_be_absent: bool = False,
                 absent_recheck_s: float = 60.0, prepare: Callable[[Record], Record] | None = None,
                 rng: Callable[[], float] = random.random,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 monotonic: Callable[[], float] = time.monotonic, where: str = ""):
        self.client_factory, self.cluster, self.kind = client_factory, cluster, kind
        self.api_version, self.namespace, self.label_selector = api_version, namespace, label_selector
        self.path = resource_path(api_version, plural, namespace)
        self.sink, self.clock = sink, clock
        self.redact = redact or default_redact()
        self.prepare = prepare
        self.idle_timeout_s, self.server_timeout_s = idle_timeout_s, int(server_timeout_s)
        self.timeouts = (connect_timeout_s, read_timeout_s or idle_timeout_s + 5.0)
        self.backoff = WatchBackoff(backoff[0], backoff[1], backoff_reset_s, rng, monotonic)
        self.list_batch, self._sleep, self._monotonic = list_batch, sleep, monotonic
        self.progressed_at: float | None = None
        self._sent_at = 0.0   # monotonic time the last GET was sent
        self.where = where   # how the cluster was reached, for messages ("context kind-dev of ~/.kube/config")
        self.rv = ""
        self.synced = False
        self.optional = optional          # /readyz does not wait for it (e.g. Repos on a registered cluster)
        self.problem: str | None = None   # a refusal only an operator can fix (shown by /readyz)
        self.may_be_absent, self.absent_recheck_s = may_be_absent, absent_recheck_s
        self.absent = False               # the apiserver does not serve the kind (``may_be_absent`` only)
        self.events = self.listed = self.bookmarks = self.relists = self.watch_requests = 0
        self.failures = 0
        self.restarts: dict[str, int] = {}
        self._api: Any = None
        self._inflight: tuple[asyncio.Future, str, list[Record]] | None = None   # (sink's task, rv after it, drafts)
        # (namespace, name) -> (uid, resourceVersion) of the last Observed journaled (sink returned) for it
        self.journaled: dict[tuple[str, str], tuple[str, str]] = {}
        self.unchanged = 0   # listed items not journaled again (see the module docstring)

    # -- the loop ---------------------------------------------------------------------------
    async def run(self) -> None:
        """List, then watch, forever. Returns only by cancellation."""
        self._api = self.client_factory()
        self.problem = None
        must_list, gone_in_a_row = True, 0
        while True:
            try:
                if must_list:
                    await self._list_and_relist()
                    must_list = False
                self._restart(await self._watch_once())
                gone_in_a_row = 0
            except Gone:
                self._restart("gone")
                must_list, gone_in_a_row = True, gone_in_a_row + 1
                if gone_in_a_row > 1:  # gone right after a fresh list: do not spin
                    await self._sleep(self.backoff.next_delay())
            except HttpStatusError as exc:
                if exc.code == 404 and self.may_be_absent:
                    await self._not_served()
                    must_list = True
                    continue
                await self._after_failure(exc, "throttled" if exc.code == 429 else "error")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # transport errors, bad lines, ERROR events: back off
                await self._after_failure(exc, "error")

    async def _after_failure(self, exc: BaseException, reason: str) -> None:
        self.failures += 1
        self._restart(reason)
        delay = self.backoff.next_delay()
        if isinstance(exc, HttpStatusError) and exc.code == 429 and exc.retry_after_s is not None:
            delay = exc.retry_after_s
        self.problem = self._explain(exc)
        if self.problem is None and _is_transport(exc):
            self._unreachable(exc, delay)
            await self._sleep(delay)
            return
        log.log(logging.ERROR if self.problem else logging.WARNING,
                "observer %s/%s %s: %s; retrying in %.2fs", self.cluster, self.kind, reason,
                self.problem or exc, delay, extra={"cluster": self.cluster, "kind": self.kind})
        await self._sleep(delay)

    async def _not_served(self) -> None:
        if not self.absent:
            log.warning("observer %s/%s: the apiserver does not serve %s (%s; its CRD is not installed): "
                        "running without it, checking again every %ss", self.cluster, self.kind, self.kind,
                        self.api_version, self.absent_recheck_s, extra={"cluster": self.cluster, "kind": self.kind})
        self.absent, self.problem = True, None
        self._restart("absent")
        await self._sleep(self.absent_recheck_s)

    def _explain(self, exc: BaseException) -> str | None:
        """A refusal an operator must fix (kfold keeps retrying, and /readyz shows this line)."""
        if not isinstance(exc, HttpStatusError) or exc.code not in (403, 404):
            return None
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        if exc.code == 404 and "/" not in self.api_version:
            return (f"the server at {self._server()} does not serve {self.kind} ({self.api_version}), a built-in "
                    f"kind: it is not a Kubernetes apiserver; point the kubeconfig's server and context at one")
        if exc.code == 404:
            return (f"the apiserver does not serve {self.kind} ({self.api_version}): its CRD is not "
                    f"installed; install kfold's CRDs with `kfold manifests | kubectl apply -f -`")
        return (f"kfold may not list/watch {self.kind} in {where} ({exc.message or exc.reason}); grant it "
                f"with kfold's RBAC (`kfold manifests`) or remove the namespace from `namespaces`")

    def _server(self) -> str:
        return str(getattr(getattr(self._api, "configuration", None), "host", "") or "?")

    def _unreachable(self, exc: BaseException, delay: float) -> None:
        """One ERROR per cluster when its apiserver cannot be reached, a WARNING every ``REMIND_S``
        while it stays so, DEBUG otherwise; ``_reached`` says when it answers again."""
        from engine.effects.io.kube_errors import transport_reason
        now, why = self._monotonic(), transport_reason(exc)
        where = f"{self._server()}" + (f" ({self.where})" if self.where else "")
        extra = {"cluster": self.cluster, "server": self._server()}
        seen = _UNREACHABLE.get(self.cluster)
        if seen is None and self._sent_at <= _ANSWERED.get(self.cluster, float("-inf")):
            log.debug("observer %s/%s: %s (sent before the apiserver answered again); retrying in %.2fs",
                      self.cluster, self.kind, why, delay, extra=extra)
        elif seen is None:
            _UNREACHABLE[self.cluster] = [now, now]
            log.error("cannot reach the apiserver of cluster %s at %s: %s; retrying quietly with backoff "
                      "(a reminder every %.0fs); check the kubeconfig's server and context, and the network",
                      self.cluster, where, why, REMIND_S, extra=extra)
        elif now - seen[1] >= REMIND_S:
            seen[1] = now
            log.warning("still cannot reach the apiserver of cluster %s at %s: %s (for %.0fs)",
                        self.cluster, where, why, now - seen[0], extra=extra)
        else:
            log.debug("observer %s/%s: %s; retrying in %.2fs", self.cluster, self.kind, why, delay, extra=extra)

    def _reached(self) -> None:
        seen = _UNREACHABLE.pop(self.cluster, None)
        if seen is not None:
            _ANSWERED[self.cluster] = self._monotonic()
            log.info("the apiserver of cluster %s at %s answers again (unreachable for %.0fs)", self.cluster,
                     self._server(), self._monotonic() - seen[0], extra={"cluster": self.cluster})

    def _restart(self, reason: str) -> None:
        self.restarts[reason] = self.restarts.get(reason, 0) + 1

    # -- list -------------------------------------------------------------------------------
    async def _list_and_relist(self) -> None:
        body = await asyncio.to_thread(self._get_json, self._list_query())
        items = body.get("items") or []
        rv = (body.get("metadata") or {}).get("resourceVersion", "")
        drafts = self.list_drafts(items, rv, self.clock.now_ms())
        for start in range(0, len(drafts), self.list_batch):
            await self.sink(drafts[start:start + self.list_batch])
            self.remember(drafts[start:start + self.list_batch])
        if self.absent:
            log.info("observer %s/%s: the apiserver serves %s now", self.cluster, self.kind, self.kind,
                     extra={"cluster": self.cluster, "kind": self.kind})
        self.rv, self.synced, self.problem, self.absent = rv, True, None, False
        self.progressed_at = self._monotonic()
        self.listed += len(items)
        self.relists += 1

    def list_drafts(self, items: list[dict[str, Any]], rv: str, at: int | None) -> list[Record]:
        """The drafts of one list answered at ``rv``: an ``Observed`` ADDED for each item not
        ``journaled`` at its uid and resourceVersion, then the ``Relist`` of every listed key."""
        keys = tuple(_listed_key(i) for i in items)
        drafts: list[Record] = [self._observed("ADDED", self._with_type(i), at)
                                for i, k in zip(items, keys) if not self._known(k)]
        self.unchanged += len(items) - len(drafts)
        drafts.append(Relist(at=at, cluster=self.cluster, api_version=self.api_version,
                             kind=self.kind, scope=self.namespace, rv=rv, keys=keys))
        return drafts

    def _known(self, key: ListedKey) -> bool:
        """The listed item is the version this observer last journaled for its key."""
        return bool(key.rv) and self.journaled.get((key.namespace, key.name)) == (key.uid, key.rv)

    def remember(self, drafts: list[Record]) -> None:
        """``drafts`` are journaled (their sink returned): ``journaled`` holds the last version of
        each key, none after a DELETED, and after a ``Relist`` exactly the keys it lists."""
        for d in drafts:
            if isinstance(d, Relist):
                self.journaled = {(k.namespace, k.name): (k.uid, k.rv) for k in d.keys if k.rv}
            elif isinstance(d, Observed) and d.event == "DELETED":
                self.journaled.pop((d.namespace, d.name), None)
            elif isinstance(d, Observed):
                self.journaled[(d.namespace, d.name)] = (d.uid, d.rv)

    def _list_query(self) -> list[tuple[str, Any]]:
        return [("labelSelector", self.label_selector)] if self.label_selector else []

    def _with_type(self, item: dict[str, Any]) -> dict[str, Any]:
        if "kind" in item and "apiVersion" in item:
            return item
        return {"apiVersion": self.api_version, "kind": self.kind, **item}

    # -- watch ------------------------------------------------------------------------------
    async def _watch_once(self) -> str:
        """One watch request; returns why it ended normally ("timeout" or "idle")."""
        self.watch_requests += 1
        try:
            resp = await asyncio.to_thread(self._get, self._watch_query())
        except HttpStatusError as exc:
            if exc.code == 410:
                raise Gone(str(exc)) from None
            raise
        self.progressed_at = self._monotonic()
        pump = LinePump(resp, asyncio.get_running_loop(), name=f"{self.cluster}-{self.kind}").start()
        try:
            return await self._consume(pump)
        finally:
            pump.close()

    async def _consume(self, pump: LinePump) -> str:
        try:
            while True:
                try:
                    item = await pump.next(self.idle_timeout_s)
                except asyncio.TimeoutError:
                    await self._land()
                    return "idle"
                if isinstance(item, StreamEnd):
                    await self._land()
                    return self._ended(item)
                await self._handle_lines(item)
        finally:
            self._abandon()

    def _ended(self, end: StreamEnd) -> str:
        if end.error is None:
            self.progressed_at = self._monotonic()
            return "timeout"
        if isinstance(end.error, ReadTimeoutError):  # the client read timeout: silence too long
            return "idle"
        raise end.error

    def _watch_query(self) -> list[tuple[str, Any]]:
        query = [("watch", "true"), ("resourceVersion", self.rv), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(self.server_timeout_s))]
        return query + self._list_query()

    async def _handle_lines(self, lines: list[bytes]) -> None:
        self.progressed_at = self._monotonic()
        drafts: list[Record] = []
        rv, at = self._inflight[1] if self._inflight else self.rv, self.clock.now_ms()
        for i, line in enumerate(lines):
            if i and not i % YIELD_EVERY:   # let a commit that became durable meanwhile issue its effects
                await asyncio.sleep(0)
            kind, obj = decode_event(line)
            if kind in CHANGE_TYPES:
                drafts.append(self._observed(kind, obj, at))
                rv = drafts[-1].rv or rv
            elif kind == "BOOKMARK":
                self.bookmarks += 1
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
            else:
                await self._flush(drafts, rv)
                await self._land()
                raise self._error_event(kind, obj)
        await self._flush(drafts, rv)

    async def _flush(self, drafts: list[Record], rv: str) -> None:
        """Hand ``drafts`` (the events up to ``rv``) to the sink, then wait for the batch handed
        before them: when the watch is behind (``PIPELINE_FROM``), two batches in flight, so the
        next batch is decoded and prepared while this one commits (waiting for each commit left
        the loop thread idle a quarter of the time under a flood); else this batch lands first.
        The resume resourceVersion moves past a batch only once its sink returned, in order; a
        batch without drafts (bookmarks) moves it once everything before it landed."""
        before, self._inflight = self._inflight, None
        if drafts:
            self._inflight = (asyncio.ensure_future(self.sink(drafts)), rv, drafts)
        if before is not None:
            await self._landed(before)
        if self._inflight is not None and len(drafts) < PIPELINE_FROM:
            await self._land()   # a watch that keeps up: each batch lands before the next is read
        if self._inflight is None:
            self.rv = rv

    async def _land(self) -> None:
        """Wait for the batch in flight (the stream ended, went idle or said something to stop on)."""
        before, self._inflight = self._inflight, None
        if before is not None:
            await self._landed(before)

    async def _landed(self, batch: tuple[asyncio.Future, str, list[Record]]) -> None:
        await asyncio.shield(batch[0])   # a cancel leaves the sink running (and its outcome retrieved)
        self.rv = batch[1]
        self.events += len(batch[2])
        self.remember(batch[2])

    def _abandon(self) -> None:
        """A watch that ends by an exception (or a cancel) leaves its batch in flight unwaited: the
        resume resourceVersion stays before it (re-delivered by the next watch: the fold tolerates
        repeats) and its outcome is retrieved when it comes, never left unread."""
        batch, self._inflight = self._inflight, None
        if batch is not None:
            batch[0].add_done_callback(_retrieve)

    @staticmethod
    def _error_event(kind: str, obj: dict[str, Any]) -> Exception:
        if kind == "ERROR" and obj.get("code") == 410:
            return Gone(obj.get("message", "resourceVersion too old"))
        return WatchError(f"watch event {kind!r}: {obj.get('code', '')} {obj.get('reason', '')} "
                          f"{obj.get('message', '')}".strip())

    # -- helpers ----------------------------------------------------------------------------
    def _get(self, query: list[tuple[str, Any]]) -> BaseHTTPResponse:
        """Blocking GET in a worker thread: feeds the clock from any answer, raises on non-2xx."""
        self._sent_at = self._monotonic()
        resp = open_get(self._api, self.path, query, self.timeouts)
        if self.cluster in _UNREACHABLE:
            self._reached()
        self.clock.observe(resp.headers.get("Date"))
        raise_for_status(resp)
        return resp

    def _get_json(self, query: list[tuple[str, Any]]) -> dict[str, Any]:
        return read_json(self._get(query))

    def _observed(self, event: str, obj: dict[str, Any], at: int | None) -> Observed:
        obj = without_managed_fields(obj)
        md = obj.get("metadata") or {}
        rec = observed_draft(at, self.cluster, obj.get("apiVersion", self.api_version), self.kind,
                             md.get("namespace", ""), md.get("name", ""), md.get("uid", ""),
                             md.get("resourceVersion", ""), event, self.redact(self.kind, obj))
        return rec if self.prepare is None else self.prepare(rec)


def _listed_key(item: dict[str, Any]) -> ListedKey:
    md = item.get("metadata") or {}
    return ListedKey(namespace=md.get("namespace", ""), name=md.get("name", ""), uid=md.get("uid", ""),
                     rv=md.get("resourceVersion", ""))


def _is_transport(exc: BaseException) -> bool:
    """A failure to reach the apiserver at all (refused, reset, DNS, TLS, timeout), not an answer."""
    from engine.effects.io.kube_errors import _TRANSPORT
    return isinstance(exc, _TRANSPORT) and not isinstance(exc, ReadTimeoutError)
