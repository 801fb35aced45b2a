"""The pod machine ("pod"): fenced deletes, create-race adoption, namespaces, orphan sweeps.

This is the safety core: a wrong delete of someone's running pod is the worst thing kfold can do.
``DISPATCH`` below is the machine: each (phase, event) pair names the one handler that decides;
the handlers live in ``create``, ``delete``, ``namespace``, ``sweep`` (orphan Secrets) and
``orphans`` (orphan pods), over the records in ``records``.
The operation table (``TABLE``), its moves (``PodMove``, ``fire``), the acts every pod operation
shares (``save``, ``send_*``, ``settled``) and the reductions of a Pod (``view_of``, ``refenced``) live here, before the
handler modules are imported: folding a plain Pod event enters this one file.

Phases: a pod key's ``PodOp.phase`` (``PHASES``) or ``absent`` (no entry); the namespace
key ``<cluster>/<namespace>/`` is phase ``namespace``, a sweep's key ``sweep`` or ``orphans``.
Events: the seam models (``engine.seams``: ``CreatePod``, ``DeletePod``, ``EnsureNamespaceRequest``,
``SweepSecrets``, ``SweepOrphans``), ``Outcome``, and the reduced events below (``Seen``,
``Vanished``, ``Missing``, ``InDoubt``, ``Budget``, ``RetryDue``).

Messages (``ctx.tell("pod", key, ...)``), answered with ``ctx.tell(reply_to, reply_key, ...)``:
- ``create`` {manifest, reply_to, reply_key, session, generation[, budget_s]} at a pod key ->
  ``pod_created`` {pod, uid, adopted} | ``pod_create_failed`` {pod, reason}
- ``delete`` {reply_to, reply_key, reason[, budget_s]} at a pod key ->
  ``pod_gone`` {pod} | ``pod_delete_failed`` {pod, reason}
- ``ensure_namespace`` {reply_to, reply_key} at ``<cluster>/<namespace>/`` ->
  ``namespace_ready`` {namespace} | ``namespace_failed`` {namespace, reason}
Commands ``pod.sweep_secrets`` {cluster, namespace ("" = all), grace_seconds (default 600)} and
``pod.sweep_orphans`` {cluster, namespace, home}.

Guarantees:
- Only pods labelled managed-by kfold are tracked, unless an operation already tracks the name.
- An outcome is acted on only if it answers the effect the entry awaits; late, duplicate or
  superseded outcomes decide nothing.
- An effect in doubt after a crash is resolved by a quorum read (pods) or by repeating an
  idempotent request (namespaces); a delete is never re-sent blindly. The doubt is resolved with
  the operation's whole budget from then on (re-armed by ``save``): what came before was time
  this replica could not act.

The operation table. Phases of one pod name (``PodOp.phase``)::

    idle --create--> creating --exists--> confirming --absent--> creating
    idle --delete--> deleting --accepted--> terminating
    idle|deleting|reading|terminating --read--> reading --fenced--> deleting
    idle|reading --wait--> terminating            (the pod is already terminating)
    any but idle --settle--> idle                 (the operation answered its callers)

No handler moves a phase: one that wants a move answers ``PodMove(e, event, then, changes)`` (``move``;
``settled`` for the move to idle), and the dispatcher (``dispatch``) makes it (``fire``, the one
caller of ``TABLE.next``): the record moved by the trigger with the changes, then the act ``then``
(``send_create``, ``send_read``, ``send_delete``, ``save``, ...), whose answer may be a move again
(``send_delete`` without a complete fence answers the read). ``tests/unit/test_pod_moves.py``.

Guarantees:
- ``send_delete`` is the only place a pod operation's ``DeleteObject`` is built, and it refuses to
  build one without a complete fence for the target uid (it re-reads instead): no unfenced delete
  exists. (The orphan-pod sweep, ``pod.orphans``, builds its own, fenced by the uid and
  resourceVersion of a quorum list, and never retries one.)
- Every operation is armed with a budget timer on server time as soon as a record carries one;
  with no server time yet the budget waits rather than guesses. An operation in doubt (a restart,
  or a takeover of what a standby held) is armed again, with its whole budget, when the doubt's
  resolution begins (``PodMachine.on_in_doubt``).
- Quorum reads that fail transiently are retried after a backoff on server time (never a delete).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from pydantic import TypeAdapter

from engine import backoff
from engine.labels import GENERATION_LABEL as GENERATION, MANAGED_BY, MANAGER
from engine.labels import SESSION_LABEL as SESSION
from engine.machines.base import (Ctx, Dispatch, InDoubt, Machine, RetryDue, Table, UnknownEvent, ignore,
                                  missing_after_relist, split_key)
from engine.machines.pod.records import (DEFAULT_BUDGET_S, ORPHANS_NAME, SWEEP_NAME, Entries, PodOp, PodView, Reply,
                                        reply_list)
from engine.effects.models import CreateObject, DeleteObject, Effect, EnsureNamespace, GetObject, ListObjects
from engine.seams import CreatePod, DeletePod, EnsureNamespaceRequest, PodCommand, PodMessage, SweepOrphans, SweepSecrets
from journal.records import Command, Observed, Outcome, Relist

__all__ = ["PodMachine", "TABLE", "DISPATCH"]


# -- the operation table and the acts every pod operation shares ------------------------------
PHASES = ("idle", "creating", "confirming", "deleting", "reading", "terminating")
BUSY = ["creating", "confirming", "deleting", "reading", "terminating"]
TABLE = Table("pod", PHASES, [
    ("create", "idle", "creating"),
    ("exists", ["creating", "confirming"], "confirming"),
    ("absent", "confirming", "creating"),
    ("delete", "idle", "deleting"),
    ("read", ["idle", "deleting", "reading", "terminating"], "reading"),
    ("fenced", "reading", "deleting"),
    ("accepted", "deleting", "terminating"),
    ("wait", ["idle", "reading"], "terminating"),
    ("settle", BUSY, "idle"),
], initial="idle")


class PodMove(NamedTuple):
    """What a handler answers when a pod operation's phase changes: the record as the handler left
    it, the trigger of ``TABLE`` to fire, the act to perform on the moved record (``send_create``,
    ``send_read``, ``send_delete``, ``save``, ...; it may answer a ``PodMove`` of its own) and the
    fields the move changes. No handler moves a phase itself: the dispatcher does (``fire``)."""

    e: PodOp
    event: str
    then: Callable[[Ctx, str, PodOp], Any]
    changes: dict[str, Any]


def move(e: PodOp, event: str, then: Callable[[Ctx, str, PodOp], Any], **changes: Any) -> PodMove:
    return PodMove(e, event, then, changes)


def fire(ctx: Ctx, key: str, answer: Any) -> None:
    """Make what a handler answered: each ``PodMove`` moves its record along ``TABLE`` by its trigger
    (``IllegalTransition`` if the table forbids it) with its changes, then performs its act, until
    an act answers no move. The one place a ``PodOp``'s phase is written; called by ``dispatch``."""
    while isinstance(answer, PodMove):
        e = answer.e
        answer = answer.then(ctx, key, e.but(phase=TABLE.next(e.phase, answer.event), **answer.changes))


