"""What every machine shares: one table shape, one move type, one ``fire``, one handler signature.

A machine is a table plus small pure functions (h11's ``_state.py``: the table *is* the protocol).
The dialect every machine (``pod``, ``repo``, ``session``) speaks:

- **The table** ``DISPATCH = Dispatch(machine, rows, phases=TABLE, kinds=(...))``: rows
  ``(key or keys, event class, handler)``. A row's key is a phase of the machine's phase table
  (``TABLE``, a ``Table``: the pod machine's ``idle``..``terminating``, a Repo's ``idle``..
  ``verifying``, a Session's ``Pending``..``Stopped``), or, for a key that holds no phase, a name
  for what it is, declared in ``kinds`` (``absent``: no record at the key; the pod machine's
  ``namespace``/``sweep``/``orphans`` entries; the repo machine's ``config``). A row naming
  anything else is refused when the table is built, as is a second row for one (key, event).
- **The events**: a seam model (``engine.seams``: a message or a command), a journal record class,
  a machine's own reduced event (``Seen``, ``Vanished``, ...), or the shared ones below:
  ``Answered`` (an outcome; its row's event class is the class of the *effect* it answers),
  ``Stale`` (an outcome or a doubt about an effect the record no longer awaits), ``Reported`` (one
  of a request no record waits for by design), ``InDoubt``, ``RetryDue``, ``Missing`` (a relist
  lacks it), ``Ordered`` (a command; its row's event class is the command's model).
- **The one lookup** ``DISPATCH.run(ctx, key, phase, event_class, record, event)``: the handler the
  table names for ``(phase, event_class)`` is called, and its answer is made (``fire``). A pair no
  row names is ``UnknownEvent`` naming both, never a silent default; what a phase ignores is a
  row too (``ignore``).
- **The handler** ``handler(ctx, key, record, event) -> Answer``: ``record`` is what the machine
  holds at ``key`` (None for none). It reads and writes its records through ``ctx`` (``Ctx``),
  emits effects and tells other machines; it never moves a phase itself.
- **The move** ``Move(key, record, trigger, then, changes)`` (``move(...)``): a handler whose
  record's phase changes answers one; ``Answer`` is a ``Move``, an iterator of them (a handler that
  starts several operations: each is made before the next is taken) or None (nothing moves).
- **``fire``**, called only by ``Dispatch.run``: the record moved along the phase table by the
  trigger (None: the phase stays; a tuple: each in turn; ``IllegalTransition`` if a row is missing)
  with the changes, then the act ``then(ctx, key, moved)`` (None: ``ctx.put(key, moved)``), whose
  own answer is made in turn. The one place any record's ``phase`` is written.

Handlers never import another machine: they ``ctx.tell(key, DeletePod(...))`` instead (a seam
model, ``engine.seams``: it names the machine and the message), and read another machine only
through ``ctx.ask``.

Phase tables (``Table``, ``IllegalTransition``) live in ``engine.machines.phases``; import them
from here or there.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Iterable, NamedTuple, Protocol, TypeVar, Union, runtime_checkable

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from engine.effects.models import Effect
from engine.machines.phases import IllegalTransition, Table
from engine.seams import Message
from journal.records import Command, Observed, Outcome, Relist


class UnknownEvent(IllegalTransition):
    """An (phase, event) pair that no row of a machine's dispatch table names (names both)."""

    def __init__(self, machine: str, phase: str, event: str):
        super().__init__(f"{machine}: no handler for event {event} in phase {phase!r}")
        self.machine, self.phase, self.event = machine, phase, event


Act = Callable[["Ctx", str, Any], "Answer"]
_NO_CHANGES: Mapping[str, Any] = MappingProxyType({})


class Move(NamedTuple):
    """A handler's (or an act's) answer when a record's phase changes: the record at ``key`` as the
    handler left it, the trigger(s) of the machine's phase table (None: the phase stays), the act
    to perform on the moved record (None: store it) and the fields the move changes."""

    key: str
    record: Any
    trigger: str | tuple[str, ...] | None
    then: Act | None = None
    changes: Mapping[str, Any] = _NO_CHANGES


Answer = Union[Move, Iterator[Any], None]
Handler = Callable[["Ctx", str, Any, Any], Answer]   # handler(ctx, key, record, event)


def move(key: str, record: Any, trigger: str | tuple[str, ...] | None, then: Act | None = None,
         **changes: Any) -> Move:
    """``Move(key, record, trigger, then, changes)``."""
    return Move(key, record, trigger, then, changes or _NO_CHANGES)


