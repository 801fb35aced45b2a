"""The repo machine's list-driven commands (reconcileBound, gc), and its command input.

The records these decide over (``RepoConfig``, ``RepoEntry``, ``ListOp``) are in ``repo.records``.

reconcileBound: a quorum list of bound Repos; each one whose key the configuration no longer binds
is unlabelled. A 404 list outcome (``not_found``, or ``error`` with code 404: a real apiserver
answers a collection it does not serve with a plain-text 404 and no Status, which ``classify``
rightly refuses to call ``not_found``) means the apiserver has no Repo resource type: no Repos,
nothing to do, no error. Any other failure is logged at error level and recorded.

gc: a quorum list of all Repos, decided on the SERVER time of that response (the outcome's
``at``). A Repo is evicted when it is unbound (no label, not in the configured bindings) and its
clock (``last-attached``, else ``creationTimestamp``) is strictly older than the TTL:
``at - clock > ttl``. Exactly at the TTL it is kept; one millisecond past, evicted. No server time
(``at`` is None), or a clock that cannot be parsed: nothing is evicted. The delete is fenced by the
listed uid + resourceVersion, so an attach that lands after the list keeps the Repo.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable

from engine.machines.base import Ctx
from engine.effects.models import ListObjects
from engine.machines.base import object_key, split_key
from engine.machines.repo.creds import CredentialError, parse_credentials
from engine.repo_names import (
    API_VERSION, KIND, LABEL_BOUND, RepoUrlError, epoch_ms, identity, key_of_identity, without_password,
)
from engine.machines.repo.records import (
    DEFAULT_REFRESH, ListOp, Op, RepoConfig, RepoEntry, absorb, config_key, config_of, entry_of, settle,
)
from engine.seams import RepoBind, RepoCommand, RepoGc, RepoReconcileBound
from journal.records import Command, Outcome


# -- command input -------------------------------------------------------------------------------
def where(rec: Command, cmd: RepoCommand) -> tuple[str, str]:
    return cmd.cluster or rec.cluster, cmd.namespace or rec.namespace


def bindings_of(raw: Any) -> list[tuple[str, str]]:
    """``[(url, identity)]``, one per identity: the first spelling met stands for it."""
    if not isinstance(raw, (list, tuple)):
        raise RepoUrlError(raw, "bindings must be a list of {url}")
    out: dict[str, str] = {}
    for b in raw:
        url = b.get("url") if isinstance(b, dict) else b
        out.setdefault(identity(url), without_password(url))
    return [(url, ident) for ident, url in out.items()]


def bind_config(ctx: Ctx, cmd: RepoBind, cluster: str, ns: str) -> tuple[RepoConfig, list[tuple[str, str]]]:
    bindings = bindings_of(cmd.bindings)
    creds = parse_credentials(cmd.credentials)
    env = cmd.env_present
    if not isinstance(env, (list, tuple)) or not all(isinstance(e, str) for e in env):
        raise CredentialError(f"env_present {env!r} refused: expected a list of variable names")
    keys = tuple(object_key(cluster, ns, key_of_identity(i)) for _, i in bindings)
    cfg = config_of(ctx, cluster, ns).but(
        configured=True, credentials=creds, env_present=tuple(sorted(set(env))), bound_keys=keys,
        refresh=cmd.refresh_interval or DEFAULT_REFRESH, last_error="")
    return cfg, bindings


def refuse(ctx: Ctx, ckey: str, command: str, exc: Exception) -> None:
    """Bad input: one error Log naming the value and the reason; no other effect."""
    ctx.log(ckey, f"{command} refused: {exc}", level="error", command=command)
    cluster, ns, _ = split_key(ckey)
    ctx.put(ckey, config_of(ctx, cluster, ns).but(last_error=str(exc)))


# -- reconcileBound and gc -----------------------------------------------------------------------
def command(ctx: Ctx, rec: Command, cmd: RepoReconcileBound | RepoGc) -> None:
    cluster, ns = where(rec, cmd)
    ckey = config_key(cluster, ns)
    try:
        lop = _list_op(cmd)
    except (RepoUrlError, ValueError) as exc:
        return refuse(ctx, ckey, rec.name, exc)
    cfg = config_of(ctx, cluster, ns)
    if lop.purpose == "reconcile":
        cfg = cfg.but(bound_keys=tuple(object_key(cluster, ns, k) for k in lop.keep))
    selector = f"{LABEL_BOUND}=true" if lop.purpose == "reconcile" else ""
    effect = ctx.emit(ListObjects, ckey, cluster=cluster, api_version=API_VERSION, kind=KIND,
                      namespace=ns, label_selector=selector)
    ctx.put(ckey, cfg.but(lists=cfg.lists + (lop.but(effect_id=effect.id),)))


def _list_op(cmd: RepoReconcileBound | RepoGc) -> ListOp:
    if isinstance(cmd, RepoReconcileBound):
        keep = tuple(key_of_identity(i) for _, i in bindings_of(cmd.bindings))
        return ListOp(effect_id="", purpose="reconcile", keep=keep)
    return ListOp(effect_id="", purpose="gc", ttl_ms=cmd.ttl_seconds * 1000)   # a whole number >= 0 (seams)


def outcome(ctx: Ctx, rec: Outcome, effect: ListObjects, start: Callable) -> Iterator[Any]:
    """The list's answer: yields the move of each operation it starts (``start``'s answer), for the
    dispatcher to make before the next one starts, then notes what it decided."""
    cluster, ns, _ = split_key(effect.key)
    cfg = config_of(ctx, cluster, ns)
    lop = next((lo for lo in cfg.lists if lo.effect_id == effect.id), None)
    if lop is None:
        return
    cfg = cfg.but(lists=tuple(lo for lo in cfg.lists if lo is not lop))
    ctx.put(effect.key, cfg)
    if rec.result == "not_found" or rec.code == 404:  # a real apiserver answers a plain-text 404
        return _note(ctx, cfg, lop, "no Repo resource type on this cluster: nothing to do")
    if rec.result != "ok":
        ctx.log(effect.key, f"listing Repos for {lop.purpose} failed: {rec.result} {rec.message}".rstrip(),
                level="error", result=rec.result, status_reason=rec.status_reason)
        return _note(ctx, cfg, lop, f"failed: {rec.result} {rec.message}".rstrip())
    decide = _reconcile if lop.purpose == "reconcile" else _gc
    _note(ctx, cfg, lop, (yield from decide(ctx, cfg, lop, rec, start)))


def in_doubt(ctx: Ctx, effect: ListObjects) -> None:
    """A list is a read: ask again, keeping what the operation was for."""
    cluster, ns, _ = split_key(effect.key)
    cfg = config_of(ctx, cluster, ns)
    lop = next((lo for lo in cfg.lists if lo.effect_id == effect.id), None)
    if lop is not None:
        again = ctx.emit(ListObjects, effect.key, **effect.model_dump(exclude={"id", "machine", "key", "type"}))
        lists = tuple(lo.but(effect_id=again.id) if lo is lop else lo for lo in cfg.lists)
        ctx.put(effect.key, cfg.but(lists=lists))


def _note(ctx: Ctx, cfg: RepoConfig, lop: ListOp, text: str) -> None:
    field = "last_reconcile" if lop.purpose == "reconcile" else "last_gc"
    ctx.put(config_key(cfg.cluster, cfg.namespace), config_of(ctx, cfg.cluster, cfg.namespace).but(**{field: text}))


def _items(ctx: Ctx, cfg: RepoConfig, rec: Outcome) -> list[RepoEntry]:
    out = []
    for item in rec.items or ():
        name = (item.get("metadata") or {}).get("name")
        if name:
            before = entry_of(ctx, object_key(cfg.cluster, cfg.namespace, name))
            settle(ctx, before, absorb(before, item))
            out.append(ctx.get(before.key))
    return out


def _reconcile(ctx: Ctx, cfg: RepoConfig, lop: ListOp, rec: Outcome, start: Callable) -> Iterator[Any]:
    stale = [e for e in _items(ctx, cfg, rec) if e.bound and e.name not in lop.keep]
    for e in stale:
        yield start(ctx, e, Op(kind="unbind"))
    return f"unbound {len(stale)}: {', '.join(e.name for e in stale)}" if stale else "nothing to unbind"


def _gc(ctx: Ctx, cfg: RepoConfig, lop: ListOp, rec: Outcome, start: Callable) -> Iterator[Any]:
    if rec.at is None:
        ctx.log(config_key(cfg.cluster, cfg.namespace), "gc: no server time on the list response; nothing evicted",
                level="warning")
        return "no server time: nothing evicted"
    evict = [e for e in _items(ctx, cfg, rec) if evictable(e, rec.at, lop.ttl_ms, cfg.bound_keys)]
    for e in evict:
        yield start(ctx, e, Op(kind="evict", uid=e.uid, rv=e.rv))
    return f"evicting {len(evict)}: {', '.join(e.name for e in evict)}" if evict else "nothing to evict"


def evictable(entry: RepoEntry, now: int, ttl_ms: int, bound_keys: tuple[str, ...]) -> bool:
    """Unbound, and its clock strictly older than the TTL at server time ``now`` (see module doc)."""
    if entry.bound or entry.key in bound_keys:
        return False
    clock = epoch_ms(entry.last_attached if entry.last_attached is not None else entry.created)
    return clock is not None and now - clock > ttl_ms