def save(ctx: Ctx, key: str, e: PodOp) -> PodOp:
    """Store ``e``, arming the operation budget once the pod's cluster's time is known (a record
    that cluster's clock stamped: a Session's record is stamped on its home cluster's)."""
    now = ctx.now_on(split_key(key)[0])
    if e.op and e.deadline is None and now is not None:
        e = e.but(deadline=now + e.budget_ms)
        ctx.set_timer(key, "budget", e.deadline)
    ctx.put(key, e)
    return e


def _ref(key: str) -> dict[str, str]:
    cluster, namespace, name = split_key(key)
    return {"cluster": cluster, "api_version": "v1", "kind": "Pod", "namespace": namespace, "name": name}


def send_create(ctx: Ctx, key: str, e: PodOp) -> PodOp:
    eff = ctx.emit(CreateObject, key, manifest=e.manifest or {}, **_ref(key))
    return save(ctx, key, e.but(awaiting=eff.id))


def send_read(ctx: Ctx, key: str, e: PodOp) -> PodOp:
    """A quorum GET; its answer may be taken as proof of absence."""
    eff = ctx.emit(GetObject, key, **_ref(key))
    return save(ctx, key, e.but(awaiting=eff.id, missing=False))


def send_delete(ctx: Ctx, key: str, e: PodOp) -> PodOp | PodMove:
    """DELETE fenced by ``(target, rv)``; without a complete fence, a quorum read instead."""
    if not (e.target and e.uid == e.target and e.rv):
        return move(e, "read", send_read)
    eff = ctx.emit(DeleteObject, key, uid=e.target, rv=e.rv, **_ref(key))
    return save(ctx, key, e.but(awaiting=eff.id))