def moved(table: Table, m: Move) -> Decision:
    """``m``'s record in the phase its trigger(s) lead to, with its changes (pure;
    ``IllegalTransition`` if ``table`` has no row for a trigger)."""
    phase = m.record.phase
    if isinstance(m.trigger, str):
        phase = table.next(phase, m.trigger)
    elif m.trigger is not None:
        for trigger in m.trigger:
            phase = table.next(phase, trigger)
    return m.record.but(phase=phase, **m.changes)


def fire(ctx: "Ctx", table: Table, answer: Any) -> None:
    """Make what a handler answered: each ``Move``'s record moved along ``table`` (``moved``), then
    its act, until an act answers no move; an iterator's moves each in turn, each made before the
    next is drawn. Anything else (None, a record an act returns to its own callers) ends it. Called
    only by ``Dispatch.run``: the one place a phase is written."""
    while True:
        if isinstance(answer, Move):
            record = moved(table, answer)
            if answer.then is None:
                ctx.put(answer.key, record)
                return
            answer = answer.then(ctx, answer.key, record)
        elif isinstance(answer, Iterator):
            for each in answer:
                fire(ctx, table, each)
            return
        else:
            return


class Dispatch:
    """A machine's one dispatch table: ``Dispatch(machine, [(key or keys, event or events, handler),
    ...], phases=TABLE, kinds=(...))``, shaped as h11's ``EVENT_TRIGGERED_TRANSITIONS``. ``event`` is a
    class: a seam model (``engine.seams``), a journal record class, an effect class (its answers,
    ``Answered``) or one of the machine's own reduced events.

    Guarantees: every row's key is a state of ``phases`` or one of ``kinds`` (a key that is no
    phase, named for what it is); a (key, event) pair names at most one handler (a second row for
    it is refused when the table is built); ``handler(phase, event)`` is the one lookup, and a pair
    no row names is ``UnknownEvent`` naming both, never a silent default. What a machine ignores in
    a phase is a row too (``ignore``). ``run`` looks up, calls and makes the answer (``fire``)."""

    def __init__(self, machine: str, rows: Iterable[tuple[Any, Any, Any]], phases: Table | None = None,
                 kinds: Iterable[str] = ()):
        self.machine = machine
        self.rows = tuple(rows)
        self.table = phases
        self.kinds = tuple(kinds)
        known = set(self.kinds) | set(phases.states if phases is not None else ())
        self._handlers: dict[tuple[str, type], Any] = {}
        for phases_, events, handler in self.rows:
            for phase in (phases_,) if isinstance(phases_, str) else phases_:
                for event in events if isinstance(events, tuple) else (events,):
                    if phases is not None and phase not in known:
                        raise ValueError(f"{machine}: row for event {event.__name__} names {phase!r}, which is "
                                         f"neither a phase of {phases.name!r} nor a declared kind")
                    if (phase, event) in self._handlers:
                        raise ValueError(f"{machine}: two rows for event {event.__name__} in phase {phase!r}")
                    self._handlers[(phase, event)] = handler

    def handler(self, phase: str, event: type) -> Handler:
        found = self._handlers.get((phase, event))
        if found is None:
            raise UnknownEvent(self.machine, phase, event.__name__)
        return found

    def run(self, ctx: "Ctx", key: str, phase: str, event: type, record: Any, ev: Any) -> None:
        """The one lookup: the handler for ``(phase, event)`` decides on ``ev`` about ``record`` (at
        ``key``), and its answer is made (``fire``)."""
        answer = self.handler(phase, event)(ctx, key, record, ev)
        if answer is not None:
            fire(ctx, self.table, answer)  # type: ignore[arg-type]  # a table that moves nothing answers None

    def pairs(self) -> list[tuple[str, str, str]]:
        """``[(phase, event, handler)]`` by name, in row order: the table as data."""
        return [(p, e.__name__, getattr(h, "__qualname__", repr(h))) for (p, e), h in self._handlers.items()]


class Answered(NamedTuple):
    """The outcome ``rec`` of ``effect`` (its table row's event class is ``type(effect)``)."""
    rec: Outcome
    effect: Effect


class Stale(NamedTuple):
    """An outcome (``rec``) or a doubt (``rec`` None) about ``effect``, which the record at its key no
    longer awaits: late, duplicate or superseded. Decides nothing, unless a row says otherwise."""
    rec: Outcome | None
    effect: Effect


class Reported(NamedTuple):
    """An outcome (``rec``) or a doubt (``rec`` None) of a request no record waits for by design (a
    sweep's deletes: each is sent once and its answer only reported)."""
    rec: Outcome | None
    effect: Effect


