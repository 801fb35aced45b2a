"""kfold's finalizer on a Session (``kfold.dev/teardown``): a sub-state with its own small machine.

``SessionDecision.finalizer_step`` is one of ``STEPS``; every change goes through ``after``, one
exhaustive match over (event, step):

========  ==========================================  ==============================================
step      means                                       left by
========  ==========================================  ==============================================
``""``    not asked for: a live Session lacking the   ``add`` -> ``sent``; ``remove`` -> ``removing``
          finalizer gets the add patch
``sent``  the add patch is in flight                  ``added`` -> ``done``; ``reread`` -> ``reading``;
                                                      ``remove`` -> ``removing``
``done``  the add patch answered ok                   ``observed`` without the finalizer (someone
                                                      removed it; not being deleted) -> ``""``, so it
                                                      is added again, as controller-runtime's
                                                      ``AddFinalizer`` does on every reconcile;
                                                      ``remove`` -> ``removing``
removing  the removal patch was sent (teardown done): ``reread`` -> ``reading`` (a conflict, a
          the Session may vanish at any moment        transient answer, a changed list); else stays
reading   a patch met a conflict or a transient       ``observed`` -> ``""``: the next decision starts
          answer: the Session is being re-read        again from what the observation shows
========  ==========================================  ==============================================

Events: ``add`` (the add patch emitted), ``added`` (its ok), ``remove`` (the removal patch emitted),
``reread`` (the Session is quorum-read again), ``observed`` (a watch, list or read folded).
An event a step does not allow raises ``IllegalTransition`` naming both (a bug, never ignored).
"""
from __future__ import annotations

from typing import Literal

from engine.machines.base import IllegalTransition

Step = Literal["", "sent", "done", "removing", "reading"]
Event = Literal["add", "added", "remove", "reread", "observed"]
STEPS: tuple[Step, ...] = ("", "sent", "done", "removing", "reading")


def after(step: Step, event: Event, carried: bool = True) -> Step:
    """The step ``event`` leads to. ``carried`` (``observed`` only): the observation shows the
    finalizer, or the Session is being deleted (a finalizer is never added to such a Session)."""
    match event, step:
        case "add", "":
            return "sent"
        case "added", "removing":
            return "removing"
        case "added", ("" | "sent" | "done" | "reading"):
            return "done"
        case "remove", ("" | "sent" | "done"):
            return "removing"
        case "reread", _:
            return "reading"
        case "observed", "reading":
            return ""
        case "observed", "done" if not carried:
            return ""
        case "observed", _:
            return step
    raise IllegalTransition(f"session finalizer: event {event!r} is not allowed in step {step!r}")


def may_add(step: Step) -> bool:
    return step == ""


def may_remove(step: Step) -> bool:
    return step in ("", "sent", "done")


def patch_in_flight(step: Step) -> bool:
    """A finalizer patch awaits its answer (a re-read waits for it)."""
    return step in ("sent", "removing")


def released(step: Step) -> bool:
    """The removal was sent."""
    return step == "removing"
