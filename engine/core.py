"""``fold(state, record) -> (state, effects)``: the only way kfold changes its mind.

Expected flow: the daemon appends a record, the journal commits it, then ``fold`` is called with
it. ``fold`` dispatches the record to the machines that own its kind (observed objects by kind,
commands by name, deadlines and outcomes to the machine that set the timer or emitted the effect),
lets them exchange messages within the same step, and returns the new state and the effects emitted.

Guarantees:
- Pure: the result depends only on ``(state, record)``. The only "now" is ``record.at``.
- ``State`` is immutable (``immutables.Map`` tables); the old state stays valid, so ``kfold trace``
  can show before and after.
- A record is folded only if its ``seq`` is exactly ``state.seq + 1``; otherwise ``SequenceError``.
- Effects get ids ``"<seq>.<n>"``; every effect except ``Log`` is pending until its outcome is
  folded. A pending effect that was issued (its ``EffectIssued`` folded) and has no outcome after a
  restart is in doubt: the daemon appends ``Command("effect.in_doubt")`` and the owning machine
  re-observes.
- A poison record never stops the fold. If a machine raises on a record, the record's effect on
  the state is dropped whole (as if it had not been folded, seq and time excepted), and its
  subject key is quarantined (``State.quarantine``, ``Quarantined``): one ``Log`` at error level
  names the record, the machine and the error; later observations, deadlines, outcomes and
  messages about a quarantined object key are skipped (its decision stays frozen as it was).
  A command's or relist's subject (``<cluster>/<namespace>/#<name>``) is no object: it is recorded
  as refused and later commands are folded as usual. Every other object goes on. Replay reproduces
  the same quarantine: it is a pure function of the records, like everything else here.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar

from immutables import Map, MapMutation

from engine import backoff
from engine.seams import MESSAGES, Message, SeamError, addressed, check_command, check_message
from journal.records import Command, Deadline, EffectIssued, Observed, Outcome, Record, Relist

if TYPE_CHECKING:
    from engine.effects.models import Effect
    from engine.machines.base import Decision, Machine, Reading
    E = TypeVar("E", bound=Effect)

EMPTY: Map = Map()
MAX_MESSAGES_PER_RECORD = 10_000


class FoldError(Exception):
    """A record the fold cannot apply. Names the record and the reason."""


class SequenceError(FoldError):
    """A gap or a repeat in sequence numbers."""


@dataclass(frozen=True, slots=True)
class Timer:
    """``due`` is server time on the clock of ``cluster`` (the cluster the deadline concerns; ""
    = the first part of an object key, or the home cluster): the daemon judges it on that clock."""

    id: str
    due: int
    machine: str
    key: str
    name: str
    cluster: str = ""

    @property
    def clock(self) -> str:
        """The cluster whose clock judges it: its own, else the first part of an object key."""
        return self.cluster or _key_cluster(self.key)


@dataclass(frozen=True, slots=True)
class Pending:
    """An emitted effect waiting for its outcome. ``issued`` once its EffectIssued is folded."""

    effect: Any
    issued: bool = False
    attempt: int = 0                 # retries of a safe effect after transient outcomes
    not_before: int | None = None    # server ms before which a retry must not be issued


@dataclass(frozen=True, slots=True)
class Quarantined:
    """Why ``key`` is quarantined: the record a machine could not fold, and the error."""

    seq: int
    rec: str
    machine: str
    error: str


@dataclass(frozen=True, slots=True)
class State:
    seq: int = 0
    at: int | None = None
    tables: Map = EMPTY          # machine name -> Map[key -> decision record]
    timers: Map = EMPTY          # timer id -> Timer
    pending: Map = EMPTY         # effect id -> Pending
    quarantine: Map = EMPTY      # subject key -> Quarantined (see the module docstring)
    # effect id -> key, of the pending effects waiting for a retry (unissued, attempt > 0): derived
    # from ``pending`` (computed when not given, kept by the fold), not compared, not in snapshots
    retrying: Map | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.retrying is None:
            object.__setattr__(self, "retrying", Map({i: p.effect.key for i, p in self.pending.items()
                                                      if not p.issued and p.attempt}))

    def table(self, machine: str) -> Map:
        return self.tables.get(machine, EMPTY)

    def in_doubt(self) -> list[Any]:
        """Effects issued before a stop whose outcome never came back."""
        return [p.effect for p in self.pending.values() if p.issued]

    def unissued(self) -> list[Any]:
        """Effects the fold emitted that were never journaled as issued (never sent)."""
        return [p.effect for p in self.pending.values() if not p.issued]

    def due_timers(self, now: "int | Callable[[str], int | None]") -> list[Timer]:
        """Timers whose due time has passed; ``now`` is one reading, or a reading per cluster."""
        clock = now if callable(now) else (lambda _c: now)
        due = [t for t in self.timers.values() if (n := clock(t.clock)) is not None and t.due <= n]
        return sorted(due, key=lambda t: (t.due, t.id))

    def next_due(self) -> int | None:
        return min((t.due for t in self.timers.values()), default=None)


def _key_cluster(key: str) -> str:
    return key.split("/", 1)[0] if key.count("/") >= 2 else ""


def initial_state() -> State:
    return State()


class StepContext:
    """What a machine handler sees and does during one fold step.

    Reads and writes go to the step's working copy; effects and messages accumulate; nothing is
    visible outside until ``fold`` returns. The working copy of a table (and of the timers and
    pending effects) is an ``immutables`` mutation made on its first write, so a batch of records
    (``fold_many``) updates each table in place instead of path-copying a new map per write; the
    state the fold started from is never touched."""

    __slots__ = ("record", "now", "_clock", "_base", "_tables", "_mut", "_dirty", "_timers", "_tmut", "_pending", "_pmut",
                 "_effects", "_queue", "_machine", "_quarantine", "_typed", "_reg", "_answered", "_ttouched",
                 "_retrying", "_rmut")

    def __init__(self, state: State, record: Record | None = None, timers_touched: set[str] | None = None):
        self.record = record
        self.now: int | None = record.at if record is not None else None  # the only clock a decision may read
        self._clock = ""   # the cluster whose clock stamped ``record`` ("" = not known: any)
        self._base = state.tables
        self._tables: dict[str, Any] = dict(state.tables.items())  # machine -> Map or MapMutation
        self._mut: set[str] = set()                                  # machines whose entry is a mutation
        self._dirty: set[str] = set()                                # machines whose table was written
        self._timers: Any = state.timers
        self._tmut = False
        self._pending: Any = state.pending
        self._pmut = False
        self._retrying: Any = state.retrying
        self._rmut = False
        self._effects: list[Any] = []
        self._queue: list[tuple[str, str, str, Any]] = []   # (machine, key, message, model or args)
        self._machine = ""
        self._quarantine: Map = state.quarantine
        self._typed: frozenset[str] = frozenset()   # machines whose messages are typed (engine.seams)
        self._reg: Machines | None = None           # the machines, for ``ask``
        self._answered: Pending | None = None       # the effect whose final outcome is being folded
        self._ttouched = timers_touched             # ids of the timers set or cancelled (``fold_many``)

    def _begin(self, record: Record) -> None:
        self.record, self.now = record, record.at
        self._clock = self._stamped_on(record)
        self._effects, self._queue, self._machine = [], [], ""
        self._answered = None

    def _finish(self, seq: int, at: int | None) -> State:
        tables = self._base
        for m in self._dirty:
            t = self._tables[m]
            tables = tables.set(m, t.finish() if m in self._mut else t)
        timers = self._timers.finish() if self._tmut else self._timers
        pending = self._pending.finish() if self._pmut else self._pending
        retrying = self._retrying.finish() if self._rmut else self._retrying
        return State(seq, at, tables, timers, pending, self._quarantine, retrying)

    # -- state of the current machine ---------------------------------------------------------
    def get(self, key: str, machine: str | None = None) -> "Decision | None":
        return self._tables.get(machine or self._machine, EMPTY).get(key)

    def put(self, key: str, decision: Any) -> None:
        self._writable(self._machine)[key] = decision

    def drop(self, key: str) -> None:
        m = self._machine
        if key in self._tables.get(m, EMPTY):
            del self._writable(m)[key]

    def _writable(self, m: str) -> MapMutation:
        """Machine ``m``'s table as a mutation, opened on its first write (in this step or batch)."""
        if m not in self._mut:
            self._tables[m] = self._tables.get(m, EMPTY).mutate()
            self._mut.add(m)
            self._dirty.add(m)
        return self._tables[m]

    def items(self, machine: str | None = None) -> Iterable[tuple[str, "Decision"]]:
        """Machine ``m``'s entries in key order. A table's own order follows its keys' string
        hashes, which differ between processes (``PYTHONHASHSEED``): a decision that visits entries
        in turn (a relist, an index rebuilt) must visit them in an order every replay shares."""
        m = machine or self._machine
        if m in self._mut:  # a mutation cannot be iterated: freeze it (the next write re-opens one)
            self._tables[m] = self._tables[m].finish()
            self._mut.discard(m)
        return sorted(self._tables.get(m, EMPTY).items(), key=itemgetter(0))

    # -- timers ---------------------------------------------------------------------------
    def set_timer(self, key: str, name: str, due: int, cluster: str = "") -> None:
        """Arm ``name`` on ``key`` for server time ``due`` on ``cluster``'s clock (default: the
        cluster of the object key, see ``Timer.clock``)."""
        tid = f"{self._machine}:{key}:{name}"
        timer = Timer(tid, due, self._machine, key, name)
        self._timer_set(tid, timer if cluster in ("", timer.clock) else replace(timer, cluster=cluster))

    def now_on(self, cluster: str) -> int | None:
        """``now`` as a time on ``cluster``'s clock: the record's time if that clock stamped it (or
        either is not known), else None. Clusters' clocks may be hours apart, so a due time for one
        is only ever computed from a record the same cluster's clock stamped."""
        return self.now if not cluster or not self._clock or cluster == self._clock else None

    def _stamped_on(self, record: Record) -> str:
        """The cluster whose clock stamped ``record`` (observers, the executor and the ticker stamp on
        the clock of the cluster concerned; see ``engine.effects.io.clock.ServerClocks``)."""
        if isinstance(record, (Observed, Relist)):
            return record.cluster
        if isinstance(record, EffectIssued):
            return record.effect.get("cluster", "")
        if isinstance(record, Outcome):
            p = self._pending.get(record.effect_id)
            return p.effect.cluster if p is not None else _key_cluster(record.key)
        if isinstance(record, Deadline):
            t = self._timers.get(record.timer)
            return t.clock if t is not None else ""
        if isinstance(record, Command) and record.name == "effect.in_doubt":   # the daemon stamps it on its effect's
            p = self._pending.get(record.args.get("effect_id", ""))
            return p.effect.cluster if p is not None else ""
        return ""

    def cancel_timer(self, key: str, name: str) -> None:
        tid = f"{self._machine}:{key}:{name}"
        if tid in self._timers:
            self._timer_delete(tid)

    def timer_due(self, key: str, name: str) -> int | None:
        t = self._timers.get(f"{self._machine}:{key}:{name}")
        return t.due if t else None

    def _timers_w(self) -> MapMutation:
        """The timers as a mutation, opened on the first write."""
        if not self._tmut:
            self._timers, self._tmut = self._timers.mutate(), True
        return self._timers

    def _timer_set(self, tid: str, timer: Timer) -> None:
        self._timers_w()[tid] = timer
        if self._ttouched is not None:
            self._ttouched.add(tid)

    def _timer_delete(self, tid: str) -> None:
        del self._timers_w()[tid]
        if self._ttouched is not None:
            self._ttouched.add(tid)

    # -- pending effects ----------------------------------------------------------------------
    def _pending_w(self) -> MapMutation:
        """The pending effects as a mutation, opened on the first write."""
        if not self._pmut:
            self._pending, self._pmut = self._pending.mutate(), True
        return self._pending

    def _pending_set(self, eid: str, p: Pending) -> None:
        self._pending_w()[eid] = p
        if not p.issued and p.attempt:
            self._retrying_w()[eid] = p.effect.key
        elif eid in self._retrying:
            del self._retrying_w()[eid]

    def _pending_delete(self, eid: str) -> None:
        del self._pending_w()[eid]
        if eid in self._retrying:
            del self._retrying_w()[eid]

    def _retrying_w(self) -> MapMutation:
        if not self._rmut:
            self._retrying, self._rmut = self._retrying.mutate(), True
        return self._retrying

    def _pending_values(self) -> Iterable[Pending]:
        if self._pmut:
            self._pending, self._pmut = self._pending.finish(), False
        return self._pending.values()

    # -- effects and messages -------------------------------------------------------------
    def emit(self, effect_type: "type[E]", key: str, **fields: Any) -> "E":
        """Emit an effect (pending until its outcome). An effect on a registered cluster, known by
        its handle ``"<name>@<tenant>"``, carries that tenant unless the machine set one."""
        cluster = fields.get("cluster")
        if cluster and "tenant" not in fields and "@" in cluster:
            fields["tenant"] = cluster.split("@", 1)[1]
        effect = effect_type(id=f"{self.record.seq}.{len(self._effects)}", machine=self._machine,
                             key=key, **fields)
        self._effects.append(effect)
        if effect.type != "log":
            self._pending_set(effect.id, Pending(effect))
        return effect

    def log(self, key: str, message: str, level: str = "info", **fields: Any) -> None:
        from engine.effects.models import Log
        self.emit(Log, key, level=level, message=message, fields=fields)

    def tell(self, key: str, message: "Message | str", *untyped: str, to: str = "", **args: Any) -> None:
        """Deliver ``message``, a seam model (``engine.seams.MESSAGES``: it names its machine and
        the message), at ``key`` within this same fold step, after this handler; ``to`` (a
        ``Reply``'s) is the machine that asked, which a typed machine must read it as. The model
        was validated where it was built, once, and is what a typed machine's ``on_receive`` gets;
        an untyped one gets its fields as given.

        No machine of kfold's sends untyped; the spelling ``tell(machine, key, name, **args)``, for
        a test's probe that relays a message named at run time, is validated here into the same
        model (``check_message``)."""
        if untyped:
            machine, key, name = key, message, untyped[0]   # type: ignore[assignment]
            self._queue.append((machine, key, name, check_message(machine, name, args) if machine in self._typed else args))
            return
        machine, name = addressed(message)   # type: ignore[arg-type]
        machine = to or machine
        if machine not in self._typed:
            self._queue.append((machine, key, name, message.model_dump(exclude_unset=True)))  # type: ignore[union-attr]
        elif MESSAGES.get((machine, name)) is type(message):
            self._queue.append((machine, key, name, message))
        else:
            raise SeamError(f"message {name!r} ({type(message).__name__}) is not one machine {machine!r} reads")

    def ask(self, machine: str, question: str, *args: Any) -> "Reading":
        """``machine``'s answer to ``question`` (``Machine.questions``), read from its table as it
        stands in this step; None when no such machine folds here (a fold of some machines only).
        Refused for a question the machine does not declare."""
        m = (self._reg or default_machines()).by_name.get(machine)
        if m is None:
            return None
        if question not in m.questions:
            raise FoldError(f"machine {machine!r} answers no question {question!r}; "
                            f"it answers: {', '.join(sorted(m.questions)) or 'none'}")
        return m.answer(question, _TableReader(self, machine), *args)

    def retry(self, policy: "backoff.Policy") -> bool:
        """The handler's "retry": the effect whose final outcome is being folded goes again as the
        next attempt of its own loop. The same effect (same id) is pending again, its attempt count
        going on from the executor's (``Pending.attempt``), due when ``policy`` says
        (``backoff.next_try`` on the failures so far and this outcome's server time, or the
        server's ``Retry-After``): one counter and one schedule per request, whoever decided the
        attempt before. Only a safe effect (an unsafe request in doubt is re-observed, never
        repeated). False: the policy says terminal (``FAIL`` or ``WAIT``), nothing is sent, and
        the handler decides what the failure means."""
        p, rec = self._answered, self.record
        if p is None or not isinstance(rec, Outcome) or rec.effect_id != p.effect.id:
            raise FoldError("retry: only the effect whose outcome is being folded can be sent again")
        if not p.effect.safe_to_retry:
            raise FoldError(f"retry of effect {p.effect.id} ({p.effect.type}): not safe to repeat")
        failures = p.attempt + 1
        when = backoff.next_try(policy, failures, self.now, rec.retry_after_ms)
        if when in (backoff.FAIL, backoff.WAIT):
            return False
        self._pending_set(p.effect.id, Pending(p.effect, issued=False, attempt=failures,
                                               not_before=when if isinstance(when, int) else None))
        return True

    def drop_retries(self, key: str, match: Callable[[Any], bool] | None = None) -> None:
        """This machine's requests on ``key`` (those ``match`` accepts, when given) that wait for a
        retry (pending, unissued, attempt > 0) are dropped, never sent: what wanted them is over.
        An attempt already issued is answered as usual (and decides nothing the handler no longer
        awaits)."""
        m, pending = self._machine, self._pending
        if self._rmut:   # a mutation cannot be iterated: freeze it (the next write re-opens one)
            self._retrying, self._rmut = self._retrying.finish(), False
        for eid in [eid for eid, k in self._retrying.items() if k == key]:
            p = pending[eid]
            if p.effect.machine == m and (match is None or match(p.effect)):
                self._pending_delete(eid)

    def pending_for(self, key: str) -> list[Any]:
        """This machine's effects on ``key`` still waiting for an outcome."""
        m = self._machine
        return [p.effect for p in self._pending_values() if p.effect.machine == m and p.effect.key == key]


