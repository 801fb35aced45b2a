"""``kfold cluster register|list|deregister``: the operator's hands on the cluster registry.

The registry lives in ``--registry-dir`` (default ``$KFOLD_REGISTRY_DIR`` or
``~/.local/state/kfold/registry``): ``index/<tenant>.json`` for records and ``credentials/`` for
kubeconfigs (one 0600 file per ``<tenant>.<name>``). Output never includes a credential.
Exit codes: 0 done, 1 refused by the registry (message on stderr), 2 usage (argparse).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import yaml

from kfold.cli.table import OUTPUTS, aligned, dump
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
WIDE = ("ALLOW-EXEC", "ALLOW-FILES")
EXAMPLES = {
    "register": """examples:
  kfold cluster register edge --tenant acme --kubeconfig edge.yaml -n sandboxes --default
  kfold cluster register gke-prod --tenant acme --context gke_proj_zone_prod --allow-exec

exit codes: 0 registered; 1 the probe failed (the cluster did not answer with this credential); 2 bad
arguments or input kfold refuses (a name that is not a DNS label, a kubeconfig that asks for what was
not allowed, a file it cannot read: stderr says what).""",
    "list": """examples:
  kfold cluster list
  kfold cluster list --tenant acme -o wide
  kfold cluster list -o json

exit codes: 0 listed; 1 the registry does not parse; 2 bad arguments or a directory kfold cannot read.""",
    "deregister": """examples:
  kfold cluster deregister edge --tenant acme

exit codes: 0 deregistered; 1 no such cluster (or the registry could not be written); 2 bad arguments.""",
}


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


def _row(r: Registration, wide: bool = False) -> tuple[str, ...]:
    inv = r.inventory
    counts = (inv.nodes, inv.nvidia_gpu, inv.amd_gpu) if inv else ("-", "-", "-")
    row = (r.name, r.tenant, r.provider, r.endpoint, *map(str, counts),
           ",".join(r.namespaces) or "*", "yes" if r.default else "", _iso(r.registered_at))
    return row + (("yes" if r.allow_exec else "no", "yes" if r.allow_files else "no") if wide else ())


def render(records: tuple[Registration, ...], output: str) -> str:
    """``records`` as json, yaml, an aligned table, or a wider one."""
    if output in ("json", "yaml"):
        return dump([r.model_dump(mode="json") for r in records], output)
    wide = output == "wide"
    return aligned([COLUMNS + (WIDE if wide else ()), *(_row(r, wide) for r in records)])


def _kubeconfig_text(path: str | None, context: str | None) -> str:
    """The kubeconfig to register (kubectl's file order, see ``kfold.cli.commands.repos.kubeconfig_path``),
    narrowed to ``context`` (its current-context set to it) when one is given."""
    from kfold.cli.commands.repos import kubeconfig_path
    text = Path(kubeconfig_path(path)[0]).expanduser().read_text()
    if not context:
        return text
    doc = yaml.safe_load(text)
    names = [c.get("name") for c in (doc or {}).get("contexts") or () if isinstance(c, dict)]
    if context not in names:
        raise RegistryError(f"context {context!r} is not in the kubeconfig; its contexts: {', '.join(map(str, names))}")
    return yaml.safe_dump({**doc, "current-context": context}, sort_keys=False)


def cmd_register(args: argparse.Namespace) -> int:
    text = _kubeconfig_text(args.kubeconfig, args.context)
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
            from kfold.cli.exits import exit_code
            print(f"kfold cluster: {e}", file=sys.stderr)
            return exit_code(e)
    return run


def _common(parser: argparse.ArgumentParser, output: bool = True) -> None:
    parser.add_argument("--registry-dir", default=default_registry_dir(),
                        help="where records and credentials live (default: $KFOLD_REGISTRY_DIR "
                             f"or {DEFAULT_DIR})")
    if output:
        parser.add_argument("-o", "--output", choices=OUTPUTS, default="table",
                            help="table (default), wide (adds the trust flags), json or yaml")


def _add_register(sub) -> None:
    p = sub.add_parser("register", help="register a cluster for a tenant (probes it first)",
                       epilog=EXAMPLES["register"], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="the cluster's name within the tenant (a DNS label)")
    p.add_argument("--tenant", required=True, help="the tenant the cluster belongs to")
    p.add_argument("--kubeconfig", help="kubeconfig file holding the credential (default: $KUBECONFIG's first "
                                        "existing file, else ~/.kube/config)")
    p.add_argument("--context", metavar="NAME", help="the kubeconfig context to register (default: its current-context)")
    p.add_argument("-n", "--namespace", "--namespace-bound", dest="namespace_bound", action="append", default=[],
                   metavar="NS", help="bound the registration to this namespace (repeatable; default: every namespace)")
    p.add_argument("--provider", default="byo", help="free-form provider label shown by list (default: byo)")
    p.add_argument("--default", action="store_true", help="the tenant's default cluster")
    p.add_argument("--allow-exec", action="store_true",
                   help="trust exec plugins/auth-providers: kfold runs them whenever it reaches the cluster (docs/cli.md)")
    p.add_argument("--allow-files", action="store_true",
                   help="trust local file references (certificate/key/token files on this machine)")
    _common(p)
    p.set_defaults(func=_guarded(cmd_register))


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``cluster`` (with register/list/deregister) to the top-level ``subparsers``.

    Each leaf sets ``func(args) -> int`` (exit code)."""
    cluster = subparsers.add_parser("cluster", help="the cluster registry (register, list, deregister)",
                                    description="The clusters Sessions may be placed on, per tenant.")
    sub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="SUBCOMMAND")
    _add_register(sub)
    p = sub.add_parser("list", help="list registered clusters", epilog=EXAMPLES["list"],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tenant", help="only this tenant's clusters (default: every tenant)")
    _common(p)
    p.set_defaults(func=_guarded(cmd_list))
    p = sub.add_parser("deregister", help="remove a cluster and destroy its credential",
                       epilog=EXAMPLES["deregister"], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="the registered cluster's name")
    p.add_argument("--tenant", required=True, help="the tenant it is registered for")
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
