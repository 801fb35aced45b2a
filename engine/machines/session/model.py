"""The session machine's decision records and its transition table, as data.

Guarantees:
- Everything here is frozen and JSON-serializable (snapshots). Records hold facts reduced from
  objects (uid, resourceVersion, phase, names, due times), never whole objects; the one exception
  is the Session's raw ``spec``, kept so a later ``session.configure`` can re-validate it.
- The session table holds two record kinds under one discriminator: per-Session ``SessionDecision``
  (keys are Session keys) and one ``SessionConfig`` under the key ``CONFIG_KEY`` (not an object
  key), plus one ``TargetIndex`` under ``INDEX_KEY`` (where each session's pods live, for the
  Pod early exit), and what the lists showed (``session.seen``: ``SlotObjects`` per target slot
  under ``#seen/<slot>``, ``Listed`` under ``#listed``). ``SessionEntry.model_validate`` reads any of them back (snapshot loading).
- The target index (``TargetIndex``, kept by ``session.targets``) says which Session's pods live
  where; it is derived from the Session records and rebuilt from them when missing.
- Digests (``Upsert.sending``/``have``, the status and spec digests) are ``canonical_json`` text:
  ``json.dumps(value, sort_keys=True, separators=(",", ":"))``, byte for byte, made by orjson where
  that gives the same text. They are stored in records and snapshots and compared with the next
  one, so the text must not change between versions (a digest in a new format would differ from
  one a snapshot holds and cause a write that changes nothing). orjson writes the same text as the
  standard library for every JSON value but three kinds, each recognisable in its output, where
  the standard library is used: text outside printable ASCII (escaped as ``\\uXXXX``, DEL
  included), a float of magnitude between 1e-9 and 1e-4 (``1e-05``; the output holds ``0.0000``
  or ``e-``), and what orjson refuses (an integer beyond 64 bits, a key that is not a string).
  ``same_json`` compares two JSON values as the wire does (``1``, ``1.0`` and ``True`` differ).
- ``TABLE`` is the only place phases change (``move``); an event the table does not allow in the
  current phase raises ``IllegalTransition`` naming both: a bug, never silently ignored.
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NamedTuple, Union

import orjson
from pydantic import Field, TypeAdapter

from engine.machines.base import Ctx, Decision, Table
from engine.machines.session import finalizer, steps
from engine.machines.session.seen import Listed, SlotObjects
from engine.seams import RegisteredCluster

CONFIG_KEY = "#config"
INDEX_KEY = "#targets"
GONE_KEY = "#gone"
MAX_GONE = 4096  # uids remembered as deleted (a stale observation of one is older than its deletion)
FINALIZER = "kfold.dev/teardown"
DEFAULT_START_MS = 180_000
DEFAULT_READY_MS = 120_000

PHASES = ("Pending", "Creating", "Provisioning", "Ready", "Suspended", "Stopping", "Stopped", "Failed")
BRINGING_UP = ("Pending", "Creating", "Provisioning")
LIVE = ("Pending", "Creating", "Provisioning", "Ready")

TABLE = Table("session", PHASES, [
    ("begin", ["Pending", "Creating", "Provisioning", "Ready", "Suspended", "Stopped", "Failed"], "Pending"),
    ("create", "Pending", "Creating"),
    ("created", "Creating", "Provisioning"),
    ("serve", "Provisioning", "Ready"),
    ("fail", ["Pending", "Creating", "Provisioning", "Ready", "Suspended", "Stopped", "Failed"], "Failed"),
    ("suspend", ["Pending", "Creating", "Provisioning", "Ready", "Failed", "Stopped"], "Suspended"),
    ("stop", ["Pending", "Creating", "Provisioning", "Ready", "Suspended", "Failed", "Stopped"], "Stopping"),
    ("stopped", "Stopping", "Stopped"),
], initial="Pending")


class SessionConfig(Decision):
    """From ``session.configure`` (appended by the daemon at boot from its validated config).

    ``clusters`` is the old form: names usable by every Session, unbounded, reached as themselves
    with no tenant. ``home``/``tenants``/``registered`` are the registry's view (session.tenancy)."""

    kind: Literal["config"] = "config"
    clusters: tuple[str, ...] = ()
    home: str = ""
    tenants: dict[str, str] = Field(default_factory=dict)      # Session namespace -> tenant
    registered: tuple[RegisteredCluster, ...] = ()   # as session.configure states them (handle filled in)
    base_domain: str = ""
    start_ms: int = DEFAULT_START_MS
    ready_ms: int = DEFAULT_READY_MS
    default_image: str = ""                        # the image of a Session that names none ("" = none)
    ceilings: tuple[tuple[str, str], ...] = ()     # resource -> the most any container gets (sorted)
    workspace_class: str = ""          # "": each pod's workspace is an emptyDir
    workspace_size: str = "1Gi"
    workspace_access: str = "ReadWriteOnce"
    workspace_seed: str = ""           # ConfigMap copied into a new workspace (a Session may name its own)
    listed: tuple[str, ...] = ()       # kinds the daemon lists on every target (``session.seen``): () = none waited for
    event_level: str = "Normal"        # the least severe Event type posted ("Warning": no Ready, no Stopped)
    container_identity: bool = False   # KFOLD_CONTAINER, KFOLD_APP, KFOLD_APP_PORTS in each container's env
    status_rules: int = 1              # what the status and Events say (engine.seams.SessionConfigure)


