"""``kfold ui JOURNAL [--listen 127.0.0.1:PORT] [--index FILE] [--until SEQ | --follow]``: a read-only page
over a journal (SQLite or JSONL export); see ``kfold.offline.ui.server`` for what it serves.

The journal is opened and its first record read before anything is served (a file kfold cannot
read is refused, exit 2, before a URL is printed). The page is served at once; the journal is refolded into an index (``kfold.offline.ui.index``) meanwhile,
and the page shows that progress (so does a terminal) until it is done. Without
``--index`` it lives in a temporary directory removed on exit; with ``--index FILE`` it is kept and
reused next time if the journal file is unchanged (same path, size and modification time; delete
it after changing kfold's code, since the index holds that code's decisions). With ``--follow`` (a
SQLite journal) the index keeps growing as the journal does (``kfold.offline.ui.index.Follow``)
and is never reused.

Exit codes: 0 stopped with Ctrl-C or SIGTERM; 2 an unreadable journal or a bad --listen; 3 a broken checksum
chain (the server stops: run ``kfold replay --up-to-corruption`` to see the intact part).
"""
from __future__ import annotations

import signal
import sqlite3
import sys
import tempfile
import threading
from pathlib import Path

DEFAULT_LISTEN = "127.0.0.1:8765"


EXAMPLES = """examples:
  kfold ui journal.db                                # http://127.0.0.1:8765/
  kfold ui bug-report.jsonl --listen 127.0.0.1:0     # any free port (printed)
  kfold ui journal.db --index ~/.cache/kfold-ui.idx  # keep the index for next time
  kfold ui /var/lib/kfold/journal.db --follow        # a running kfold's journal, new records as they come

exit codes: 0 stopped with Ctrl-C or SIGTERM; 2 an unreadable journal or a bad --listen; 3 a broken
checksum chain."""


def register(sub) -> None:
    import argparse
    from kfold.cli.args import seq_number
    p = sub.add_parser("ui", help="browse a journal in a local, read-only web page",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("journal", help="journal file (SQLite) or its JSONL export")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to serve on (default {DEFAULT_LISTEN}; port 0 picks a free one)")
    p.add_argument("--index", default=None, metavar="FILE", help="keep the index in FILE and reuse it next time")
    p.add_argument("--until", type=seq_number, default=None, metavar="SEQ", help="index records up to SEQ only")
    p.add_argument("--follow", action="store_true",
                   help="keep reading a live SQLite journal (a running kfold's): new records appear in the page "
                        "without a restart")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        host, port = _listen(args.listen)
    except ValueError as exc:
        print(f"kfold ui: --listen {args.listen!r}: {exc}", file=sys.stderr)
        return 2
    try:
        _readable(args.journal, args.until)
    except Exception as exc:  # noqa: BLE001 - classified like a failure while indexing
        return _failure(args, exc)
    if args.follow and (problem := _follow_problem(args)):
        print(f"kfold ui: {problem}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kfold-ui-") as tmp:
        index = Path(args.index) if args.index else Path(tmp) / "index.sqlite"
        try:
            serving = _serving(args, index)
        except OSError as exc:
            print(f"kfold ui: {args.journal}: {exc}", file=sys.stderr)
            return 2
        return _serve(args, serving, index, host, port)


def _readable(journal: str, until: int | None) -> None:
    """Open the journal as the index will and read its first record, so a file that is not a
    journal is refused before any URL is printed (a bad record further on is still reported
    while indexing: the page and the terminal say so and the server stops)."""
    from contextlib import closing
    from kfold.offline.sources import iter_records, start_point
    _, first, _ = start_point(journal, until)
    with closing(iter_records(journal, until, first)) as records:
        next(records, None)


def _follow_problem(args) -> str | None:
    from kfold.offline.sources import is_sqlite
    if not is_sqlite(args.journal):
        return (f"--follow: {args.journal} is an export (JSONL), which is complete as written; follow the SQLite "
                f"journal a running kfold writes (journal.path), or drop --follow")
    if args.until is not None:
        return "--follow and --until: pick one (--until stops at a record, --follow reads every new one)"
    return None


def _serving(args, index: Path):
    """What to serve: a kept index still valid for this journal, or one to build."""
    from kfold.offline.progress import journal_size
    from kfold.offline.ui.index import read_meta, source_identity
    from kfold.offline.ui.server import Indexing, Store
    identity = source_identity(args.journal)
    if index.exists() and not args.follow:
        try:
            meta = read_meta(index)
        except (sqlite3.Error, ValueError):  # not an index, or one whose build was cut short
            meta = {}
        if {k: meta.get(k) for k in identity} == identity and meta.get("until") == args.until:
            print(f"kfold ui: reusing the index {index}", file=sys.stderr)
            return Indexing(args.journal, meta.get("records"), Store(index, args.journal))
    for stale in (index, index.with_name(index.name + "-wal"), index.with_name(index.name + "-shm")):
        stale.unlink(missing_ok=True)
    return Indexing(args.journal, journal_size(args.journal, args.until))


def _serve(args, serving, index: Path, host: str, port: int) -> int:
    from kfold.offline.ui.server import LOOPBACK, serve
    try:
        server = serve(serving, host, port)
    except OSError as exc:
        print(f"kfold ui: cannot listen on {host}:{port}: {exc.strerror or exc} "
              f"(pick another with --listen 127.0.0.1:PORT, or port 0 for any free one)", file=sys.stderr)
        return 2
    if host not in LOOPBACK:
        print(f"kfold ui: warning: serving on {host}, not loopback: anyone who can reach it can read this journal",
              file=sys.stderr)
    print(f"kfold ui: {args.journal} at http://{host}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    failed: list[BaseException] = []
    signal.signal(signal.SIGTERM, _stop)  # like Ctrl-C: the temporary index is removed on the way out
    follow = None
    if args.follow:
        from kfold.offline.ui.index import Follow
        from kfold.offline.ui.server import Store
        follow = Follow(1.0, ready=lambda: setattr(serving, "store", Store(index, args.journal)))
    indexer = None
    if serving.store is None:
        indexer = threading.Thread(target=_index, args=(args, serving, index, server, failed, follow), daemon=True)
        indexer.start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if follow is not None and indexer is not None:   # let it finish its round before the index is removed
            follow.stop.set()
            indexer.join(10)
    return _failure(args, failed[0]) if failed else 0


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt


def _index(args, serving, index: Path, server, failed: list, follow=None) -> None:
    """Build the index while the page already shows its progress; a journal that cannot be read
    stops the server (``run`` then exits with the error). Following, the build goes on until
    the server stops; the page is served from its first publish."""
    from kfold.offline.ui.index import build
    from kfold.offline.ui.server import Store
    if follow is not None:
        print(f"kfold ui: following {args.journal}: new records appear as they are journaled", file=sys.stderr)
    try:
        meta = build(args.journal, index, args.until, watch=lambda b: setattr(serving, "builder", b), follow=follow)
        if follow is not None:
            return
        serving.store = Store(index, args.journal)
        print(f"kfold ui: indexed {meta['records']:,} records in {meta['seconds']}s", file=sys.stderr)
    except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which reports or re-raises it
        failed.append(exc)
        server.shutdown()


def _failure(args, exc: BaseException) -> int:
    from kfold.offline.sources import input_error, input_error_code
    code = input_error_code(exc)
    if code is None:
        raise exc
    print(f"kfold ui: {args.journal}: {input_error(exc)}", file=sys.stderr)
    return code


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:8765")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port {port} is out of range")
    return host.strip("[]"), int(port)
