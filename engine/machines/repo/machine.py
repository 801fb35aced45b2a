"""The Repo lifecycle machine ("repo"): bind at boot, ensure at attach, reconcileBound, eviction.

kfold creates ``Repo`` resources and never clones; a cache agent on each node does, and reports
per-node status on the resource. kfold states what should be cached (url, credential), whether a
configured binding holds it (label ``kfold.dev/repo-bound``) and when a session last used it
(annotation ``kfold.dev/last-attached``, the eviction clock).

Expected flow (one operation at a time per Repo; later ones queue, ensures join):
- ``repo.bind`` (boot): validate everything first, then per binding create (labelled bound); on
  AlreadyExists one merge patch restating url, ``secretRef`` (``None`` clears), identity and label.
  Never touches ``last-attached``. A missing token variable is logged once here.
- ``ensure`` (message from the session machine): create with ``last-attached`` = the attach's
  server time ON THE REPO'S CLUSTER; on AlreadyExists move the clock only. If neither the slot nor
  the label binds it, read it (quorum) and restate the ``secretRef`` resolved against the url that
  STANDS. An attach folded from a record another cluster's clock stamped (a Session observed on
  the home cluster, placed on a registered one) has no time on the Repo's clock: the Repo is read
  first and the read's outcome, stamped on that cluster's clock, gives ``last-attached``.
- ``repo.reconcile_bound``: quorum-list bound Repos, unlabel those the config no longer binds.
  A 404 for the list (no Repo CRD) is "nothing to do"; any other refusal is logged as an error.
- ``repo.gc``: quorum-list Repos, delete (fenced by uid + resourceVersion) every unbound one whose
  clock is older than the TTL on the list response's server time. See ``repo.bindings``.

Guarantees: pure; bad input is refused with the value and the reason before any effect; a token
value is never seen (only variable names). Caveats: a burst of ensures joins the one in flight, so
the clock holds the first attach's time of the burst; retries of one operation (in doubt,
re-created after a read found it absent) are counted across the whole operation in ``Op.attempts``,
within ``engine.backoff.REPO_OP``, then it is reported.

Layout: this module routes and takes commands and messages in; one operation runs in ``repo.ops``,
the list-driven commands in ``repo.bindings``, over the records in ``repo.records``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from engine.machines.base import (
    Answer, Answered, Ctx, Dispatch, Handler, InDoubt, Machine, Missing, Ordered, Reply, Stale, ignore,
    object_key, split_key,
)
from engine.machines.repo import bindings as repo_list
from engine.machines.repo import ops
from engine.machines.repo.creds import CredentialError, missing_env, resolve
from engine.repo_names import KIND, RepoUrlError, identity, key_of_identity, rfc3339, without_password
from engine.effects.models import ApplySecret, CreateObject, DeleteObject, Effect, GetObject, ListObjects, PatchObject
from engine.machines.repo.ops import BUSY, TABLE, RepoEffect, doubt, ref_fields, start, transient
from engine.machines.repo.records import (
    Op, RepoConfig, RepoEntry, RepoRow, absorb, config_key, config_of, entry_of, gone, settle,
)
from engine.seams import (
    EnsureRepo, ReleaseRepo, RepoBind, RepoCommand, RepoFailed, RepoGc, RepoMessage, RepoReconcileBound,
)
from journal.records import Command, Observed, Outcome, Relist


class RepoSeen(NamedTuple):
    """An ADDED or MODIFIED event of the Repo (its object, reduced by ``records.absorb``)."""
    obj: dict[str, Any]


class RepoGone(NamedTuple):
    """A DELETED event of the Repo."""


class Recheck(NamedTuple):
    """The answer (``rec``; None: in doubt) of the quorum GET sent because a relist lacked the Repo."""
    rec: Outcome | None
    effect: GetObject


class RepoMachine(Machine):
    name = "repo"
    decision = RepoRow
    observes = frozenset({KIND})
    commands = frozenset({"repo.bind", "repo.reconcile_bound", "repo.gc"})
    typed_messages = True

    def on_command(self, ctx: Ctx, rec: Command, cmd: RepoCommand) -> None:
        cluster, ns = repo_list.where(rec, cmd)
        ckey = config_key(cluster, ns)
        DISPATCH.run(ctx, ckey, "config", type(cmd), ctx.get(ckey), Ordered(rec, cmd))

    def on_receive(self, ctx: Ctx, key: str, msg: RepoMessage) -> None:
        entry = ctx.get(key)
        DISPATCH.run(ctx, key, phase_of(key, entry), type(msg), entry, msg)

    def on_observed(self, ctx: Ctx, rec: Observed) -> None:
        key = object_key(rec.cluster, rec.namespace, rec.name)
        entry = ctx.get(key)
        ev = RepoGone() if rec.event == "DELETED" else RepoSeen(rec.obj)
        DISPATCH.run(ctx, key, phase_of(key, entry), type(ev), entry, ev)

    def on_relist(self, ctx: Ctx, rec: Relist) -> None:
        """A Repo the list lacks is a suspect (``Missing``): ``missing_after_relist`` says why a list
        alone is no proof."""
        present = {object_key(rec.cluster, k.namespace, k.name) for k in rec.keys}
        prefix = f"{rec.cluster}/{rec.scope + '/' if rec.scope else ''}"
        for key, entry in list(ctx.items()):
            if isinstance(entry, RepoEntry) and entry.exists and key.startswith(prefix) and key not in present:
                DISPATCH.run(ctx, key, entry.phase, Missing, entry, Missing())

    def on_outcome(self, ctx: Ctx, rec: Outcome, effect: Effect) -> None:
        key = effect.key
        entry = ctx.get(key)
        phase = phase_of(key, entry)
        event, ev = _reduced(phase, entry, effect, rec)
        DISPATCH.run(ctx, key, phase, event, entry, ev)

    def on_in_doubt(self, ctx: Ctx, effect: Effect) -> None:
        key = effect.key
        entry = ctx.get(key)
        phase = phase_of(key, entry)
        event, ev = _reduced(phase, entry, effect, None)
        DISPATCH.run(ctx, key, phase, event, entry, ev)


def phase_of(key: str, entry: Any) -> str:
    """The table key of ``key``: ``config`` for a namespace's configuration key
    (``<cluster>/<namespace>/``), else the Repo's phase (``absent``: no record)."""
    if key.endswith("/"):
        return "config"
    return entry.phase if isinstance(entry, RepoEntry) else "absent"


