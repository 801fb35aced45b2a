"""``kfold cluster register|list|deregister``: the operator's hands on the cluster registry.

The registry lives in ``--registry-dir`` (default ``$KFOLD_REGISTRY_DIR`` or
``~/.local/state/kfold/registry``): ``index/<tenant>.json`` for records and ``credentials/`` for
kubeconfigs (one 0600 file per ``<tenant>.<name>``). Output never includes a credential.
Exit codes: 0 done, 1 refused by the registry (message on stderr), 2 usage (argparse).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import yaml

from kfold.registry import (
    DirectoryCredentials,
    RegistrationIndex,
    Registration,
    Registry,
    RegistryError,
)

DEFAULT_DIR = "~/.local/state/kfold/registry"
COLUMNS = ("NAME", "TENANT", "PROVIDER", "ENDPOINT", "NODES", "NVIDIA", "AMD", "NAMESPACES",
           "DEFAULT", "REGISTERED")


def default_registry_dir() -> str:
    return os.environ.get("KFOLD_REGISTRY_DIR") or DEFAULT_DIR


def open_registry(directory: str) -> Registry:
    """The registry stored under ``directory`` (index + directory credentials)."""
    root = Path(directory).expanduser()
    return Registry(RegistrationIndex(root / "index"), DirectoryCredentials(root / "credentials"))


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _row(r: Registration) -> tuple[str, ...]:
    inv = r.inventory
    counts = (inv.nodes, inv.nvidia_gpu, inv.amd_gpu) if inv else ("-", "-", "-")
    return (r.name, r.tenant, r.provider, r.endpoint, *map(str, counts),
            ",".join(r.namespaces) or "*", "yes" if r.default else "", _iso(r.registered_at))


def render(records: tuple[Registration, ...], output: str) -> str:
    """``records`` as json, yaml or an aligned table."""
    data = [r.model_dump(mode="json") for r in records]
    if output == "json":
        return json.dumps(data, indent=2)
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False).rstrip()
    rows = [COLUMNS, *map(_row, records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def cmd_register(args: argparse.Namespace) -> int:
    text = Path(args.kubeconfig).expanduser().read_text()
    record = open_registry(args.registry_dir).register(
        args.tenant, args.name, text, provider=args.provider, namespaces=args.namespace_bound,
        default=args.default, allow_exec=args.allow_exec, allow_files=args.allow_files,
    )
    print(render((record,), args.output))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    registry = open_registry(args.registry_dir)
    records = registry.list(args.tenant) if args.tenant else registry.list_all()
    print(render(records, args.output))
    return 0


def cmd_deregister(args: argparse.Namespace) -> int:
    record = open_registry(args.registry_dir).deregister(args.tenant, args.name)
    print(f"deregistered cluster {record.name} of tenant {record.tenant}; its credential is destroyed")
    return 0


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (RegistryError, OSError) as e:
            print(f"kfold cluster: {e}", file=sys.stderr)
            return 1
    return run


def _common(parser: argparse.ArgumentParser, output: bool = True) -> None:
    parser.add_argument("--registry-dir", default=default_registry_dir(),
                        help="where records and credentials live (default: $KFOLD_REGISTRY_DIR "
                             f"or {DEFAULT_DIR})")
    if output:
        parser.add_argument("-o", "--output", choices=("json", "yaml", "table"), default="table")


def _add_register(sub) -> None:
    p = sub.add_parser("register", help="register a cluster for a tenant (probes it first)")
    p.add_argument("name")
    p.add_argument("--tenant", required=True)
    p.add_argument("--kubeconfig", required=True, help="kubeconfig file holding the credential")
    p.add_argument("--namespace-bound", action="append", default=[], metavar="NS",
                   help="bound the registration to this namespace (repeatable)")
    p.add_argument("--provider", default="byo")
    p.add_argument("--default", action="store_true", help="the tenant's default cluster")
    p.add_argument("--allow-exec", action="store_true", help="trust exec plugins/auth-providers")
    p.add_argument("--allow-files", action="store_true", help="trust local file references")
    _common(p)
    p.set_defaults(func=_guarded(cmd_register))


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``cluster`` (with register/list/deregister) to the top-level ``subparsers``.

    Each leaf sets ``func(args) -> int`` (exit code)."""
    cluster = subparsers.add_parser("cluster", help="the cluster registry")
    sub = cluster.add_subparsers(dest="cluster_command", required=True)
    _add_register(sub)
    p = sub.add_parser("list", help="list registered clusters")
    p.add_argument("--tenant", help="only this tenant's clusters (default: every tenant)")
    _common(p)
    p.set_defaults(func=_guarded(cmd_list))
    p = sub.add_parser("deregister", help="remove a cluster and destroy its credential")
    p.add_argument("name")
    p.add_argument("--tenant", required=True)
    _common(p, output=False)
    p.set_defaults(func=_guarded(cmd_deregister))
    return cluster


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m kfold.cli.commands.cluster``) for tests and scripts."""
    parser = argparse.ArgumentParser(prog="kfold")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
