"""``kfold repos [--journal PATH | [--kubeconfig PATH] [--context NAME] [-n NS] [--allow-exec]] [-o table|wide|json|yaml]``.

Lists each Repo: key (cache key), url, identity, bound, lastAttached, and per node
present/synced/attempted/lastAttempt/lastFetched/lastError (absent fields absent, empty errors
omitted). From a journal: the journal is folded and the repo machine's decision records are read,
so the listing is what kfold believed at the journal's last record. From a kubeconfig: the Repos
are listed from the apiserver now: the kubeconfig is ``--kubeconfig``, else ``$KUBECONFIG``'s first
existing file, else ``~/.kube/config``; the namespace is ``-n``, else the context's, else ``default``
(kubectl's order).
Exit codes: 0 listed; 1 the apiserver did not answer or refused the list; 2 bad arguments or input kfold
cannot use (a journal it cannot read, a kubeconfig or context it refuses: as ``kfold run``); 3 a
journal's broken checksum chain. One line on stderr says which and why.
"""
from __future__ import annotations

import sys
from typing import Any, Iterable

from engine.machines.repo.records import RepoEntry, absorb, listing
from engine.repo_names import GROUP
from kfold.cli.table import OUTPUTS, aligned, dump

COLUMNS = ("CLUSTER", "NAMESPACE", "KEY", "URL", "BOUND", "LAST-ATTACHED", "NODES")
WIDE = ("IDENTITY", "LAST-FETCHED", "LAST-ERROR")


EXAMPLES = """examples:
  kfold repos -n team-a                              # the current context of $KUBECONFIG or ~/.kube/config
  kfold repos --kubeconfig ~/.kube/config --context kind-dev -n team-a -o wide
  kfold repos --context gke_proj_zone_prod -n team-a --allow-exec   # a GKE/EKS/AKS login plugin
  kfold repos --journal /var/lib/kfold/journal.db -o json

exit codes: 0 listed; 1 the apiserver did not answer or refused the list; 2 bad arguments, or a
journal, kubeconfig or context kfold cannot use (as kfold run); 3 a journal's broken checksum chain."""


def register(sub: Any) -> None:
    import argparse
    p = sub.add_parser("repos", help="list Repo resources and their per-node cache status", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="List Repos and their per-node cache status, from a cluster now or from a journal.")
    p.add_argument("--journal", metavar="PATH",
                   help="fold this journal (SQLite or JSONL) and list what it holds (instead of a cluster)")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="kubeconfig file (default: $KUBECONFIG's first existing file, else ~/.kube/config)")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")
    p.add_argument("--namespace", "-n", metavar="NS", help="namespace of the Repos (default: the context's, else default)")
    p.add_argument("--allow-exec", action="store_true",
                   help="let the kubeconfig run its exec credential plugin (GKE/EKS/AKS login); see docs/cli.md")
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table",
                   help="table (default), wide (adds identity and per-node detail), json or yaml")
    p.set_defaults(func=run)


def run(args: Any) -> int:
    if args.journal and (args.kubeconfig or args.context or args.namespace or args.allow_exec):
        print("kfold repos: --journal reads a journal; --kubeconfig, --context, -n and --allow-exec read a cluster: "
              "pass one or the other", file=sys.stderr)
        return 2
    source = args.journal
    try:
        if args.journal:
            rows = rows_from_journal(args.journal)
        else:
            source, via = kubeconfig_path(args.kubeconfig)
            rows = rows_from_cluster(source, args.namespace, context=args.context, allow_exec=args.allow_exec)
    except Exception as exc:  # the source, not the listing, failed: say which and why
        from kfold.offline.sources import input_error
        print(f"kfold repos: {source or 'kubeconfig'}: {input_error(exc)}", file=sys.stderr)
        from kfold.cli.exits import exit_code
        return exit_code(exc)
    print(render(rows, args.output))
    return 0


def kubeconfig_path(explicit: str | None) -> tuple[str, str]:
    """kubectl's choice of kubeconfig file: ``--kubeconfig``, ``$KUBECONFIG`` (its first existing
    file), ``~/.kube/config``; and how it was chosen."""
    import os
    from kfold.registry.home import kubeconfig_from_env
    if explicit:
        return explicit, "--kubeconfig"
    found = kubeconfig_from_env()
    if found is not None:
        return found
    return os.path.expanduser("~/.kube/config"), "~/.kube/config"


def rows_from_journal(path: str) -> list[dict[str, Any]]:
    from engine import fold_all, initial_state
    from kfold.offline.sources import iter_records, start_point
    start, first, _ = start_point(path)   # a cut journal or its export: from the snapshot it continues
    state = fold_all(start or initial_state(), iter_records(path, from_seq=first)).state
    entries = [e for _, e in sorted(state.table("repo").items()) if isinstance(e, RepoEntry) and e.exists]
    return [listing(e) for e in entries]


def rows_from_cluster(kubeconfig: str, namespace: str | None, context: str | None = None,
                      allow_exec: bool = False) -> list[dict[str, Any]]:
    """A live list through the registry's home client (the only door to an apiserver); no
    ``namespace``: the context's, else ``default``."""
    import tempfile

    import urllib3
    from kubernetes import client
    from engine.effects.io.kube_errors import transport_reason
    from kfold.cli.exits import Unanswered
    from kfold.registry import MemoryCredentials, RegistrationIndex, Registry
    with tempfile.TemporaryDirectory() as unused:
        registry = Registry(RegistrationIndex(unused), MemoryCredentials())
        try:
            api = client.CustomObjectsApi(registry.home(kubeconfig, context, allow_exec=allow_exec))
            source = registry.home_source
            try:
                return _list(api, namespace or getattr(source, "namespace", None) or "default")
            except (urllib3.exceptions.HTTPError, OSError) as exc:   # no answer at all: say where and why
                raise Unanswered(f"cannot reach the apiserver at {source.endpoint} ({source.describe()}): "
                                  f"{transport_reason(exc)}") from None
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
    if output in ("json", "yaml"):
        return dump(rows, output)
    wide = output == "wide"
    cells = [_cells(r, wide) for r in rows]
    return aligned([COLUMNS + (WIDE if wide else ())] + cells)


def _cells(r: dict[str, Any], wide: bool = False) -> tuple[str, ...]:
    out = (r.get("cluster", "-"), r["namespace"], r["key"], r["url"], "yes" if r["bound"] else "no",
           r.get("lastAttached", "-"), _nodes(r["nodes"]) or "-")
    if wide:
        errors = "; ".join(f"{n['node']}: {n['lastError']}" for n in r["nodes"] if n.get("lastError"))
        fetched = ",".join(f"{n['node']}:{n['lastFetched']}" for n in r["nodes"] if n.get("lastFetched"))
        out += (r.get("identity", "-"), fetched or "-", errors or "-")
    return out


def _nodes(nodes: Iterable[dict[str, Any]]) -> str:
    """``node:synced|present|absent``, plus ``/Clone-failed`` (etc.) when the last attempt failed."""
    out = []
    for n in nodes:
        state = "synced" if n["synced"] else ("present" if n["present"] else "absent")
        failed = f"/{n.get('attempted', 'attempt')}-failed" if n.get("lastError") else ""
        out.append(f"{n['node']}:{state}{failed}")
    return ",".join(out)
