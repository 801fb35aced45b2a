"""The typed seams between kfold's parts: one frozen model per command and per machine message.

A command is what the configuration, the CLI or the daemon asks of the fold (``Command.name`` ->
``COMMANDS[name]`` validates ``Command.args``); a message is what one machine tells another within
a fold step (``ctx.tell(key, DeletePod(...))``: the model names its machine and message,
``MESSAGES[(machine, message)]``, requests and their replies alike). Both sides name one model, so a field one side sends is a
field the other side reads: a renamed or misspelt field is an error where it enters, not a
silently ignored key.

Guarantees:
- ``check_command(name, args)`` returns the validated model or raises ``SeamError`` naming the
  command and the first wrong fields (``command pod.sweep_secrets refused: field grace_seconds:
  ...``). The daemon calls it before a command is journaled (a command the fold cannot accept is
  never journaled); the fold calls it again on every journaled command (a journal written by an
  older kfold), where a refusal is a quarantined record (``engine.core``), never a crash.
- ``check_message`` is the same for ``ctx.tell``: a machine that sends what the receiver cannot
  read is a bug, reported on the record that made it.
- Every model is frozen and forbids unknown fields; counts and durations are strict integers (no
  "10" or ``true`` read as a number). Old journals' spellings are accepted only
  where a model says so explicitly (``SessionConfigure``).

Pure: pydantic only; no clock, no I/O.
"""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator


class SeamError(ValueError):
    """A command or message that does not match its model; the message names the field."""


