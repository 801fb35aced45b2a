"""Which Session's pods live where: ``"<handle>/<namespace>/<session name>"`` -> Session key.

Expected flow: ``session.save`` calls ``update`` whenever a Session's target changes (a new
generation placed elsewhere, a Session dropped); a Pod observation looks its
``kfold.dev/session`` label up with ``lookup`` before anything is reduced, after ``none_tracked``
has said that some Session is placed at all.

Guarantees:
- A slot names one Session at a time: ``lookup`` tells a Session that another Session already
  runs its pods under the same name in the same target namespace (two Session namespaces of one
  tenant sent to a single-namespace bound), so it can refuse instead of adopting the other's pod.
- The index is derived state: missing (a snapshot written before it existed) it is rebuilt from
  the Session records, so it can never disagree with them.
"""
from __future__ import annotations

from engine.machines.base import Ctx
from engine.machines.session.model import INDEX_KEY, SessionDecision, TargetIndex


_EMPTY = TargetIndex(slots={})


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
    any_session = False
    for key, d in ctx.items():
        any_session = any_session or isinstance(d, SessionDecision)
        s = slot_of(d)
        if s is not None and s not in slots:
            slots[s] = key
    if not any_session:  # nothing to index; an empty table stays empty (and this stays cheap)
        return _EMPTY
    index = TargetIndex(slots=slots)
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
    """Move ``key``'s slot from where ``before`` ran to where ``after`` runs (None: dropped)."""
    old, new = slot_of(before), slot_of(after)
    index = _index(ctx)
    if old == new and (new is None or new in index.slots):
        return
    slots = dict(index.slots)
    if old is not None and slots.get(old) == key:
        del slots[old]
    if new is not None:
        slots.setdefault(new, key)
    if slots != index.slots:
        ctx.put(INDEX_KEY, index.but(slots=slots))