class _TableReader:
    """One machine's table, read only, as ``Machine.answer`` sees it."""

    __slots__ = ("_ctx", "_machine")

    def __init__(self, ctx: StepContext, machine: str):
        self._ctx, self._machine = ctx, machine

    def get(self, key: str) -> "Decision | None":
        return self._ctx.get(key, self._machine)

    def items(self) -> Iterable[tuple[str, "Decision"]]:
        return self._ctx.items(self._machine)


def fold(state: State, record: Record, machines: "Machines | None" = None,
         timers_touched: set[str] | None = None) -> tuple[State, tuple[Any, ...]]:
    """Apply one committed record. Pure; see the module docstring for the contract."""
    state, effects = fold_many(state, (record,), machines, timers_touched)
    return state, effects[0]


def fold_many(state: State, records: Sequence[Record], machines: "Machines | None" = None,
              timers_touched: set[str] | None = None) -> tuple[State, list[tuple[Any, ...]]]:
    """Apply committed records in order: exactly ``fold`` of each in turn (the same final state, the
    same effects per record, ``tests/unit/test_fold_many.py``), with one working copy for the
    whole batch instead of a new ``State`` and new maps per record.

    A record a machine raises on is quarantined (module docstring): the batch is refolded up to
    it from ``state`` (immutable, so nothing is lost), the quarantine is applied, and the rest of
    the batch goes on. Only a ``SequenceError`` (a gap or a repeat) propagates.

    ``timers_touched``, when given, gains the id of every timer the batch set or cancelled (a
    superset: a refolded run's too), so a timer index kept beside the state updates only those
    (``engine.effects.timers``) instead of comparing every timer; the fold reads nothing from it."""
    reg = machines or _DEFAULT or default_machines()
    out: list[tuple[Any, ...]] = []
    start = 0
    while True:
        try:
            state, effects = _fold_run(reg, state, records, start, len(records), timers_touched)
            return state, out + effects
        except _Poison as poison:
            if poison.index > start:
                state, effects = _fold_run(reg, state, records, start, poison.index, timers_touched)
                out += effects
            state, effects = _quarantine(reg, state, records[poison.index], poison, timers_touched)
            out.append(effects)
            start = poison.index + 1


