"""The repo machine's decision records, and the small helpers that build, read and store them.

One table, two row kinds, told apart by ``row`` (``RepoRow.model_validate`` reads either back from
a snapshot):
- ``RepoEntry`` per Repo key ``<cluster>/<namespace>/<cachekey>``: what was observed (uid, rv,
  url, identity, bound, last-attached, per-node rows: everything ``kfold repos`` lists), the
  operation in flight (``Op``) and its queue, and the subscribers (``Reply``) told of status changes.
- ``RepoConfig`` per ``<cluster>/<namespace>/`` (empty name): what the last ``repo.bind`` said
  (credentials, the NAMES of set variables, bound keys) and the list operations in flight (``ListOp``).

Reduce, then decide: a Repo object is reduced by ``absorb`` to the fields above before anything
decides; engine state never keeps the object.

Guarantees: records are frozen and small; a token value is never held (only variable names);
``settle`` is the one place an observed change is stored, and it tells every subscriber exactly
when the per-node status changed.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter

from engine.machines.base import Ctx
from engine.machines.base import Decision, Reply, object_key, split_key
from engine.machines.repo.creds import CredEntry
from engine.seams import RepoStatusReply
from engine.repo_names import ANNOTATION_IDENTITY, ANNOTATION_LAST_ATTACHED, LABEL_BOUND, repo_status_rows

DEFAULT_REFRESH = "5m"


class Op(Decision):
    """One operation on one Repo: what to state, and where it stands."""

    kind: Literal["bind", "ensure", "unbind", "evict"]
    url: str = ""
    identity: str = ""
    slot_bound: bool = False        # ensure: a configured binding names this key
    configured: bool = True         # ensure: a repo.bind was seen (credentials are known)
    restate: bool = False           # ensure: nothing binds it, so this attach restates secretRef
    stamp: str | None = None        # ensure: last-attached, the attach's server time
    ref: str | None = None
    token_env: str = ""             # a Secret to apply before the statement (variable NAME)
    secured: bool = False           # that Secret was applied in this operation
    then: str = ""                  # after the Secret: "create" | "patch"
    waiters: tuple[Reply, ...] = ()
    uid: str = ""                   # evict: the fence from the listed item
    rv: str = ""
    effect_id: str = ""
    attempts: int = 0


class RepoEntry(Decision):
    row: Literal["repo"] = "repo"
    key: str
    cluster: str
    namespace: str
    name: str
    exists: bool = False
    uid: str = ""
    rv: str = ""
    url: str = ""
    identity: str = ""
    bound: bool = False
    last_attached: str | None = None
    created: str | None = None
    secret_ref: str | None = None
    nodes: tuple[dict[str, Any], ...] = ()
    phase: str = "idle"
    op: Op | None = None
    queue: tuple[Op, ...] = ()
    subscribers: tuple[Reply, ...] = ()
    last_error: str = ""
    checking: str = ""              # the quorum GET sent because a relist lacked it (effect id)


class ListOp(Decision):
    effect_id: str
    purpose: Literal["reconcile", "gc"]
    keep: tuple[str, ...] = ()
    ttl_ms: int = 0


class RepoConfig(Decision):
    row: Literal["config"] = "config"
    cluster: str
    namespace: str
    configured: bool = False
    credentials: tuple[CredEntry, ...] = ()
    env_present: tuple[str, ...] = ()
    bound_keys: tuple[str, ...] = ()
    refresh: str = DEFAULT_REFRESH
    lists: tuple[ListOp, ...] = ()
    last_reconcile: str = ""
    last_gc: str = ""
    last_error: str = ""


_ROW: TypeAdapter = TypeAdapter(Annotated[Union[RepoEntry, RepoConfig], Field(discriminator="row")])


class RepoRow:
    """The table's decision type for snapshots: validates either row kind by its ``row`` tag."""

    @staticmethod
    def model_validate(data: Any) -> RepoEntry | RepoConfig:
        return _ROW.validate_python(data)


# -- building, reading and storing records -------------------------------------------------------
def config_key(cluster: str, namespace: str) -> str:
    return object_key(cluster, namespace, "")


def config_of(ctx: Ctx, cluster: str, namespace: str) -> RepoConfig:
    cfg = ctx.get(config_key(cluster, namespace))
    return cfg if isinstance(cfg, RepoConfig) else RepoConfig(cluster=cluster, namespace=namespace)


def entry_of(ctx: Ctx, key: str) -> RepoEntry:
    entry = ctx.get(key)
    if isinstance(entry, RepoEntry):
        return entry
    cluster, ns, name = split_key(key)
    return RepoEntry(key=key, cluster=cluster, namespace=ns, name=name)


def absorb(entry: RepoEntry, obj: dict[str, Any]) -> RepoEntry:
    """Reduce a Repo object to the fields the machine and ``kfold repos`` decide from."""
    md = obj.get("metadata") or {}
    labels, ann, spec = md.get("labels") or {}, md.get("annotations") or {}, obj.get("spec") or {}
    return entry.but(
        exists=True, uid=md.get("uid", ""), rv=md.get("resourceVersion", ""), url=spec.get("url", ""),
        identity=ann.get(ANNOTATION_IDENTITY, ""), bound=labels.get(LABEL_BOUND) == "true",
        last_attached=ann.get(ANNOTATION_LAST_ATTACHED), created=md.get("creationTimestamp"),
        secret_ref=(spec.get("secretRef") or {}).get("name"), nodes=tuple(repo_status_rows(obj)))


def gone(entry: RepoEntry) -> RepoEntry:
    return entry.but(exists=False, uid="", rv="", nodes=(), bound=False)


def settle(ctx: Ctx, before: RepoEntry, after: RepoEntry) -> None:
    """Store ``after``; when the per-node status changed, tell every subscriber."""
    ctx.put(after.key, after)
    if after.nodes != before.nodes:
        for s in after.subscribers:
            ctx.tell(s.key, RepoStatusReply(repo=after.key, nodes=status_nodes(after.nodes)), to=s.to)


def status_nodes(nodes: tuple[dict[str, Any], ...]) -> dict[str, dict[str, Any]]:
    """``repo_status`` payload: per node present/synced, and attempted/lastError when reported."""
    keep = ("present", "synced", "attempted", "lastError")
    return {n["node"]: {f: n[f] for f in keep if f in n} for n in nodes}


def listing(entry: RepoEntry) -> dict[str, Any]:
    """One ``kfold repos`` row: absent fields stay absent."""
    row: dict[str, Any] = {"cluster": entry.cluster, "namespace": entry.namespace, "key": entry.name,
                           "url": entry.url}
    if entry.identity:
        row["identity"] = entry.identity
    row["bound"] = entry.bound
    if entry.last_attached:
        row["lastAttached"] = entry.last_attached
    row["nodes"] = [dict(n) for n in entry.nodes]
    return row
