"""``kfold ui JOURNAL [--listen 127.0.0.1:PORT] [--index FILE] [--until SEQ]``: a read-only page
over a journal (SQLite or JSONL export); see ``kfold.ui.server`` for what it serves.

The journal is refolded once into an index (``kfold.ui.index``; progress on a terminal). Without
``--index`` it lives in a temporary directory removed on exit; with ``--index FILE`` it is kept and
reused next time if the journal file is unchanged (same path, size and modification time; delete
it after changing kfold's code, since the index holds that code's decisions).

Exit codes: 0 stopped with Ctrl-C; 2 an unreadable journal or a bad --listen; 3 a broken checksum
chain (nothing is served past a corrupt record: run ``kfold replay --up-to-corruption`` to see the
intact part).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

DEFAULT_LISTEN = "127.0.0.1:8765"


def register(sub) -> None:
    p = sub.add_parser("ui", help="browse a journal in a local, read-only web page")
    p.add_argument("journal", help="journal file (SQLite) or its JSONL export")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to serve on (default {DEFAULT_LISTEN}; port 0 picks a free one)")
    p.add_argument("--index", default=None, metavar="FILE", help="keep the index in FILE and reuse it next time")
    p.add_argument("--until", type=int, default=None, metavar="SEQ", help="index records up to SEQ only")
    p.set_defaults(func=run)


def run(args) -> int:
    from kfold.sources import input_error_code
    try:
        host, port = _listen(args.listen)
    except ValueError as exc:
        print(f"kfold ui: --listen {args.listen!r}: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kfold-ui-") as tmp:
        try:
            store = _store(args, Path(args.index) if args.index else Path(tmp) / "index.sqlite")
        except Exception as exc:
            code = input_error_code(exc)
            if code is None:
                raise
            print(f"kfold ui: {args.journal}: {exc}", file=sys.stderr)
            return code
        return _serve(store, host, port)


def _store(args, index: Path):
    from kfold.ui.index import build, read_meta, source_identity
    from kfold.ui.server import Store
    if index.exists():
        meta = read_meta(index)
        if {k: meta.get(k) for k in ("source", "source_size", "source_mtime_ns")} == source_identity(args.journal) \
                and meta.get("until") == args.until:
            print(f"kfold ui: reusing the index {index}", file=sys.stderr)
            return Store(index, args.journal)
        index.unlink()
    meta = build(args.journal, index, args.until)
    print(f"kfold ui: indexed {meta['records']:,} records in {meta['seconds']}s", file=sys.stderr)
    return Store(index, args.journal)


def _serve(store, host: str, port: int) -> int:
    from kfold.ui.server import LOOPBACK, serve
    try:
        server = serve(store, host, port)
    except OSError as exc:
        print(f"kfold ui: cannot listen on {host}:{port}: {exc.strerror or exc} "
              f"(pick another with --listen 127.0.0.1:PORT, or port 0 for any free one)", file=sys.stderr)
        return 2
    if host not in LOOPBACK:
        print(f"kfold ui: warning: serving on {host}, not loopback: anyone who can reach it can read this journal",
              file=sys.stderr)
    print(f"kfold ui: {store.source} at http://{host}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:8765")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port {port} is out of range")
    return host.strip("[]"), int(port)