def retry_read(ctx: Ctx, key: str, e: PodOp, rec: Outcome, fail: Any) -> PodMove | None:
    """A quorum read failed transiently (its executor's attempts spent): the same read goes again as
    the next attempt of its own loop when ``backoff.POD_READ`` says (``Ctx.retry``), or ``fail``."""
    e = e.but(attempts=e.attempts + 1)
    if ctx.retry(backoff.POD_READ):
        save(ctx, key, e.but(awaiting=rec.effect_id))
        return None
    return fail(ctx, key, e.but(awaiting=""), f"could not read pod {name_of(key)} after {e.attempts} "
                                              "failed answers and there is no server time to back off on")


def settled(ctx: Ctx, key: str, e: PodOp, then: Callable[[Ctx, str, PodOp], Any], **changes: Any) -> PodMove:
    """``e``'s operation finished (its timers cancelled here): the move to idle that forgets its
    callers (already told), then ``then``."""
    ctx.cancel_timer(key, "budget")
    ctx.cancel_timer(key, "retry")   # a read's retry set by an earlier version (a timer)
    ctx.drop_retries(key)
    return move(e, "settle", then, op="", replies=(), target="", reason="", manifest=None, awaiting="",
                attempts=0, deadline=None, **changes)


def tell_all(ctx: Ctx, replies: tuple[Reply, ...], message: str, **args: Any) -> None:
    for r in replies:
        ctx.tell(r.to, r.key, message, **args)


def name_of(key: str) -> str:
    cluster, namespace, name = split_key(key)
    return f"{namespace}/{name}"


# -- reductions of a Pod (every Pod event) ----------------------------------------------------
_VIEW: TypeAdapter[PodView] = TypeAdapter(PodView)


def view_of(obj: dict[str, Any] | None, uid: str = "", rv: str = "") -> PodView:
    """Reduce a Pod object; ``uid``/``rv`` fill in what the object lacks (e.g. a bare event).

    Hot path (every Pod event): when every field is already of its declared type the view is built
    directly; otherwise ``_VIEW`` validates, refusing (or coercing) what a pydantic ``PodView``
    did, with the same errors. Either way the result equals the plain form, a validated record
    (tests/unit/test_fastpath_pod_observe.py)."""
    md = (obj or {}).get("metadata") or {}
    labels = md.get("labels") or {}
    uid, rv = md.get("uid") or uid, md.get("resourceVersion") or rv
    managed, session = labels.get(MANAGED_BY) == MANAGER, labels.get(SESSION, "")
    generation, terminating = labels.get(GENERATION, ""), bool(md.get("deletionTimestamp"))
    if (type(uid) is str and type(rv) is str and type(session) is str and type(generation) is str
            and type(managed) is bool):
        return PodView(uid, rv, managed, session, generation, terminating)
    return _VIEW.validate_python({"uid": uid, "rv": rv, "managed": managed, "session": session,
                                  "generation": generation, "terminating": terminating})


def refenced(e: PodOp, uid: str, rv: str, terminating: bool) -> PodOp:
    """``e.but(uid=uid, rv=rv, terminating=terminating)``: the same record (fields, fields set,
    serialized form; no validation, as ``but``), built without pydantic's generic copy machinery,
    which costs more than the rest of the step: a fence moves on nearly every Pod event."""
    rec = _new(PodOp)
    fields = e.__dict__.copy()
    fields["uid"], fields["rv"], fields["terminating"] = uid, rv, terminating
    _set(rec, "__dict__", fields)
    _set(rec, "__pydantic_fields_set__", e.__pydantic_fields_set__ | _FENCE)
    _set(rec, "__pydantic_extra__", None)
    _set(rec, "__pydantic_private__", None)
    return rec


_FENCE = frozenset({"uid", "rv", "terminating"})
_new = object.__new__
_set = object.__setattr__


# the handler modules use the acts above: imported once those are defined
from engine.machines.pod import create, delete, namespace, orphans, sweep  # noqa: E402


# -- the machine's own reduced events -----------------------------------------------------------
class Seen(NamedTuple):
    """An ADDED or MODIFIED event of the pod, reduced."""
    view: PodView


class Vanished(NamedTuple):
    """A DELETED event of the pod ``uid`` (None: proof of absence of any uid)."""
    uid: str | None


class Missing(NamedTuple):
    """A relist lacks the pod: a suspect, not proof (``missing_after_relist``)."""


class Budget(NamedTuple):
    """The operation's budget timer fired."""


