"""Projections: the part of an observed object that the fold reads, stored beside its record.

A Pod event's payload holds the whole object (~2.5 KB on a real cluster); the machines read about
a dozen fields of it (``engine.machines.pod.machine.view_of``, ``session.views.pod_view``,
``session.pods.pod_owner``/``release_stale``). The journal stores, next to such a row's
payload, its object pruned to ``POD``'s paths (~0.5 KB), and ``kfold replay`` folds the record
made of the payload's other fields and that object, instead of decoding the whole object
(``Journal.read_batches(projected=True)``, ``parse_rows``). Only Pod observations are projected;
every other record is read from its payload.

Guarantees:
- ``project(rec)`` keeps, of every path in ``POD``, exactly what the object holds there; a value
  whose type is not the one the path expects (a list where a mapping should be, a string for a
  container list) is kept whole, so a reader's own type checks see what they would have seen, and
  so is a mapping or list that would be pruned to nothing, so its truth value is kept too.
  Folding the projected record gives the same state and effects as folding the record
  (``tests/unit/test_projection.py`` folds both, with a tripwire object that notes any read
  outside ``POD``).
- It is made from the record as journaled, after redaction: a projection holds a subset of what
  the payload holds, never more (invariant 6).
- Stored form: ``crc32 (4 bytes, big-endian) + version (1 byte) + JSON of the pruned object``;
  the crc covers the version and the JSON and is seeded with the row's chained checksum, so a
  projection belongs to its row. ``unseal`` returns None for a projection that fails its crc or
  has another version: the reader then decodes the payload, which the chain verified. The chain
  itself covers the payload only, so a journal with projections reads with an older kfold, and an
  older journal (no projections) reads with this one.

Caveats: ``POD`` mirrors what the machines read. A machine that starts reading another field of
a Pod must add it here and bump ``VERSION`` (older projections are then ignored, not misread); the
tripwire test fails until it does. Costs: a projection is ~20% of a realistic Pod payload's bytes,
and making one (prune + serialize, at ``prepare``/seal time) costs about twice serializing the
whole record.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any, Sequence

import orjson

from journal.records import built, trusted_record

VERSION = 1
KEEP = None   # a path's value is kept whole


class Each:
    """Every element of a list, pruned by ``spec``; with ``where=(key, value)`` only the mapping
    elements holding that pair (other mappings are ones no reader looks into)."""

    __slots__ = ("spec", "where")

    def __init__(self, spec: Any, where: tuple[str, str] | None = None):
        self.spec, self.where = spec, where


_CONTAINER = {"name": KEEP, "ready": KEEP, "state": {
    "waiting": {"reason": KEEP, "message": KEEP}, "terminated": {"exitCode": KEEP, "reason": KEEP}}}
POD: dict[str, Any] = {
    # labels whole: the machines read kfold's own (engine.labels, which the journal does not import)
    "metadata": {"name": KEEP, "uid": KEEP, "resourceVersion": KEEP, "deletionTimestamp": KEEP, "labels": KEEP},
    "spec": {"nodeName": KEEP},
    "status": {
        "phase": KEEP, "podIP": KEEP, "reason": KEEP, "message": KEEP,
        "conditions": Each({"type": KEEP, "status": KEEP, "reason": KEEP, "message": KEEP},
                           where=("type", "PodScheduled")),
        "containerStatuses": Each(_CONTAINER), "initContainerStatuses": Each(_CONTAINER),
    },
}
SPECS: dict[str, dict[str, Any]] = {"Pod": POD}   # object kind -> what of it the fold reads

_CRC = struct.Struct(">I")
_VERSION = bytes([VERSION])


def prune(value: Any, spec: Any) -> Any:
    """``value`` cut down to the paths of ``spec`` (see the module docstring)."""
    cut = pruner(spec)
    return value if cut is None else cut(value)


def pruner(spec: Any) -> Any:
    """``prune`` for one spec as a function (None for ``KEEP``): the spec is walked once here,
    not on every event (a generic walk cost about as much as serializing the whole record)."""
    if spec is KEEP:
        return None
    if type(spec) is dict:
        fields = tuple((key, pruner(sub)) for key, sub in spec.items())
        if all(inner is None for _, inner in fields):  # every field kept whole: one comprehension
            keys = tuple(spec)

            def cut_leaves(value: Any) -> Any:
                if not isinstance(value, dict):
                    return value
                out = {key: value[key] for key in keys if key in value}
                return out if out or not value else value   # never empty where the object is not
            return cut_leaves

        def cut_mapping(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            out = {}
            for key, inner in fields:
                v = value.get(key, _ABSENT)
                if v is not _ABSENT:
                    out[key] = v if inner is None else inner(v)
            return out if out or not value else value
        return cut_mapping
    inner = pruner(spec.spec)
    key, want = spec.where or (None, None)

    def cut_list(value: Any) -> Any:
        if not isinstance(value, list):
            return value
        kept = value if key is None else [v for v in value if not isinstance(v, dict) or v.get(key) == want]
        out = list(kept) if inner is None else [inner(v) for v in kept]
        return out if out or not value else value
    return cut_list


_ABSENT = object()
_PRUNERS = {kind: pruner(spec) for kind, spec in SPECS.items()}


class Pruned(dict):
    """An object cut down to its kind's projection (``projected``): what a prepared draft holds in
    place of its whole object. A plain ``dict`` to every reader (and to ``orjson``); the type tells
    the journal that this draft's payload was made at ``prepare`` and must never be made from it."""

    __slots__ = ()