class PodFacts(Decision):
    """The current generation's pod, as far as kfold knows it."""

    name: str = ""
    uid: str = ""
    rv: str = ""
    created: bool = False      # pod_created received (made or adopted)
    phase: str = ""            # Pod status.phase
    ip: str = ""
    node: str = ""
    ready: bool = False        # the workspace container's readiness
    detail: str = ""           # status.reason/message, for a terminal phase
    gone: bool = False
    provisioning: str = ""     # the last provisioning message reported
    ended: str = ""            # how the workspace container ended ("" = it has not; ``status_rules`` 3 on)
    reading: bool = False      # a quorum GET of the pod is in flight (after a relist missed it, or an adopt)
    checked: str = ""          # a bring-up deadline ("start"/"ready") that passed and for which the pod
                               # was read since (``session.deadlines``: the failure waits for that read)


class RepoFacts(Decision):
    url: str
    key: str
    ensured: bool = False
    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Run(Decision):
    app: str
    generation: int
    reason: str
    exitCode: int | None = None


class Upsert(Decision):
    """One endpoint object (Service or Ingress): create; on AlreadyExists read, then replace."""

    stage: steps.UpsertStage = "idle"   # moved only by ``after`` (``session.steps.upsert_after``)
    sending: str = ""          # digest of the manifest in flight
    have: str = ""             # digest of what the apiserver last accepted ("" = nothing routed)
    tries: int = 0
    error: str = ""

    def after(self, event: str, **changes: Any) -> "Upsert":
        return self.but(stage=steps.upsert_after(self.stage, event), **changes)   # type: ignore[return-value]


class Owned(Decision):
    """An object the bring-up makes and this Session owns (``session.objects``): the env Secret,
    the workspace claim."""

    step: steps.ObjectStep = ""   # moved only by ``after`` (``session.steps.object_after``)
    uid: str = ""                 # its uid, from the create's answer or the adopting read
    tries: int = 0                # its requests failed in a row (engine.backoff)
    made: bool = False            # a create was sent: a stop reads and deletes it

    def after(self, event: str, **changes: Any) -> "Owned":
        return self.but(step=steps.object_after(self.step, event), **changes)   # type: ignore[return-value]


class Failure(Decision):
    reason: str
    message: str


class SessionDecision(Decision):
    kind: Literal["session"] = "session"
    name: str
    namespace: str
    home: str
    uid: str = ""
    rv: str = ""
    spec_raw: dict[str, Any] = Field(default_factory=dict)
    spec_generation: int = 0   # metadata.generation of ``spec_raw`` (0: not known); a Failed status names it
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    gone: bool = False                     # the Session itself was deleted
    phase: str = "Pending"
    generation: int = 0
    target: str = ""                       # the cluster handle the pod runs on
    target_tenant: str = ""                # its tenant ("" = home, or an old-form cluster)
    target_namespace: str = ""             # where the pod runs when not the Session's namespace
    shape: str = ""                        # session.spec.shape of the current generation
    failed_spec: str = ""                  # the spec that failed; a different one retries
    finalizer_step: finalizer.Step = ""    # kfold's finalizer: its own small machine (``session.finalizer``)
    reread_tries: int = 0                  # Session re-reads refused in a row (engine.backoff)
    namespace_step: steps.AskStep = ""     # the bring-up's sub-states: each a small machine (``session.steps``)
    secret: Owned = Owned()                # the env Secret (``session.secret``)
    claim: Owned = Owned()                 # the workspace PersistentVolumeClaim
    repos: tuple[RepoFacts, ...] = ()
    pod: PodFacts = PodFacts()
    repos_step: steps.AskStep = ""
    abandoned: tuple[str, ...] = ()        # pod keys whose create was in flight when let go
    releasing: tuple[str, ...] = ()        # pod keys asked to be deleted, not yet gone
    ahead: dict[str, int] = Field(default_factory=dict)  # pod key -> generation: newer than the record knows (session.ahead)
    ahead_read: str = ""                   # the id of the quorum GET of the Session that settles them
    runs: tuple[Run, ...] = ()
    service: Upsert = Upsert()
    ingress: Upsert = Upsert()
    teardown: tuple[str, ...] = ()         # kinds still to delete on stop: the Secret (the rest goes with the pod)
    teardown_sent: bool = False
    failure: Failure | None = None
    blocked: str = ""                      # why a teardown cannot finish
    blocked_pod: str = ""                  # the pod key whose failed delete blocks it (retried: session.replies)
    start_ms: int = DEFAULT_START_MS
    ready_ms: int = DEFAULT_READY_MS
    status_written: str = ""
    status_rv: str = ""                    # the resourceVersion the last status write returned
    status_echoed: bool = False            # that write has been observed since (see session.observed.absorb)
    reported_phase: str = ""               # status.phase on the Session as last observed
    reported_generation: int = 0           # status.generation on the Session as last observed
    since: dict[str, tuple[str, str]] = Field(default_factory=dict)  # condition type -> (status, lastTransitionTime) last written
    home_time: str = ""                    # the latest home-clock time (RFC 3339, seconds) its record knows
    evented: str = ""                      # the last decision posted as an Event (session.status.event_mark)
    resumed: int = 0                       # rebuilt from a status of this generation (``from_status``): up to it,
                                           # what the first lists show is adopted (``session.seen``); 0 = own history

    @property
    def target_ns(self) -> str:
        """The namespace of everything on the target side (pod, Secret, Service, Ingress, Events)."""
        return self.target_namespace or self.namespace


