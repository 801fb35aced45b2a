"""Effects as frozen data.

Contract:
- An effect's ``id`` is ``"<cause seq>.<index>"``: stable, derived from the record whose fold
  emitted it, so a replay recomputes the same ids and ``kfold replay --check`` can compare.
- ``machine`` and ``key`` route the outcome back to the machine (and object) that asked.
- Effects are verbs on generic objects (apiVersion/kind/namespace/name) plus a few named ones; the
  executor maps each to exactly one kind of apiserver request (or none, for ``Log``).
- ``DeleteObject`` carries its fence (``uid`` + ``rv`` preconditions) when the machine has one; a
  pod delete always does. No effect carries a grace period: the object's own budget applies.
- ``GetObject`` and ``ListObjects`` are quorum reads (resourceVersion unset): their answer may be
  treated as proof of absence.
- ``safe_to_retry`` says whether repeating the request after an unknown result is harmless;
  unsafe effects in doubt are resolved by re-observation, never by a blind retry.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# A decoded JSON value (a response body, a merge patch).
Json = Union[dict[str, "Json"], list["Json"], str, int, float, bool, None]


class _Effect(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    machine: str
    key: str
    cluster: str = ""
    tenant: str = ""    # with cluster: which registry entry the executor reaches ("" = kfold's own)

    safe_to_retry: bool = True


class _ObjectRef(_Effect):
    api_version: str
    kind: str
    namespace: str = ""
    name: str


class CreateObject(_ObjectRef):
    """POST the manifest. AlreadyExists comes back as ``already_exists``, never as success."""

    type: Literal["create"] = "create"
    manifest: dict[str, Any]
    safe_to_retry: bool = False  # a repeat after an unknown result answers AlreadyExists, not ok


class GetObject(_ObjectRef):
    """Quorum GET (resourceVersion unset)."""

    type: Literal["get"] = "get"


class PatchObject(_ObjectRef):
    """JSON merge patch (RFC 7386) when ``patch`` is an object: ``None`` values clear fields; a JSON
    patch (RFC 6902) when it is a list of operations, so a ``test`` op can precondition exactly the
    field the patch changes. ``subresource`` e.g. "status"."""

    type: Literal["patch"] = "patch"
    patch: Union[dict[str, Any], list[dict[str, Any]]]
    subresource: str = ""


class ReplaceObject(_ObjectRef):
    """PUT the manifest, which carries ``metadata.resourceVersion`` (optimistic concurrency)."""

    type: Literal["replace"] = "replace"
    manifest: dict[str, Any]


class DeleteObject(_ObjectRef):
    """DELETE with optional preconditions; never sets gracePeriodSeconds."""

    type: Literal["delete"] = "delete"
    uid: str = ""
    rv: str = ""
    propagation: Literal["Background", "Foreground", "Orphan"] = "Background"
    safe_to_retry: bool = False


class ListObjects(_Effect):
    """Quorum LIST of one kind, optionally by namespace and label selector. The outcome carries the
    items and the server time read from the SAME response's Date header (``at``)."""

    type: Literal["list"] = "list"
    api_version: str
    kind: str
    namespace: str = ""
    label_selector: str = ""


class EnsureNamespace(_Effect):
    """GET the namespace; create it when absent; AlreadyExists is fine; Forbidden is reported."""

    type: Literal["ensure_namespace"] = "ensure_namespace"
    namespace: str
    labels: dict[str, str] = Field(default_factory=dict)


class RecordEvent(_Effect):
    """A Kubernetes Event (core/v1) about an object, e.g. an app container that ended."""

    type: Literal["event"] = "event"
    namespace: str
    involved: dict[str, str]
    reason: str
    message: str
    event_type: Literal["Normal", "Warning"] = "Normal"
    event_name: str


class PostEvent(_Effect):
    """An events.k8s.io/v1 Event about ``regarding`` (apiVersion, kind, name, namespace, uid): a
    decision a user should see in ``kubectl describe``. Best effort: the executor dedups repeats
    into a series (``event_series``), never retries, and its answer decides nothing. ``note``
    carries no secret material (it is what the status already says)."""

    type: Literal["post_event"] = "post_event"
    namespace: str
    regarding: dict[str, str]
    reason: str
    action: str
    note: str
    event_type: Literal["Normal", "Warning"] = "Normal"
    safe_to_retry: bool = False


class ApplySecret(_Effect):
    """Create-or-update a Secret whose values the executor resolves itself at apply time.

    The effect never carries a secret value: ``values_from_env`` maps a data key to the name of an
    environment variable of the daemon; ``literal`` holds non-secret values (e.g. a username)."""

    type: Literal["apply_secret"] = "apply_secret"
    namespace: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    literal: dict[str, str] = Field(default_factory=dict)
    values_from_env: dict[str, str] = Field(default_factory=dict)
    secret_type: str = "Opaque"


class Log(_Effect):
    """A decision worth telling the operator (e.g. why a sweep was skipped). No request is sent."""

    type: Literal["log"] = "log"
    level: Literal["debug", "info", "warning", "error"] = "info"
    message: str
    fields: dict[str, Any] = Field(default_factory=dict)


Effect = Annotated[
    Union[
        CreateObject, GetObject, PatchObject, ReplaceObject, DeleteObject, ListObjects,
        EnsureNamespace, RecordEvent, PostEvent, ApplySecret, Log,
    ],
    Field(discriminator="type"),
]
EffectAdapter: TypeAdapter[Effect] = TypeAdapter(Effect)
ObjectEffect = Union[CreateObject, GetObject, PatchObject, ReplaceObject, DeleteObject]   # the verbs on one named object


def effect_from_dict(data: dict[str, Any]) -> Effect:
    return EffectAdapter.validate_python(data)


def effect_to_dict(effect: Any) -> dict[str, Any]:
    return effect.model_dump(mode="json")