class _Poison(Exception):
    def __init__(self, index: int, machine: str, error: BaseException):
        super().__init__(index, machine, error)
        self.index, self.machine, self.error = index, machine, error


def _fold_run(reg: "Machines", state: State, records: Sequence[Record], start: int,
              end: int, timers_touched: set[str] | None = None) -> tuple[State, list[tuple[Any, ...]]]:
    ctx = StepContext(state, timers_touched=timers_touched)
    ctx._typed, ctx._reg = reg.typed, reg
    seq, at = state.seq, state.at
    out: list[tuple[Any, ...]] = []
    for i in range(start, end):
        record = records[i]
        if record.seq != seq + 1:
            raise SequenceError(
                f"record seq {record.seq} cannot follow seq {seq}: "
                f"{'repeat' if record.seq <= seq else 'gap'} in the journal")
        ctx._begin(record)
        try:
            _dispatch(reg, ctx, record)
            if ctx._queue:
                _drain(reg, ctx)
        except Exception as exc:  # a poison record: see the module docstring
            raise _Poison(i, ctx._machine, exc) from exc
        seq, rat = record.seq, record.at
        if rat is not None and (at is None or rat >= at):
            at = rat
        out.append(tuple(ctx._effects))
    return ctx._finish(seq, at), out


MAX_ERROR_CHARS = 500


