"""``kfold repos [--journal PATH | --kubeconfig PATH --namespace NS] [-o json|table]``.

Lists each Repo: key (cache key), url, identity, bound, lastAttached, and per node
present/synced/attempted/lastAttempt/lastFetched/lastError (absent fields absent, empty errors
omitted). From a journal: the journal is folded and the repo machine's decision records are read,
so the listing is what kfold believed at the journal's last record. From a kubeconfig: the Repos
are listed from the apiserver now.
Exit codes: 0 listed, 1 could not read the source (message on stderr), 2 usage.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from engine.machines.repo.records import RepoEntry, absorb, listing
from engine.repo_names import GROUP

COLUMNS = ("CLUSTER", "NAMESPACE", "KEY", "URL", "BOUND", "LAST-ATTACHED", "NODES")


def register(sub: Any) -> None:
    p = sub.add_parser("repos", help="list Repo resources and their per-node cache status")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--journal", metavar="PATH", help="fold this journal (SQLite or JSONL) and list what it holds")
    src.add_argument("--kubeconfig", metavar="PATH", help="list the Repos on this cluster now")
    p.add_argument("--namespace", "-n", metavar="NS", help="namespace of the Repos (with --kubeconfig)")
    p.add_argument("-o", "--output", choices=("json", "table"), default="table")
    p.set_defaults(func=run)


def run(args: Any) -> int:
    if args.kubeconfig and not args.namespace:
        print("kfold repos: --kubeconfig needs --namespace", file=sys.stderr)
        return 2
    try:
        rows = rows_from_journal(args.journal) if args.journal else rows_from_cluster(args.kubeconfig, args.namespace)
    except Exception as exc:  # the source, not the listing, failed: say which and why
        from kfold.sources import input_error
        print(f"kfold repos: {args.journal or args.kubeconfig}: {input_error(exc)}", file=sys.stderr)
        return 1
    print(render(rows, args.output))
    return 0


def rows_from_journal(path: str) -> list[dict[str, Any]]:
    from engine import fold_all, initial_state
    from kfold.sources import iter_records, start_point
    start, first, _ = start_point(path)   # a cut journal or its export: from the snapshot it continues
    state = fold_all(start or initial_state(), iter_records(path, from_seq=first)).state
    entries = [e for _, e in sorted(state.table("repo").items()) if isinstance(e, RepoEntry) and e.exists]
    return [listing(e) for e in entries]


def rows_from_cluster(kubeconfig: str, namespace: str) -> list[dict[str, Any]]:
    """A live list through the registry's home client (the only door to an apiserver)."""
    import tempfile

    from kubernetes import client
    from kfold.registry import MemoryCredentials, RegistrationIndex, Registry
    with tempfile.TemporaryDirectory() as unused:
        registry = Registry(RegistrationIndex(unused), MemoryCredentials())
        try:
            return _list(client.CustomObjectsApi(registry.home(kubeconfig)), namespace)
        finally:
            registry.close()


def _list(api: Any, namespace: str) -> list[dict[str, Any]]:
    from kubernetes import client
    try:
        items = api.list_namespaced_custom_object(GROUP, "v1alpha1", namespace, "repos")["items"]
    except client.ApiException as exc:
        if exc.status == 404:
            return []  # no Repo resource type on this cluster: it holds no Repos
        raise
    return [_row_of(obj) for obj in sorted(items, key=lambda o: o["metadata"]["name"])]


def _row_of(obj: dict[str, Any]) -> dict[str, Any]:
    md = obj.get("metadata") or {}
    blank = RepoEntry(key="", cluster="", namespace=md.get("namespace", ""), name=md.get("name", ""))
    row = listing(absorb(blank, obj))
    row.pop("cluster")
    return row


def render(rows: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps(rows, indent=2, sort_keys=False)
    table = [COLUMNS] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table)


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (r.get("cluster", "-"), r["namespace"], r["key"], r["url"], "yes" if r["bound"] else "no",
            r.get("lastAttached", "-"), _nodes(r["nodes"]) or "-")


def _nodes(nodes: Iterable[dict[str, Any]]) -> str:
    """``node:synced|present|absent``, plus ``/Clone-failed`` (etc.) when the last attempt failed."""
    out = []
    for n in nodes:
        state = "synced" if n["synced"] else ("present" if n["present"] else "absent")
        failed = f"/{n.get('attempted', 'attempt')}-failed" if n.get("lastError") else ""
        out.append(f"{n['node']}:{state}{failed}")
    return ",".join(out)
