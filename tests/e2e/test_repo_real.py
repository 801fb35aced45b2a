"""The Repo machine against the real ``repos.kfold.dev`` CRD, through fold + executor.

bind at boot (create labelled bound, with the token Secret applied first), ensure at attach
(``last-attached`` = the attach's SERVER time), reconcileBound (unlabel what the config dropped),
gc (evict an unbound Repo older than the TTL on the list response's server time; keep a bound
one), a restart's re-bind (real AlreadyExists -> restating patch), and a cluster that does not
serve the Repo type.

The last one cannot remove the CRD (other tests share it), so the transport aims the Repo
requests at an API group the apiserver does not serve. A real apiserver answers that with a
plain-text ``404 page not found`` and no Status body, which ``kube_errors.classify`` (rightly)
refuses to call ``not_found``: the outcome is ``error`` with code 404. The repo machine must
still read it as "no Repo resource type: nothing to do" (engine/machines/repo/bindings.py).
"""
from __future__ import annotations

import base64
import dataclasses

from engine.machines.base import object_key
from engine.machines.repo.creds import token_secret_name
from engine.repo_names import cache_key, epoch_ms, rfc3339
from journal.records import Command
from tests.e2e.driver import Driver, get, ok, replay_check, server_date_ms

BOUND_URL = "https://github.com/Org/Bound.git"
FREE_URL = "https://gitlab.example.com/team/free"
TOKEN_ENV = "KFOLD_E2E_GIT_TOKEN"
BOUND_LABEL = "kfold.dev/repo-bound"
LAST = "kfold.dev/last-attached"
IDENTITY = "kfold.dev/repo-identity"


def repos(ns: str, name: str = "") -> str:
    return f"/apis/kfold.dev/v1alpha1/namespaces/{ns}/repos" + (f"/{name}" if name else "")


def _bind_args(ns: str, bindings: list[dict]) -> dict:
    return dict(cluster="local", namespace=ns, bindings=bindings,
                credentials=[{"match": "github.com/Org", "env": TOKEN_ENV}], env_present=[TOKEN_ENV],
                refresh_interval="7m")


def _last_command(d: Driver) -> Command:
    return next(r for r in reversed(d.records) if isinstance(r, Command))


def _steps(done) -> list[tuple[str, str]]:
    return [(e.type, o.result) for e, o in done]


async def test_bind_ensure_reconcile_and_rebind_on_the_real_crd(admin, cp, namespace):
    ns, bound, free = namespace, cache_key(BOUND_URL), cache_key(FREE_URL)
    ref = token_secret_name("github.com/Org")
    d = Driver(admin, env={TOKEN_ENV: "tok-e2e"})
    try:
        await d.prime()
        # -- bind at boot ---------------------------------------------------------------------
        done = await d.command("repo.bind", **_bind_args(ns, [{"url": BOUND_URL}]))
        assert _steps(done) == [("apply_secret", "ok"), ("create", "ok")]
        assert "data" not in done[0][1].obj  # the token never reaches an outcome
        repo = get(admin, repos(ns, bound))
        md = repo["metadata"]
        assert md["labels"] == {"app.kubernetes.io/managed-by": "kfold", BOUND_LABEL: "true"}
        assert md["annotations"] == {IDENTITY: "github.com/Org/Bound"}  # no last-attached
        assert repo["spec"] == {"url": BOUND_URL, "secretRef": {"name": ref}, "refreshInterval": "7m"}
        secret = get(admin, f"/api/v1/namespaces/{ns}/secrets/{ref}")
        assert base64.b64decode(secret["data"]["password"]) == b"tok-e2e"
        assert base64.b64decode(secret["data"]["username"]) == b"x-access-token"

        # -- ensure at attach of the bound Repo: the clock moves to the attach's server time ------
        before = server_date_ms(cp)
        done = await d.tell("repo", object_key("local", ns, bound), "ensure", url=BOUND_URL)
        after = server_date_ms(cp)
        attach = _last_command(d)
        assert _steps(done) == [("patch", "ok")]
        assert [m for m, _ in d.replies()] == ["repo_ensured"]
        stamp = get(admin, repos(ns, bound))["metadata"]["annotations"][LAST]
        assert stamp == rfc3339(attach.at)
        assert before - 1000 <= epoch_ms(stamp) <= after + 1000, (before, stamp, after)
        assert get(admin, repos(ns, bound))["metadata"]["labels"][BOUND_LABEL] == "true"

        # -- ensure at attach of a Repo nothing binds: created unbound, clock set ----------------
        done = await d.tell("repo", object_key("local", ns, free), "ensure", url=FREE_URL, reply_key="free")
        attach = _last_command(d)
        assert _steps(done) == [("create", "ok")]
        assert [m for m, _ in d.replies("free")] == ["repo_ensured"]
        free_obj = get(admin, repos(ns, free))
        assert BOUND_LABEL not in free_obj["metadata"]["labels"]
        assert free_obj["metadata"]["annotations"] == {IDENTITY: "gitlab.example.com/team/free",
                                                       LAST: rfc3339(attach.at)}
        assert "secretRef" not in free_obj["spec"]

        # -- reconcileBound: the config no longer binds it -> the label goes, nothing else -------
        done = await d.command("repo.reconcile_bound", cluster="local", namespace=ns, bindings=[])
        assert _steps(done) == [("list", "ok"), ("patch", "ok")]
        assert done[0][0].label_selector == f"{BOUND_LABEL}=true"
        assert [i["metadata"]["name"] for i in done[0][1].items] == [bound]
        unbound = get(admin, repos(ns, bound))
        assert BOUND_LABEL not in unbound["metadata"]["labels"]
        assert unbound["metadata"]["annotations"][LAST] == stamp
        assert get(admin, repos(ns, free))["metadata"]["resourceVersion"] == free_obj["metadata"]["resourceVersion"]
    finally:
        await d.close()

    # -- a restart with no journal re-binds: real AlreadyExists -> one restating patch ---------
    d2 = Driver(admin, env={TOKEN_ENV: "tok-rotated"})
    try:
        await d2.prime()
        done = await d2.command("repo.bind", **_bind_args(ns, [{"url": BOUND_URL}]))
        assert [(e.type, o.result, o.status_reason) for e, o in done] == [
            ("apply_secret", "ok", ""), ("create", "already_exists", "AlreadyExists"), ("patch", "ok", "")]
        again = get(admin, repos(ns, bound))
        assert again["metadata"]["labels"][BOUND_LABEL] == "true"
        assert again["metadata"]["annotations"][LAST] == stamp  # bind never touches the clock
        secret = get(admin, f"/api/v1/namespaces/{ns}/secrets/{ref}")
        assert base64.b64decode(secret["data"]["password"]) == b"tok-rotated"
    finally:
        await d2.close()