def subject(record: Record, pending: Map = EMPTY) -> str:
    """The key a record is about: an object key, or ``<cluster>/<namespace>/#<what>`` for a
    command or a relist (no object)."""
    if isinstance(record, Observed):
        return f"{record.cluster}/{record.namespace}/{record.name}"
    if isinstance(record, (Deadline, Outcome)):
        return record.key
    if isinstance(record, Command):
        eid = _in_doubt_id(record)
        p = pending.get(eid) if eid else None
        return p.effect.key if p is not None else f"{record.cluster}/{record.namespace}/#{record.name}"
    if isinstance(record, Relist):
        return f"{record.cluster}/{record.scope}/#relist:{record.kind}"
    return f"//#{record.rec}"


def _quarantine(reg: "Machines", state: State, record: Record, poison: _Poison,
                timers_touched: set[str] | None = None) -> tuple[State, tuple[Any, ...]]:
    """``record`` folded as refused: the state as before it (its deadline or outcome consumed), its
    subject quarantined, one error Log, and what each machine's ``on_quarantine`` reports (e.g. the
    Session's status); a report that raises is left out."""
    from engine.effects.models import Log
    if record.seq != state.seq + 1:
        raise SequenceError(f"record seq {record.seq} cannot follow seq {state.seq}")
    ctx = StepContext(state, timers_touched=timers_touched)
    ctx._begin(record)
    key = subject(record, state.pending)
    if isinstance(record, Outcome) and record.effect_id in ctx._pending:
        ctx._pending_delete(record.effect_id)
    elif isinstance(record, Command) and _in_doubt_id(record) in ctx._pending:
        ctx._pending_delete(_in_doubt_id(record))
    elif isinstance(record, Deadline) and record.timer in ctx._timers:
        ctx._timer_delete(record.timer)
    error = f"{type(poison.error).__name__}: {poison.error}"
    if len(error) > MAX_ERROR_CHARS:
        error = error[:MAX_ERROR_CHARS - 3] + "..."
    machine = poison.machine or "fold"
    ctx._quarantine = ctx._quarantine.set(key, Quarantined(record.seq, record.rec, machine, error))
    what = "quarantined: its decision stays as it was and later records about it are skipped" \
        if is_object_key(key) else "refused: nothing of it was applied"
    ctx._machine = machine
    ctx.emit(Log, key, level="error", message=f"record {record.seq} ({record.rec}) could not be folded by "
             f"machine {machine}: {error}; {key} is {what}", fields={"seq": record.seq, "quarantined": key})
    at = state.at if record.at is None or (state.at is not None and record.at < state.at) else record.at
    done, effects = ctx._finish(record.seq, at), tuple(ctx._effects)
    reported = _reported(reg, done, effects, record, key, error, timers_touched) if is_object_key(key) else None
    return (done, effects) if reported is None else (reported._finish(record.seq, at), tuple(reported._effects))


