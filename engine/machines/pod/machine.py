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
    Answer, Answered, Ctx, Dispatch, InDoubt, Machine, Move, Ordered, RetryDue, Stale, UnknownEvent, ignore,
    missing_after_relist,
)
from engine.machines.pod import create, delete, namespace, orphans, sweep
from engine.machines.pod.acts import BUSY, PHASES, TABLE, move, name_of, refenced, save, send_read, view_of
from engine.machines.pod.records import DEFAULT_BUDGET_S, ORPHANS_NAME, SWEEP_NAME, Entries, PodOp, PodView, Reply, reply_list
from engine.effects.models import CreateObject, DeleteObject, Effect, EnsureNamespace, GetObject, ListObjects
from engine.seams import CreatePod, DeletePod, EnsureNamespaceRequest, PodCommand, PodMessage, SweepOrphans, SweepSecrets
from journal.records import Command, Observed, Outcome, Relist

__all__ = ["PodMachine", "TABLE", "PHASES", "DISPATCH"]


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
    ctx.tell(msg.reply_to, msg.reply_key, "pod_create_failed", pod=key,
             reason=f"pod {name_of(key)} is {busy}; refusing a second create")


def _delete(ctx: Ctx, key: str, e: PodOp | None, msg: DeletePod) -> Move:
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
    """A pod operation's effect in doubt: its handler decides with nothing awaited and no deadline
    (the budget is armed again, whole, by the act that resolves the doubt)."""
    def resolve(ctx: Ctx, key: str, e: PodOp, ev: InDoubt) -> Answer:
        return operation(ctx, key, e.but(awaiting="", deadline=None))
    resolve.__qualname__ = f"{operation.__module__.rsplit('.', 1)[-1]}.{operation.__name__}"
    return resolve


def _op_outcome(handler: Any) -> Any:
    def answer(ctx: Ctx, key: str, e: PodOp, ev: Answered) -> Answer:
        return handler(ctx, key, e.but(awaiting=""), ev.rec)
    answer.__qualname__ = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
    return answer


def _entry_in_doubt(handler: Any) -> Any:
    def resolve(ctx: Ctx, key: str, e: Any, ev: InDoubt) -> None:
        handler(ctx, key, ev.effect)
    resolve.__qualname__ = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
    return resolve


def _entry_outcome(handler: Any) -> Any:
    def answer(ctx: Ctx, key: str, e: Any, ev: Answered) -> None:
        handler(ctx, key, *ev)
    answer.__qualname__ = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
    return answer


def _over_budget(fail: Any) -> Any:
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


def _namespace_retry(ctx: Ctx, key: str, e: Any, ev: Any) -> None:
    namespace.on_deadline(ctx, key)


def _sweep_secrets(ctx: Ctx, key: str, e: Any, ev: Ordered) -> None:
    sweep.start(ctx, *ev)


def _sweep_orphans(ctx: Ctx, key: str, e: Any, ev: Ordered) -> None:
    orphans.start(ctx, ev.cmd)