class Ordered(NamedTuple):
    """The command ``cmd`` (a seam model; its row's event class is ``type(cmd)``), in record ``rec``."""
    rec: Command
    cmd: BaseModel


class InDoubt(NamedTuple):
    """``effect`` was issued before a crash and has no outcome (an event of every machine)."""
    effect: Effect


class Missing(NamedTuple):
    """A relist lacks an object the machine tracks: a suspect, not proof (``missing_after_relist``)."""


class RetryDue(NamedTuple):
    """A failed request's backoff passed (a machine's retry timer; ``engine.backoff``)."""


def ignore(*_args: Any) -> None:
    """The handler of a (phase, event) pair that decides nothing."""


class Decision(BaseModel):
    """Base for per-object decision records: small, frozen, serializable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def but(self, **changes: Any) -> "Decision":
        """``self.model_copy(update=changes)``: the same record (fields, fields set, serialized
        form; no validation, as ``model_copy``), built without pydantic's generic copy machinery
        (``__copy__`` copies each slot through ``copy.copy``), which was the largest single cost of
        folding a Session record: a decision is copied several times per step."""
        new = _new(type(self))
        fields = self.__dict__.copy()
        fields.update(changes)
        _set(new, "__dict__", fields)
        _set(new, "__pydantic_fields_set__", self.__pydantic_fields_set__ | changes.keys())
        _set(new, "__pydantic_extra__", None)     # extra="forbid": never any
        _set(new, "__pydantic_private__", None)   # no private attributes on a decision
        return new


_new = object.__new__
_set = object.__setattr__


V = TypeVar("V")
E = TypeVar("E", bound=Effect)
Reading = Union[str, set[str], None]   # what ``Ctx.ask`` answers (``Machine.answer``)


def remember(memo: dict[Any, V], key: Any, value: V, limit: int) -> V:
    """Keep ``value`` under ``key`` in ``memo``, dropping its oldest entry once it holds ``limit``;
    returns ``value``. For the fold's bounded memos (``session.flow.spec_of``,
    ``session.flow._wanted_endpoints``)."""
    if len(memo) >= limit:
        del memo[next(iter(memo))]
    memo[key] = value
    return value


class Reply(Decision):
    """Where a machine sends its answer: ``ctx.tell(key, reply, to=to)`` (the pod machine's callers,
    the repo machine's waiters and subscribers). Snapshots written when the repo machine spelt
    ``to`` as ``machine`` still load."""

    to: str = Field(validation_alias=AliasChoices("to", "machine"))
    key: str


@runtime_checkable
class Ctx(Protocol):
    """What a machine handler sees and does during one fold step (implemented by
    ``engine.core.StepContext``). Reads and writes go to the step's working copy; nothing is
    visible outside until the fold returns. ``now`` is the only clock a decision may read."""

    record: Any
    now: int | None

    def get(self, key: str, machine: str | None = None) -> Decision | None: ...

    def put(self, key: str, decision: Decision) -> None: ...

    def drop(self, key: str) -> None: ...

    def items(self, machine: str | None = None) -> Iterable[tuple[str, Decision]]: ...

    def now_on(self, cluster: str) -> int | None: ...

    def set_timer(self, key: str, name: str, due: int, cluster: str = "") -> None: ...

    def cancel_timer(self, key: str, name: str) -> None: ...

    def timer_due(self, key: str, name: str) -> int | None: ...

    def emit(self, effect_type: type[E], key: str, **fields: Any) -> E: ...

    def log(self, key: str, message: str, level: str = "info", **fields: Any) -> None: ...

    def tell(self, key: str, message: Message, to: str = "") -> None:
        """``message`` (a seam model: it names its machine) delivered at ``key`` after this handler;
        ``to``, a ``Reply``'s machine, must be the model's."""
        ...

    def pending_for(self, key: str) -> list[Any]: ...

    def retry(self, policy: Any) -> bool:
        """The handler's "retry": the effect whose final outcome is being folded goes again (same id)
        as the next attempt of its own loop, when ``policy`` (``engine.backoff``) says; False:
        terminal, nothing sent."""
        ...

    def drop_retries(self, key: str, match: Callable[[Any], bool] | None = None) -> None:
        """This machine's requests on ``key`` (those ``match`` accepts) waiting for a retry are
        dropped, never sent."""
        ...

    def ask(self, machine: str, question: str, *args: Any) -> Reading:
        """The one read across machines: ``machine``'s answer to a question it declares
        (``Machine.questions``), from this step's working copy, read only; None when that machine
        is not in the fold."""
        ...


class TableView(Protocol):
    """One machine's table as ``Machine.answer`` reads it (read only)."""

    def get(self, key: str) -> Decision | None: ...

    def items(self) -> Iterable[tuple[str, Decision]]: ...


class Machine:
    """Default handlers do nothing; a machine overrides what it owns."""

    name: ClassVar[str] = ""
    decision: ClassVar[type[Decision]] = Decision
    observes: ClassVar[frozenset[str]] = frozenset()   # object kinds, e.g. {"Pod"}
    commands: ClassVar[frozenset[str]] = frozenset()   # command names, e.g. {"repo.bind"}
    questions: ClassVar[frozenset[str]] = frozenset()   # what other machines may ``ask`` it (``answer``)
    typed_messages: ClassVar[bool] = False             # typed seams: ``on_receive(msg model)``, ``on_command(rec, cmd model)``

    def on_observed(self, ctx: Ctx, rec: Observed) -> None: ...

    def on_relist(self, ctx: Ctx, rec: Relist) -> None: ...

    def on_command(self, ctx: Ctx, rec: Command) -> None: ...

    def on_deadline(self, ctx: Ctx, key: str, name: str) -> None: ...

    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Effect) -> None: ...

    def on_in_doubt(self, ctx: Ctx, effect: Effect) -> None:
        """Default for an effect issued before a crash with no outcome: nothing safe to assume.
        Machines with unsafe effects override this to re-observe with a quorum read."""

    def on_quarantine(self, ctx: Ctx, key: str, error: str) -> None:
        """``key`` was just quarantined (a machine raised on a record about it; ``engine.core``):
        a machine that owns it may report that where a user looks (a status). Its decision must
        stay as it is; raising here only drops the report."""

    def answer(self, question: str, table: "TableView", *args: Any) -> Reading:
        """The answer to ``Ctx.ask(self.name, question, *args)`` from this machine's ``table``."""
        raise UnknownEvent(self.name, "any", f"question {question!r}")

    def on_message(self, ctx: Ctx, key: str, message: str, args: dict[str, Any]) -> None:
        """A message to a machine whose messages are not typed (``typed_messages`` False)."""
        raise IllegalTransition(f"{self.name}: unknown message {message!r}")

    def on_receive(self, ctx: Ctx, key: str, msg: Message) -> None:
        """A message to a typed machine: its model, validated once where it was sent
        (``engine.seams.MESSAGES``; ``Ctx.tell``)."""
        raise UnknownEvent(self.name, "any", type(msg).__name__)


