"""The read-only JSON API and static page of ``kfold ui`` (stdlib ``http.server``, one thread per
request, each on its own read-only connection to the index).

Routes (GET/HEAD only; anything else is 405; while the index is still being built every ``/api/``
route answers 503 with the progress, see ``Indexing``):
- ``/`` and ``/static/<file>``: the page (``kfold/offline/ui/static``, shipped as package data).
- ``/api/summary``: the journal, its record count and time span, machines, record kinds, the first
  divergence, and ``following`` (``kfold ui --follow``: the count grows; the page polls it).
- ``/api/sessions?problems=1&offset=&limit=``: the landing list: each Session with its phase, the
  Ready condition's reason and message, its failure and last problem, and the count per phase.
- ``/api/objects?q=&kind=&top=1&bookkeeping=0&offset=&limit=``: objects by kind and key, with their
  last state and record count (``bookkeeping=0``: without the machines' bookkeeping rows, and how
  many were left out); ``/api/object/<id>``: one object with its parent and children.
- ``/api/records?obj=&related=1&machine=&kinds=a,b&problems=1&from=SEQ&dir=next|prev|around&limit=``:
  one page of the timeline (at most ``MAX_PAGE`` records), each with its diff, effects (with their
  outcome), timers, the effect it answers, the objects it names, its signed time delta on its own
  clock and its problem (``problems=1``: only records with one).
- ``/api/session/<id>``: a Session's summary (``kfold.offline.explain.SessionSummary``).
- ``/api/effects?obj=&related=1&problems=1&offset=&limit=``: effect -> outcome rows in the order
  they were emitted, with latency and retries (``problems=1``: only those not answered ``ok``, nor
  with an answer the machine expected and moved on from, ``kfold.offline.explain.expected_of``).
- ``/api/pending``: the effects without an outcome and the timers armed when the journal ends, each
  with its object and the Session it serves (``session``: an object id, or null).
- ``/api/record/<seq>``: the record as journaled (read back from the journal file by seq, or by
  byte offset for a JSONL export).
- ``/api/diagram/<machine>.svg?state=S``: the machine's table drawn with ``S`` highlighted.

Guarantees: nothing is written (the index and the journal are opened read-only); on a loopback
address a request whose ``Host`` is not the address served is refused (403), so a web page
elsewhere cannot read the journal through DNS rebinding (bound elsewhere on purpose, any Host is
served); no page ever holds more than ``MAX_PAGE`` records.
"""
from __future__ import annotations

import mimetypes
import re
import sqlite3
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

STATIC = Path(__file__).with_name("static")
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
MAX_PAGE = 200


