"""``kfold run --config PATH [--kubeconfig] [--context] [-n NS] [--allow-exec] [--journal] [--listen]
[--metrics-listen] [--log-level]``: the daemon.

Contract: every bad input or unusable environment found before the daemon runs (config file,
kubeconfig and context, journal path, the probe and metrics ports, the metrics certificate) is one line on stderr naming the thing and the
fix, exit 2, no traceback; an unexpected failure prints its traceback and exits 1 at once (worker
threads never hold the process). See docs/cli.md.
"""
from __future__ import annotations

import argparse
import asyncio
import errno
import os
import sys

EXAMPLES = """examples:
  kfold run --config /etc/kfold/config.yaml
  kfold run --config dev.yaml --kubeconfig ~/.kube/config --context kind-dev -n team-a --journal ./journal.db
  kfold run --config dev.yaml --listen 127.0.0.1:8080 --metrics-listen 127.0.0.1:8443
  KUBECONFIG=~/.kube/gke.yaml kfold run --config dev.yaml --allow-exec --log-level debug

exit codes: 0 stopped by SIGTERM/SIGINT; 1 the daemon stopped on an error (logged); 2 bad input or an
unusable environment (one line on stderr says what and how to fix it)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run the reconciler daemon", epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              description="Watch Sessions and Repos and reconcile them; every decision is journaled.")
    p.add_argument("--config", required=True, metavar="FILE", help="config file (YAML), see docs/config.md")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="kubeconfig of the home cluster (overrides cluster.kubeconfig; default: $KUBECONFIG's "
                        "first existing file, else the in-cluster service account)")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (overrides cluster.context; default: its current-context)")
    p.add_argument("-n", "--namespace", action="append", metavar="NS",
                   help="namespace to watch (repeatable or comma-separated; overrides `namespaces`)")
    p.add_argument("--allow-exec", action="store_true", default=None,
                   help="let the kubeconfig run its exec credential plugin (GKE/EKS/AKS login); it runs with "
                        "kfold's privileges, see docs/cli.md (overrides cluster.allow_exec)")
    p.add_argument("--journal", metavar="FILE", help="journal file (overrides journal.path)")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="where /healthz and /readyz are served, plain HTTP (overrides http.listen; e.g. 127.0.0.1:8080)")
    p.add_argument("--metrics-listen", metavar="HOST:PORT",
                   help="where /metrics is served on a port of its own, HTTPS with the apiserver's authentication "
                        "and authorization unless metrics.secure is false (overrides metrics.listen)")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), help="overrides log.level")
    p.add_argument("--log-format", choices=("plain", "json"), help="overrides log.format")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kfold.daemon import logs
    from kfold.daemon.config import ConfigError, read_config
    try:
        cfg = read_config(args.config, _overrides(args), FLAGS)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    problem, via = _preflight(cfg)
    if problem:
        print(f"kfold run: {problem}", file=sys.stderr)
        return 2
    if via:
        cfg = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"kubeconfig": via[0]})})
    logs.setup(cfg.log.format, cfg.log.level)
    if via:
        import logging
        logging.getLogger("kfold.daemon").info("home kubeconfig from %s", via[1])
    from kfold.daemon.boot import run
    try:
        code = _run_to_completion(run(cfg))
    except Exception as exc:  # noqa: BLE001 - the operator needs one clear line, not a traceback
        message = _refusal(exc, cfg)
        if message is None:
            import traceback
            traceback.print_exc()
            _exit_now(1)   # a bug: its traceback, and no worker thread holds the process
        print(f"kfold run: {message}", file=sys.stderr)
        _exit_now(2)
        return 2
    _exit_now(code)
    return code


# the flag that overrides each config field (a bad value it gives is blamed on the flag)
FLAGS = {"cluster.kubeconfig": "--kubeconfig", "cluster.context": "--context", "journal.path": "--journal",
         "cluster.allow_exec": "--allow-exec", "namespaces": "-n/--namespace", "log.level": "--log-level",
         "log.format": "--log-format", "http.listen": "--listen", "metrics.listen": "--metrics-listen"}


def _overrides(args: argparse.Namespace) -> dict:
    namespaces = [n.strip() for ns in args.namespace or () for n in ns.split(",") if n.strip()] or None
    return {"cluster.kubeconfig": args.kubeconfig, "cluster.context": args.context, "journal.path": args.journal,
            "cluster.allow_exec": args.allow_exec, "namespaces": namespaces, "log.level": args.log_level,
            "log.format": args.log_format, "http.listen": args.listen, "metrics.listen": args.metrics_listen}


def _preflight(cfg) -> tuple[str | None, tuple[str, str] | None]:
    """(the first reason kfold cannot start, or None; ``$KUBECONFIG``'s file and how it was chosen,
    when neither --kubeconfig nor cluster.kubeconfig names one)."""
    from kfold.registry.errors import HomeUnavailable
    from kfold.registry.home import kubeconfig_from_env
    via = None
    if not cfg.cluster.kubeconfig:
        try:
            via = kubeconfig_from_env()
        except HomeUnavailable as exc:
            return str(exc), None
    problem = (_journal_problem(cfg.journal.path) or _listen_problem(cfg.http.listen, LISTEN)
               or (_listen_problem(cfg.metrics.listen, METRICS) if cfg.metrics.listen is not None else None)
               or (cert_problem(cfg.metrics.cert_dir) if cfg.metrics.listen and cfg.metrics.secure else None))
    return problem, via


def _journal_problem(path: str) -> str | None:
    """Why the journal at ``path`` (and its ``.lock`` beside it) cannot be created or written."""
    fix = "point journal.path (or --journal) at a file in a directory kfold may write"
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(full):
        return f"journal {path} is a directory; point journal.path (or --journal) at a file, e.g. {path.rstrip('/')}/journal.db"
    if os.path.exists(full) and not os.access(full, os.R_OK | os.W_OK):
        return f"journal {path}: not readable and writable by this user (uid {os.getuid()}); fix its permissions, or {fix}"
    parent = os.path.dirname(full)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"journal {path}: {parent} is not a directory; {fix}"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"journal {path}: directory {parent} is not writable by this user (uid {os.getuid()}); {fix}"
    try:  # what the daemon does first (its directory, the lock beside it): a read-only volume, /proc
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(f"{full}.lock", "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return f"journal {path}: cannot create {exc.filename or full} ({exc.strerror or exc}); {fix}"
    return None


LISTEN, METRICS = ("http.listen", "--listen"), ("metrics.listen", "--metrics-listen")   # (field, flag)


def _listen_problem(listen: str, where: tuple[str, str]) -> str | None:
    """Why ``listen`` cannot be bound (tried with the options asyncio's server uses)."""
    import socket
    from kfold.daemon.config import host_port
    host, port = host_port(listen)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"{where[0]} {listen}: cannot resolve {host} ({exc.strerror}); use an address such as 0.0.0.0:{port}"
    for family, kind, proto, _name, addr in infos[:1]:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as exc:
                return _bind_message(listen, exc, where)
    return None


def _bind_message(listen: str, exc: OSError, where: tuple[str, str]) -> str:
    what = "is already in use (another kfold, or another program)" if exc.errno == errno.EADDRINUSE \
        else f"cannot be bound ({exc.strerror or exc})"
    return f"{where[0]} {listen} {what}; stop it, or pick a free port with {where[1]} or the config's {where[0]}"


def cert_problem(cert_dir: str | None) -> str | None:
    """Why the metrics certificate in ``cert_dir`` cannot be served (kfold.daemon.secure)."""
    from kfold.daemon.secure import CertError, check_cert_dir
    try:
        check_cert_dir(cert_dir)
    except CertError as exc:
        return str(exc)
    return None


def _refusal(exc: Exception, cfg) -> str | None:
    """The one-line reason kfold refuses to start, with the fix; None for a bug (traceback)."""
    import sqlite3
    from journal.store import JournalCorrupt, JournalError
    from engine.seams import SeamError
    from kfold.registry import RegistryError
    from kfold.daemon.http import BindError
    journal_path = cfg.journal.path
    if isinstance(exc, JournalCorrupt):
        return (f"journal {journal_path}: {exc}. kfold neither folds past it nor appends to it. "
                f"See what it holds with `kfold replay {journal_path} --up-to-corruption`; restore the "
                f"file from a backup, or move it aside to start a new journal (`kfold export` keeps "
                f"the records before seq {exc.seq})")
    if isinstance(exc, JournalError):  # some name the file themselves (a full volume, a schema)
        return f"journal {exc}" if str(exc).startswith(journal_path) else f"journal {journal_path}: {exc}"
    if isinstance(exc, sqlite3.Error):
        return f"journal {journal_path}: {exc}; point journal.path (or --journal) at a SQLite file kfold may write"
    if isinstance(exc, RegistryError):
        return str(exc)
    if isinstance(exc, SeamError):  # a boot command the fold could not take: nothing was journaled
        return f"{exc}; nothing was journaled; check the configuration field it comes from"
    if isinstance(exc, BindError):  # a listen address, taken between the preflight and the start
        where = METRICS if exc.field == METRICS[0] else LISTEN
        return _bind_message(cfg.metrics.listen if where is METRICS else cfg.http.listen, exc, where)
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
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
