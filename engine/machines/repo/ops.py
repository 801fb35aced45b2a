"""One operation on one Repo, from its start to its answer: the repo machine's table and runner.

Expected flow: ``start`` runs an ``Op`` when the Repo is idle and queues it otherwise (an ensure
joins the ensure in flight or queued; an evict decided on a busy Repo is dropped, the next gc
decides again). One request is in flight per Repo: the token Secret first when the statement names
one (``secure``), then create or merge patch; a quorum read when an ensure must learn what stands
(or the time on the Repo's cluster, see ``repo``); a delete fenced by uid + resourceVersion for an
evict. The ``on_*`` answers act on the outcome of the request the phase sent (the machine's table
names one per phase); ``succeed`` / ``fail`` tell the waiters, and ``finish`` starts the next
queued op.

No step moves a phase: a step that sends a request (``go``) or ends the op (``finish``) answers a
``base.Move`` (the entry, the trigger of ``TABLE``, the act on the moved entry), which the
dispatcher makes (``base.fire``). A finish's act starts the next queued op, whose own move is made
in turn.

Guarantees:
- Every request moves the entry along ``TABLE`` (``IllegalTransition`` otherwise) and records its
  effect id on the op; ``RepoMachine`` hands an ``on_*`` answer only the outcome of that effect.
- A request in doubt is repeated when safe to retry, else a quorum read decides what happened;
  a bounded number of times (``engine.backoff.REPO_OP``, counted in ``Op.attempts``), then it fails and
  every waiter is told ``repo_failed``.
- An ensure's waiters are told ``repo_ensured`` (and ``repo_status`` when per-node status is known)
  and become subscribers. A fenced delete that meets a conflict keeps the Repo.

Why the runner and the answers share a module: they call each other (``start`` -> ``after_exists``
-> ``patch_now`` -> ``succeed`` -> ``finish`` -> ``start``), and machine modules import only downward.
"""
from __future__ import annotations

from typing import Any

from engine import backoff
from engine.machines.base import Answer, Ctx, Move, describe, move
from engine.effects.models import ApplySecret, CreateObject, DeleteObject, GetObject, PatchObject
from engine.machines.base import Table
from engine.machines.repo.creds import (
    bind_patch, clock_patch, create_manifest, resolve, secret_fields, unbind_patch, unbound_attach_patch,
)
from engine.repo_names import API_VERSION, KIND, rfc3339
from engine.machines.repo.records import Op, RepoEntry, config_of, gone, status_nodes
from engine.seams import RepoEnsured, RepoFailed, RepoStatusReply
from journal.records import Outcome

# What is sent at a Repo's key (``go``; ``machine._recheck``), so what its outcomes and doubts answer.
RepoEffect = ApplySecret | CreateObject | DeleteObject | GetObject | PatchObject

BUSY = ["securing", "creating", "reading", "patching", "deleting", "verifying"]
TABLE = Table("repo", ["idle", *BUSY], [
    ("secure", ["idle", "reading", "patching", "verifying"], "securing"),
    ("create", ["idle", "securing", "reading", "patching", "verifying"], "creating"),
    ("read", ["idle", "creating", "verifying"], "reading"),
    ("patch", ["idle", "securing", "creating", "reading", "verifying"], "patching"),
    ("delete", "idle", "deleting"),
    ("verify", ["creating", "deleting"], "verifying"),
    *[("retry", s, s) for s in BUSY],
    ("finish", ["idle", *BUSY], "idle"),   # from idle: an op that sent nothing ends where it started
], initial="idle")


# -- running one operation ---------------------------------------------------------------------
def start(ctx: Ctx, entry: RepoEntry, op: Op) -> Answer:
    """Run ``op`` now if the Repo is idle; otherwise queue it (an ensure joins one in flight)."""
    return _START[entry.phase](ctx, entry, op)


def _queue(ctx: Ctx, entry: RepoEntry, op: Op) -> None:
    ctx.put(entry.key, _enqueue(entry, op))


def _run(ctx: Ctx, entry: RepoEntry, op: Op) -> Answer:
    if op.kind == "ensure" and (entry.exists or op.stamp is None):
        return after_exists(entry, op, None)
    if op.kind in ("bind", "ensure"):
        return secure_or(ctx, entry, op, "patch" if entry.exists else "create")
    if op.kind == "unbind":
        return go(entry, op, "patch", PatchObject, patch=unbind_patch(), **ref_fields(entry))
    return go(entry, op, "delete", DeleteObject, uid=op.uid, rv=op.rv, **ref_fields(entry))


_START = {"idle": _run, **dict.fromkeys(BUSY, _queue)}


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


def secure_or(ctx: Ctx, entry: RepoEntry, op: Op, then: str) -> Move:
    """Apply the token Secret first when the statement names one, then ``then`` (create|patch)."""
    return secure_or_create(ctx, entry, op) if then == "create" else secure_or_patch(entry, op)


def secure_or_create(ctx: Ctx, entry: RepoEntry, op: Op) -> Move:
    return _secure(entry, op, "create") or go(entry, op, "create", CreateObject, manifest=manifest(ctx, entry, op),
                                              **ref_fields(entry))