def _reduced(phase: str, entry: Any, effect: Effect, outcome: Outcome | None) -> tuple[type, Any]:
    """An outcome (``outcome``; None: a doubt) reduced to the event the table routes: a configuration
    key's lists decide by their own ids (``repo.bindings``); a Repo's is the relist's quorum read
    (``Recheck``), the answer its op awaits (the effect's class; ``InDoubt``), or ``Stale``."""
    if phase == "config":
        return (type(effect), Answered(outcome, effect)) if outcome is not None else (InDoubt, InDoubt(effect))
    if not isinstance(entry, RepoEntry):
        return Stale, Stale(outcome, effect)
    if entry.checking == effect.id:
        return Recheck, Recheck(outcome, effect)
    if entry.op is not None and entry.op.effect_id == effect.id:
        return (type(effect), Answered(outcome, effect)) if outcome is not None else (InDoubt, InDoubt(effect))
    return Stale, Stale(outcome, effect)


def _answer(handler: Any, shows_the_repo: bool = True) -> Handler:
    """The answer of the request ``entry``'s op awaits: the Repo it shows (a create's, patch's or
    read's, ``shows_the_repo``) is absorbed first; a transient one is ``ops.transient``'s (retried
    or in doubt); otherwise ``handler`` decides."""
    def answer(ctx: Ctx, key: str, entry: RepoEntry, ev: Answered) -> Answer:
        rec, effect = ev
        if shows_the_repo and rec.result == "ok" and rec.obj:
            settle(ctx, entry, absorb(entry, rec.obj))
            entry = ctx.get(key)
        if rec.result == "transient":
            return transient(ctx, entry, effect, rec)
        return handler(ctx, entry, rec)
    answer.__qualname__ = f"ops.{handler.__name__}"
    return answer