# -- handlers that only route the event to an operation's own function ---------------------------
def _track(ctx: Ctx, key: str, e: None, ev: Seen) -> None:
    if ev.view.managed:
        ctx.put(key, PodOp(uid=ev.view.uid, rv=ev.view.rv, terminating=ev.view.terminating))


def _refence(ctx: Ctx, key: str, e: PodOp, ev: Seen) -> None:
    view = ev.view
    if e.uid == view.uid and e.rv == view.rv and e.terminating == view.terminating:
        save(ctx, key, e)  # re-observed unchanged (a relist, a resync): the fence stands as it is
    else:  # the common case: a new resourceVersion moves the fence
        save(ctx, key, refenced(e, view.uid, view.rv, view.terminating))


def _forget(ctx: Ctx, key: str, e: PodOp, ev: Any) -> None:
    """An idle fence is a cache of the last observation: forgotten when its pod goes (or a relist
    lacks it; a later delete starts from a quorum read when it has no fence, so this never deletes)."""
    if isinstance(ev, Missing) or ev.uid is None or not ev.uid or ev.uid == e.uid:
        ctx.drop(key)


def _unfence(ctx: Ctx, key: str, e: PodOp, ev: Any) -> None:
    """A create in flight only forgets its fence."""
    if isinstance(ev, Missing) or ev.uid is None or ev.uid == e.uid:
        save(ctx, key, e.but(uid="", rv="", terminating=False))


def _reread(ctx: Ctx, key: str, e: PodOp, ev: Missing) -> PodMove | None:
    """A delete waiting for the pod to go re-reads it (quorum GET; its 404 answers ``pod_gone``);
    one with a request in flight notes the relist (``missing``), and an answer of that request
    that leaves the pod terminating is followed by the quorum read: the pod may be gone already,
    and no watch started after the relist will tell its DELETED."""
    if not e.awaiting:
        return move(e, "read", send_read)
    save(ctx, key, e.but(missing=True))
    return None


def _create(ctx: Ctx, key: str, e: PodOp | None, msg: CreatePod) -> PodMove | None:
    return create.start(ctx, key, _reply(msg), msg, _budget_ms(msg))


def _create_again(ctx: Ctx, key: str, e: PodOp, msg: CreatePod) -> None:
    if (e.session, e.generation) == (msg.session, msg.generation):
        save(ctx, key, e.but(replies=reply_list(e.replies, msg.reply_to, msg.reply_key)))
    else:
        _refuse_create(ctx, key, e, msg, f"being created for session {e.session} generation {e.generation}")


def _create_while_deleting(ctx: Ctx, key: str, e: PodOp, msg: CreatePod) -> None:
    _refuse_create(ctx, key, e, msg, "being deleted")


def _refuse_create(ctx: Ctx, key: str, e: PodOp, msg: CreatePod, busy: str) -> None:
    ctx.tell(msg.reply_to, msg.reply_key, "pod_create_failed", pod=key,
             reason=f"pod {name_of(key)} is {busy}; refusing a second create")


def _delete(ctx: Ctx, key: str, e: PodOp | None, msg: DeletePod) -> PodMove:
    return delete.start(ctx, key, (_reply(msg),), msg.reason, _budget_ms(msg), msg.session)


def _delete_after_create(ctx: Ctx, key: str, e: PodOp, msg: DeletePod) -> None:
    save(ctx, key, e.but(then_delete=reply_list(e.then_delete, msg.reply_to, msg.reply_key)))


def _delete_again(ctx: Ctx, key: str, e: PodOp, msg: DeletePod) -> None:
    save(ctx, key, e.but(replies=reply_list(e.replies, msg.reply_to, msg.reply_key)))


def _ensure_namespace(ctx: Ctx, key: str, e: Any, msg: EnsureNamespaceRequest) -> None:
    namespace.ensure(ctx, key, _reply(msg))


def _reply(msg: PodMessage) -> Reply:
    return Reply(to=msg.reply_to, key=msg.reply_key)


def _budget_ms(msg: CreatePod | DeletePod) -> int:
    return (msg.budget_s if msg.budget_s is not None else DEFAULT_BUDGET_S) * 1000


def _op_in_doubt(operation: Any) -> Any:
    def resolve(ctx: Ctx, key: str, e: PodOp, ev: InDoubt) -> PodMove | None:
        return operation(ctx, key, e.but(awaiting="", deadline=None))
    resolve.__qualname__ = f"{operation.__module__.rsplit('.', 1)[-1]}.{operation.__name__}"
    return resolve