def secure_or_patch(entry: RepoEntry, op: Op) -> Move:
    return _secure(entry, op, "patch") or patch_now(entry, op)


def _secure(entry: RepoEntry, op: Op, then: str) -> Answer:
    """The token Secret's apply when the statement names one not applied yet (``then`` after it)."""
    if op.token_env and not op.secured:
        return go(entry, op.but(then=then), "secure", ApplySecret, **secret_fields(entry.namespace, op))
    return None


def manifest(ctx: Ctx, entry: RepoEntry, op: Op) -> dict[str, Any]:
    cfg = config_of(ctx, entry.cluster, entry.namespace)
    return create_manifest(entry.name, entry.namespace, op.url, op.identity, bound=op.kind == "bind" or op.slot_bound,
                           ref=op.ref, stamp=op.stamp if op.kind == "ensure" else None, refresh=cfg.refresh)


def patch_now(entry: RepoEntry, op: Op) -> Move:
    """The patch of ``op``'s statement; with nothing to state, the op ends where it is (no move)."""
    patch = statement(op)
    if not patch:
        return move(entry.key, entry, None, _clock_not_moved)
    return go(entry, op, "patch", PatchObject, patch=patch, **ref_fields(entry))


def _clock_not_moved(ctx: Ctx, key: str, entry: RepoEntry) -> Move:
    ctx.log(entry.key, "no server time for this attach: last-attached not moved", level="warning")
    return succeed(ctx, entry)


def statement(op: Op) -> dict[str, Any]:
    if op.kind == "bind":
        return bind_patch(op.url, op.identity, op.ref)
    if op.kind == "unbind":
        return unbind_patch()
    if op.restate:
        return unbound_attach_patch(op.stamp, op.ref)
    return clock_patch(op.stamp) if op.stamp else {}


def go(entry: RepoEntry, op: Op, event: str, effect_type: type, **fields: Any) -> Move:
    """The move ``event``, then ``op``'s request: ``effect_type`` with ``fields``, its id kept on the op."""
    def send(ctx: Ctx, key: str, moved: RepoEntry) -> None:
        effect = ctx.emit(effect_type, moved.key, cluster=moved.cluster, **fields)
        ctx.put(moved.key, moved.but(op=op.but(effect_id=effect.id)))
    return move(entry.key, entry, event, send)


def transient(ctx: Ctx, entry: RepoEntry, effect: RepoEffect, rec: Outcome) -> Answer:
    """A transient answer, its executor's attempts spent: a safe request goes on as the next attempt
    of its own loop (``Ctx.retry``, ``engine.backoff.REPO_REQUEST``), then fails; an unsafe one is in
    doubt (``doubt``: re-observed)."""
    if not effect.safe_to_retry:
        return doubt(ctx, entry, effect)
    if ctx.retry(backoff.REPO_REQUEST):
        return None
    return fail(ctx, entry, f"{effect.type} of {effect.key!r} still failing after {backoff.REPO_REQUEST.limit} "
                            f"attempts: {describe(rec)}")


def doubt(ctx: Ctx, entry: RepoEntry, effect: RepoEffect) -> Move:
    """The request may or may not have happened: repeat a safe one, re-observe an unsafe one."""
    if backoff.exhausted(backoff.REPO_OP, entry.op.attempts + 1):
        return fail(ctx, entry, f"{effect.type} of {effect.key!r} still in doubt after {backoff.REPO_OP.limit} attempts")
    if effect.safe_to_retry:
        return reissue(entry, effect)
    op = entry.op.but(attempts=entry.op.attempts + 1)
    return go(entry, op, "verify", GetObject, **ref_fields(entry))


def reissue(entry: RepoEntry, effect: RepoEffect) -> Move:
    fields = effect.model_dump(exclude={"id", "machine", "key", "type", "cluster"})   # ``go`` names the cluster
    return go(entry, entry.op.but(attempts=entry.op.attempts + 1), "retry", type(effect), **fields)


def ref_fields(entry: RepoEntry) -> dict[str, Any]:
    return {"api_version": API_VERSION, "kind": KIND, "namespace": entry.namespace, "name": entry.name}


# -- outcomes by phase ---------------------------------------------------------------------------
def on_secured(ctx: Ctx, entry: RepoEntry, rec: Outcome) -> Move:
    if rec.result != "ok":
        return fail(ctx, entry, f"applying git credential Secret {entry.op.ref!r}: {why(rec)}")
    return secure_or(ctx, entry, entry.op.but(secured=True), entry.op.then)


def on_created(ctx: Ctx, entry: RepoEntry, rec: Outcome) -> Move:
    op = entry.op
    if rec.result == "ok":
        return succeed(ctx, entry)
    if rec.result != "already_exists":
        return fail(ctx, entry, f"creating Repo {entry.name!r}: {why(rec)}")
    return after_exists(entry, op, rec.at)


