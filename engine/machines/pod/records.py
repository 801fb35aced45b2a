"""The pod machine's decision records, and the reductions from raw objects to them (the Pod's
``view_of`` and ``refenced``, on every Pod event, live with the dispatcher in ``machine``).

Reduce, then decide: a Pod is reduced to a ``PodView`` (uid, resourceVersion, kfold labels,
terminating) before anything decides; a Secret to a ``SecretRef``. Engine state keeps only what
records copy from these, never an object.

The pod machine's table holds four kinds of entry, told apart by ``kind``, each with its
``awaits(effect id)`` (the request whose answer decides next) and ``table_key`` (its row key in
``machine.DISPATCH``):
- ``PodOp`` at a pod key ``<cluster>/<namespace>/<name>``: the fence and the running operation;
- ``NamespaceOp`` at ``<cluster>/<namespace>/`` (empty name): a namespace being ensured;
- ``SweepOp`` at ``<cluster>/<namespace>/#sweep`` ("" namespace = all): an orphan Secret sweep;
- ``OrphanSweep`` at ``<cluster>/<namespace>/#orphans``: an orphan-pod sweep (``pod.orphans``).
``Entries.model_validate`` reads any of them back from a snapshot.

Guarantees: records are frozen and small; a ``PodOp`` never holds a whole object (the manifest is
kept only while a create is running, to re-create after a quorum read proves absence).
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, NamedTuple, Union

from pydantic import Field, TypeAdapter

from engine.machines.base import Decision, Reply  # noqa: F401 - Reply: the machines' one answer address
from engine.rfc3339 import to_ms

from engine.labels import GENERATION_LABEL as GENERATION, MANAGED_BY, MANAGER
from engine.labels import SESSION_LABEL as SESSION
SWEEP_NAME = "#sweep"
ORPHANS_NAME = "#orphans"
DEFAULT_BUDGET_S = 600
# The pod machine's table keys for what holds no pod phase (``machine.DISPATCH``): a key with no
# record is named for its kind; a record names its own (``table_key``).
NO_RECORD = {"": "namespace", SWEEP_NAME: "sweep", ORPHANS_NAME: "orphans"}   # by the key's last part; else "absent"
SWEEP_KEYS = {"secrets": "listing secrets", "pods": "listing pods"}            # by ``SweepOp.phase``


class PodView(NamedTuple):
    """One observation of a pod, reduced. Transient: decided on, never stored (a ``PodOp`` copies
    what it keeps), so a plain tuple rather than a pydantic record: built on every Pod event."""

    uid: str
    rv: str
    managed: bool = False
    session: str = ""
    generation: str = ""
    terminating: bool = False


class PodOp(Decision):
    """The fence of one pod name and the operation running on it.

    ``uid``/``rv`` is the latest observation (watch event or quorum read). During a delete,
    ``target`` is the uid the delete means; observations of another uid never move the fence.
    ``awaiting`` is the id of the effect whose outcome decides next ("" = none in flight)."""

    kind: Literal["pod"] = "pod"
    phase: str = "idle"
    uid: str = ""
    rv: str = ""
    terminating: bool = False
    op: Literal["", "create", "delete"] = ""
    target: str = ""
    replies: tuple[Reply, ...] = ()
    then_delete: tuple[Reply, ...] = ()
    reason: str = ""
    session: str = ""          # create: the session it is for; delete: only a pod labelled for it is deleted
    generation: int = 0
    manifest: dict[str, Any] | None = None
    awaiting: str = ""
    missing: bool = False      # a relist lacked the pod while ``awaiting``: that answer cannot prove it still there
    attempts: int = 0
    budget_ms: int = DEFAULT_BUDGET_S * 1000
    deadline: int | None = None

    def awaits(self, effect_id: str) -> bool:
        return effect_id == self.awaiting

    @property
    def table_key(self) -> str:
        return self.phase


class NamespaceOp(Decision):
    kind: Literal["namespace"] = "namespace"
    replies: tuple[Reply, ...] = ()
    awaiting: str = ""
    attempts: int = 0

    def awaits(self, effect_id: str) -> bool:
        return effect_id == self.awaiting

    table_key: ClassVar[str] = "ensuring"


class SecretRef(Decision):
    namespace: str
    name: str
    uid: str
    session: str
    created_ms: int | None


class SweepOp(Decision):
    """A sweep in progress: Secrets listed first (their response's Date is the clock), then Pods."""

    kind: Literal["sweep"] = "sweep"
    phase: Literal["secrets", "pods"] = "secrets"
    awaiting: str = ""
    grace_ms: int = 600_000
    at: int | None = None
    secrets: tuple[SecretRef, ...] = ()

    def awaits(self, effect_id: str) -> bool:
        return effect_id == self.awaiting

    @property
    def table_key(self) -> str:
        return SWEEP_KEYS[self.phase]


class OrphanPod(Decision):
    """A pod of kfold's whose Session the fold does not track, as the sweep's list showed it."""

    name: str
    uid: str
    rv: str
    session: str
    session_namespace: str


class OrphanSweep(Decision):
    """An orphan-pod sweep in progress: the pod list (``awaiting``), then one quorum GET of each
    candidate's Session on ``home`` (``reads``: the effect ids still unanswered)."""

    kind: Literal["orphans"] = "orphans"
    home: str
    awaiting: str = ""
    reads: tuple[str, ...] = ()
    pods: tuple[OrphanPod, ...] = ()

    def awaits(self, effect_id: str) -> bool:
        return effect_id == self.awaiting or effect_id in self.reads

    table_key: ClassVar[str] = "sweeping orphans"


Entry = Annotated[Union[PodOp, NamespaceOp, SweepOp, OrphanSweep], Field(discriminator="kind")]
_ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)


class Entries:
    """Snapshot loader for the pod machine's table (``Machine.decision`` protocol)."""

    @staticmethod
    def model_validate(data: Any) -> PodOp | NamespaceOp | SweepOp | OrphanSweep:
        return _ENTRY.validate_python(data)


# -- reductions ---------------------------------------------------------------------------------
def labels_of(obj: dict[str, Any] | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def secret_ref(obj: dict[str, Any]) -> SecretRef:
    md = obj.get("metadata") or {}
    return SecretRef(namespace=md.get("namespace", ""), name=md.get("name", ""), uid=md.get("uid", ""),
                     session=(md.get("labels") or {}).get(SESSION, ""),
                     created_ms=to_ms(md.get("creationTimestamp")))


def reply_list(replies: tuple[Reply, ...], to: str, key: str) -> tuple[Reply, ...]:
    """``replies`` plus ``(to, key)``, once: a repeated request keeps one reply target."""
    r = Reply(to=to, key=key)
    return replies if r in replies else replies + (r,)
