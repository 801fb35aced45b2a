"""Journal records: one frozen, typed union of everything kfold ever learns or decides.

Guarantees:
- Every record carries ``seq`` (its position in the journal, assigned on append; ``-1`` on a
  draft not yet appended) and ``at``: the apiserver's clock, in integer milliseconds since the
  epoch, at which the record was observed, or ``None`` when no server time was known yet.
- Records are immutable. The journal stamps ``seq`` on a copy.
- ``parse_record`` refuses an unknown ``rec`` kind with a clear error; nothing is skipped.

The ``obj`` carried by an observed event is already redacted (see ``journal.redact``); a record
never holds secret material.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SCHEMA_VERSION = 1

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = -1
    at: int | None = None

    def stamped(self, seq: int) -> "_Record":
        return self.model_copy(update={"seq": seq})


class Observed(_Record):
    """One apiserver watch or list event for one object."""

    rec: Literal["observed"] = "observed"
    cluster: str
    api_version: str
    kind: str
    namespace: str = ""
    name: str
    uid: str = ""
    rv: str = ""
    event: EventType
    obj: dict[str, Any] = Field(default_factory=dict)


class ListedKey(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    namespace: str = ""
    name: str
    uid: str = ""
    rv: str = ""


class Relist(_Record):
    """The complete set of objects present after a fresh quorum list of one kind on one cluster.

    A key folded earlier but absent here was deleted while kfold was not watching; the fold infers
    that deletion. ``scope`` is the namespace the list covered ("" = all namespaces)."""

    rec: Literal["relist"] = "relist"
    cluster: str
    api_version: str
    kind: str
    scope: str = ""
    rv: str = ""
    keys: tuple[ListedKey, ...] = ()


class Command(_Record):
    """A request from a user, the configuration or the daemon itself (e.g. ``repo.bind``)."""

    rec: Literal["command"] = "command"
    name: str
    cluster: str = ""
    namespace: str = ""
    target: str = ""
    args: dict[str, Any] = Field(default_factory=dict)


class Deadline(_Record):
    """The server clock passed ``due`` for a timer the fold set."""

    rec: Literal["deadline"] = "deadline"
    timer: str
    machine: str
    key: str
    name: str
    due: int


class EffectIssued(_Record):
    """An effect the fold emitted, journaled before the executor performs it."""

    rec: Literal["effect"] = "effect"
    effect: dict[str, Any]
    term: int | None = None   # the leadership term it was issued under (kfold.daemon.leader); None: no election
    shard: int | None = None  # whose term: the shard's Lease (kfold.daemon.shards, leader.shards > 1); None: the one Lease


Result = Literal[
    "ok",             # 2xx
    "not_found",      # 404 NotFound
    "already_exists", # 409 AlreadyExists
    "conflict",       # 409 Conflict (precondition or resourceVersion mismatch)
    "forbidden",      # 403 Forbidden
    "invalid",        # 422 Invalid / 400 BadRequest
    "gone",           # 410 Gone / Expired
    "transient",      # 5xx, 429, transport error: the request may or may not have happened
    "refused",        # refused before sending (namespace bound, unknown cluster, bad input)
    "error",          # anything else, permanent
]


class Outcome(_Record):
    """What came back when the executor performed an effect."""

    rec: Literal["outcome"] = "outcome"
    effect_id: str
    machine: str
    key: str
    result: Result
    status_reason: str = ""
    message: str = ""
    code: int = 0
    obj: dict[str, Any] | None = None
    items: tuple[dict[str, Any], ...] | None = None
    retry_after_ms: int | None = None
    step: str = ""    # an effect of several requests: the one this answers ("check": EnsureNamespace's GET)


Record = Annotated[
    Union[Observed, Relist, Command, Deadline, EffectIssued, Outcome],
    Field(discriminator="rec"),
]
RECORD_KINDS = ("observed", "relist", "command", "deadline", "effect", "outcome")

RecordAdapter: TypeAdapter[Record] = TypeAdapter(Record)


class RecordError(ValueError):
    """A record that cannot be read: names where and why."""


def parse_record(data: bytes | str, where: str = "record") -> Record:
    """Validate one JSON record; an unknown ``rec`` kind or a bad field raises ``RecordError``."""
    try:
        return RecordAdapter.validate_json(data)
    except Exception as exc:  # pydantic.ValidationError or JSON decode error
        raise RecordError(f"{where}: {_describe(exc)}") from None


def parse_records(payloads: list[bytes]) -> list[Record]:
    """Validate many JSON records, fully (each one as ``parse_record`` would, without its error
    wrapping). For the journal's own checksummed rows use ``trusted_records``: it is ~5x faster.

    (This used to validate one ``[...]`` document with a list adapter: ~50 us per 1.2 KB record,
    mostly the collector scanning the whole list being built; one record at a time is ~4 us.)"""
    validate = RecordAdapter.validate_json
    return [validate(p) for p in payloads]


# -- trusted construction ---------------------------------------------------------------------
# Kinds whose fields all come back from JSON exactly as validation would leave them (str, int,
# None, dict). Relist (tuple of ListedKey) and Outcome (tuple of items) always go through the
# validator; so does any unknown kind, which the validator refuses.
_TRUSTED: dict[str, tuple[type[_Record], tuple[str, ...], frozenset[str]]] = {
    cls.model_fields["rec"].default: (cls, tuple(cls.model_fields), frozenset(cls.model_fields))
    for cls in (Observed, Command, Deadline, EffectIssued)
}
_new = object.__new__
_set = object.__setattr__


def built(cls: type[_Record], data: dict[str, Any], fields_set: set[str]) -> Any:
    """A ``cls`` record holding ``data`` as its fields, without validation (what
    ``model_construct`` does, minus its per-field loop): for values the caller knows to be
    valid. ``fields_set`` must be a set of the record's own (pydantic gives each record one);
    records have no extra or private attributes."""
    rec = _new(cls)
    _set(rec, "__dict__", data)
    _set(rec, "__pydantic_fields_set__", fields_set)
    _set(rec, "__pydantic_extra__", None)
    _set(rec, "__pydantic_private__", None)
    return rec


def trusted_record(data: Any) -> Record:
    """A record from the decoded JSON of a payload the journal wrote and has just verified.

    Assumes: ``data`` is ``orjson.loads`` of bytes produced by ``journal.chain.dump`` or
    ``dump_record`` of a record that was validated when it was appended, and the checksum chain
    proved the bytes unchanged. Then a hot kind whose keys are exactly its fields, in field order,
    is built without re-validating (what ``model_construct`` does, minus its per-field loop); the
    result equals ``RecordAdapter.validate_python(data)``. Anything else (another layout, a
    nested-model kind, an unknown kind) is validated in full, so an unknown kind is still an error.
    Never use this for input kfold did not write and verify (JSONL import validates)."""
    spec = _TRUSTED.get(data.get("rec")) if type(data) is dict else None
    if spec is None or tuple(data) != spec[1]:
        return RecordAdapter.validate_python(data)
    return built(spec[0], data, set(spec[2]))


_OBSERVED_SET = frozenset({"at", "cluster", "api_version", "kind", "namespace", "name", "uid", "rv", "event", "obj"})
_EVENTS = frozenset(("ADDED", "MODIFIED", "DELETED"))


def observed_draft(at: int | None, cluster: str, api_version: str, kind: str, namespace: str, name: str,
                   uid: str, rv: str, event: str, obj: dict[str, Any]) -> Observed:
    """``Observed(at=..., ..., obj=obj)`` (a draft: seq -1), equal to it and with the same fields
    set, without pydantic's validation when every value already has its field's type (an observer
    builds one per watch event: ~4 us of ~10 per record saved). ``obj`` is kept, not copied (the
    caller's, as the observer's redaction returns a fresh one); its keys are not checked, so it
    must come from JSON. Anything else is validated, so a bad value raises as ``Observed`` does."""
    if (type(obj) is not dict or event not in _EVENTS or not (at is None or type(at) is int)
            or not all(type(v) is str for v in (cluster, api_version, kind, namespace, name, uid, rv))):
        return Observed(at=at, cluster=cluster, api_version=api_version, kind=kind, namespace=namespace,
                        name=name, uid=uid, rv=rv, event=event, obj=obj)
    return built(Observed, {"seq": -1, "at": at, "rec": "observed", "cluster": cluster, "api_version": api_version,
                            "kind": kind, "namespace": namespace, "name": name, "uid": uid, "rv": rv,
                            "event": event, "obj": obj}, set(_OBSERVED_SET))


def dump_record(record: Record) -> bytes:
    return record.__pydantic_serializer__.to_json(record, exclude_defaults=False)


def _describe(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        parts = []
        for err in errors()[:3]:
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = err.get("msg", "")
            if err.get("type") == "union_tag_invalid":
                msg = f"unknown record kind {err.get('input', {}).get('rec')!r}; expected one of {', '.join(RECORD_KINDS)}" if isinstance(err.get("input"), dict) else msg
            parts.append(f"field {loc or '(root)'}: {msg}")
        return "; ".join(parts)
    return str(exc)
