"""``kfold run --config PATH [--kubeconfig] [--context] [--journal]``: the daemon."""
from __future__ import annotations

import argparse
import asyncio
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run the reconciler daemon")
    p.add_argument("--config", required=True, help="config file (YAML), see docs/config.md")
    p.add_argument("--kubeconfig", help="override cluster.kubeconfig (default: in-cluster service account)")
    p.add_argument("--context", help="override cluster.context")
    p.add_argument("--journal", help="override journal.path")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kfold.daemon import logs
    from kfold.daemon.config import ConfigError, read_config
    from kfold.daemon.boot import run
    try:
        cfg = read_config(args.config, {"cluster.kubeconfig": args.kubeconfig, "cluster.context": args.context,
                                        "journal.path": args.journal})
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    logs.setup(cfg.log.format, cfg.log.level)
    try:
        code = _run_to_completion(run(cfg))
    except Exception as exc:  # noqa: BLE001 - the operator needs one clear line, not a traceback
        message = _refusal(exc, cfg.journal.path)
        if message is None:
            raise
        print(f"kfold run: {message}", file=sys.stderr)
        _exit_now(2)
        return 2
    _exit_now(code)
    return code


def _refusal(exc: Exception, journal_path: str) -> str | None:
    """The one-line reason kfold refuses to start, with the fix; None for a bug (traceback)."""
    from journal.store import JournalCorrupt, JournalError
    from engine.seams import SeamError
    from kfold.registry import RegistryError
    if isinstance(exc, JournalCorrupt):
        return (f"journal {journal_path}: {exc}. kfold neither folds past it nor appends to it. "
                f"See what it holds with `kfold replay {journal_path} --up-to-corruption`; restore the "
                f"file from a backup, or move it aside to start a new journal (`kfold export` keeps "
                f"the records before seq {exc.seq})")
    if isinstance(exc, JournalError):  # some name the file themselves (a full volume, a schema)
        return f"journal {exc}" if str(exc).startswith(journal_path) else f"journal {journal_path}: {exc}"
    if isinstance(exc, RegistryError):
        return str(exc)
    if isinstance(exc, SeamError):  # a boot command the fold could not take: nothing was journaled
        return f"{exc}; nothing was journaled; check the configuration field it comes from"
    return None


def _run_to_completion(main_coro) -> int:
    """Run the daemon; do not wait for worker threads still blocked in a watch read.

    By the time ``run`` returns the journal is closed cleanly. A thread blocked reading a watch
    stream cannot be interrupted and would hold ``asyncio.run`` (and interpreter exit) until the
    server-side watch timeout; nothing it could still deliver would be journaled anyway."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main_coro)
    finally:
        loop.close()


def _exit_now(code: int) -> None:
    import logging
    import os
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
