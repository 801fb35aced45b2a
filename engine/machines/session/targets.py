"""The target index: which Session's pods live where.

The index (``session.model.TargetIndex``) says which Session's pods live
where: ``"<handle>/<namespace>/<session name>"`` -> Session key. ``session.handlers.save`` calls
``update`` whenever a Session's target changes; a Pod observation looks its ``kfold.dev/session``
label up with ``lookup`` before anything is reduced, after ``none_tracked`` has said that some
Session is placed at all. A slot names one Session at a time (``lookup`` tells a Session that
another already runs its pods under the same name in the same target namespace, so it can refuse
instead of adopting the other's pod); when that Session leaves the slot, the least other key
placed there takes it at once (``update``). The index is derived state: its slots are those the
Session records are placed on, and missing (a snapshot written before it existed) it is rebuilt
from them, so it can never disagree with them.
"""
from __future__ import annotations

from typing import Any

from engine.machines.base import Ctx
from engine.machines.session.model import INDEX_KEY, SessionDecision, TargetIndex


_EMPTY = TargetIndex(slots={})


def owner(table: Any, handle: str, namespace: str, session: str) -> str | None:
    """``lookup`` as another machine asks it (``Ctx.ask("session", "owner", ...)``: the pod
    machine's sweeps): from the session machine's index, or its records when there is none."""
    want = slot(handle, namespace, session)
    got = table.get(INDEX_KEY)
    if isinstance(got, TargetIndex):
        return got.slots.get(want)
    return min((key for key, d in table.items() if slot_of(d) == want), default=None)   # ``_index``'s choice


def slot(handle: str, namespace: str, session: str) -> str:
    return f"{handle}/{namespace}/{session}"


def slot_of(d: SessionDecision | None) -> str | None:
    if not isinstance(d, SessionDecision) or not d.target:
        return None
    return slot(d.target, d.target_ns, d.name)


def _index(ctx: Ctx) -> TargetIndex:
    got = ctx.get(INDEX_KEY)
    if isinstance(got, TargetIndex):
        return got
    slots: dict[str, str] = {}
    others: dict[str, tuple[str, ...]] = {}
    any_session = False
    for key, d in ctx.items():   # in key order: each slot's holder is the least key placed there
        any_session = any_session or isinstance(d, SessionDecision)
        s = slot_of(d)
        if s is not None and s not in slots:
            slots[s] = key
        elif s is not None:
            others[s] = others.get(s, ()) + (key,)
    if not any_session:  # nothing to index; an empty table stays empty (and this stays cheap)
        return _EMPTY
    index = TargetIndex(slots=slots, others=others)
    ctx.put(INDEX_KEY, index)
    return index


def lookup(ctx: Ctx, handle: str, namespace: str, session: str) -> str | None:
    return _index(ctx).slots.get(slot(handle, namespace, session))


def none_tracked(ctx: Ctx) -> bool:
    """True when ``lookup`` answers None for every slot and changes nothing: the index is empty,
    or there is no index and no Session to build one from. Reads only (``_index`` would store a
    rebuilt index): a Pod of no Session is dropped without reading its labels or building a slot."""
    got = ctx.get(INDEX_KEY)
    if isinstance(got, TargetIndex):
        return not got.slots
    for _, d in ctx.items():
        if isinstance(d, SessionDecision):
            return False
    return True


def update(ctx: Ctx, key: str, before: SessionDecision | None, after: SessionDecision | None) -> None:
    """Move ``key``'s slot from where ``before`` ran to where ``after`` runs (None: dropped).

    A slot keeps the Session that claimed it first while that one is placed there (``lookup``
    refuses the others); when it leaves, the slot passes at once to the least other key still
    placed there (a rebuild, ``_index``, picks the least too). So the index's slots are at every step
    exactly those some Session record is placed on (``SessionMachine.answer("placed")`` reads
    them). The others placed on a slot are kept beside it (``TargetIndex.others``), so no step
    scans the table."""
    old, new = slot_of(before), slot_of(after)
    index = _index(ctx)
    if old == new and (new is None or index.slots.get(new) == key or key in index.others.get(new, ())):
        return
    slots, others = dict(index.slots), dict(index.others)
    if old is not None and old != new:
        rest = others.pop(old, ())
        if slots.get(old) == key:
            del slots[old]
            if rest:
                slots[old], rest = rest[0], rest[1:]
        else:
            rest = tuple(k for k in rest if k != key)
        if rest:
            others[old] = rest
    if new is not None and slots.setdefault(new, key) != key:
        others[new] = tuple(sorted({*others.get(new, ()), key}))
    if slots != index.slots or others != index.others:
        ctx.put(INDEX_KEY, index.but(slots=slots, others=others))