def _doubt(ctx: Ctx, key: str, entry: RepoEntry, ev: InDoubt) -> Answer:
    return doubt(ctx, entry, ev.effect)


def _seen(ctx: Ctx, key: str, entry: RepoEntry | None, ev: RepoSeen) -> None:
    entry = entry_of(ctx, key)
    settle(ctx, entry, absorb(entry, ev.obj))


def _vanished(ctx: Ctx, key: str, entry: RepoEntry | None, ev: RepoGone) -> None:
    entry = entry_of(ctx, key)
    settle(ctx, entry, gone(entry))


def _missing(ctx: Ctx, key: str, entry: RepoEntry, ev: Missing) -> None:
    """An idle Repo a relist lacked is re-read (quorum GET; only its 404 forgets it); an operation in
    flight decides by its own outcome (a row of its own)."""
    _recheck(ctx, entry)


def _stale(ctx: Ctx, key: str, entry: Any, ev: Stale) -> None:
    if ev.rec is not None:
        ctx.log(key, "outcome for no operation in flight; ignored", level="debug")


def _rechecked(ctx: Ctx, key: str, entry: RepoEntry, ev: Recheck) -> None:
    """The quorum read a relist asked for: its 404 forgets the Repo, a Repo read is absorbed, a
    read in doubt is sent again; anything else keeps what is known (the watch or the next relist
    decides)."""
    entry, rec = entry.but(checking=""), ev.rec
    if rec is None:
        return _recheck(ctx, entry)
    if rec.result == "not_found":
        return settle(ctx, entry, gone(entry))
    if rec.result == "ok" and rec.obj:
        return settle(ctx, entry, absorb(entry, rec.obj))
    ctx.put(entry.key, entry)


def _recheck(ctx: Ctx, entry: RepoEntry) -> None:
    """Quorum-read a Repo a relist lacked; an operation in flight decides by its own outcome."""
    if entry.op is not None or entry.checking:
        return
    effect = ctx.emit(GetObject, entry.key, cluster=entry.cluster, **ref_fields(entry))
    ctx.put(entry.key, entry.but(checking=effect.id))


# -- commands and messages ---------------------------------------------------------------------
def bind(ctx: Ctx, ckey: str, cfg: Any, ev: Ordered) -> Answer:
    rec, cmd = ev
    cluster, ns, _ = split_key(ckey)
    try:
        cfg, bindings = repo_list.bind_config(ctx, cmd, cluster, ns)
    except (RepoUrlError, CredentialError) as exc:
        return repo_list.refuse(ctx, ckey, rec.name, exc)
    ctx.put(ckey, cfg)
    report_missing_env(ctx, ckey, cfg)
    return _bind_each(ctx, cluster, ns, cfg, bindings)


def _bind_each(ctx: Ctx, cluster: str, ns: str, cfg: RepoConfig, bindings: Any) -> Iterator[Answer]:
    for url, ident in bindings:
        key = object_key(cluster, ns, key_of_identity(ident))
        resolved = resolve(url, ident, cfg.credentials, cfg.env_present)
        yield start(ctx, entry_of(ctx, key), Op(kind="bind", url=url, identity=ident, ref=resolved.ref,
                                               token_env=resolved.token_env))


def report_missing_env(ctx: Ctx, ckey: str, cfg: RepoConfig) -> None:
    missing = missing_env(cfg.credentials, cfg.env_present)
    if missing:
        names = ", ".join(f"{c.env} (for {c.match})" for c in missing)
        ctx.log(ckey, f"git credential token variable not set: {names}; https clones of the "
                      f"repositories they match are anonymous until it is set and kfold restarts",
                level="warning", missing=[{"match": c.match, "env": c.env} for c in missing])