# The pod machine: (phase or kind, event) -> handler. A pod key's phase is its record's
# (``PodOp.phase``, moved along ``TABLE``), ``absent`` for no record; the other keys hold no phase
# and are named for their entry kind (``namespace``, ``sweep``, ``orphans``). An answer's event is
# the class of the effect it answers; an answer or doubt the pod key does not await is ``Stale``.
CREATING = ("creating", "confirming")
DELETING = ("deleting", "reading", "terminating")
POD_KEYS = ("absent", *PHASES)
ENTRIES = ("namespace", "sweep", "orphans")
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
    # requests
    (("absent", "idle"), CreatePod, _create),
    (CREATING, CreatePod, _create_again),
    (DELETING, CreatePod, _create_while_deleting),
    (("absent", "idle"), DeletePod, _delete),
    (CREATING, DeletePod, _delete_after_create),
    (DELETING, DeletePod, _delete_again),
    ("namespace", EnsureNamespaceRequest, _ensure_namespace),
    ("sweep", SweepSecrets, _sweep_secrets),
    ("orphans", SweepOrphans, _sweep_orphans),
    # answers: a pod key hears only the outcome it awaits (the others are ``Stale``)
    ("creating", CreateObject, _op_outcome(create.created)),
    ("confirming", GetObject, _op_outcome(create.confirmed)),
    ("deleting", DeleteObject, _op_outcome(delete.deleted)),
    ("reading", GetObject, _op_outcome(delete.read)),
    (POD_KEYS, Stale, ignore),
    ("namespace", EnsureNamespace, _entry_outcome(namespace.on_outcome)),
    ("sweep", ListObjects, _entry_outcome(sweep.on_outcome)),
    ("sweep", DeleteObject, _entry_outcome(sweep.on_outcome)),
    ("orphans", ListObjects, _entry_outcome(orphans.on_outcome)),
    ("orphans", GetObject, _entry_outcome(orphans.on_outcome)),
    ("orphans", DeleteObject, _entry_outcome(orphans.on_outcome)),
    ("creating", InDoubt, _op_in_doubt(create.in_doubt)),
    ("deleting", InDoubt, _op_in_doubt(delete.in_doubt)),
    (("confirming", "reading"), InDoubt, _op_in_doubt(send_read)),
    ("namespace", InDoubt, _entry_in_doubt(namespace.in_doubt)),
    ("sweep", InDoubt, _entry_in_doubt(sweep.in_doubt)),
    ("orphans", InDoubt, _entry_in_doubt(orphans.in_doubt)),
    # timers
    (CREATING, Budget, _over_budget(create.fail)),
    (DELETING, Budget, _over_budget(delete.fail)),
    (BUSY, RetryDue, _read_again),
    (("absent", "idle"), Budget, ignore),
    (("absent", "idle"), RetryDue, ignore),
    ("namespace", Budget, _namespace_retry),
    ("namespace", RetryDue, _namespace_retry),
    (("sweep", "orphans"), Budget, ignore),
    (("sweep", "orphans"), RetryDue, ignore),
], phases=TABLE, kinds=("absent", *ENTRIES))
_DEADLINES = {"budget": Budget, "retry": RetryDue}
_KEY_KINDS = {SWEEP_NAME: "sweep", ORPHANS_NAME: "orphans", "": "namespace"}


def phase_of(key: str, e: Any) -> str:
    """The table key of ``key``: the entry kind of a namespace or sweep key, else the pod record's
    phase (``absent`` for none)."""
    return _KEY_KINDS.get(key.rpartition("/")[2]) or (e.phase if isinstance(e, PodOp) else "absent")


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

    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        key = f"{rec.cluster}/{rec.namespace}/{rec.name}"  # object_key, inlined: runs on every Pod event
        view = view_of(rec.obj, rec.uid, rec.rv)
        e = ctx.get(key)
        ev = Vanished(view.uid) if rec.event == "DELETED" else Seen(view)
        DISPATCH.run(ctx, key, e.phase if isinstance(e, PodOp) else "absent", type(ev), e, ev)

    def on_relist(self, ctx: Ctx, rec: Relist) -> None:
        pods = {k: e for k, e in ctx.items() if isinstance(e, PodOp)}
        for key in missing_after_relist(pods, rec):
            DISPATCH.run(ctx, key, pods[key].phase, Missing, pods[key], Missing())

    def on_receive(self, ctx: Ctx, key: str, msg: PodMessage) -> None:
        e = ctx.get(key)
        DISPATCH.run(ctx, key, phase_of(key, e), type(msg), e, msg)

    def on_command(self, ctx: Ctx, rec: Command, cmd: PodCommand) -> None:
        where = sweep.key_of(rec, cmd) if isinstance(cmd, SweepSecrets) else orphans.key_of(cmd)
        DISPATCH.run(ctx, where, phase_of(where, None), type(cmd), ctx.get(where), Ordered(rec, cmd))

    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Effect) -> None:
        key = effect.key
        e = ctx.get(key)
        phase = phase_of(key, e)
        if isinstance(e, PodOp) and e.awaiting == effect.id or phase in ENTRIES:
            DISPATCH.run(ctx, key, phase, type(effect), e, Answered(rec, effect))
        else:
            DISPATCH.run(ctx, key, phase, Stale, e, Stale(rec, effect))

    def on_in_doubt(self, ctx: Ctx, effect: Effect) -> None:
        key = effect.key
        e = ctx.get(key)
        phase = phase_of(key, e)
        if isinstance(e, PodOp) and e.awaiting == effect.id or phase in ENTRIES:
            DISPATCH.run(ctx, key, phase, InDoubt, e, InDoubt(effect))
        else:
            DISPATCH.run(ctx, key, phase, Stale, e, Stale(None, effect))

    def on_deadline(self, ctx: Ctx, key: str, name: str) -> None:
        event = _DEADLINES.get(name)
        e = ctx.get(key)
        if event is None:
            raise UnknownEvent(self.name, phase_of(key, e), f"deadline {name!r}")
        DISPATCH.run(ctx, key, phase_of(key, e), event, e, event())
