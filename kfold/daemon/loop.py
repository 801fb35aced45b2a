"""The daemon loop: drafts in, journal first, fold, effects journaled, then executed.

Expected flow (one committer task owns the journal and the state):
  drafts (observers, executor outcomes, deadlines, commands; everything waiting is taken as one
  batch) -> ``journal.seal`` (numbered, redacted, chained) -> fold each sealed record -> for each
  touched key's fresh head ``EffectIssued`` sealed and folded -> ``journal.flush``: ONE
  transaction, one fsync, for the batch and the effects it issued -> only once it is durable are
  those effects handed to the executor. The committer folds the next batch while a transaction
  commits (at most two in flight: the one committing, the one queued behind it); effects go out in
  transaction order.

Crash recovery (``recover``), before any observer or executor runs:
  1. latest snapshot + fold of the journal tail (the tail's effects are NOT re-run);
  2. every issued effect without an outcome is in doubt: ``Command("effect.in_doubt")`` is
     appended for each, before anything else, so its machine re-observes (quorum read);
  3. every effect the fold emitted that was never journaled as issued (a crash between fold and
     ``EffectIssued``, or held behind an earlier effect of its key) was never sent: it is issued
     now if it heads its key, else it keeps waiting its turn; a journaled retry waits for its
     ``not_before`` (the ticker) and keeps holding its key — none of these is an unsafe effect
     repeated blindly;
  4. then boot commands, observers (fresh lists), the ticker and periodic commands start. The
     ticker issues nothing until recovery is done.

Order per object key (``engine.effects.timers``): the daemon issues (journals ``EffectIssued``,
then submits) only the oldest pending effect of each key, so at most one effect per key is in the
executor. A later effect stays pending and unissued until every earlier effect of its key has its
final outcome folded — including one waiting for a retry, which the ticker re-issues when due.
The rule reads only the fold's pending map (journaled, snapshotted), so it holds across restarts.

Guarantees:
- Journal first: an effect is submitted (and a ``Log`` written) only after its cause records and
  its ``EffectIssued`` are durable (they are one transaction). The fold runs ahead of the disk
  (``Journal.seal``): nothing leaves the process on account of a record before its transaction
  committed, and a failed transaction stops the committer (the state is ahead of the journal: it
  is dropped; the next start folds the journal again). A submitter's ``submit`` returns once its
  records are durable.
- An effect is submitted exactly once per ``EffectIssued`` that flipped it to issued.
- Retries: a clocked retry is re-issued when the server clock passes its ``not_before``; an
  unclocked one (its outcome had no server time) after its ``retry_after_ms`` on the monotonic
  clock. With no server clock reading the ticker sleeps (``MAX_SLEEP_S`` at most); it never spins.
- Latency (``metrics``, the daemon's monotonic clock, never the fold's): each inbox entry carries
  when it arrived; folding its records, issuing the effects they emitted and getting those
  effects' outcomes back feed the histograms of ``kfold.daemon.metrics.Metrics``; each fold's Session
  decisions before and after feed its time to Ready and failures (``BringUps``, server clock).
- Leadership (``gate``, set when ``leader.enabled``; ``kfold.daemon.leader``): an effect is journaled as
  issued only while ``gate()`` gives a term, and carries it (``EffectIssued.term``); without one
  (standby, or the term fenced) keys are held and the ticker's retries wait. ``resume()`` (a term
  began) first puts every effect held since in doubt (its machine re-observes), then releases.
  With shards (``shards``, ``leader.shards`` > 1; ``kfold.daemon.shards``) the same per shard: an effect
  goes out only under its shard's term (``EffectIssued.shard``), held keys wait per shard, and
  ``resume(acquired)`` re-observes only what was held for the shards acquired.
- ``stop()`` (SIGTERM): observers stop, in-flight effects finish (bounded wait) and their outcomes
  are committed, a snapshot is written and the journal closed.
- Snapshots follow ``snapshots`` (``journal.retention.SnapshotPolicy``: by record bytes against the
  last snapshot's size, and optionally a record count); the journal applies its retention policy
  after each one it stores.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from functools import partial
from typing import Any, Callable, Iterable, Iterator

from engine import snapshot
from engine.core import Machines, State, default_machines, fold, fold_many, initial_state
from engine.effects.io.clock import ServerClocks
from engine.effects.models import effect_to_dict
from engine.effects.timers import PendingIndex, Ticker, ready_to_issue, seq_key
from engine.seams import SeamError, check_command
from journal.records import Command, Deadline, EffectIssued, Observed, Outcome, Relist
from journal.chain import JournalError, kfold_version
from journal.retention import SnapshotPolicy
from kfold.daemon import gc_policy
from kfold.daemon.shards import held_effects

_PLAIN = (Observed, Relist, Deadline)  # records that touch no pending effect (see Daemon._fold)
log = logging.getLogger("kfold.daemon")
MAX_BATCH = 512


def _stored_state(journal: Any, snap: tuple[int, bytes], machines: Machines) -> State:
    """The state of the snapshot recovery starts from; ``JournalError`` (kfold refuses to start,
    having written nothing) for one this kfold cannot read: a newer format, a missing migration."""
    where = str(getattr(journal, "path", "the journal"))
    try:
        return snapshot.load_stored(snap[0], snap[1], where, kfold_version(), machines)
    except snapshot.SnapshotFormatError as exc:
        raise JournalError(str(exc)) from None


class Daemon:
    def __init__(self, journal: Any, executor_factory: Callable[[Any], Any], clock: Any, *,
                 machines: Machines | None = None, snapshot_every: int | None = None, metrics: Any = None,
                 monotonic: Callable[[], float] = time.monotonic, snapshots: SnapshotPolicy | None = None):
        self.journal = journal
        # one server clock per cluster (a single ServerClock: every cluster reads it)
        self.clock = clock if isinstance(clock, ServerClocks) else ServerClocks.single(clock)
        self.machines = machines or default_machines()
        self.snapshots = snapshots or SnapshotPolicy(every=snapshot_every)
        self.metrics = metrics
        self._bringups_failed = False   # the bring-up accounting failed once: logged, not again
        self.state: State = initial_state()
        self.executor = executor_factory(self.outcome_sink)
        self.index = PendingIndex()      # pending effect ids per key: the per-commit lookups (timers.py)
        self.ticker = Ticker(self.index)
        self._monotonic = monotonic
        self._touched: set[str] = set()   # object keys whose pending effects changed since the last release
        self._recovering = False
        self._inbox: asyncio.Queue[tuple[list[Any], asyncio.Future | None, float]] = asyncio.Queue()
        self._arrived: list[float] | None = None        # per record of the commit being folded
        self._born: dict[str, tuple[float, float, int]] = {}  # effect id -> (record arrived, folded, commit)
        self._commits = 0
        self._sent: dict[str, float] = {}                # effect id -> handed to the executor
        self._snap_seq = 0
        self._tasks: list[asyncio.Task] = []
        self._changed = asyncio.Event()   # wakes the ticker: see ``_wake_ticker``
        self._ticked: Any = None           # the timers map the ticker last looked at
        self._committing: asyncio.Future | None = None
        self._sends: list[tuple[Any, int]] = []   # (effect, attempt) issued by the commit being folded
        self._sending: asyncio.Future | None = None   # the last commit's ``_send_when_durable``
        self.stopping = False
        self.on_send: Callable[[Any], None] | None = None   # told each effect as it goes to the executor
        # Leadership (kfold.daemon.leader): the current term, or None = standby: nothing is issued, the
        # keys wait in ``_held`` until ``resume`` (on acquire). No gate: always issue (one replica).
        self.gate: Callable[[], int | None] | None = None
        self._held: set[str] = set()
        self._takeover = False
        # Leadership by shard (kfold.daemon.shards, instead of ``gate``): ``shards.stamp(effect)`` gives
        # (shard, term); keys wait per shard in ``_held_by`` until ``resume(acquired)``.
        self.shards: Any = None
        self._held_by: dict[int | None, set[str]] = {}
        self._acquired: set[int | None] = set()
        self._resumed: dict[int, int | None] = {}   # shard -> the term its takeover was re-observed under

    def bookkeeping(self) -> dict[str, int]:
        """Entries in the daemon's maps beside the fold's state (``kfold_bookkeeping_entries``): each
        holds an entry per effect or key in progress and is empty, or back to its floor, at rest."""
        sizes = {"effects_born": len(self._born), "effects_sent": len(self._sent), "keys_held": len(self._held),
                 "keys_touched": len(self._touched), "pending_index_keys": len(self.index),
                 "bringups_timed": len(self.metrics.bringups) if self.metrics is not None else 0}
        for part in (self.executor, self.ticker):
            sizes.update(getattr(part, "sizes", dict)())
        return sizes

    # -- sinks (observers, executor, ticker, periodic commands) ---------------------------------
    async def submit(self, drafts: Iterable[Any]) -> None:
        """Queue drafts and wait until they are committed and folded (backpressure). A command the
        fold cannot accept raises ``SeamError`` naming the field; nothing of ``drafts`` is queued."""
        drafts = self.journal.prepare(checked(list(drafts), self.machines))  # redacted and serialized
        fut = asyncio.get_running_loop().create_future()  # now, while an earlier batch commits
        self._inbox.put_nowait((drafts, fut, time.perf_counter()))
        await fut

    async def outcome_sink(self, outcome: Outcome) -> None:
        p = self.state.pending.get(outcome.effect_id)
        if p is not None:
            _crash_hook("performed", p.effect)
        now = time.perf_counter()
        sent = self._sent.pop(outcome.effect_id, None)
        if sent is not None and p is not None and self.metrics is not None:
            self.metrics.round_trip.observe(now - sent, p.effect.type)
        self._inbox.put_nowait(([outcome], None, now))

    # -- recovery -------------------------------------------------------------------------------
    async def recover(self) -> dict[str, int]:
        """Rebuild state, resolve in-doubt effects first, issue the never-sent. See module doc."""
        self._recovering = True
        try:
            await self._load()
            gc_policy.freeze()  # what boot and replay loaded stays: later collections skip it
            in_doubt = sorted(self.state.in_doubt(), key=lambda e: seq_key(e.id))
            never_sent = [p for p in self.state.pending.values() if not p.issued and not p.attempt]
            await self.commit([Command(at=self.clock.now_ms(e.cluster), name="effect.in_doubt", args={"effect_id": e.id})
                               for e in in_doubt])   # on its cluster's clock, as ``_held_in_doubt`` stamps it
            self._touched |= {p.effect.key for p in self.state.pending.values()}
            await self.commit([])
        finally:
            self._recovering = False
            self._changed.set()
        log.info("recovered at seq %d: %d in doubt, %d never sent", self.state.seq, len(in_doubt), len(never_sent))
        for key, q in sorted(self.state.quarantine.items()):
            log.error("quarantined since seq %d: %s (machine %s: %s); `kfold trace JOURNAL %s` shows it",
                      q.seq, key, q.machine, q.error, key, extra={"key": key})
        return {"seq": self.state.seq, "in_doubt": len(in_doubt), "unissued": len(never_sent)}

    async def _load(self) -> None:
        snap = await self.journal.latest_snapshot()
        if snap is not None:
            self.state = _stored_state(self.journal, snap, self.machines)
            self._snap_seq = self.state.seq
        run: list[Any] = []
        async for rec in self.journal.read(self.state.seq + 1):
            run.append(rec)
            if len(run) == MAX_BATCH:
                self.state, _ = fold_many(self.state, run, self.machines)
                run = []
        self.state, _ = fold_many(self.state, run, self.machines)
        self.index.rebuild(self.state)

    # -- the committer --------------------------------------------------------------------------
    async def commit(self, drafts: list[Any], arrived: list[float] | None = None) -> list[Any]:
        """Journal, fold, journal the keys' next effects as issued — one transaction — and once
        it is durable submit them. The only writer. ``arrived``: when each draft reached the
        daemon (monotonic), for the latency metrics."""
        stamped, done = self._fold_ahead(drafts, arrived)
        await done
        await self._maybe_snapshot()
        return stamped

    def _fold_ahead(self, drafts: list[Any], arrived: list[float] | None = None) -> tuple[list[Any], asyncio.Future]:
        """Seal ``drafts`` into the journal's open transaction, fold them, seal the ``EffectIssued``
        of every touched key's fresh head and fold those, flush: all of it synchronous, so a
        commit is never cancelled half-way (records journaled but not folded would make the next
        fold a gap). Returns the stamped records and a task that, once the transaction is
        durable, submits what it issued (journal first). The fold runs ahead of the disk: the
        committer folds the next batch while this one's transaction commits."""
        if self._takeover:   # ``resume``: a term began; whatever else the batch holds, before anything is issued
            drafts = self._held_in_doubt() + list(drafts)   # (kfold sim, soak seed 50576: batched with an
            # observation, the takeover's entry was skipped and a standby's stale status patch went out)
        drafts = self._still_owed(drafts)
        stamped: list[Any] = []
        logs: list[Any] = []
        if drafts:
            stamped = self.journal.seal(drafts)   # commands were checked by submit (or are the daemon's own)
            self._commits += 1
            self._arrived = arrived if self.metrics is not None and arrived and len(arrived) == len(stamped) else None
            logs = [e for effects in self._fold_all(stamped) for e in effects if e.type == "log"]
        self._release()
        sends, self._sends = self._sends, []
        durable = self.journal.flush()
        if self.metrics is not None and not durable.done():
            durable.add_done_callback(partial(self._note_durable, time.perf_counter()))
        done = asyncio.ensure_future(self._send_when_durable(durable, sends, logs, self._sending))
        self._sending = done
        self._wake_ticker()
        return stamped, done

    def _still_owed(self, drafts: list[Any]) -> list[Any]:
        """The ticker's retries (``EffectIssued`` drafts) whose effect is still pending, unissued,
        and not put in doubt by this batch: a retry the ticker read before a takeover's in-doubt
        commands (or recovery's) superseded its effect is dropped, not journaled as issued. The
        in-doubt command replaces the effect with a fresh read; an ``EffectIssued`` of the old one
        would name an effect no replay of the journal still holds (``kfold replay --check``)."""
        doubted = {d.args.get("effect_id", "") for d in drafts
                   if isinstance(d, Command) and d.name == "effect.in_doubt"}
        out = []
        for d in drafts:
            if isinstance(d, EffectIssued):
                eid = d.effect.get("id", "")
                p = self.state.pending.get(eid)
                if eid in doubted or p is None or p.issued:
                    continue
            out.append(d)
        return out

    async def _send_when_durable(self, durable: asyncio.Future, sends: list[tuple[Any, int]], logs: list[Any],
                                 before: asyncio.Future | None) -> None:
        """Submit a transaction's effects once it committed, after the previous transaction's (in
        order). A failed transaction raises here: nothing of it leaves the process."""
        if before is not None and not before.done():
            await asyncio.gather(before, return_exceptions=True)
        await durable
        for effect, attempt in sends:
            _crash_hook("issued", effect)
            if not self.stopping:
                if self.metrics is not None:
                    self._note_issued(effect.id)
                self.executor.submit(effect, attempt)
                if self.on_send is not None:
                    self.on_send(effect)
        for e in logs:
            self.executor.submit(e)

    def _release(self, keys: set[str] | None = None) -> None:
        """Seal as issued (and fold) each touched key's head if it is fresh; see module doc. The
        effects go to the executor once their transaction is durable (``_send_when_durable``).
        While stopping, nothing is issued: never sent, so issued (not in doubt) at next start."""
        keys = self._touched if keys is None else keys | self._touched
        self._touched = set()
        if self.stopping or not (keys or self._held or self._held_by):
            return
        if self.shards is not None:
            return self._issue(self._sharded(keys))
        term = None
        if self.gate is not None:   # fencing: issue only under a term still valid on its clock
            if self.gate() is None:   # standing by: the keys wait, nothing is decided or stamped
                self._held |= keys
                return
            keys, self._held = keys | self._held, set()
        ready = ready_to_issue(self.state, keys, self.index)
        # Each ``EffectIssued.at`` is read BEFORE the check that lets it out, so an effect issued
        # under a term is stamped no later than that check: a process frozen (SIGSTOP, a GC pause)
        # between the two wakes with effects stamped before its pause (and fenced when sent), never
        # ones that look decided after it.
        at = {c: self.clock.now_ms(c) for c in {e.cluster for e in ready}}
        if self.gate is not None and (term := self.gate()) is None:   # the term ended meanwhile
            self._held |= keys
            return
        self._issue([self._issued(e, at[e.cluster], term) for e in ready])

    def _issue(self, issued: list[EffectIssued]) -> None:
        if issued:
            for rec in self.journal.seal(issued):
                self._fold(rec)

    def _sharded(self, keys: set[str]) -> list[EffectIssued]:
        """Each key's head issued under its shard's term, or held for that shard (kfold.daemon.shards).
        Keys held while a term lapsed (a late renewal) go out once the same term is valid again."""
        for s in [s for s in self._held_by if self._term_resumed(s)]:
            keys = keys | self._held_by.pop(s)
        out = []
        for e in ready_to_issue(self.state, keys, self.index):
            at = self.clock.now_ms(e.cluster)   # read before the term is checked (see ``_release``)
            shard, term = self._stamp(e)
            if term is None:
                self._held_by.setdefault(shard, set()).add(e.key)
            else:
                out.append(self._issued(e, at, term, shard))
        return out

    def _fold_all(self, records: list[Any]) -> Iterator[tuple[Any, ...]]:
        """``_fold`` of each record; runs of observations, relists and deadlines (which touch no
        pending effect, so need none of ``_fold``'s bookkeeping) go through ``fold_many`` at once."""
        i = 0
        while i < len(records):
            j = i
            while j < len(records) and isinstance(records[j], _PLAIN):
                j += 1
            if j - i > 1:
                t0, before, touched = time.perf_counter(), self.state, set()
                self.state, per_record = fold_many(self.state, records[i:j], self.machines, touched)
                self.ticker.note_timers(before.timers, self.state.timers, touched)
                t1 = time.perf_counter()
                if self.metrics is not None:
                    self._count_bringups(before, records[i:j], per_record)
                share = (t1 - t0) / (j - i)
                for k, (rec, effects) in enumerate(zip(records[i:j], per_record), start=i):
                    self.index.add(effects)
                    if self.metrics is not None:
                        self.metrics.folded(rec, share)
                        self._note_born(k, t1, effects)
                    self._touched.update(e.key for e in effects if e.type != "log")
                    yield effects
                i = j
            else:
                yield self._fold(records[i], i)
                i += 1
        self._arrived = None

    def _fold(self, rec: Any, index: int | None = None) -> tuple[Any, ...]:
        before = None
        if isinstance(rec, EffectIssued):
            before = self.state.pending.get(rec.effect.get("id"))
        elif isinstance(rec, Outcome):
            before = self.state.pending.get(rec.effect_id)
        elif isinstance(rec, Command) and rec.name == "effect.in_doubt":
            before = self.state.pending.get(rec.args.get("effect_id", ""))
        t0, state, touched = time.perf_counter(), self.state, set()
        self.state, effects = fold(self.state, rec, self.machines, touched)
        self.ticker.note_timers(state.timers, self.state.timers, touched)
        self.index.add(effects)
        if self.metrics is not None:
            t1 = time.perf_counter()
            self._count_bringups(state, (rec,), (effects,))
            self.metrics.folded(rec, t1 - t0)
            self._note_born(index, t1, effects)
        if isinstance(rec, EffectIssued) and before is not None and not before.issued and not self.stopping:
            self._sends.append((before.effect, before.attempt))   # once durable: ``_send_when_durable``
        if isinstance(rec, Outcome) and before is not None:
            self._wait_unclocked_retry(rec)
        if before is not None and not isinstance(rec, EffectIssued):
            self._touched.add(before.effect.key)    # an outcome or in-doubt may free the key
        self._touched.update(e.key for e in effects if e.type != "log")
        return effects

    def _note_born(self, index: int | None, folded: float, effects: tuple[Any, ...]) -> None:
        """Latency bookkeeping: record ``index`` of this commit was folded at ``folded``."""
        arrived = self._arrived[index] if self._arrived is not None and index is not None else None
        if arrived is not None:
            self.metrics.event_to_fold.observe(folded - arrived)
        if len(self._born) > 100_000:   # effects dropped without being issued: never grow unbounded
            self._born.clear()
        for e in effects:
            if e.type != "log":
                self._born[e.id] = (folded if arrived is None else arrived, folded, self._commits)

    def _count_bringups(self, before: Any, records: Any, per_record: Any) -> None:
        """Time to Ready and failures for /metrics. Accounting only: an error here is logged once and
        never stops the committer (the fold and the journal are what matter)."""
        try:
            self.metrics.bringups.moved(before, self.state, records, per_record, self.clock)
        except Exception:   # noqa: BLE001 - a metrics bug must not stop the daemon
            if not self._bringups_failed:
                self._bringups_failed = True
                log.exception("bring-up accounting for /metrics failed; kfold goes on without it")

    def _note_durable(self, flushed: float, _: Any) -> None:
        self.metrics.durable.observe(time.perf_counter() - flushed)

    def _note_issued(self, effect_id: str) -> None:
        now = time.perf_counter()
        born = self._born.pop(effect_id, None)
        if born is not None:   # held: not issued by the commit that emitted it (its key was busy)
            held = "true" if born[2] != self._commits else "false"
            self.metrics.event_to_issue.observe(now - born[0], held)
            self.metrics.fold_to_issue.observe(now - born[1], held)
        if len(self._sent) > 100_000:
            self._sent.clear()
        self._sent[effect_id] = now

    def _stamp(self, effect: Any) -> tuple[int | None, int | None]:
        """``shards.stamp``, but a term whose takeover this daemon has not re-observed yet
        (``resume`` queued, ``_held_in_doubt`` not run) issues nothing: (shard, None)."""
        shard, term = self.shards.stamp(effect)
        return (shard, term) if term is not None and self._resumed.get(shard) == term else (shard, None)

    def _term_resumed(self, shard: int | None) -> bool:
        if shard is None:
            return any(t is not None and self.shards.term(s) == t for s, t in self._resumed.items())
        t = self._resumed.get(shard)
        return t is not None and self.shards.term(shard) == t

    def _issued(self, effect: Any, at: int | None, term: int | None = None, shard: int | None = None) -> EffectIssued:
        return EffectIssued(at=at, effect=effect_to_dict(effect), term=term, shard=shard)

    def resume(self, acquired: set[int | None] | None = None) -> None:
        """A leadership term began (through the committer, the only writer): every effect held
        while standby is put in doubt first (``_held_in_doubt``), then the keys are released.
        ``acquired``: the shards whose terms began (kfold.daemon.shards); only their effects."""
        self._acquired |= acquired or set()
        self._takeover = True
        self._inbox.put_nowait(([], None, time.perf_counter()))

    def _held_in_doubt(self) -> list[Command]:
        """On takeover, each pending effect this replica never sent is in doubt: it was decided on a
        world another leader has been changing since, so its machine re-observes (quorum read) and
        decides again, rather than replaying history (e.g. a standby's stale status patches)."""
        self._takeover = False
        if self.shards is not None:
            acquired, self._acquired = self._acquired, set()
            for s in acquired:
                self._touched |= self._held_by.pop(s, set())
                if s is not None:
                    self._resumed[s] = self.shards.holding(s)
            held = sorted(held_effects(self.state.pending.values(), self.shards.shard_for, acquired), key=lambda e: seq_key(e.id))
        else:
            held = sorted((p.effect for p in self.state.pending.values() if not p.issued), key=lambda e: seq_key(e.id))
        if held:
            log.info("takeover: %d effects decided while standby are in doubt and re-observed", len(held))
        return [Command(at=self.clock.now_ms(e.cluster), name="effect.in_doubt", args={"effect_id": e.id}) for e in held]

    def _fenced(self, drafts: list[Any]) -> list[Any] | None:
        """The ticker's retries, stamped with the current term; without one they are dropped and
        forgotten by the ticker (due again once a term begins), and so are its deadlines: a standby
        cannot re-observe, so it does not judge a deadline on what it last saw (kfold sim, soak seed
        40120: a standby failed a Session at its start deadline while the read that would have
        found its pod Running was held). None: something was held back."""
        if self.shards is not None:
            return self._sharded_retries(drafts)
        if self.gate is None or not drafts:
            return drafts
        term = self.gate()
        if term is not None:
            return [d.model_copy(update={"term": term}) if isinstance(d, EffectIssued) else d for d in drafts]
        for d in drafts:
            p = self.state.pending.get(d.effect.get("id")) if isinstance(d, EffectIssued) else None
            if p is not None:
                self.ticker.forget_retry(p.effect.id, p.attempt)
            elif isinstance(d, Deadline):
                self.ticker.forget_timer(d.timer, d.due)
        kept = [d for d in drafts if not isinstance(d, (EffectIssued, Deadline))]
        return kept or None

    def _sharded_retries(self, drafts: list[Any]) -> list[Any] | None:
        """The ticker's retries and deadlines under their shard's term; one whose shard is not held here is
        dropped and forgotten by the ticker (offered again on a later loop: issued if the same term
        is valid again, re-observed if this replica takes the shard over, ``_held_in_doubt``).
        None: nothing left to submit (the ticker then waits a second)."""
        kept = []
        for d in drafts:
            if isinstance(d, Deadline):   # judged only by a replica holding its shard (as ``_fenced``)
                if self._term_resumed(self.shards.shard_for(d)):
                    kept.append(d)
                else:
                    self.ticker.forget_timer(d.timer, d.due)
                continue
            p = self.state.pending.get(d.effect.get("id")) if isinstance(d, EffectIssued) else None
            if p is None:
                kept.append(d)
                continue
            shard, term = self._stamp(p.effect)
            if term is not None:
                kept.append(d.model_copy(update={"term": term, "shard": shard}))
            else:   # due again next time (a lapsed term may be renewed); put in doubt if its shard is taken over
                self.ticker.forget_retry(p.effect.id, p.attempt)
        return kept if kept or not drafts else None

    def _wait_unclocked_retry(self, rec: Outcome) -> None:
        """A retry decided without server time waits ``retry_after_ms`` in-process (the ticker)."""
        p = self.state.pending.get(rec.effect_id)
        if p is None or p.issued or not p.attempt:
            return
        if p.not_before is not None:   # the ticker re-issues it when due (``state.retrying``)
            return
        due = int(self._monotonic() * 1000) + int(rec.retry_after_ms or 0)
        self.ticker.wait_locally(p.effect.id, p.attempt, due)

    async def _maybe_snapshot(self, force: bool = False) -> None:
        if self.state.seq and self.state.seq > self._snap_seq and (force or self._snapshot_due()):
            await self.journal.put_snapshot(self.state.seq, snapshot.dump(self.state))
            self._snap_seq = self.state.seq

    def _snapshot_due(self) -> bool:
        j = self.journal
        return self.snapshots.due(self.state.seq - self._snap_seq, j.bytes_since_snapshot, j.last_snapshot_bytes)

    async def run_committer(self) -> None:
        while True:
            batch = [await self._inbox.get()]
            while not self._inbox.empty() and sum(len(d) for d, _, _ in batch) < MAX_BATCH:
                batch.append(self._inbox.get_nowait())
            # Shielded: stop() cancels the committer between commits, never half-way through one.
            self._committing = asyncio.ensure_future(self._commit_batch(batch))
            await asyncio.shield(self._committing)

    async def _commit_batch(self, batch: list[tuple[list[Any], asyncio.Future | None, float]]) -> None:
        """Fold the batch ahead of the disk (``_fold_ahead``), then wait for the transaction
        before it: at most two in flight, the one committing and the one queued behind it. Each
        submitter's future resolves once its records are durable. A failed transaction stops the
        committer (the state is ahead of the journal: it is dropped, the next start folds again)."""
        futures = [fut for _, fut, _ in batch if fut is not None]
        before = self._sending
        self._raise_if_unsent()
        try:
            _, done = self._fold_ahead([d for drafts, _, _ in batch for d in drafts],
                                       [t for drafts, _, t in batch for _ in drafts])
        except BaseException as exc:
            _settle(futures, exc if isinstance(exc, Exception) else RuntimeError("stopped"))
            raise
        done.add_done_callback(lambda d: self._settled(futures, d))
        if before is not None:
            await asyncio.gather(before, return_exceptions=True)
            self._raise_if_unsent()
        if self._snapshot_due():
            await done
            await self._maybe_snapshot()

    def _settled(self, futures: list[asyncio.Future], done: asyncio.Future) -> None:
        exc = done.exception() if not done.cancelled() else RuntimeError("stopped")
        _settle(futures, exc)
        if exc is not None:   # wake the committer, which stops on it
            self._inbox.put_nowait(([], None, time.perf_counter()))

    def _raise_if_unsent(self) -> None:
        """A transaction failed: what was folded after it is not journaled, so fold nothing more."""
        t = self._sending
        if t is not None and t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()

    def _wake_ticker(self) -> None:
        """After a commit, wake the ticker only if what it judges may have changed: the timers (a
        new or earlier deadline), or a retry waiting (a new one, or its key's head moved). Else it
        sleeps until the next due time it already knows (at most ``MAX_SLEEP_S``): waking it after
        every commit cost a pass over the timers and a loop round per commit."""
        if self.state.timers is not self._ticked or self.state.retrying:
            self._changed.set()

    async def run_ticker(self) -> None:
        """Deadlines and retries, as their clock passes them (not while recovering)."""
        while True:
            self._ticked = self.state.timers
            now, mono = self.clock.now_ms, int(self._monotonic() * 1000)  # a reading per cluster
            drafts = [] if self._recovering else self._fenced(self.ticker.due(self.state, now, mono))
            if drafts is None:      # standby: retries wait for a term; do not spin on them
                await asyncio.sleep(1.0)
                continue
            if drafts:
                await self.submit(drafts)
                continue
            self._changed.clear()
            try:  # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow stop()'s cancel
                async with asyncio.timeout(self.ticker.sleep_s(self.state, now, mono)):
                    await self._changed.wait()
            except TimeoutError:
                pass

    # -- lifecycle ------------------------------------------------------------------------------
    def start_loops(self) -> None:
        self._tasks.append(asyncio.create_task(self.run_committer(), name="committer"))
        self._tasks.append(asyncio.create_task(self.run_ticker(), name="ticker"))

    def spawn(self, coro: Any, name: str) -> asyncio.Task:
        task = asyncio.create_task(coro, name=name)
        self._tasks.append(task)
        return task

    async def stop(self, drain_s: float = 10.0) -> None:
        """Stop inputs, let in-flight effects finish, commit what came back, snapshot, close."""
        self.stopping = True
        committer = next((t for t in self._tasks if t.get_name() == "committer"), None)
        others = [t for t in self._tasks if t is not committer]
        for t in others:
            t.cancel()
        if others:  # inputs really stopped: nothing submits after the final snapshot
            await asyncio.wait(others, timeout=5.0)
        try:
            async with asyncio.timeout(drain_s):
                await self.executor.join()
        except TimeoutError:
            log.warning("stop: effects still in flight after %.0fs; they will be in doubt at next start", drain_s)
        await self.executor.close()
        broken = committer is not None and committer.done() and not committer.cancelled() and committer.exception()
        if committer is not None:
            committer.cancel()
            await asyncio.gather(committer, return_exceptions=True)
        if self._committing is not None:
            await asyncio.gather(self._committing, return_exceptions=True)
        if self._sending is not None:
            await asyncio.gather(self._sending, return_exceptions=True)
            broken = broken or (not self._sending.cancelled() and self._sending.exception())
        if not broken:  # after a fold failure the state no longer matches the journal: fold nothing more
            await self._drain_inbox()
            await self._maybe_snapshot(force=True)
        await self.journal.close()

    async def _drain_inbox(self) -> None:
        batch = []
        while not self._inbox.empty():
            batch.append(self._inbox.get_nowait())
        if batch:
            drafts = [d for ds, _, _ in batch for d in ds if not isinstance(d, EffectIssued)]
            await self.commit([d for d in drafts if isinstance(d, Outcome)])