def _reported(reg: "Machines", done: State, effects: tuple[Any, ...], record: Record, key: str,
              error: str, timers_touched: set[str] | None = None) -> "StepContext | None":
    """A step after ``done`` (the quarantine and its Log) where each machine reported the
    quarantine of ``key``; None if a report raised (the quarantine stands without it)."""
    ctx = StepContext(done, timers_touched=timers_touched)
    ctx._typed, ctx._reg = reg.typed, reg
    ctx._begin(record)
    ctx._effects = list(effects)
    try:
        for m in reg.all:
            _call(ctx, m, m.on_quarantine, key, error)
    except Exception:
        return None
    return ctx


def is_object_key(key: str) -> bool:
    return not key.rpartition("/")[2].startswith("#")


def _frozen(ctx: StepContext, key: str) -> bool:
    q = ctx._quarantine
    return bool(q) and key in q and is_object_key(key)


def fold_all(state: State, records: Iterable[Record], machines: "Machines | None" = None):
    """Fold records in order; yields ``(record, effects)`` and returns the final state via ``.state``."""
    reg = machines or default_machines()
    out = _FoldRun(state)
    for rec in records:
        out.state, effects = fold(out.state, rec, reg)
        out.effects.append((rec.seq, effects))
    return out


@dataclass
class _FoldRun:
    state: State
    effects: list[tuple[int, tuple[Any, ...]]] = field(default_factory=list)


