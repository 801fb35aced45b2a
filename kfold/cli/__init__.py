"""The ``kfold`` command line: a thin dispatcher over ``kfold.cli.commands.<name>.register``.

Each subcommand module adds its parser and sets ``func`` (returning an exit code). A module that
fails to import is reported by name rather than hiding every other command.
"""
from __future__ import annotations

import argparse
import importlib
import sys

EPILOG = """examples:
  kfold run --config /etc/kfold/config.yaml --context kind-dev -n team-a
  kfold replay journal.db --check
  kfold trace journal.db team-a/demo
  kfold repos -n team-a -o wide
  kfold <command> --help            (each command's flags, examples and exit codes)

exit codes (every command):
  0  done
  1  the command ran and found a problem: a replay divergence, a failed sim invariant, nothing
     matched (trace), an apiserver that did not answer or refused (repos, cluster), no such cluster
  2  bad arguments or input kfold cannot use, the same for every command: a journal it cannot read,
     a config, kubeconfig, context or exec plugin it refuses (one line on stderr names it and the fix)
  3  a journal's broken checksum chain (replay, export, trace, ui)

docs/cli.md describes every command."""

COMMANDS = ("run", "replay", "export", "trace", "ui", "diagrams", "manifests", "repos", "cluster", "sim")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``only`` (a name in ``COMMANDS``): importing every
    command's module imports the Kubernetes client and more (~1 s), which ``kfold replay`` of a
    journal does not need."""
    from kfold import __version__
    parser = argparse.ArgumentParser(prog="kfold", description="Event-sourced Kubernetes reconciler for sandbox sessions.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kfold {__version__}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        try:
            module = importlib.import_module(f"kfold.cli.commands.{name}")
        except ImportError as exc:
            broken = sub.add_parser(name, help=f"(unavailable: {exc})")
            broken.set_defaults(func=lambda _a, e=exc, n=name: _unavailable(n, e))
            continue
        module.register(sub)
    return parser


def _unavailable(name: str, exc: Exception) -> int:
    print(f"kfold {name}: unavailable in this install: {exc}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