class Moved(NamedTuple):
    """What a step returns when the Session's phase changes: its decision, with the phase it was
    decided in, and the triggers of ``TABLE`` to fire, in order. A step never moves the phase
    itself: the session dispatcher fires them (``session.decide.act``, and ``session.handlers.save``
    for a handler's answer)."""

    decision: "SessionDecision"
    triggers: tuple[str, ...]


def fire(moved: Moved) -> "SessionDecision":
    """``moved``'s decision in the phase its triggers lead to (``IllegalTransition`` if the table
    forbids one): the one place the Session's phase moves."""
    d = moved.decision
    phase = d.phase
    for trigger in moved.triggers:
        phase = TABLE.next(phase, trigger)
    return d.but(phase=phase)


def moved(d: "SessionDecision", *triggers: str) -> Moved:
    """``d`` asking its dispatcher to fire ``triggers``."""
    return Moved(d, triggers)


class TargetIndex(Decision):
    """``"<handle>/<namespace>/<session name>"`` -> the key of the Session whose pods live there."""

    kind: Literal["targets"] = "targets"
    slots: dict[str, str] = Field(default_factory=dict)
    # slot -> the other keys placed there, least first (refused it while its holder is there); empty
    # on the normal path. The first takes the slot when the holder leaves (``update``).
    others: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class DeletedSessions(Decision):
    """The uids of the newest deleted Sessions (at most ``MAX_GONE``, oldest first). A uid is never
    reused, so an observation carrying one of them (a list answered before the deletion and folded
    after it) is older than the deletion and must not bring the Session back."""

    kind: Literal["gone"] = "gone"
    uids: tuple[str, ...] = ()


_Entry = Annotated[Union[SessionDecision, SessionConfig, TargetIndex, DeletedSessions, SlotObjects, Listed],
                   Field(discriminator="kind")]
_ENTRY: TypeAdapter[Any] = TypeAdapter(_Entry)


class SessionEntry:
    """The session table's record type for snapshots: any kind, told apart by ``kind``."""

    @staticmethod
    def model_validate(data: Any) -> SessionDecision | SessionConfig | TargetIndex | DeletedSessions | SlotObjects | Listed:
        return _ENTRY.validate_python(data)


# Digests: the text a record keeps of a manifest, a status or a spec (see the guarantees above).
_SORTED = orjson.OPT_SORT_KEYS


def canonical_json(value: Any, sort_keys: bool = True) -> str:
    """``json.dumps(value, sort_keys=sort_keys, separators=(",", ":"))``, faster."""
    try:
        out = orjson.dumps(value, option=_SORTED if sort_keys else 0)
    except (orjson.JSONEncodeError, TypeError):
        out = None
    if out is not None and out.isascii() and b"\x7f" not in out and b"0.0000" not in out and b"e-" not in out:
        return out.decode("ascii")
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"))


def same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON value, types included: unlike ``==``, ``1``, ``1.0`` and
    ``True`` differ, as they do on the wire and to a validator that checks ``is True``."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


# -- reading the table ------------------------------------------------------------------------------

def sessions(ctx: Ctx) -> list[tuple[str, SessionDecision]]:
    return [(k, d) for k, d in ctx.items() if isinstance(d, SessionDecision)]


def config(ctx: Ctx) -> SessionConfig | None:
    """The configuration in force (``session.configure``), or None before the first one."""
    cfg = ctx.get(CONFIG_KEY)
    return cfg if isinstance(cfg, SessionConfig) else None