def _dispatch(reg: "Machines", ctx: StepContext, record: Record) -> None:
    if ctx._quarantine and _frozen(ctx, subject(record, ctx._pending)):
        _skip(ctx, record)
        return
    if type(record) is Observed:  # most records: set the machine directly (what _call does)
        for m in reg.by_kind.get(record.kind, ()):
            ctx._machine = m.name
            m.on_observed(ctx, record)
    elif isinstance(record, Relist):
        for m in reg.by_kind.get(record.kind, ()):
            _call(ctx, m, m.on_relist, record)
    elif isinstance(record, Command):
        _command(reg, ctx, record)
    elif isinstance(record, Deadline):
        timer = ctx._timers.get(record.timer)
        if timer is None or timer.due != record.due:
            return  # cancelled or moved since: a stale deadline decides nothing
        ctx._timer_delete(record.timer)
        m = reg.by_name[record.machine]
        _call(ctx, m, m.on_deadline, record.key, record.name)
    elif isinstance(record, EffectIssued):
        eid = record.effect.get("id", "")
        p = ctx._pending.get(eid)
        if p is not None:
            ctx._pending_set(eid, replace(p, issued=True))
    elif isinstance(record, Outcome):
        p = ctx._pending.get(record.effect_id)
        if p is None:
            return  # a duplicate or late outcome: already decided
        if _retrying(record, p):
            ctx._pending_set(record.effect_id, _retry(record, p))
            return  # the executor retries it; the machine hears only the final outcome
        ctx._pending_delete(record.effect_id)
        m = reg.by_name.get(record.machine)
        if m is None:
            raise FoldError(f"record {record.seq}: outcome for unknown machine {record.machine!r}")
        ctx._answered = p
        _call(ctx, m, m.on_outcome, record, p.effect)
    else:  # pragma: no cover - the union is closed
        raise FoldError(f"record {record.seq}: unknown record type {type(record).__name__}")