def after_exists(entry: RepoEntry, op: Op, at: int | None) -> Move:
    """It exists (known, AlreadyExists, or found after a create in doubt): bind restates; ensure
    moves the clock (stamped from the response's server time ``at`` when the attach had none; with
    neither, a quorum read first: its outcome's time is on the Repo's cluster's clock)."""
    if op.kind == "bind":
        return secure_or_patch(entry, op)
    if op.stamp is None and at is not None:
        op = op.but(stamp=rfc3339(at))
    if op.kind == "ensure" and (not op.slot_bound or op.stamp is None):
        return go(entry, op, "read", GetObject, **ref_fields(entry))
    return patch_now(entry, op)


def on_read(ctx: Ctx, entry: RepoEntry, rec: Outcome) -> Move:
    op = entry.op
    if op.stamp is None and rec.at is not None:   # the read's server time is the Repo's cluster's
        op = op.but(stamp=rfc3339(rec.at))
    if rec.result == "not_found":
        if backoff.exhausted(backoff.REPO_OP, op.attempts + 1):
            return fail(ctx, entry, f"Repo {entry.name!r} was gone at each read after a create found it "
                                    f"present ({backoff.REPO_OP.limit} attempts)")
        return secure_or_create(ctx, entry, op.but(attempts=op.attempts + 1))
    if rec.result != "ok":
        return fail(ctx, entry, f"reading Repo {entry.name!r}: {why(rec)}")
    if entry.identity and entry.identity != op.identity:
        return fail(ctx, entry, f"cache key {entry.name!r} already names repository {entry.identity!r}")
    if entry.bound or op.slot_bound or not op.configured:
        return patch_now(entry, op)
    cfg = config_of(ctx, entry.cluster, entry.namespace)
    resolved = resolve(entry.url or op.url, op.identity, cfg.credentials, cfg.env_present)
    return secure_or_patch(entry, op.but(restate=True, ref=resolved.ref, token_env=resolved.token_env))


def on_patched(ctx: Ctx, entry: RepoEntry, rec: Outcome) -> Move:
    if rec.result == "ok" or (rec.result == "not_found" and entry.op.kind == "unbind"):
        return succeed(ctx, entry)
    if rec.result == "not_found" and not backoff.exhausted(backoff.REPO_OP, entry.op.attempts + 1):
        return secure_or_create(ctx, entry, entry.op.but(attempts=entry.op.attempts + 1))
    return fail(ctx, entry, f"patching Repo {entry.name!r}: {why(rec)}")


def on_deleted(ctx: Ctx, entry: RepoEntry, rec: Outcome) -> Move:
    if rec.result in ("ok", "not_found"):
        ctx.log(entry.key, f"evicted Repo {entry.name!r}", evicted=entry.name)
        return succeed(ctx, gone(entry))
    if rec.result == "conflict":
        ctx.log(entry.key, f"Repo {entry.name!r} changed since the gc listed it: kept")
        return succeed(ctx, entry)
    return fail(ctx, entry, f"evicting Repo {entry.name!r}: {why(rec)}")


def on_verified(ctx: Ctx, entry: RepoEntry, rec: Outcome) -> Move:
    """The quorum read after an unsafe request in doubt decides what happened."""
    op = entry.op
    if rec.result not in ("ok", "not_found"):
        return fail(ctx, entry, f"re-reading Repo {entry.name!r} after a request in doubt: {why(rec)}")
    if op.kind == "evict":
        return succeed(ctx, gone(entry) if rec.result == "not_found" else entry)
    if rec.result == "ok":
        return after_exists(entry, op, rec.at)
    return secure_or_create(ctx, entry, op)


def succeed(ctx: Ctx, entry: RepoEntry) -> Move:
    op = entry.op
    if op.kind == "ensure":
        url = entry.url or op.url
        for w in op.waiters:
            ctx.tell(w.key, RepoEnsured(repo=entry.key, url=url), to=w.to)
            if entry.nodes:
                ctx.tell(w.key, RepoStatusReply(repo=entry.key, nodes=status_nodes(entry.nodes)), to=w.to)
        subs = entry.subscribers + tuple(w for w in op.waiters if w not in entry.subscribers)
        entry = entry.but(subscribers=subs)
    return finish(entry, "")


def fail(ctx: Ctx, entry: RepoEntry, reason: str) -> Move:
    ctx.log(entry.key, f"repo {entry.op.kind} failed: {reason}", level="error", repo=entry.key)
    for w in entry.op.waiters:
        ctx.tell(w.key, RepoFailed(repo=entry.key, reason=reason), to=w.to)
    return finish(entry, reason)


def finish(entry: RepoEntry, error: str) -> Move:
    """The move to idle (from idle too: an op that sent nothing), then the next queued op starts."""
    def next_op(ctx: Ctx, key: str, moved: RepoEntry) -> Answer:
        idle = moved.but(op=None, queue=entry.queue[1:], last_error=error)
        ctx.put(entry.key, idle)
        return start(ctx, idle, entry.queue[0]) if entry.queue else None
    return move(entry.key, entry, "finish", next_op)


def why(rec: Outcome) -> str:
    detail = rec.message or rec.status_reason
    return f"{rec.result}{' (' + detail + ')' if detail else ''}"

