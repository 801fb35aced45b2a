"""The pod machine ("pod"): fenced deletes, create-race adoption, namespaces, orphan sweeps.

This is the safety core: a wrong delete of someone's running pod is the worst thing kfold can do.
``DISPATCH`` below is the machine (``engine.machines.base``: one table shape, one move, one
``fire``): each (phase, event) pair names the one handler that decides; the handlers live in
``create``, ``delete``, ``namespace``, ``sweep`` (orphan Secrets) and ``orphans`` (orphan pods),
over the records in ``records``. The phase table (``TABLE``), the acts every pod operation shares
(``save``, ``send_*``, ``settled``) and the reductions of a Pod (``view_of``, ``refenced``) live in
``acts``, which the handler modules import; this file imports them all and holds the dispatch.

Table keys: a pod key's ``PodOp.phase`` (``PHASES``: ``idle``, ``creating``, ``confirming``,
``deleting``, ``reading``, ``terminating``) or ``absent`` (no record); the keys that hold no phase
are named for their entry: ``namespace`` (``<cluster>/<namespace>/``), ``sweep`` and ``orphans``.
Events: the seam models (``engine.seams``: ``CreatePod``, ``DeletePod``, ``EnsureNamespaceRequest``,
``SweepSecrets``, ``SweepOrphans``), the effect class an outcome answers, and the reduced events
(``Seen``, ``Vanished``, ``Missing``, ``Budget`` below; ``InDoubt``, ``Stale``, ``RetryDue`` from
``base``).

Messages (``ctx.tell(key, <model>)``, ``engine.seams``), answered with ``ctx.tell(reply_key, <reply>, to=reply_to)``:
- ``CreatePod`` {manifest, reply_to, reply_key, session, generation[, budget_s]} at a pod key ->
  ``PodCreated`` {pod, uid, adopted} | ``PodCreateFailed`` {pod, reason[, taken]}
- ``DeletePod`` {reply_to, reply_key, reason[, budget_s, session]} at a pod key ->
  ``PodGone`` {pod} | ``PodDeleteFailed`` {pod, reason}
- ``EnsureNamespaceRequest`` {reply_to, reply_key} at ``<cluster>/<namespace>/`` ->
  ``NamespaceReady`` {namespace} | ``NamespaceFailed`` {namespace, reason}
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

No handler moves a phase: one that wants a move answers ``base.Move(key, e, trigger, then,
changes)`` (``move``; ``settled`` for the move to idle), and ``DISPATCH.run`` makes it
(``base.fire``): the record moved by the trigger with the changes, then the act ``then``
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

from typing import Any, NamedTuple

from engine.machines.base import (
    Answer, Answered, Ctx, Dispatch, Handler, InDoubt, Machine, Missing, Move, Ordered, Reported, RetryDue, Stale,
    TableView, UnknownEvent, ignore, missing_after_relist,
)
from engine.machines.pod import create, delete, namespace, orphans, sweep
from engine.machines.pod.acts import BUSY, PHASES, TABLE, move, name_of, refenced, save, send_read, view_of
from engine.machines.pod.records import (
    DEFAULT_BUDGET_S, NO_RECORD, SWEEP_KEYS, Entries, PodOp, PodView, Reply, reply_list,
)
from engine.effects.models import CreateObject, DeleteObject, Effect, EnsureNamespace, GetObject, ListObjects
from engine.seams import (
    CreatePod, DeletePod, EnsureNamespaceRequest, PodCommand, PodCreateFailed, PodMessage, SweepOrphans, SweepSecrets,
)
from journal.records import Command, Observed, Outcome, Relist

__all__ = ["PodMachine", "TABLE", "PHASES", "DISPATCH"]


# -- the machine's own reduced events -----------------------------------------------------------
class Seen(NamedTuple):
    """An ADDED or MODIFIED event of the pod, reduced."""
    view: PodView


class Vanished(NamedTuple):
    """A DELETED event of the pod ``uid`` (None: proof of absence of any uid)."""
    uid: str | None


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


def _reread(ctx: Ctx, key: str, e: PodOp, ev: Missing) -> Answer:
    """A delete waiting for the pod to go re-reads it (quorum GET; its 404 answers ``pod_gone``);
    one with a request in flight notes the relist (``missing``), and an answer of that request
    that leaves the pod terminating is followed by the quorum read: the pod may be gone already,
    and no watch started after the relist will tell its DELETED."""
    if not e.awaiting:
        return move(key, e, "read", send_read)
    save(ctx, key, e.but(missing=True))
    return None


def _create(ctx: Ctx, key: str, e: PodOp | None, msg: CreatePod) -> Answer:
    return create.start(ctx, key, _reply(msg), msg, _budget_ms(msg))


def _create_again(ctx: Ctx, key: str, e: PodOp, msg: CreatePod) -> None:
    if (e.session, e.generation) == (msg.session, msg.generation):
        save(ctx, key, e.but(replies=reply_list(e.replies, msg.reply_to, msg.reply_key)))
    else:
        _refuse_create(ctx, key, e, msg, f"being created for session {e.session} generation {e.generation}")


def _create_while_deleting(ctx: Ctx, key: str, e: PodOp, msg: CreatePod) -> None:
    _refuse_create(ctx, key, e, msg, "being deleted")


def _refuse_create(ctx: Ctx, key: str, e: PodOp, msg: CreatePod, busy: str) -> None:
    ctx.tell(msg.reply_key, PodCreateFailed(pod=key, reason=f"pod {name_of(key)} is {busy}; refusing a second create"),
             to=msg.reply_to)


def _delete(ctx: Ctx, key: str, e: PodOp | None, msg: DeletePod) -> Move:
    return delete.start(ctx, key, (_reply(msg),), msg.reason, _budget_ms(msg), msg.session)


def _delete_after_create(ctx: Ctx, key: str, e: PodOp, msg: DeletePod) -> PodOp:
    return save(ctx, key, e.but(then_delete=reply_list(e.then_delete, msg.reply_to, msg.reply_key)))


def _delete_during_create(ctx: Ctx, key: str, e: PodOp, msg: DeletePod) -> Answer:
    """The delete waits for the create in flight; a refused create backing off (nothing awaited)
    ends now, unsent, and the delete starts."""
    e = _delete_after_create(ctx, key, e, msg)
    return None if e.awaiting else create.retry_due(ctx, key, e, None)


def _delete_again(ctx: Ctx, key: str, e: PodOp, msg: DeletePod) -> None:
    save(ctx, key, e.but(replies=reply_list(e.replies, msg.reply_to, msg.reply_key)))


def _reply(msg: PodMessage) -> Reply:
    return Reply(to=msg.reply_to, key=msg.reply_key)


def _budget_ms(msg: CreatePod | DeletePod) -> int:
    return (msg.budget_s if msg.budget_s is not None else DEFAULT_BUDGET_S) * 1000


def _op_in_doubt(operation: Any) -> Handler:
    """A pod operation's effect in doubt: its handler decides with nothing awaited and no deadline
    (the budget is armed again, whole, by the act that resolves the doubt)."""
    def resolve(ctx: Ctx, key: str, e: PodOp, ev: InDoubt) -> Answer:
        return operation(ctx, key, e.but(awaiting="", deadline=None))
    resolve.__qualname__ = f"{operation.__module__.rsplit('.', 1)[-1]}.{operation.__name__}"
    return resolve


def _op_outcome(handler: Any) -> Handler:
    def answer(ctx: Ctx, key: str, e: PodOp, ev: Answered) -> Answer:
        return handler(ctx, key, e.but(awaiting=""), ev.rec)
    answer.__qualname__ = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
    return answer


def _over_budget(fail: Any) -> Handler:
    def over_budget(ctx: Ctx, key: str, e: PodOp, ev: Budget) -> Move:
        reason = (f"{e.op} of pod {name_of(key)} exceeded its budget of {e.budget_ms // 1000} s "
                  f"(still {e.phase}); nothing more is sent for it")
        ctx.log(key, reason, level="warning")
        return fail(ctx, key, e.but(awaiting=""), reason)
    over_budget.__qualname__ = f"{fail.__module__.rsplit('.', 1)[-1]}.over_budget"
    return over_budget


def _read_again(ctx: Ctx, key: str, e: PodOp, ev: RetryDue) -> None:
    if not e.awaiting:
        send_read(ctx, key, e)


# The pod machine: (phase or kind, event) -> handler. A pod key's phase is its record's
# (``PodOp.phase``, moved along ``TABLE``), ``absent`` for no record; the other keys hold no phase
# and are named for what they hold (``records.NO_RECORD``, ``table_key``): ``namespace`` (nothing
# ensured) or ``ensuring``; ``sweep`` (no sweep) or ``listing secrets``, ``listing pods``;
# ``orphans`` (no orphan sweep) or ``sweeping orphans``. An answer's event is the class of the
# effect it answers; one the record does not await is ``Stale``; a sweep's delete's is ``Reported``.
CREATING = ("creating", "confirming")
DELETING = ("deleting", "reading", "terminating")
POD_KEYS = ("absent", *PHASES)
NAMESPACE_KEYS = ("namespace", "ensuring")
SWEEPING = tuple(SWEEP_KEYS.values())
SWEEP_KEYS_ALL = ("sweep", *SWEEPING)
ORPHAN_KEYS = ("orphans", "sweeping orphans")
OTHER_KEYS = (*NAMESPACE_KEYS, *SWEEP_KEYS_ALL, *ORPHAN_KEYS)
DISPATCH = Dispatch("pod", [
    # observations of the pod
    ("absent", Seen, _track),
    (("idle", *CREATING), Seen, _refence),
    (("deleting", "reading"), Seen, delete.observed),
    ("terminating", Seen, delete.observed_terminating),
    ("absent", Vanished, ignore),
    ("idle", Vanished, _forget),
    (CREATING, Vanished, _unfence),
    (DELETING, Vanished, delete.vanished),
    ("idle", Missing, _forget),
    (CREATING, Missing, _unfence),
    (DELETING, Missing, _reread),
    # requests and commands
    (("absent", "idle"), CreatePod, _create),
    (CREATING, CreatePod, _create_again),
    (DELETING, CreatePod, _create_while_deleting),
    (("absent", "idle"), DeletePod, _delete),
    ("creating", DeletePod, _delete_during_create),
    ("confirming", DeletePod, _delete_after_create),
    (DELETING, DeletePod, _delete_again),
    ("namespace", EnsureNamespaceRequest, namespace.ensure),
    ("ensuring", EnsureNamespaceRequest, namespace.join),
    ("sweep", SweepSecrets, sweep.start),
    (SWEEPING, SweepSecrets, sweep.running),
    ("orphans", SweepOrphans, orphans.start),
    ("sweeping orphans", SweepOrphans, orphans.running),
    # answers: a key hears only the outcome its record awaits (the others are ``Stale``)
    ("creating", CreateObject, _op_outcome(create.created)),
    ("confirming", GetObject, _op_outcome(create.confirmed)),
    ("deleting", DeleteObject, _op_outcome(delete.deleted)),
    ("reading", GetObject, _op_outcome(delete.read)),
    ("ensuring", EnsureNamespace, namespace.on_outcome),
    ("listing secrets", ListObjects, sweep.secrets_listed),
    ("listing pods", ListObjects, sweep.pods_listed),
    ("sweeping orphans", ListObjects, orphans.listed),
    ("sweeping orphans", GetObject, orphans.session_read),
    (SWEEP_KEYS_ALL, Reported, sweep.secret_deleted),
    (ORPHAN_KEYS, Reported, orphans.pod_deleted),
    ((*POD_KEYS, *OTHER_KEYS), Stale, ignore),
    # in doubt
    ("creating", InDoubt, _op_in_doubt(create.in_doubt)),
    ("deleting", InDoubt, _op_in_doubt(delete.in_doubt)),
    (("confirming", "reading"), InDoubt, _op_in_doubt(send_read)),
    ("ensuring", InDoubt, namespace.in_doubt),
    (SWEEPING, InDoubt, sweep.in_doubt),
    ("sweeping orphans", InDoubt, orphans.in_doubt),
    # timers
    (CREATING, Budget, _over_budget(create.fail)),
    (DELETING, Budget, _over_budget(delete.fail)),
    ("creating", RetryDue, create.retry_due),
    (tuple(p for p in BUSY if p != "creating"), RetryDue, _read_again),
    ("ensuring", (Budget, RetryDue), namespace.on_deadline),
    (("absent", "idle", "namespace", *SWEEP_KEYS_ALL, *ORPHAN_KEYS), (Budget, RetryDue), ignore),
], phases=TABLE, kinds=("absent", *OTHER_KEYS))
_DEADLINES = {"budget": Budget, "retry": RetryDue}
_REPORTED = frozenset((key, DeleteObject) for key in (*SWEEP_KEYS_ALL, *ORPHAN_KEYS))


def table_key(key: str, e: Any) -> str:
    """The row key of ``key`` holding ``e``: its record's (a pod's phase, an entry's kind), or, with
    none, what the key is for (``records.NO_RECORD``; ``absent`` at a pod key)."""
    return e.table_key if e is not None else NO_RECORD.get(key.rpartition("/")[2], "absent")


def reduced(key: str, e: Any, effect: Effect, outcome: Outcome | None) -> tuple[str, type, Any]:
    """An outcome (``outcome``; None: a doubt) of ``effect`` as the table routes it: (row key, event
    class, event). The effect's class (``InDoubt``) when the record at its key awaits it, or when no
    record waits for it by design (``Reported``: a sweep's deletes); otherwise ``Stale``."""
    phase = table_key(key, e)
    if (phase, type(effect)) in _REPORTED:
        return phase, Reported, Reported(outcome, effect)
    if e is None or not e.awaits(effect.id):
        return phase, Stale, Stale(outcome, effect)
    if outcome is None:
        return phase, InDoubt, InDoubt(effect)
    return phase, type(effect), Answered(outcome, effect)


class PodMachine(Machine):
    name = "pod"
    decision = Entries  # type: ignore[assignment]  # a union of four entry kinds, see records
    observes = frozenset({"Pod"})
    commands = frozenset({"pod.sweep_secrets", "pod.sweep_orphans"})
    typed_messages = True
    questions = frozenset({"uid"})

    def answer(self, question: str, table: TableView, *args: Any) -> str:
        """``uid`` (pod key): the uid of the pod kfold has seen at that key, "" for none."""
        e = table.get(args[0])
        return e.uid if isinstance(e, PodOp) else ""

    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        key = f"{rec.cluster}/{rec.namespace}/{rec.name}"  # object_key, inlined: runs on every Pod event
        view = view_of(rec.obj, rec.uid, rec.rv)
        e = ctx.get(key)
        ev = Vanished(view.uid) if rec.event == "DELETED" else Seen(view)
        DISPATCH.run(ctx, key, "absent" if e is None else e.phase, type(ev), e, ev)

    def on_relist(self, ctx: Ctx, rec: Relist) -> None:
        for key in missing_after_relist([k for k, e in ctx.items() if isinstance(e, PodOp)], rec):
            e = ctx.get(key)
            DISPATCH.run(ctx, key, e.phase, Missing, e, Missing())

    def on_receive(self, ctx: Ctx, key: str, msg: PodMessage) -> None:
        e = ctx.get(key)
        DISPATCH.run(ctx, key, table_key(key, e), type(msg), e, msg)

    def on_command(self, ctx: Ctx, rec: Command, cmd: PodCommand) -> None:
        key = sweep.key_of(rec, cmd) if isinstance(cmd, SweepSecrets) else orphans.key_of(cmd)
        e = ctx.get(key)
        DISPATCH.run(ctx, key, table_key(key, e), type(cmd), e, Ordered(rec, cmd))

    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Effect) -> None:
        e = ctx.get(effect.key)
        phase, event, ev = reduced(effect.key, e, effect, rec)
        DISPATCH.run(ctx, effect.key, phase, event, e, ev)

    def on_in_doubt(self, ctx: Ctx, effect: Effect) -> None:
        e = ctx.get(effect.key)
        phase, event, ev = reduced(effect.key, e, effect, None)
        DISPATCH.run(ctx, effect.key, phase, event, e, ev)

    def on_deadline(self, ctx: Ctx, key: str, name: str) -> None:
        event = _DEADLINES.get(name)
        e = ctx.get(key)
        if event is None:
            raise UnknownEvent(self.name, table_key(key, e), f"deadline {name!r}")
        DISPATCH.run(ctx, key, table_key(key, e), event, e, event())