def _skip(ctx: StepContext, record: Record) -> None:
    """A record about a quarantined object: consumed (its timer or pending effect goes), decided on
    by no machine."""
    if isinstance(record, Deadline) and record.timer in ctx._timers:
        ctx._timer_delete(record.timer)
    elif isinstance(record, Outcome) and record.effect_id in ctx._pending:
        ctx._pending_delete(record.effect_id)
    elif isinstance(record, Command) and _in_doubt_id(record) in ctx._pending:
        ctx._pending_delete(_in_doubt_id(record))


def _in_doubt_id(record: Command) -> str:
    eid = record.args.get("effect_id") if record.name == "effect.in_doubt" else None
    return eid if isinstance(eid, str) else ""


def _retrying(record: Outcome, p: Pending) -> bool:
    """A transient outcome of a safe effect with ``retry_after_ms`` is a journaled retry decision."""
    return record.result == "transient" and record.retry_after_ms is not None and p.effect.safe_to_retry


def _retry(record: Outcome, p: Pending) -> Pending:
    """Pending again, not issued: re-issued when the server clock passes ``not_before`` (after a
    restart too: it is not in doubt, its last attempt's outcome is journaled)."""
    due = None if record.at is None else record.at + int(record.retry_after_ms or 0)
    return Pending(p.effect, issued=False, attempt=p.attempt + 1, not_before=due)