def _entry_in_doubt(handler: Any) -> Any:
    def resolve(ctx: Ctx, key: str, e: Any, ev: InDoubt) -> None:
        handler(ctx, key, ev.effect)
    resolve.__qualname__ = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
    return resolve


def _entry_outcome(handler: Any) -> Any:
    def answer(ctx: Ctx, key: str, e: Any, ev: tuple[Outcome, Effect]) -> None:
        handler(ctx, key, *ev)
    answer.__qualname__ = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
    return answer


def _op_outcome(handler: Any) -> Any:
    def answer(ctx: Ctx, key: str, e: PodOp, ev: tuple[Outcome, Effect]) -> PodMove | None:
        return handler(ctx, key, e.but(awaiting=""), ev[0])
    answer.__qualname__ = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
    return answer


def _over_budget(ctx: Ctx, key: str, e: PodOp, ev: Budget) -> PodMove:
    reason = (f"{e.op} of pod {name_of(key)} exceeded its budget of {e.budget_ms // 1000} s "
              f"(still {e.phase}); nothing more is sent for it")
    ctx.log(key, reason, level="warning")
    return (create.fail if e.op == "create" else delete.fail)(ctx, key, e.but(awaiting=""), reason)


def _read_again(ctx: Ctx, key: str, e: PodOp, ev: RetryDue) -> None:
    if not e.awaiting:
        send_read(ctx, key, e)


def _namespace_retry(ctx: Ctx, key: str, e: Any, ev: Any) -> None:
    namespace.on_deadline(ctx, key)


def _sweep_secrets(ctx: Ctx, key: str, e: Any, ev: tuple[Command, SweepSecrets]) -> None:
    sweep.start(ctx, *ev)


def _sweep_orphans(ctx: Ctx, key: str, e: Any, ev: tuple[Command, SweepOrphans]) -> None:
    orphans.start(ctx, ev[1])


# The pod machine. A pod key's phase is its operation (``PodOp.op``: ``idle`` for none, ``absent``
# for no entry; the operation's own steps are ``PodOp.phase``, moved by ``TABLE``); the other
# keys' phase is their entry kind. An answer's event is the class of the effect it answers.
DISPATCH = Dispatch("pod", [
    # observations of the pod
    ("absent", Seen, _track),
    (("idle", "create"), Seen, _refence),
    ("delete", Seen, delete.observed),
    ("absent", Vanished, ignore),
    ("idle", Vanished, _forget),
    ("create", Vanished, _unfence),
    ("delete", Vanished, delete.vanished),
    ("idle", Missing, _forget),
    ("create", Missing, _unfence),
    ("delete", Missing, _reread),
    # requests
    (("absent", "idle"), CreatePod, _create),
    ("create", CreatePod, _create_again),
    ("delete", CreatePod, _create_while_deleting),
    (("absent", "idle"), DeletePod, _delete),
    ("create", DeletePod, _delete_after_create),
    ("delete", DeletePod, _delete_again),
    ("namespace", EnsureNamespaceRequest, _ensure_namespace),
    ("sweep", SweepSecrets, _sweep_secrets),
    ("orphans", SweepOrphans, _sweep_orphans),
    # answers: a pod operation hears only the outcome it awaits (``PodMachine.on_outcome``)
    ("create", CreateObject, _op_outcome(create.created)),
    ("create", GetObject, _op_outcome(create.confirmed)),
    ("delete", DeleteObject, _op_outcome(delete.deleted)),
    ("delete", GetObject, _op_outcome(delete.read)),
    ("namespace", EnsureNamespace, _entry_outcome(namespace.on_outcome)),
    ("sweep", ListObjects, _entry_outcome(sweep.on_outcome)),
    ("sweep", DeleteObject, _entry_outcome(sweep.on_outcome)),
    ("orphans", ListObjects, _entry_outcome(orphans.on_outcome)),
    ("orphans", GetObject, _entry_outcome(orphans.on_outcome)),
    ("orphans", DeleteObject, _entry_outcome(orphans.on_outcome)),
    ("create", InDoubt, _op_in_doubt(create.in_doubt)),
    ("delete", InDoubt, _op_in_doubt(delete.in_doubt)),
    ("namespace", InDoubt, _entry_in_doubt(namespace.in_doubt)),
    ("sweep", InDoubt, _entry_in_doubt(sweep.in_doubt)),
    ("orphans", InDoubt, _entry_in_doubt(orphans.in_doubt)),
    # timers
    (("create", "delete"), Budget, _over_budget),
    (("create", "delete"), RetryDue, _read_again),
    (("absent", "idle"), Budget, ignore),
    (("absent", "idle"), RetryDue, ignore),
    ("namespace", Budget, _namespace_retry),
    ("namespace", RetryDue, _namespace_retry),
    (("sweep", "orphans"), Budget, ignore),
    (("sweep", "orphans"), RetryDue, ignore),
])
ENTRIES = ("namespace", "sweep", "orphans")
_DEADLINES = {"budget": Budget, "retry": RetryDue}
_KEY_PHASES = {SWEEP_NAME: "sweep", ORPHANS_NAME: "orphans", "": "namespace"}


