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

A request to another machine — the target namespace (``namespace_step``), the repositories
(``repos_step``) — moves through ``ask_after``: ``""`` -``ask``-> ``sent`` -``answered``-> ``done``;
``skip`` -> ``done`` and ``again`` -> ``""`` from any step.

An event a step does not allow raises ``IllegalTransition`` naming both (a bug, never ignored).
"""
from __future__ import annotations

from typing import Any, Literal

from engine.machines.base import IllegalTransition

ObjectStep = Literal["", "sent", "reading", "replacing", "waiting", "dropping", "done"]
AskStep = Literal["", "sent", "done"]
OBJECT_STEPS: tuple[ObjectStep, ...] = ("", "sent", "reading", "replacing", "waiting", "dropping", "done")
ASK_STEPS: tuple[AskStep, ...] = ("", "sent", "done")
OBJECT_EVENTS = ("create", "drop", "skip", "made", "exists", "kept", "mend", "replaced", "wait", "dropped", "again")
ASK_EVENTS = ("ask", "answered", "skip", "again")


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


def object_after(step: ObjectStep, event: str) -> ObjectStep:
    return _after(OBJECT_TABLE, "object", step, event)


def ask_after(step: AskStep, event: str) -> AskStep:
    return _after(ASK_TABLE, "request", step, event)


def _after(table: dict[tuple[str, str], Any], what: str, step: str, event: str) -> Any:
    nxt = FROM_ANY.get(event, table.get((event, step)))
    if nxt is None:
        raise IllegalTransition(f"session {what} step: event {event!r} is not allowed in step {step!r}")
    return nxt


def begun_again(d: Any) -> dict[str, str]:
    """Every bring-up step of ``d`` after ``again`` (a new generation), as fields for ``d.but``."""
    return {"namespace_step": ask_after(d.namespace_step, "again"), "repos_step": ask_after(d.repos_step, "again"),
            "secret_step": object_after(d.secret_step, "again"), "claim_step": object_after(d.claim_step, "again")}
