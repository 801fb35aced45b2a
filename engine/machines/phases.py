"""A machine's phase table (``Table``), declared as data and checked by the ``transitions`` library.

One class-level ``transitions.Machine(model=None)`` per table (``add_model`` is quadratic), driven
with ``machine.events[name].trigger(scratch)`` on a throwaway object, so decision records stay
frozen. Only ``base.moved`` (for ``base.fire``) asks a table where a trigger leads.
"""
from __future__ import annotations

from typing import Any, Iterable

from transitions import Machine as _TMachine
from transitions import MachineError


class IllegalTransition(Exception):
    """An event that the table does not allow from the current state (names both)."""


class _Scratch:
    __slots__ = ("state",)

    def __init__(self, state: str):
        self.state = state


class Table:
    """A transition table: ``Table(name, states, [(event, source(s), dest), ...], initial)``."""

    def __init__(self, name: str, states: Iterable[str], rows: Iterable[tuple[str, Any, str]], initial: str):
        self.name = name
        self.rows = tuple(rows)
        self.states = tuple(states)
        self._m = _TMachine(
            model=None, states=list(self.states), initial=initial, auto_transitions=False,
            transitions=[{"trigger": e, "source": s, "dest": d} for e, s, d in self.rows],
        )
        self._next: dict[tuple[str, str], str | IllegalTransition] = {}

    def next(self, state: str, event: str) -> str:
        """The state ``event`` leads to from ``state``; ``IllegalTransition`` if the table has no row.

        Each (state, event) pair is run through the ``transitions`` machine once and its answer kept:
        the table has no conditions or callbacks, so the answer never changes, and a trigger costs
        more than the rest of a small step."""
        known = self._next.get((state, event))
        if known is None:
            known = self._next[(state, event)] = self._run(state, event)
        if isinstance(known, IllegalTransition):
            raise IllegalTransition(*known.args)
        return known

    def _run(self, state: str, event: str) -> str | IllegalTransition:
        ev = self._m.events.get(event)
        if ev is None:
            return IllegalTransition(f"{self.name}: unknown event {event!r}")
        scratch = _Scratch(state)
        try:
            ev.trigger(scratch)
        except MachineError:
            return IllegalTransition(f"{self.name}: event {event!r} is not allowed in state {state!r}")
        return scratch.state

    def allows(self, state: str, event: str) -> bool:
        ev = self._m.events.get(event)
        return ev is not None and state in ev.transitions