def ensure(ctx: Ctx, key: str, entry: Any, msg: EnsureRepo) -> Answer:
    target = Reply(to=msg.reply_to, key=msg.reply_key)
    cluster, ns, name = split_key(key)
    try:
        url, ident = _attach_url(msg.url, name)
    except RepoUrlError as exc:
        return ctx.tell(target.key, RepoFailed(repo=key, reason=str(exc)), to=target.to)
    entry = entry_of(ctx, key)
    if entry.identity and entry.identity != ident:
        return ctx.tell(target.key, RepoFailed(repo=key, reason=(
            f"cache key {name!r} already names repository {entry.identity!r}, not {ident!r}")), to=target.to)
    cfg = config_of(ctx, cluster, ns)
    resolved = resolve(url, ident, cfg.credentials, cfg.env_present)
    now = ctx.now_on(cluster)   # the target's clock only: registered clusters' clocks may be hours apart
    stamp = rfc3339(now) if now is not None else None
    return start(ctx, entry, Op(kind="ensure", url=url, identity=ident, slot_bound=key in cfg.bound_keys,
                                stamp=stamp, waiters=(target,), ref=resolved.ref, token_env=resolved.token_env,
                                configured=cfg.configured))


def _attach_url(url: Any, name: str) -> tuple[str, str]:
    ident = identity(url)
    expected = key_of_identity(ident)
    if expected != name:
        raise RepoUrlError(url, f"its cache key is {expected!r}, not {name!r}")
    return without_password(url), ident


def release(ctx: Ctx, key: str, entry: Any, msg: ReleaseRepo) -> None:
    target = Reply(to=msg.reply_to, key=msg.reply_key)
    entry = ctx.get(key)
    if isinstance(entry, RepoEntry) and target in entry.subscribers:
        ctx.put(key, entry.but(subscribers=tuple(s for s in entry.subscribers if s != target)))


def _list_command(ctx: Ctx, ckey: str, cfg: Any, ev: Ordered) -> None:
    repo_list.command(ctx, *ev)


def _list_answer(ctx: Ctx, ckey: str, cfg: Any, ev: Answered) -> Answer:
    return repo_list.outcome(ctx, *ev, start)


def _list_doubt(ctx: Ctx, ckey: str, cfg: Any, ev: InDoubt) -> None:
    repo_list.in_doubt(ctx, ev.effect)


# The repo machine: (phase or kind, event) -> handler. A Repo key's phase is its record's
# (``RepoEntry.phase``, moved along ``ops.TABLE``), ``absent`` for no record; a namespace's
# configuration key holds no phase (``config``). An answer's event is the class of the effect it
# answers; one the Repo's op does not await is ``Stale``, the relist's quorum read's ``Recheck``.
REPO_KEYS = ("absent", "idle", *BUSY)
DISPATCH = Dispatch("repo", [
    ("config", RepoBind, bind),
    ("config", RepoReconcileBound, _list_command),
    ("config", RepoGc, _list_command),
    ("config", ListObjects, _list_answer),
    ("config", InDoubt, _list_doubt),
    (REPO_KEYS, RepoSeen, _seen),
    (REPO_KEYS, RepoGone, _vanished),
    ("idle", Missing, _missing),
    (BUSY, Missing, ignore),
    (REPO_KEYS, EnsureRepo, ensure),
    (REPO_KEYS, ReleaseRepo, release),
    ("securing", ApplySecret, _answer(ops.on_secured, shows_the_repo=False)),
    ("creating", CreateObject, _answer(ops.on_created)),
    ("reading", GetObject, _answer(ops.on_read)),
    ("patching", PatchObject, _answer(ops.on_patched)),
    ("deleting", DeleteObject, _answer(ops.on_deleted, shows_the_repo=False)),
    ("verifying", GetObject, _answer(ops.on_verified)),
    (BUSY, InDoubt, _doubt),
    (REPO_KEYS, Recheck, _rechecked),
    (REPO_KEYS, Stale, _stale),
], phases=TABLE, kinds=("absent", "config"))