def projected(rec: Any) -> tuple[Pruned, bytes] | None:
    """``(pruned object, its JSON)`` for a record of a projected kind (``project`` plus the object
    it serialized), or None as ``project`` gives None."""
    if rec.rec != "observed":
        return None
    cut = _PRUNERS.get(rec.kind)
    if cut is None:
        return None
    obj = Pruned(cut(rec.obj))
    try:
        return obj, orjson.dumps(obj)
    except TypeError:  # what orjson refuses: read from the payload
        return None


def slim(rec: Any, obj: Pruned) -> Any:
    """``rec`` with ``obj`` in place of its object, built as ``journal.chain.stamp`` builds (no
    validation: ``obj`` is a pruned copy of the validated one): the record ``parse_rows`` reads
    back from the row's payload head and projection."""
    return built(type(rec), {**rec.__dict__, "obj": obj}, set(rec.__pydantic_fields_set__))


def project(rec: Any) -> bytes | None:
    """The JSON of ``rec.obj`` pruned to what the fold reads, or None when ``rec`` is not of a
    projected kind (or its projection does not serialize)."""
    cut = projected(rec)
    return None if cut is None else cut[1]


def seal(view: bytes | None, chk: int) -> bytes | None:
    """The stored form of ``view`` for the row whose chained checksum is ``chk``."""
    if view is None:
        return None
    body = _VERSION + view
    return _CRC.pack(zlib.crc32(body, chk)) + body


def unseal(stored: bytes | None, chk: int) -> bytes | None:
    """The projected object's JSON, or None: no projection, a failed crc or another version."""
    if not stored or len(stored) < 6 or stored[4] != VERSION:
        return None
    if zlib.crc32(memoryview(stored)[4:], chk) != _CRC.unpack_from(stored)[0]:
        return None
    return stored[5:]


def parse_rows(rows: Sequence[Any]) -> list[Any]:
    """Records from verified rows ``(seq, at, kind, payload, chk, view)``: a row with a sound
    projection gets its record's fields from the payload's head (everything before ``"obj"``,
    the record's last field: ``journal.chain.dump`` writes the fields in order, and none before
    ``obj`` is a mapping or a list, so its key is the first ``,"obj":`` in the bytes) and its
    object from the projection; any other row is decoded whole (``trusted_record``, as
    ``journal.chain.parse_payloads``). Raises on what does not decode; the caller then reads the
    payloads alone."""
    loads, build, out = orjson.loads, trusted_record, []
    for _, _, _, payload, chk, view in rows:
        obj = unseal(view, chk) if view is not None else None
        if obj is None:
            out.append(build(loads(payload)))
            continue
        cut = payload.find(_OBJ)
        if cut < 0:
            raise ValueError("a projection for a record without an object")
        out.append(build(loads(b"".join((payload[:cut], _OBJ, obj, b"}")))))
    return out


_OBJ = b',"obj":'