def _repo(admin, ns: str, name: str, url: str, last_ms: int, bound: bool = False) -> dict:
    labels = {"app.kubernetes.io/managed-by": "kfold", **({BOUND_LABEL: "true"} if bound else {})}
    return ok(admin, "POST", repos(ns), {
        "apiVersion": "kfold.dev/v1alpha1", "kind": "Repo", "spec": {"url": url},
        "metadata": {"name": name, "labels": labels, "annotations": {LAST: rfc3339(last_ms)}}})


async def test_gc_evicts_unbound_repos_older_than_the_ttl_on_server_time(admin, cp, namespace, tmp_path):
    ns, now = namespace, server_date_ms(cp)
    old = _repo(admin, ns, "old-free", "https://example.com/a/old", now - 700_000)
    _repo(admin, ns, "young-free", "https://example.com/a/young", now - 500_000)
    _repo(admin, ns, "old-bound", "https://example.com/a/bound", now - 7 * 86_400_000, bound=True)
    d = Driver(admin)
    try:
        before = server_date_ms(cp)
        done = await d.command("repo.gc", cluster="local", namespace=ns, ttl_seconds=600)
        after = server_date_ms(cp)
        assert _steps(done) == [("list", "ok"), ("delete", "ok")]
        listed, deleted = done[0][1], done[1][0]
        assert before <= listed.at <= after  # the list response's own Date decided
        assert (deleted.name, deleted.uid, deleted.rv) == (
            "old-free", old["metadata"]["uid"], old["metadata"]["resourceVersion"])
        assert get(admin, repos(ns, "old-free")) is None
        assert get(admin, repos(ns, "young-free")) is not None
        assert get(admin, repos(ns, "old-bound")) is not None
        assert not d.state.table("repo")[object_key("local", ns, "old-free")].exists
        assert "evicting 1: old-free" in d.state.table("repo")[object_key("local", ns, "")].last_gc
        out = replay_check(await d.write_journal(tmp_path / "journal.db"))  # same decisions on refold
        assert "effects: delete=1, list=1" in out
    finally:
        await d.close()


async def test_a_cluster_not_serving_the_repo_type_is_nothing_to_do(admin, namespace):
    d = Driver(admin)
    d.transport.rewrite = lambda r: dataclasses.replace(
        r, path=r.path.replace("/apis/kfold.dev/v1alpha1/", "/apis/absent.kfold-e2e.dev/v1alpha1/"))
    try:
        await d.prime()
        done = await d.command("repo.reconcile_bound", cluster="local", namespace=namespace, bindings=[])
        done += await d.command("repo.gc", cluster="local", namespace=namespace, ttl_seconds=0)
        assert [(e.type, o.code) for e, o in done] == [("list", 404), ("list", 404)]
        assert all(r.path.startswith(f"/apis/kfold.dev/v1alpha1/namespaces/{namespace}/repos")
                   for r in d.transport.requests)
        cfg = d.state.table("repo")[object_key("local", namespace, "")]
        assert "nothing to do" in cfg.last_reconcile and "nothing to do" in cfg.last_gc
        assert [e.message for e in d.effects if e.type == "log" and e.level == "error"] == []
    finally:
        await d.close()