class _Seam(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- commands -------------------------------------------------------------------------------------

class RegisteredCluster(_Seam):
    """A registered cluster as ``session.configure`` carries it: never a credential."""

    handle: str = ""
    name: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    namespaces: tuple[str, ...] = ()


STATUS_RULES = 3   # the status rules this kfold writes by (``SessionConfigure.status_rules``)


class SessionConfigure(_Seam):
    """``session.configure``: placement, base domain, the bring-up deadlines (seconds), the default
    image and the container resource ceilings (config ``sessions``).

    Journals written before this model spelt the deadlines ``defaults: {start_seconds,
    ready_seconds}`` (plus ``start_ms``/``ready_ms``), which the session machine never read: they
    are taken here, so such a journal replays with the deadlines its config asked for."""

    home: str = ""
    clusters: tuple[str, ...] = ()
    tenants: dict[str, str] = Field(default_factory=dict)
    registered: tuple[RegisteredCluster, ...] = ()
    base_domain: str = ""
    start_seconds: StrictInt = Field(180, ge=1)
    ready_seconds: StrictInt = Field(120, ge=1)
    default_image: str = ""                              # "" = none: a Session must name its image
    limits: dict[str, str] = Field(default_factory=dict)   # resource -> ceiling (quantity) of every container
    # The workspace volume (kfold.daemon.config.WorkspaceConfig): no class = an emptyDir per pod.
    workspace_class: str = ""
    workspace_size: str = "1Gi"
    workspace_access: str = "ReadWriteOnce"
    workspace_seed: str = ""
    # The kinds the daemon lists (then watches) on every cluster it places pods on: a Session rebuilt
    # from its status waits for their first lists before it creates what they show (session.seen).
    listed: tuple[str, ...] = ()
    # The least severe Event type posted on a Session (config ``events.level``).
    event_level: Literal["Normal", "Warning"] = "Normal"
    # Each container's identity in its env (docs/session-api.md "Container identity"); a journal
    # written before kfold stated it (no such argument) replays as it was decided: without.
    container_identity: bool = False
    # What a Session's status and Events say (engine.machines.session.status, docs/session-status.md):
    # 1 as kfold wrote them before it stated this (a journal without it replays as it was decided);
    # 2: PortsRouted True only while every declared port is routed, a failure's Event note naming its
    # pod generation (none before the first); 3 (``STATUS_RULES``, what kfold run states): also a
    # waiting pod's reason in Ready's message, an Event and the start deadline's failure, and a
    # workspace container that ended failing the Session (``WorkspaceEnded``).
    status_rules: StrictInt = Field(1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _old_spelling(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not ({"defaults", "start_ms", "ready_ms"} & set(data)):
            return data
        data = dict(data)
        defaults = data.pop("defaults", None) or {}
        start_ms, ready_ms = data.pop("start_ms", None), data.pop("ready_ms", None)
        for name, ms, alias in (("start_seconds", start_ms, "start_deadline_s"),
                                ("ready_seconds", ready_ms, "ready_deadline_s")):
            if name not in data:
                given = defaults.get(name, defaults.get(alias)) if isinstance(defaults, dict) else None
                if given is None and isinstance(ms, int):
                    given = ms // 1000
                if given is not None:
                    data[name] = given
        return data


class RepoBind(_Seam):
    """``repo.bind`` (boot, per namespace of each cluster): the repo machine validates the urls and
    credential entries itself and refuses them with their value named (``repo.bindings``)."""

    cluster: str = ""
    namespace: str = ""
    bindings: Any = ()
    credentials: Any = ()
    env_present: tuple[str, ...] = ()
    refresh_interval: str = "5m"


class RepoReconcileBound(_Seam):
    cluster: str = ""
    namespace: str = ""
    bindings: Any = ()


class RepoGc(_Seam):
    cluster: str = ""
    namespace: str = ""
    ttl_seconds: StrictInt = Field(ge=0)


class SweepSecrets(_Seam):
    """``pod.sweep_secrets``: ``namespace`` "" sweeps every namespace of the cluster."""

    cluster: str = ""
    namespace: str = ""
    grace_seconds: StrictInt = Field(600, ge=0)


class SweepOrphans(_Seam):
    """``pod.sweep_orphans``: kfold's pods in ``namespace`` of ``cluster`` whose Session (on ``home``)
    is gone are deleted (``engine.machines.pod.orphans``)."""

    cluster: str = Field(min_length=1)
    namespace: str = Field(min_length=1)
    home: str = Field(min_length=1)


class EffectInDoubt(_Seam):
    effect_id: str = Field(min_length=1)


COMMANDS: dict[str, type[_Seam]] = {
    "session.configure": SessionConfigure,
    "repo.bind": RepoBind,
    "repo.reconcile_bound": RepoReconcileBound,
    "repo.gc": RepoGc,
    "pod.sweep_secrets": SweepSecrets,
    "pod.sweep_orphans": SweepOrphans,
    "effect.in_doubt": EffectInDoubt,
}


# -- messages: requests ---------------------------------------------------------------------------

class _Request(_Seam):
    reply_to: str = Field(min_length=1)
    reply_key: str = Field(min_length=1)


class CreatePod(_Request):
    manifest: dict[str, Any]
    session: str = Field(min_length=1)
    generation: int = Field(ge=1)
    budget_s: int | None = Field(None, ge=1)


class DeletePod(_Request):
    reason: str = ""
    budget_s: int | None = Field(None, ge=1)
    session: str = ""   # set: only a pod labelled for this Session (kfold.dev/session) is deleted


class EnsureNamespaceRequest(_Request):
    pass


class EnsureRepo(_Request):
    url: str


class ReleaseRepo(_Request):
    pass


# -- messages: replies ----------------------------------------------------------------------------

class PodCreated(_Seam):
    pod: str
    uid: str = ""
    adopted: bool = False


class PodCreateFailed(_Seam):
    pod: str
    reason: str
    taken: bool = False   # the name is held by a pod kfold refused to adopt (not this session generation's)


class PodGone(_Seam):
    pod: str


class PodDeleteFailed(_Seam):
    pod: str
    reason: str


class NamespaceReady(_Seam):
    namespace: str


class NamespaceFailed(_Seam):
    namespace: str
    reason: str


class RepoEnsured(_Seam):
    repo: str
    url: str = ""


class RepoFailed(_Seam):
    repo: str
    reason: str


class NodeStatus(_Seam):
    """One node's cache status as the Repo's status reports it (the CRD's fields)."""

    present: bool | None = None
    synced: bool | None = None
    attempted: Literal["Probe", "Clone", "Fetch"] | None = None
    lastError: str | None = None


class RepoStatusReply(_Seam):
    repo: str
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)


class SecretListed(_Seam):
    """A Session's ``<session>-env`` Secret as the orphan Secret sweep's quorum list showed it
    (``pod.sweep``): the session machine decides with the spec it holds (``session.secret.listed``)."""

    namespace: str
    name: str
    uid: str = Field(min_length=1)
    rv: str = Field(min_length=1)
    session_owners: tuple[str, ...] = ()   # uids of the Sessions its ownerReferences name


MESSAGES: dict[tuple[str, str], type[_Seam]] = {
    ("pod", "create"): CreatePod,
    ("pod", "delete"): DeletePod,
    ("pod", "ensure_namespace"): EnsureNamespaceRequest,
    ("repo", "ensure"): EnsureRepo,
    ("repo", "release"): ReleaseRepo,
    ("session", "pod_created"): PodCreated,
    ("session", "pod_create_failed"): PodCreateFailed,
    ("session", "pod_gone"): PodGone,
    ("session", "pod_delete_failed"): PodDeleteFailed,
    ("session", "namespace_ready"): NamespaceReady,
    ("session", "namespace_failed"): NamespaceFailed,
    ("session", "repo_ensured"): RepoEnsured,
    ("session", "repo_failed"): RepoFailed,
    ("session", "repo_status"): RepoStatusReply,
    ("session", "secret_listed"): SecretListed,
}


ADDRESSES: dict[type[_Seam], tuple[str, str]] = {model: where for where, model in MESSAGES.items()}
assert len(ADDRESSES) == len(MESSAGES), "a message model is addressed to one machine under one name"


def addressed(msg: _Seam) -> tuple[str, str]:
    """The machine and the message name ``msg`` is sent as (``MESSAGES``)."""
    where = ADDRESSES.get(type(msg))
    if where is None:
        raise SeamError(f"{type(msg).__name__} is not a message; known: {', '.join(sorted(m.__name__ for m in ADDRESSES))}")
    return where


# The models each machine's seam handlers receive (``Machine.on_command``'s ``cmd``, ``on_receive``'s
# ``msg``): the tables above, by machine (tests/unit/test_handler_types.py holds them equal).
PodCommand = Union[SweepSecrets, SweepOrphans]
RepoCommand = Union[RepoBind, RepoReconcileBound, RepoGc]
PodMessage = Union[CreatePod, DeletePod, EnsureNamespaceRequest]
RepoMessage = Union[EnsureRepo, ReleaseRepo]
SessionMessage = Union[PodCreated, PodCreateFailed, PodGone, PodDeleteFailed, NamespaceReady, NamespaceFailed,
                       RepoEnsured, RepoFailed, RepoStatusReply, SecretListed]
Message = Union[PodMessage, RepoMessage, SessionMessage]


# -- checking -------------------------------------------------------------------------------------

def check_command(name: str, args: dict[str, Any]) -> _Seam | None:
    """The validated arguments of command ``name``; None for a name no model covers (the fold's
    dispatch refuses an unknown command with the known names)."""
    model = COMMANDS.get(name)
    if model is None:
        return None
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise SeamError(f"command {name} refused: {describe(exc)}") from None


def check_message(machine: str, message: str, args: dict[str, Any]) -> _Seam:
    model = MESSAGES.get((machine, message))
    if model is None:
        raise SeamError(f"message {message!r} to machine {machine!r} is not a known message; known: "
                        f"{', '.join(sorted(m for w, m in MESSAGES if w == machine)) or 'none'}")
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise SeamError(f"message {message!r} to machine {machine!r} refused: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    """``field a.b: reason (got X)``, for the first three errors."""
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        field = ".".join(str(p) for p in err.get("loc", ())) or "(all)"
        text = f"field {field}: {err.get('msg', '').removeprefix('Value error, ')}"
        if err.get("type") != "missing":
            text += f" (got {err.get('input')!r})"
        parts.append(text)
    return "; ".join(parts)
