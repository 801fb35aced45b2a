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
  server time; on AlreadyExists move the clock only. If neither the slot nor the label binds it,
  read it (quorum) and restate the ``secretRef`` resolved against the url that STANDS.
- ``repo.reconcile_bound``: quorum-list bound Repos, unlabel those the config no longer binds.
  A 404 for the list (no Repo CRD) is "nothing to do"; any other refusal is logged as an error.
- ``repo.gc``: quorum-list Repos, delete (fenced by uid + resourceVersion) every unbound one whose
  clock is older than the TTL on the list response's server time. See ``repo_list``.

Guarantees: pure; bad input is refused with the value and the reason before any effect; a token
value is never seen (only variable names). Caveats: a burst of ensures joins the one in flight, so
the clock holds the first attach's time of the burst; a transient failure is retried at most
``MAX_ATTEMPTS`` times per step, then reported.
"""
from __future__ import annotations

from typing import Any

from engine.effects.models import ApplySecret, CreateObject, DeleteObject, GetObject, PatchObject
from engine.machines import repo_list
from engine.machines.base import Machine, Table, object_key, split_key
from engine.machines.repo_creds import (
    CredentialError, bind_patch, clock_patch, create_manifest, missing_env, resolve, secret_fields,
    unbind_patch, unbound_attach_patch,
)
from engine.machines.repo_list import (
    Op, RepoConfig, RepoEntry, RepoRow, Target, absorb, config_key, entry_of, gone, settle, status_nodes,
)
from engine.machines.repo_names import (
    API_VERSION, KIND, RepoUrlError, identity, key_of_identity, rfc3339, without_password,
)
from journal.records import Command, Observed, Outcome, Relist

MAX_ATTEMPTS = 3
BUSY = ["securing", "creating", "reading", "patching", "deleting", "verifying"]
TABLE = Table("repo", ["idle", *BUSY], [
    ("secure", ["idle", "reading", "patching", "verifying"], "securing"),
    ("create", ["idle", "securing", "reading", "patching", "verifying"], "creating"),
    ("read", ["idle", "creating", "verifying"], "reading"),
    ("patch", ["idle", "securing", "creating", "reading", "verifying"], "patching"),
    ("delete", "idle", "deleting"),
    ("verify", ["creating", "deleting"], "verifying"),
    *[("retry", s, s) for s in BUSY],
    ("finish", BUSY, "idle"),
], initial="idle")


class RepoMachine(Machine):
    name = "repo"
    decision = RepoRow
    observes = frozenset({KIND})
    commands = frozenset({"repo.bind", "repo.reconcile_bound", "repo.gc"})

    def on_command(self, ctx: Any, rec: Command) -> None:
        if rec.name == "repo.bind":
            bind(ctx, rec)
        else:
            repo_list.command(ctx, rec, start)

    def on_message(self, ctx: Any, key: str, message: str, args: dict[str, Any]) -> None:
        if message == "ensure":
            ensure(ctx, key, args)
        elif message == "release":
            release(ctx, key, Target(machine=args["reply_to"], key=args["reply_key"]))
        else:
            super().on_message(ctx, key, message, args)

    def on_observed(self, ctx: Any, rec: Observed) -> None:
        key = object_key(rec.cluster, rec.namespace, rec.name)
        entry = entry_of(ctx, key)
        settle(ctx, entry, gone(entry) if rec.event == "DELETED" else absorb(entry, rec.obj))

    def on_relist(self, ctx: Any, rec: Relist) -> None:
        present = {object_key(rec.cluster, k.namespace, k.name) for k in rec.keys}
        prefix = f"{rec.cluster}/{rec.scope + '/' if rec.scope else ''}"
        for key, entry in list(ctx.items()):
            if isinstance(entry, RepoEntry) and entry.exists and key.startswith(prefix) and key not in present:
                settle(ctx, entry, gone(entry))

    def on_outcome(self, ctx: Any, rec: Outcome, effect: Any) -> None:
        if split_key(effect.key)[2] == "":
            return repo_list.outcome(ctx, rec, effect, start)
        entry = ctx.get(effect.key)
        if not isinstance(entry, RepoEntry) or entry.op is None or entry.op.effect_id != effect.id:
            return ctx.log(effect.key, "outcome for no operation in flight; ignored", level="debug")
        if rec.result == "ok" and rec.obj and effect.type in ("create", "patch", "get"):
            settle(ctx, entry, absorb(entry, rec.obj))
            entry = ctx.get(effect.key)
        if rec.result == "transient":
            return doubt(ctx, entry, effect)
        _ON_OUTCOME[entry.phase](ctx, entry, rec)

    def on_in_doubt(self, ctx: Any, effect: Any) -> None:
        if split_key(effect.key)[2] == "":
            return repo_list.in_doubt(ctx, effect)
        entry = ctx.get(effect.key)
        if isinstance(entry, RepoEntry) and entry.op is not None and entry.op.effect_id == effect.id:
            doubt(ctx, entry, effect)


# -- commands and messages ---------------------------------------------------------------------
def bind(ctx: Any, rec: Command) -> None:
    cluster, ns = repo_list.where(rec)
    ckey = config_key(cluster, ns)
    try:
        cfg, bindings = repo_list.bind_config(ctx, rec, cluster, ns)
    except (RepoUrlError, CredentialError) as exc:
        return repo_list.refuse(ctx, ckey, rec.name, exc)
    ctx.put(ckey, cfg)
    report_missing_env(ctx, ckey, cfg)
    for url, ident in bindings:
        key = object_key(cluster, ns, key_of_identity(ident))
        resolved = resolve(url, ident, cfg.credentials, cfg.env_present)
        start(ctx, entry_of(ctx, key), Op(kind="bind", url=url, identity=ident, ref=resolved.ref,
                                         token_env=resolved.token_env))


def report_missing_env(ctx: Any, ckey: str, cfg: RepoConfig) -> None:
    missing = missing_env(cfg.credentials, cfg.env_present)
    if missing:
        names = ", ".join(f"{c.env} (for {c.match})" for c in missing)
        ctx.log(ckey, f"git credential token variable not set: {names}; https clones of the "
                      f"repositories they match are anonymous until it is set and kfold restarts",
                level="warning", missing=[{"match": c.match, "env": c.env} for c in missing])


def ensure(ctx: Any, key: str, args: dict[str, Any]) -> None:
    target = Target(machine=args["reply_to"], key=args["reply_key"])
    cluster, ns, name = split_key(key)
    try:
        url, ident = _attach_url(args.get("url"), name)
    except RepoUrlError as exc:
        return ctx.tell(target.machine, target.key, "repo_failed", repo=key, reason=str(exc))
    entry = entry_of(ctx, key)
    if entry.identity and entry.identity != ident:
        return ctx.tell(target.machine, target.key, "repo_failed", repo=key, reason=(
            f"cache key {name!r} already names repository {entry.identity!r}, not {ident!r}"))
    cfg = repo_list.config_of(ctx, cluster, ns)
    resolved = resolve(url, ident, cfg.credentials, cfg.env_present)
    stamp = rfc3339(ctx.now) if ctx.now is not None else None
    start(ctx, entry, Op(kind="ensure", url=url, identity=ident, slot_bound=key in cfg.bound_keys,
                         stamp=stamp, waiters=(target,), ref=resolved.ref, token_env=resolved.token_env,
                         configured=cfg.configured))


def _attach_url(url: Any, name: str) -> tuple[str, str]:
    ident = identity(url)
    expected = key_of_identity(ident)
    if expected != name:
        raise RepoUrlError(url, f"its cache key is {expected!r}, not {name!r}")
    return without_password(url), ident


def release(ctx: Any, key: str, target: Target) -> None:
    entry = ctx.get(key)
    if isinstance(entry, RepoEntry) and target in entry.subscribers:
        ctx.put(key, entry.but(subscribers=tuple(s for s in entry.subscribers if s != target)))


# -- running one operation ---------------------------------------------------------------------
def start(ctx: Any, entry: RepoEntry, op: Op) -> None:
    """Run ``op`` now if the Repo is idle; otherwise queue it (an ensure joins one in flight)."""
    if entry.phase != "idle":
        return ctx.put(entry.key, _enqueue(entry, op))
    if op.kind == "ensure" and entry.exists:
        return after_exists(ctx, entry, op, None)
    if op.kind in ("bind", "ensure"):
        return secure_or(ctx, entry, op, "patch" if entry.exists else "create")
    if op.kind == "unbind":
        return go(ctx, entry, op, "patch", PatchObject, patch=unbind_patch(), **ref_fields(entry))
    go(ctx, entry, op, "delete", DeleteObject, uid=op.uid, rv=op.rv, **ref_fields(entry))


def _enqueue(entry: RepoEntry, op: Op) -> RepoEntry:
    if op.kind == "ensure":
        for i, other in enumerate((entry.op, *entry.queue)):
            if other is not None and other.kind == "ensure":
                joined = other.but(waiters=other.waiters + tuple(w for w in op.waiters if w not in other.waiters))
                return entry.but(op=joined) if i == 0 else entry.but(
                    queue=tuple(joined if q is other else q for q in entry.queue))
    if op.kind == "evict":
        return entry  # a gc decision made on a busy Repo is stale: the next gc decides again
    return entry.but(queue=entry.queue + (op,))


def secure_or(ctx: Any, entry: RepoEntry, op: Op, then: str) -> None:
    """Apply the token Secret first when the statement names one, then ``then`` (create|patch)."""
    if op.token_env and not op.secured:
        return go(ctx, entry, op.but(then=then), "secure", ApplySecret,
                  **secret_fields(entry.namespace, op))
    if then == "create":
        return go(ctx, entry, op, "create", CreateObject, manifest=manifest(ctx, entry, op), **ref_fields(entry))
    patch_now(ctx, entry, op)


def manifest(ctx: Any, entry: RepoEntry, op: Op) -> dict[str, Any]:
    cfg = repo_list.config_of(ctx, entry.cluster, entry.namespace)
    return create_manifest(entry.name, entry.namespace, op.url, op.identity, bound=op.kind == "bind" or op.slot_bound,
                           ref=op.ref, stamp=op.stamp if op.kind == "ensure" else None, refresh=cfg.refresh)


def patch_now(ctx: Any, entry: RepoEntry, op: Op) -> None:
    patch = statement(op)
    if not patch:
        ctx.log(entry.key, "no server time for this attach: last-attached not moved", level="warning")
        return succeed(ctx, entry)
    go(ctx, entry, op, "patch", PatchObject, patch=patch, **ref_fields(entry))


def statement(op: Op) -> dict[str, Any]:
    if op.kind == "bind":
        return bind_patch(op.url, op.identity, op.ref)
    if op.kind == "unbind":
        return unbind_patch()
    if op.restate:
        return unbound_attach_patch(op.stamp, op.ref)
    return clock_patch(op.stamp) if op.stamp else {}


def go(ctx: Any, entry: RepoEntry, op: Op, event: str, effect_type: type, **fields: Any) -> None:
    phase = TABLE.next(entry.phase, event)
    effect = ctx.emit(effect_type, entry.key, cluster=entry.cluster, **fields)
    ctx.put(entry.key, entry.but(phase=phase, op=op.but(effect_id=effect.id)))


def doubt(ctx: Any, entry: RepoEntry, effect: Any) -> None:
    """The request may or may not have happened: repeat a safe one, re-observe an unsafe one."""
    if entry.op.attempts + 1 >= MAX_ATTEMPTS:
        return fail(ctx, entry, f"{effect.type} of {effect.key!r} still in doubt after {MAX_ATTEMPTS} attempts")
    if effect.safe_to_retry:
        return reissue(ctx, entry, effect)
    op = entry.op.but(attempts=entry.op.attempts + 1)
    go(ctx, entry, op, "verify", GetObject, **ref_fields(entry))


def reissue(ctx: Any, entry: RepoEntry, effect: Any) -> None:
    fields = effect.model_dump(exclude={"id", "machine", "key", "type"})
    go(ctx, entry, entry.op.but(attempts=entry.op.attempts + 1), "retry", type(effect), **fields)


def ref_fields(entry: RepoEntry) -> dict[str, Any]:
    return {"api_version": API_VERSION, "kind": KIND, "namespace": entry.namespace, "name": entry.name}


# -- outcomes by phase ---------------------------------------------------------------------------
def on_secured(ctx: Any, entry: RepoEntry, rec: Outcome) -> None:
    if rec.result != "ok":
        return fail(ctx, entry, f"applying git credential Secret {entry.op.ref!r}: {why(rec)}")
    secure_or(ctx, entry, entry.op.but(secured=True), entry.op.then)


def on_created(ctx: Any, entry: RepoEntry, rec: Outcome) -> None:
    op = entry.op
    if rec.result == "ok":
        return succeed(ctx, entry)
    if rec.result != "already_exists":
        return fail(ctx, entry, f"creating Repo {entry.name!r}: {why(rec)}")
    after_exists(ctx, entry, op, rec.at)


def after_exists(ctx: Any, entry: RepoEntry, op: Op, at: int | None) -> None:
    """It exists (known, AlreadyExists, or found after a create in doubt): bind restates; ensure
    moves the clock (stamped from the response's server time ``at`` when the attach had none)."""
    if op.kind == "bind":
        return secure_or(ctx, entry, op, "patch")
    if op.stamp is None and at is not None:
        op = op.but(stamp=rfc3339(at))
    if op.kind == "ensure" and not op.slot_bound:
        return go(ctx, entry, op, "read", GetObject, **ref_fields(entry))
    patch_now(ctx, entry, op)


def on_read(ctx: Any, entry: RepoEntry, rec: Outcome) -> None:
    op = entry.op
    if rec.result == "not_found":
        return secure_or(ctx, entry, op.but(attempts=op.attempts + 1), "create")
    if rec.result != "ok":
        return fail(ctx, entry, f"reading Repo {entry.name!r}: {why(rec)}")
    if entry.identity and entry.identity != op.identity:
        return fail(ctx, entry, f"cache key {entry.name!r} already names repository {entry.identity!r}")
    if entry.bound or not op.configured:
        return patch_now(ctx, entry, op)
    cfg = repo_list.config_of(ctx, entry.cluster, entry.namespace)
    resolved = resolve(entry.url or op.url, op.identity, cfg.credentials, cfg.env_present)
    secure_or(ctx, entry, op.but(restate=True, ref=resolved.ref, token_env=resolved.token_env), "patch")


def on_patched(ctx: Any, entry: RepoEntry, rec: Outcome) -> None:
    if rec.result == "ok" or (rec.result == "not_found" and entry.op.kind == "unbind"):
        return succeed(ctx, entry)
    if rec.result == "not_found" and entry.op.attempts + 1 < MAX_ATTEMPTS:
        return secure_or(ctx, entry, entry.op.but(attempts=entry.op.attempts + 1), "create")
    fail(ctx, entry, f"patching Repo {entry.name!r}: {why(rec)}")


def on_deleted(ctx: Any, entry: RepoEntry, rec: Outcome) -> None:
    if rec.result in ("ok", "not_found"):
        ctx.log(entry.key, f"evicted Repo {entry.name!r}", evicted=entry.name)
        return succeed(ctx, gone(entry))
    if rec.result == "conflict":
        ctx.log(entry.key, f"Repo {entry.name!r} changed since the gc listed it: kept")
        return succeed(ctx, entry)
    fail(ctx, entry, f"evicting Repo {entry.name!r}: {why(rec)}")


def on_verified(ctx: Any, entry: RepoEntry, rec: Outcome) -> None:
    """The quorum read after an unsafe request in doubt decides what happened."""
    op = entry.op
    if rec.result not in ("ok", "not_found"):
        return fail(ctx, entry, f"re-reading Repo {entry.name!r} after a request in doubt: {why(rec)}")
    if op.kind == "evict":
        return succeed(ctx, gone(entry) if rec.result == "not_found" else entry)
    if rec.result == "ok":
        return after_exists(ctx, entry, op, rec.at)
    secure_or(ctx, entry, op, "create")


_ON_OUTCOME = {"securing": on_secured, "creating": on_created, "reading": on_read,
               "patching": on_patched, "deleting": on_deleted, "verifying": on_verified}


def succeed(ctx: Any, entry: RepoEntry) -> None:
    op = entry.op
    if op.kind == "ensure":
        url = entry.url or op.url
        for w in op.waiters:
            ctx.tell(w.machine, w.key, "repo_ensured", repo=entry.key, url=url)
            if entry.nodes:
                ctx.tell(w.machine, w.key, "repo_status", repo=entry.key, nodes=status_nodes(entry.nodes))
        subs = entry.subscribers + tuple(w for w in op.waiters if w not in entry.subscribers)
        entry = entry.but(subscribers=subs)
    finish(ctx, entry, "")


def fail(ctx: Any, entry: RepoEntry, reason: str) -> None:
    ctx.log(entry.key, f"repo {entry.op.kind} failed: {reason}", level="error", repo=entry.key)
    for w in entry.op.waiters:
        ctx.tell(w.machine, w.key, "repo_failed", repo=entry.key, reason=reason)
    finish(ctx, entry, reason)


def finish(ctx: Any, entry: RepoEntry, error: str) -> None:
    phase = TABLE.next(entry.phase, "finish") if entry.phase != "idle" else "idle"
    idle = entry.but(phase=phase, op=None, queue=entry.queue[1:], last_error=error)
    ctx.put(entry.key, idle)
    if entry.queue:
        start(ctx, idle, entry.queue[0])


def why(rec: Outcome) -> str:
    detail = rec.message or rec.status_reason
    return f"{rec.result}{' (' + detail + ')' if detail else ''}"