def object_key(cluster: str, namespace: str, name: str) -> str:
    return f"{cluster}/{namespace}/{name}"


def split_key(key: str) -> tuple[str, str, str]:
    cluster, namespace, name = key.split("/", 2)
    return cluster, namespace, name


def missing_after_relist(tracked: Iterable[str], rec: Relist) -> list[str]:
    """Keys the machine tracks for this relist's cluster and scope that the list no longer holds.

    These are suspects, never proof of absence (DESIGN invariant 9, seed 001). A list is folded
    when it is journaled, which may be after an outcome newer than the list itself: the observer's
    LIST and the executor's create race, so a pod created at resourceVersion 70540 can be followed
    in the journal by a list taken at 70539 that cannot contain it. Absence proves a deletion only
    from a read newer than everything kfold knows about the object.

    Choice: kfold does not order resourceVersions. The API contract makes them opaque strings
    (clients may compare them for equality only), so "is the list newer than what we know" cannot
    be answered from the strings without leaning on etcd's integers. Instead every caller treats a
    missing key as a reason to re-read that one object with a quorum GET (``GetObject``, no
    resourceVersion), issued after the relist is folded and therefore after everything kfold knew
    when it asked; that GET's 404 is the proof, anything else keeps the object. An object with an
    operation in flight waits for the operation's own outcome instead. The cost is one GET per
    tracked object missing from a relist (rare: relists happen at boot and after a 410)."""
    present = {object_key(rec.cluster, k.namespace, k.name) for k in rec.keys}
    prefix = f"{rec.cluster}/{rec.scope + '/' if rec.scope else ''}"
    return sorted(k for k in tracked if k.startswith(prefix) and k not in present)


def describe(rec: Outcome) -> str:
    """An outcome in words, for a failure reason."""
    detail = f" ({rec.status_reason})" if rec.status_reason else ""
    return f"{rec.result}{detail}: {rec.message}" if rec.message else f"{rec.result}{detail}"