def _command(reg: "Machines", ctx: StepContext, record: Command) -> None:
    cmd = check_command(record.name, record.args)  # a journal from before the daemon checked (engine.seams)
    if record.name == "effect.in_doubt":
        eid = record.args.get("effect_id", "")
        p = ctx._pending.get(eid)
        if p is None:
            return
        ctx._pending_delete(eid)
        m = reg.by_name[p.effect.machine]
        _call(ctx, m, m.on_in_doubt, p.effect)
        return
    m = reg.by_command.get(record.name)
    if m is None:
        raise FoldError(f"record {record.seq}: unknown command {record.name!r}; "
                        f"known: {', '.join(sorted(reg.by_command))}")
    if m.typed_messages:
        _call(ctx, m, m.on_command, record, cmd)   # the model validated here, once
    else:
        _call(ctx, m, m.on_command, record)


def _drain(reg: "Machines", ctx: StepContext) -> None:
    handled, queue = 0, ctx._queue
    while queue:
        machine, key, message, args = queue.pop(0)
        handled += 1
        if handled > MAX_MESSAGES_PER_RECORD:
            raise FoldError(f"record {ctx.record.seq}: machines exchanged more than "
                            f"{MAX_MESSAGES_PER_RECORD} messages (a message loop)")
        m = reg.by_name.get(machine)
        if m is None:
            raise FoldError(f"record {ctx.record.seq}: message {message!r} for unknown machine {machine!r}")
        if ctx._quarantine and _frozen(ctx, key):
            continue  # a quarantined object hears nothing: its decision stays frozen
        if m.typed_messages:
            _call(ctx, m, m.on_receive, key, args)   # the message's model (``StepContext.tell``)
        else:
            _call(ctx, m, m.on_message, key, message, args)


def _call(ctx: StepContext, machine: "Machine", handler: Any, *args: Any) -> None:
    """Run ``handler`` as ``machine``. Handlers never nest (machines ``tell``, they do not call
    each other's handlers), so the current machine is simply set: nothing to restore."""
    ctx._machine = machine.name
    handler(ctx, *args)


class Machines:
    """The dispatch table: which machine owns which object kinds, commands and name."""

    def __init__(self, machines: Iterable["Machine"]):
        self.all = tuple(machines)
        self.by_name = {m.name: m for m in self.all}
        self.by_kind: dict[str, tuple["Machine", ...]] = {}
        self.by_command: dict[str, "Machine"] = {}
        self.typed = frozenset(m.name for m in self.all if m.typed_messages)
        for m in self.all:
            for kind in m.observes:
                self.by_kind[kind] = self.by_kind.get(kind, ()) + (m,)
            for cmd in m.commands:
                if cmd in self.by_command:
                    raise ValueError(f"command {cmd!r} claimed by {self.by_command[cmd].name} and {m.name}")
                self.by_command[cmd] = m


_DEFAULT: Machines | None = None


def default_machines() -> Machines:
    global _DEFAULT
    if _DEFAULT is None:
        from engine.machines import all_machines
        _DEFAULT = Machines(all_machines())
    return _DEFAULT