def dispatch(ctx: Ctx, key: str, phase: str, event: type, e: Any, ev: Any) -> None:
    """The pod machine's dispatcher: the handler ``DISPATCH`` names for ``(phase, event)`` decides on
    ``ev``; a ``PodMove`` it answers is made here (``fire``), the only place a pod's phase moves."""
    answer = DISPATCH.handler(phase, event)(ctx, key, e, ev)
    if answer is not None:
        fire(ctx, key, answer)


def op_phase(e: Any) -> str:
    """The phase of a pod key's entry: its operation, ``idle`` for none, ``absent`` for no entry."""
    return (e.op or "idle") if isinstance(e, PodOp) else "absent"


def phase_of(key: str, e: Any) -> str:
    """The phase of the key an answer, a doubt or a timer is about: the entry kind of a namespace
    or sweep key, else the pod operation's (``op_phase``)."""
    return _KEY_PHASES.get(key.rpartition("/")[2]) or op_phase(e)


class PodMachine(Machine):
    name = "pod"
    decision = Entries  # type: ignore[assignment]  # a union of four entry kinds, see records
    observes = frozenset({"Pod"})
    commands = frozenset({"pod.sweep_secrets", "pod.sweep_orphans"})
    typed_messages = True
    questions = frozenset({"uid"})

    def answer(self, question: str, table: Any, *args: Any) -> Any:
        """``uid`` (pod key): the uid of the pod kfold has seen at that key, "" for none."""
        e = table.get(args[0])
        return e.uid if isinstance(e, PodOp) else ""

    def _run(self, ctx: Ctx, key: str, ev: Any) -> None:
        e = ctx.get(key)
        dispatch(ctx, key, op_phase(e), type(ev), e, ev)

    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        key = f"{rec.cluster}/{rec.namespace}/{rec.name}"  # object_key, inlined: runs on every Pod event
        view = view_of(rec.obj, rec.uid, rec.rv)
        self._run(ctx, key, Vanished(view.uid) if rec.event == "DELETED" else Seen(view))

    def on_relist(self, ctx: Ctx, rec: Relist) -> None:
        pods = [k for k, e in ctx.items() if isinstance(e, PodOp)]
        for key in missing_after_relist(pods, rec):
            self._run(ctx, key, Missing())

    def on_receive(self, ctx: Ctx, key: str, msg: PodMessage) -> None:
        if isinstance(msg, EnsureNamespaceRequest):
            return dispatch(ctx, key, "namespace", EnsureNamespaceRequest, ctx.get(key), msg)
        self._run(ctx, key, msg)

    def on_command(self, ctx: Ctx, rec: Command, cmd: PodCommand) -> None:
        where = sweep.key_of(rec, cmd) if isinstance(cmd, SweepSecrets) else orphans.key_of(cmd)
        dispatch(ctx, where, phase_of(where, None), type(cmd), ctx.get(where), (rec, cmd))

    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Effect) -> None:
        key = effect.key
        e = ctx.get(key)
        phase = phase_of(key, e)
        if phase in ENTRIES or (isinstance(e, PodOp) and e.awaiting == effect.id):
            dispatch(ctx, key, phase, type(effect), e, (rec, effect))

    def on_in_doubt(self, ctx: Ctx, effect: Effect) -> None:
        key = effect.key
        e = ctx.get(key)
        phase = phase_of(key, e)
        if phase in ENTRIES or (isinstance(e, PodOp) and e.awaiting == effect.id):
            dispatch(ctx, key, phase, InDoubt, e, InDoubt(effect))

    def on_deadline(self, ctx: Ctx, key: str, name: str) -> None:
        event = _DEADLINES.get(name)
        e = ctx.get(key)
        if event is None:
            raise UnknownEvent(self.name, phase_of(key, e), f"deadline {name!r}")
        dispatch(ctx, key, phase_of(key, e), event, e, event())