def _settle(futures: list[asyncio.Future], exc: BaseException | None) -> None:
    for fut in futures:
        if not fut.done():
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)


def checked(drafts: list[Any], machines: Machines) -> list[Any]:
    """``drafts``, once every command among them is one a machine takes and matches its model
    (``engine.seams``): a command the fold cannot accept is refused before it is journaled, so it
    can never come back at a restart."""
    for d in drafts:
        if isinstance(d, Command):
            try:
                if d.name not in machines.by_command and d.name != "effect.in_doubt":
                    raise SeamError(f"command {d.name} refused: no machine takes it; known: "
                                    f"{', '.join(sorted(machines.by_command))}")
                check_command(d.name, d.args)
            except SeamError as exc:
                log.error("%s; nothing was journaled", exc, extra={"command": d.name})
                raise
    return drafts


_CRASH_COUNTS: dict[str, int] = {}
_CRASH_SPEC = os.environ.get("KFOLD_CRASH_AFTER")   # read once: it is called for every effect


def _crash_hook(point: str, effect: Any) -> None:
    """TEST-ONLY fault injection (tests/e2e/test_kill9.py); inert unless ``KFOLD_CRASH_AFTER`` is set.

    ``KFOLD_CRASH_AFTER=<point>:<type>:<kind>:<n>`` with point ``issued`` (the n-th matching
    ``EffectIssued`` is durable, nothing sent yet) or ``performed`` (the executor performed it, its
    outcome not journaled): the process ``os._exit(137)``s there, as a kill -9 would leave it."""
    spec = _CRASH_SPEC
    if not spec:
        return
    want_point, want_type, want_kind, n = spec.split(":")
    e = effect if isinstance(effect, dict) else effect_to_dict(effect)
    if point != want_point or e.get("type") != want_type or e.get("kind") != want_kind:
        return
    _CRASH_COUNTS[spec] = _CRASH_COUNTS.get(spec, 0) + 1
    if _CRASH_COUNTS[spec] >= int(n):
        log.warning("KFOLD_CRASH_AFTER=%s: exiting 137 (test-only crash hook)", spec)
        logging.shutdown()
        os._exit(137)