class Indexing:
    """What the server serves from: ``store`` once the index is built; until then the API answers
    503 with the progress (``done`` of ``total`` records) and the page waits, showing it."""

    def __init__(self, source: str, total: int | None = None, store: "Store | None" = None):
        self.source, self.total, self.store = source, total, store
        self.builder: Any = None

    def progress(self) -> dict[str, Any]:
        done = self.builder.count if self.builder is not None else 0
        return {"error": "the journal is still being indexed", "indexing": True, "source": self.source,
                "done": done, "total": self.total}


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Store:
    """Read-only queries over an index (``kfold.offline.ui.index``) and its source journal."""

    def __init__(self, index: str | Path, source: str):
        self.index, self.source = Path(index).absolute(), source
        self._local = threading.local()
        from kfold.offline.sources import is_sqlite
        self.sqlite_source = is_sqlite(source)

    @property
    def meta(self) -> dict[str, Any]:
        """Read at each use: the index grows while ``kfold ui --follow`` follows a live journal."""
        return {k: orjson.loads(v) for k, v in self.db().execute("SELECT key, value FROM meta")}

    def db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "db", None)
        if conn is None:
            conn = self._local.db = sqlite3.connect(f"file:{self.index}?mode=ro", uri=True)
            conn.row_factory = sqlite3.Row
        return conn

    # -- summary and objects --------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        return self.meta

    def objects(self, q: str = "", kind: str = "", top: bool = False, offset: int = 0,
                limit: int = 100, bookkeeping: bool = True) -> dict[str, Any]:
        conds, params = [], []
        if not bookkeeping:
            conds.append("kind NOT LIKE '% bookkeeping'")
        if q:
            conds.append("key LIKE ?")
            params.append(f"%{q}%")
        if kind:
            conds.append("kind = ?")
            params.append(kind)
        if top:
            conds.append("parent IS NULL")
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        order = "ORDER BY kind NOT IN ('Session','Repo'), kind LIKE '% bookkeeping', kind, nkey"
        rows = self.db().execute(f"SELECT *, (SELECT COUNT(*) FROM objects c WHERE c.parent = o.id) AS children "
                                 f"FROM objects o {where} {order} LIMIT ? OFFSET ?",
                                 (*params, _limit(limit), max(offset, 0))).fetchall()
        total = self.db().execute(f"SELECT COUNT(*) FROM objects {where}", params).fetchone()[0]
        hidden = 0 if bookkeeping else self.db().execute(
            "SELECT COUNT(*) FROM objects WHERE kind LIKE '% bookkeeping'").fetchone()[0]
        return {"objects": [dict(r) for r in rows], "total": total, "offset": offset, "bookkeeping_hidden": hidden}

    def sessions(self, problems: bool = False, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        """The landing list: every Session in natural order with its phase, the Ready condition's
        reason and message as last written, its failure and last problem; and how many are in
        each phase."""
        db = self.db()
        where = "WHERE s.problem = 1" if problems else ""
        rows = db.execute(f"SELECT o.id, o.key, o.n, s.summary FROM sessions s JOIN objects o ON o.id = s.obj "
                          f"{where} ORDER BY s.nkey LIMIT ? OFFSET ?", (_limit(limit), max(offset, 0))).fetchall()
        out = []
        for r in rows:
            summary = orjson.loads(r["summary"])
            summary.pop("phases")
            out.append({"id": r["id"], "key": r["key"], "n": r["n"], **summary})
        phases = dict(db.execute("SELECT phase, COUNT(*) FROM sessions GROUP BY phase ORDER BY phase").fetchall())
        total = db.execute(f"SELECT COUNT(*) FROM sessions s {where}").fetchone()[0]
        with_problem = db.execute("SELECT COUNT(*) FROM sessions WHERE problem = 1").fetchone()[0]
        return {"sessions": out, "total": total, "offset": offset, "phases": phases, "with_problem": with_problem}

    def object(self, oid: int) -> dict[str, Any]:
        db = self.db()
        row = db.execute("SELECT * FROM objects WHERE id = ?", (oid,)).fetchone()
        if row is None:
            raise ApiError(404, f"no object {oid} in this journal's index")
        children = [dict(r) for r in db.execute("SELECT * FROM objects WHERE parent = ? ORDER BY kind, nkey", (oid,))]
        parent = db.execute("SELECT * FROM objects WHERE id = ?", (row["parent"],)).fetchone()
        return {**dict(row), "children": children, "parent": dict(parent) if parent else None}

    # -- the timeline ---------------------------------------------------------------------------
    def records(self, obj: int | None = None, related: bool = False, machine: str = "", kinds: list[str] = (),
                start: int | None = None, direction: str = "next", limit: int = 50,
                problems: bool = False) -> dict[str, Any]:
        limit = _limit(limit)
        ids = self._object_ids(obj, related) if obj else []
        seqs_of = lambda at, way, n: self._seqs(ids, machine, kinds, at, way, n, problems)  # noqa: E731
        if direction == "around":
            before = seqs_of(start, "prev", max(limit // 4, 1))
            seqs = before + seqs_of(start, "next", limit - len(before))
        else:
            seqs = seqs_of(start, direction, limit)
        page = self._expand(seqs)
        more_before = bool(seqs) and bool(seqs_of(seqs[0], "prev", 1))
        more_after = bool(seqs) and bool(seqs_of(seqs[-1] + 1, "next", 1))
        return {**page, "more_before": more_before, "more_after": more_after, "objects_filtered": ids}

    def session(self, oid: int) -> dict[str, Any]:
        row = self.db().execute("SELECT summary FROM sessions WHERE obj = ?", (oid,)).fetchone()
        if row is None:
            raise ApiError(404, f"object {oid} is not a Session of this journal")
        return orjson.loads(row[0])

    def effect_rows(self, obj: int | None = None, related: bool = False, problems: bool = False, offset: int = 0,
                    limit: int = 100) -> dict[str, Any]:
        """Effect -> outcome rows, in the order they were emitted."""
        conds, params = [], []
        if obj:
            ids = self._object_ids(obj, related)
            marks = ",".join("?" * len(ids))
            conds.append(f"(owner IN ({marks}) OR obj IN ({marks}))")
            params += ids + ids
        if problems:   # not answered, or answered neither ok nor as expected (explain.expected_of)
            conds.append("(result IS NULL OR (result != 'ok' AND expected IS NULL))")
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        db = self.db()
        rows = db.execute(f"SELECT * FROM effects {where} ORDER BY cause, nid LIMIT ? OFFSET ?",
                          (*params, _limit(limit), max(offset, 0))).fetchall()
        total = db.execute(f"SELECT COUNT(*) FROM effects {where}", params).fetchone()[0]
        objects = {r["id"]: dict(r) for r in _in(db, "objects", "id", {r["obj"] for r in rows})}
        return {"effects": [dict(r) for r in rows], "objects": objects, "total": total, "offset": offset}

    def pending(self) -> dict[str, Any]:
        meta = self.meta
        return {**(meta.get("pending") or {"effects": [], "timers": [], "more": 0}),
                "last_at": meta.get("last_at"), "home": meta.get("home", "")}

    def _object_ids(self, obj: int, related: bool) -> list[int]:
        if not related:
            return [obj]
        rows = self.db().execute("SELECT id FROM objects WHERE parent = ?", (obj,)).fetchall()
        return [obj, *(r[0] for r in rows)]

    def _seqs(self, ids: list[int], machine: str, kinds: list[str] | tuple, start: int | None, direction: str,
              limit: int, problems: bool = False) -> list[int]:
        """Sequence numbers of one page, driven by the narrowest index the filter allows."""
        back = direction == "prev"
        if ids:
            src, seq = "touches d JOIN records r ON r.seq = d.seq", "d.seq"
            conds, params = [f"d.obj IN ({','.join('?' * len(ids))})"], list(ids)
        elif machine:
            src, seq, conds, params = "mtouch d JOIN records r ON r.seq = d.seq", "d.seq", ["d.machine = ?"], [machine]
        else:
            src, seq, conds, params = "records r", "r.seq", [], []
        if ids and machine:
            conds.append("EXISTS (SELECT 1 FROM mtouch m WHERE m.machine = ? AND m.seq = r.seq)")
            params.append(machine)
        if kinds:
            # with an object or machine driving, ``+`` keeps SQLite off the kind index (a scan of every
            # record of that kind); alone, the kind index is the driver
            conds.append(f"{'+' if ids or machine else ''}r.kind IN ({','.join('?' * len(kinds))})")
            params += list(kinds)
        if problems:
            conds.append("r.problem IS NOT NULL")
        if start is not None:
            conds.append(f"{seq} {'<' if back else '>='} ?")
            params.append(start)
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        group = f"GROUP BY {seq}" if len(ids) > 1 else ""
        rows = self.db().execute(f"SELECT {seq} FROM {src} {where} {group} ORDER BY {seq} {'DESC' if back else ''} "
                                 f"LIMIT ?", (*params, limit)).fetchall()
        out = [r[0] for r in rows]
        return out[::-1] if back else out

    def _expand(self, seqs: list[int]) -> dict[str, Any]:
        if not seqs:
            return {"records": [], "effects": {}, "objects": {}}
        db = self.db()
        rows = db.execute(f"SELECT * FROM records WHERE seq IN ({','.join('?' * len(seqs))}) ORDER BY seq",
                          seqs).fetchall()
        records, eids, oids = [], set(), set()
        for r in rows:
            rec = dict(r)
            rec["detail"] = orjson.loads(rec["detail"])
            for c in rec["detail"].get("changes", ()):
                oids.add(c["obj"])
            for e in rec["detail"].get("effects", ()):
                eids.add(e["id"])
                oids |= {e["obj"], e["owner"]}
            if rec["answers"]:
                eids.add(rec["answers"])
            records.append(rec)
        effects = {r["id"]: dict(r) for r in _in(db, "effects", "id", eids)}
        oids |= {e["obj"] for e in effects.values()}
        objects = {r["id"]: dict(r) for r in _in(db, "objects", "id", oids)}
        return {"records": records, "effects": effects, "objects": objects}

    def effect(self, eid: str) -> dict[str, Any]:
        row = self.db().execute("SELECT * FROM effects WHERE id = ?", (eid,)).fetchone()
        if row is None:
            raise ApiError(404, f"no effect {eid!r} in this journal (log effects are not journaled)")
        return dict(row)

    def raw(self, seq: int) -> dict[str, Any]:
        """The record as the journal holds it."""
        row = self.db().execute("SELECT pos FROM records WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            raise ApiError(404, f"no record {seq} in this journal")
        if self.sqlite_source:
            with sqlite3.connect(f"file:{Path(self.source).absolute()}?mode=ro", uri=True) as src:
                payload = src.execute("SELECT payload FROM journal WHERE seq = ?", (seq,)).fetchone()
            return orjson.loads(payload[0])
        with open(self.source, "rb") as f:
            f.seek(row[0])
            return orjson.loads(f.readline())


def _in(db: sqlite3.Connection, table: str, column: str, values: set) -> list[sqlite3.Row]:
    if not values:
        return []
    values = list(values)
    return db.execute(f"SELECT * FROM {table} WHERE {column} IN ({','.join('?' * len(values))})", values).fetchall()


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def _limit(value: int) -> int:
    return max(1, min(int(value), MAX_PAGE))


# -- HTTP -----------------------------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    serving: Indexing
    hosts: frozenset[str] | None   # None: bound beyond loopback on purpose, any Host is accepted
    server_version = "kfold-ui"

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        try:
            if self.hosts is not None and self.headers.get("Host", "") not in self.hosts:
                raise ApiError(403, f"Host {self.headers.get('Host')!r} is not this server; open {sorted(self.hosts)[0]}")
            url = urlsplit(self.path)
            if url.path.startswith("/api/") and self.serving.store is None:
                return self._send(503, orjson.dumps(self.serving.progress()), "application/json")
            if url.path.startswith("/api/"):
                body, ctype = self._api(url.path[5:], parse_qs(url.query))
            else:
                body, ctype = self._static(url.path)
            self._send(200, body, ctype)
        except ApiError as exc:
            self._send(exc.status, orjson.dumps({"error": str(exc)}), "application/json")
        except (ValueError, KeyError) as exc:
            self._send(400, orjson.dumps({"error": f"bad request: {exc}"}), "application/json")
        except Exception as exc:  # a bug: say so to the page and the terminal, keep serving
            print(f"kfold ui: {self.path}: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._send(500, orjson.dumps({"error": f"{type(exc).__name__}: {exc}"}), "application/json")

    do_HEAD = do_GET

    def _refuse(self) -> None:
        self._send(405, orjson.dumps({"error": "this server is read-only"}), "application/json")

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _api(self, path: str, qs: dict[str, list[str]]) -> tuple[bytes, str]:
        if m := re.fullmatch(r"diagram/(\w+)\.svg", path):
            return self._diagram(m[1], qs.get("state", [""])[0]), "image/svg+xml"
        return self._json_api(path, qs), "application/json"

    def _json_api(self, path: str, qs: dict[str, list[str]]) -> bytes:
        arg = lambda name, default="": qs.get(name, [default])[0]  # noqa: E731
        s = self.serving.store
        if path == "summary":
            return orjson.dumps(s.summary())
        if path == "objects":
            return orjson.dumps(s.objects(arg("q"), arg("kind"), arg("top") == "1", int(arg("offset", "0")),
                                          int(arg("limit", "100")), arg("bookkeeping", "1") == "1"))
        if path == "sessions":
            return orjson.dumps(s.sessions(arg("problems") == "1", int(arg("offset", "0")), int(arg("limit", "100"))))
        if m := re.fullmatch(r"object/(\d+)", path):
            return orjson.dumps(s.object(int(m[1])))
        if path == "records":
            kinds = [k for k in arg("kinds").split(",") if k]
            return _json(s.records(int(arg("obj")) if arg("obj") else None, arg("related") == "1",
                                   arg("machine"), kinds, int(arg("from")) if arg("from") else None,
                                   arg("dir", "next"), int(arg("limit", "50")), arg("problems") == "1"))
        if m := re.fullmatch(r"session/(\d+)", path):
            return orjson.dumps(s.session(int(m[1])))
        if path == "effects":
            return _json(s.effect_rows(int(arg("obj")) if arg("obj") else None, arg("related") == "1",
                                       arg("problems") == "1", int(arg("offset", "0")), int(arg("limit", "100"))))
        if path == "pending":
            return orjson.dumps(s.pending())
        if m := re.fullmatch(r"record/(\d+)", path):
            return orjson.dumps(s.raw(int(m[1])))
        if m := re.fullmatch(r"effect/([\w.]+)", path):
            return orjson.dumps(s.effect(m[1]))
        raise ApiError(404, f"no API route /api/{path}")

    def _diagram(self, machine: str, state: str) -> bytes:
        from kfold.offline import diagrams
        table = diagrams.tables().get(machine)
        if table is None:
            raise ApiError(404, f"no machine table named {machine!r}")
        try:
            return diagrams.svg(table, state or None).encode()
        except diagrams.DotMissing as exc:
            raise ApiError(503, str(exc)) from None

    def _static(self, path: str) -> tuple[bytes, str]:
        name = "index.html" if path in ("/", "/index.html") else path.removeprefix("/static/")
        files = {p.name: p for p in STATIC.iterdir() if p.is_file()}
        if name not in files or (path not in ("/", "/index.html") and not path.startswith("/static/")):
            raise ApiError(404, f"no page {path}")
        return files[name].read_bytes(), mimetypes.guess_type(name)[0] or "application/octet-stream"

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8" if ctype.startswith(("text/", "application/json",
                                                                                          "image/svg")) else ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the terminal shows progress and the URL
        pass


def serve(serving: Store | Indexing, host: str, port: int) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0: any free one) for a built index (a ``Store``) or
    one being built (``Indexing``); call ``serve_forever`` on it."""
    if isinstance(serving, Store):
        serving = Indexing(serving.source, serving.meta.get("records"), serving)
    server = ThreadingHTTPServer((host, port), Handler)
    bound = server.server_address[1]
    loopback = host in LOOPBACK
    hosts = frozenset(f"{h}:{bound}" for h in LOOPBACK | {host}) if loopback else None
    handler = type("BoundHandler", (Handler,), {"serving": serving, "hosts": hosts})
    server.RequestHandlerClass = handler
    server.daemon_threads = True
    return server
