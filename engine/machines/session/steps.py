"""The bring-up's sub-states, each a small machine of its own (the finalizer's is ``session.finalizer``).

An object the bring-up makes — the env Secret (``secret_step``) and the workspace claim
(``claim_step``) — moves through ``object_after``:

==============  =========================================  =========================================
step            means                                      left by
==============  =========================================  =========================================
``""``          not begun (or to begin again)              ``create`` -> ``sent``; ``drop`` ->
                                                           ``dropping`` (a Secret no env needs);
                                                           ``skip`` -> ``done`` (nothing to make)
``sent``        the create is in flight                    ``made`` -> ``done``; ``exists`` ->
                                                           ``reading`` (AlreadyExists); ``wait``
``reading``     the same-name object is being read         ``kept`` -> ``done`` (this Session's, as
                                                           wanted); ``mend`` -> ``replacing``; ``wait``
``replacing``   a fenced PUT mends this Session's object   ``replaced`` -> ``done``
``waiting``     a failed request waits for its backoff     ``again`` (the retry is due)
``dropping``    the object no spec wants is read/deleted   ``dropped`` -> ``done``
``done``        made, adopted, mended or dropped
==============  =========================================  =========================================

``again`` -> ``""`` from any step: begun again (absent since, a request in doubt, a replace that
failed, a retry due, a new generation, a teardown, the Session failed); ``skip`` -> ``done`` from any
step (the config or spec asks for nothing). ``wait`` -> ``waiting`` from ``sent`` or ``reading``.

An object's request answered is an answer to its step only where ``OBJECT_ANSWERS`` names the pair
(the step's own request); any other is one the step no longer waits for. A step is ``done``
(``done``), not begun (``unbegun``), waiting for its backoff (``backing_off``), or has a request in
flight (``IN_FLIGHT``: a crash leaves it in doubt, and the step begins again).

A request to another machine — the target namespace (``namespace_step``), the repositories
(``repos_step``) — moves through ``ask_after``: ``""`` -``ask``-> ``sent`` -``answered``-> ``done``;
``skip`` -> ``done`` and ``again`` -> ``""`` from any step; ``asked``: its answer is awaited.

An endpoint object (``Upsert.stage``: the Service, the Ingress) moves through ``upsert_after``:
``idle`` -``create``-> ``create`` (-``read``-> ``read`` on AlreadyExists); ``idle`` -``read``->
``read`` -``replace``-> ``replace`` (-``read``-> ``read`` on a conflict) or -``delete``->
``delete``; ``settle`` -> ``idle`` from any stage (answered, or given up). ``busy``: a request
of it is in flight; ``writing``: that request writes the object.

An event a step does not allow raises ``IllegalTransition`` naming both (a bug, never ignored).
"""
from __future__ import annotations

from typing import Any, Literal

from engine.machines.base import IllegalTransition

ObjectStep = Literal["", "sent", "reading", "replacing", "waiting", "dropping", "done"]
AskStep = Literal["", "sent", "done"]
UpsertStage = Literal["idle", "create", "read", "replace", "delete"]
OBJECT_STEPS: tuple[ObjectStep, ...] = ("", "sent", "reading", "replacing", "waiting", "dropping", "done")
ASK_STEPS: tuple[AskStep, ...] = ("", "sent", "done")
OBJECT_EVENTS = ("create", "drop", "skip", "made", "exists", "kept", "mend", "replaced", "wait", "dropped", "again")
ASK_EVENTS = ("ask", "answered", "skip", "again")
UPSERT_STAGES: tuple[UpsertStage, ...] = ("idle", "create", "read", "replace", "delete")
UPSERT_EVENTS = ("create", "read", "replace", "delete", "settle")


# (event, step) -> the next step; ``again`` and ``skip`` lead from every step (``FROM_ANY``).
OBJECT_TABLE: dict[tuple[str, str], ObjectStep] = {
    ("create", ""): "sent", ("drop", ""): "dropping",
    ("made", "sent"): "done", ("exists", "sent"): "reading",
    ("kept", "reading"): "done", ("mend", "reading"): "replacing",
    ("replaced", "replacing"): "done",
    ("wait", "sent"): "waiting", ("wait", "reading"): "waiting",
    ("dropped", "dropping"): "done",
}
ASK_TABLE: dict[tuple[str, str], AskStep] = {("ask", ""): "sent", ("answered", "sent"): "done"}
FROM_ANY: dict[str, Any] = {"again": "", "skip": "done"}
UPSERT_TABLE: dict[tuple[str, str], UpsertStage] = {
    ("create", "idle"): "create", ("read", "idle"): "read", ("read", "create"): "read", ("read", "replace"): "read",
    ("replace", "read"): "replace", ("delete", "read"): "delete",
}
UPSERT_FROM_ANY: dict[str, Any] = {"settle": "idle"}

# (step, the request answered) -> what the answer is to that step (``session.objects``)
OBJECT_ANSWERS: dict[tuple[str, str], str] = {
    ("sent", "create"): "created", ("reading", "get"): "read", ("replacing", "replace"): "replaced",
    ("dropping", "get"): "dropped", ("dropping", "delete"): "dropped",
}
IN_FLIGHT: frozenset[str] = frozenset({"sent", "reading", "replacing"})   # a request of the step is unanswered


def object_after(step: ObjectStep, event: str) -> ObjectStep:
    return _after(OBJECT_TABLE, "object", step, event)


def ask_after(step: AskStep, event: str) -> AskStep:
    return _after(ASK_TABLE, "request", step, event)


def upsert_after(stage: UpsertStage, event: str) -> UpsertStage:
    return _after(UPSERT_TABLE, "endpoint", stage, event, UPSERT_FROM_ANY)


def done(step: str) -> bool:
    return step == "done"


def unbegun(step: str) -> bool:
    return step == ""


def backing_off(step: ObjectStep) -> bool:
    return step == "waiting"


def asked(step: AskStep) -> bool:
    return step == "sent"


def busy(stage: UpsertStage) -> bool:
    return stage != "idle"


def writing(stage: UpsertStage) -> bool:
    return stage in ("create", "replace")


def _after(table: dict[tuple[str, str], Any], what: str, step: str, event: str,
           from_any: dict[str, Any] = FROM_ANY) -> Any:
    nxt = from_any.get(event, table.get((event, step)))
    if nxt is None:
        raise IllegalTransition(f"session {what} step: event {event!r} is not allowed in step {step!r}")
    return nxt


def begun_again(d: Any) -> dict[str, Any]:
    """Every bring-up step of ``d`` after ``again`` (a new generation), as fields for ``d.but``."""
    return {"namespace_step": ask_after(d.namespace_step, "again"), "repos_step": ask_after(d.repos_step, "again"),
            "secret": d.secret.after("again"), "claim": d.claim.after("again")}
