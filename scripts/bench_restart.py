#!/usr/bin/env python3
"""bench_restart.py - kfold at rest over N Ready Sessions, then restarted over them (issue 38 items 2, 3).

    python scripts/bench_restart.py [--n 3000] [--rest 600] [--window 60] [--json out.json] [--peers kopf-async]

On the local control plane (scripts/controlplane.sh start; sized for large N as in
docs/performance.md), one fresh namespace, ``kfold run`` with the production journal settings
(default snapshots and retention; the admin kubeconfig):

1. N Sessions created at once (16 threads) and all Ready; kwok Nodes added for their pods.
2. **At rest** for ``--rest`` seconds with nothing changing: requests kfold sent (its own
   ``kfold_client_requests_total``) by verb, per minute, watches apart; its CPU (/proc); the
   journal's growth (file + WAL) per hour, and the rows appended meanwhile by record kind (count,
   bytes of payload and projection).
3. **Restarts**, each measured over ``--window`` seconds from the new process's start:
   SIGTERM then start on its journal; SIGKILL then start on its journal; SIGKILL then start on a
   fresh journal. Per restart: time to /readyz, requests by verb and resource in the window, the
   writes among them, and what changed on the apiserver: pod uids, and the resourceVersions of
   the Pods and Services (a write to an unchanged object moves its resourceVersion).

4. With ``--peers kopf-async``, **kopf's restart over the same Sessions**: kfold stopped (SIGTERM),
   then scripts/peer_kopf_async.py under ``kopf run --standalone`` (as scripts/bench_peer.py runs
   it: its own ServiceAccount ``kfold-bench/kopf``, the only operator running) three times: its
   first start over the Sessions kfold made (no kopf state on them: a takeover, kopf's counterpart
   of kfold's fresh journal); SIGTERM then start; SIGKILL then start (kopf's state is its
   annotations on the Sessions, kopf's counterpart of kfold's journal). Its requests are counted
   BY THE APISERVER: one FlowSchema per (verb, resource) for the kopf identity (``verb_flow_schemas``)
   and the delta of ``apiserver_flowcontrol_dispatched_requests_total`` per FlowSchema; kfold's
   are counted by its own client. Per start the same figures as kfold's, over ``--window`` s and
   on until kopf is idle (no request for ``QUIET_S``): ``last_request_s`` and ``last_write_s`` are
   when it sent its last request and its last write (kfold's too, from its metrics), to the
   second they are polled at: kopf has no readiness of its own.

Prints one JSON object (and writes it with --json). Exits 1 if a Session is not Ready at the end
of any window, or a pod uid changed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from kubernetes import client  # noqa: E402

from bench_peer import (BENCH_NS, LEVEL, Contestant, apf_dispatched, client_requests, control_plane_flags,  # noqa: E402
                        cpu_seconds, ensure_bench_extra, ensure_capacity, minus, remove_nodes, sa_kubeconfig, scrape,
                        session)
from bench_peer import install as install_peers  # noqa: E402
from tests.e2e.conftest import Daemon, apply, discard_namespace, install_crds  # noqa: E402
from tests.e2e.controlplane import ensure_controlplane  # noqa: E402

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
WRITES = {"create", "update", "patch", "delete"}
PEERS = ("kopf-async",)
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
PEER_RESOURCES = ("sessions", "sessions/status", "pods", "services", "events")   # what the kopf peer touches
QUIET_S = 15.0      # a peer is idle once it has sent no request for this long
PEER_CAP_S = 900.0  # a peer start measured at most this long


def requests(port: int) -> dict[tuple[str, str], float]:
    """kfold's requests so far, (verb, resource) -> count, from its /metrics."""
    out: dict[tuple[str, str], float] = {}
    for key, n in client_requests(scrape(f"http://127.0.0.1:{port}/metrics")).items():
        verb, resource, _code = key.split(" ")
        out[(verb, resource)] = out.get((verb, resource), 0.0) + n
    return out


def journal_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def journal_rows(path: Path, after: int = 0) -> tuple[int, dict[str, list[int]]]:
    """The last seq, and the rows after ``after`` by record kind: [count, bytes of payload and
    projection]; snapshots stored meanwhile under "snapshot" (read-only, beside the running daemon)."""
    import sqlite3
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        last = db.execute("SELECT COALESCE(MAX(seq), 0) FROM journal").fetchone()[0]
        rows = {kind: [n, size] for kind, n, size in db.execute(
            "SELECT kind, COUNT(*), SUM(LENGTH(payload) + COALESCE(LENGTH(view), 0)) FROM journal WHERE seq > ?"
            " GROUP BY kind", (after,))}
        n, size = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM snapshots WHERE seq > ?",
                             (after,)).fetchone()
        if n:
            rows["snapshot"] = [n, size]
        return last, rows
    finally:
        db.close()


def world(admin: Any, ns: str) -> dict[str, Any]:
    """What the apiserver holds: pod uid and resourceVersion per pod, Service and Session
    resourceVersions, Session phases."""
    core, co = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    pods = {p.metadata.name: (p.metadata.uid, p.metadata.resource_version)
            for p in core.list_namespaced_pod(ns).items if p.metadata.deletion_timestamp is None}
    svcs = {s.metadata.name: s.metadata.resource_version for s in core.list_namespaced_service(ns).items}
    items = co.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
    phases = {i["metadata"]["name"]: (i.get("status") or {}).get("phase") for i in items}
    sessions = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}
    return {"pods": pods, "services": svcs, "phases": phases, "sessions": sessions}


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    return {
        "pod_uids_changed": sum(1 for n, (uid, _) in before["pods"].items() if after["pods"].get(n, ("",))[0] != uid),
        "pods_written": sum(1 for n, (_, rv) in before["pods"].items() if n in after["pods"] and after["pods"][n][1] != rv),
        "services_written": sum(1 for n, rv in before["services"].items() if after["services"].get(n) != rv),
        "sessions_written": sum(1 for n, rv in before["sessions"].items() if after["sessions"].get(n) != rv),
        "not_ready": sum(1 for p in after["phases"].values() if p != "Ready"),
    }


def restart(d: Daemon, how: str, window_s: float, admin: Any, ns: str, fresh_journal: Path | None = None
            ) -> tuple[Daemon, dict[str, Any]]:
    before = world(admin, ns)
    if how == "SIGTERM":
        d.stop()
    else:
        d.kill9()
    if fresh_journal is not None:
        import yaml
        cfg = yaml.safe_load(d.config.read_text())
        cfg["journal"]["path"] = str(fresh_journal)
        d.config.write_text(yaml.safe_dump(cfg))
        d.journal = fresh_journal
    t0 = time.monotonic()
    d.start(wait_ready=False)
    d.wait_ready(timeout=max(60.0, window_s))
    ready_s = time.monotonic() - t0
    c0 = cpu_seconds(d.proc.pid)
    last, last_t = requests(d.port), time.monotonic()
    last_write_t = None
    while time.monotonic() - t0 < window_s:
        time.sleep(min(1.0, max(0.0, window_s - (time.monotonic() - t0))))
        now = requests(d.port)
        if now != last:
            if sum(n for (v, _r), n in now.items() if v in WRITES) != sum(n for (v, _r), n in last.items() if v in WRITES):
                last_write_t = time.monotonic()
            last, last_t = now, time.monotonic()
    sent = requests(d.port)
    cpu = cpu_seconds(d.proc.pid)
    after = world(admin, ns)
    out = {"restart": how + (" fresh journal" if fresh_journal else " on its journal"), "ready_s": round(ready_s, 2),
           "last_request_s": round(last_t - t0, 1),
           "last_write_s": None if last_write_t is None else round(last_write_t - t0, 1),
           "window_s": window_s, "requests": {f"{v} {r}": n for (v, r), n in sorted(sent.items())},
           "writes": sum(n for (v, _r), n in sent.items() if v in WRITES),
           "cpu_s": round(cpu, 2), "cpu_s_after_ready": round(cpu - c0, 2), **changed(before, after)}
    return d, out


# --------------------------------------------------------------------------------------------
# kopf's restart over the same Sessions
# --------------------------------------------------------------------------------------------
def verb_flow_schemas(who: str) -> tuple[list[dict], dict[str, str]]:
    """FlowSchemas that make the apiserver count ``who``'s requests (ServiceAccount ``kfold-bench/<who>``)
    by verb and resource: one per (verb, resource) of ``PEER_RESOURCES``, matched before
    scripts/bench_peer.py's per-identity one (precedence 190 < 200), which counts the rest
    ("other"). Returns the documents and ``flow_schema name -> "verb resource"``."""
    docs, names = [], {}
    for verb in VERBS:
        for resource in PEER_RESOURCES:
            name = f"kfold-bench-{who}-{verb}-{resource.replace('/', '.')}"
            names[name] = f"{verb} {resource}"
            docs.append({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": name},
                         "spec": {"priorityLevelConfiguration": {"name": LEVEL}, "matchingPrecedence": 190,
                                  "distinguisherMethod": {"type": "ByUser"},
                                  "rules": [{"subjects": [{"kind": "ServiceAccount",
                                                           "serviceAccount": {"name": who, "namespace": BENCH_NS}}],
                                             "resourceRules": [{"verbs": [verb], "apiGroups": ["*"], "resources": [resource],
                                                                "clusterScope": True, "namespaces": ["*"]}]}]}})
    names[f"kfold-bench-{who}"] = "other"
    return docs, names


def by_verb(dispatched: dict[str, float], names: dict[str, str]) -> dict[str, float]:
    """``flow_schema -> count`` (``apf_dispatched``) as ``"verb resource" -> count`` for ``names``."""
    out: dict[str, float] = {}
    for schema, n in dispatched.items():
        if schema in names and n:
            out[names[schema]] = out.get(names[schema], 0.0) + n
    return out


def writes_of(sent: dict[str, float]) -> float:
    return sum(n for key, n in sent.items() if key.split(" ", 1)[0] in WRITES)


def peer_start(c: Contestant, how: str, window_s: float, admin: Any, ns: str, names: dict[str, str]) -> dict[str, Any]:
    """Stop the peer ``how`` (SIGTERM, SIGKILL, or "first start": not running), start it, and measure
    it over ``window_s`` and on until it has sent nothing for ``QUIET_S``."""
    before = world(admin, ns)
    stop_s = None
    if c.proc is not None and c.proc.poll() is None:
        t = time.monotonic()
        if how == "SIGTERM":
            c.stop()
        else:
            c.proc.kill()
            c.proc.wait()
        stop_s = round(time.monotonic() - t, 2)
    r0 = by_verb(apf_dispatched(admin), names)
    t0 = time.monotonic()
    c.start()   # returns once kopf's liveness endpoint answers (and 1 s more)
    up_s = time.monotonic() - t0
    last, last_t, in_window = r0, t0, None
    last_write_t = None
    cpu_window = None
    while True:
        time.sleep(1.0)
        now = by_verb(apf_dispatched(admin), names)
        t = time.monotonic()
        if now != last:
            if writes_of(now) != writes_of(last):
                last_write_t = t
            last, last_t = now, t
        if in_window is None and t - t0 >= window_s:
            in_window, cpu_window = minus(now, r0), cpu_seconds(c.proc.pid)
        if in_window is not None and t - last_t >= QUIET_S:
            break
        if t - t0 >= PEER_CAP_S:
            break
        if c.proc.poll() is not None:
            raise RuntimeError(f"kopf exited {c.proc.returncode}: {c.log.read_text()[-2000:]}")
    total = minus(last, r0)
    cpu = cpu_seconds(c.proc.pid)
    return {"restart": {"first start": "first start over kfold's Sessions"}.get(how, f"{how} on its annotations"),
            "stop_s": stop_s, "up_s": round(up_s, 2), "last_request_s": round(last_t - t0, 1),
            "last_write_s": None if last_write_t is None else round(last_write_t - t0, 1),
            "idle": time.monotonic() - last_t >= QUIET_S, "window_s": window_s,
            "requests": dict(sorted(in_window.items())), "writes": writes_of(in_window),
            "requests_to_idle": dict(sorted(total.items())), "writes_to_idle": writes_of(total),
            "cpu_s": round(cpu_window, 2), "cpu_s_to_idle": round(cpu, 2), **changed(before, world(admin, ns))}


def kopf_restarts(admin: Any, cp: dict, ns: str, window_s: float, work: Path) -> list[dict[str, Any]]:
    """kopf (scripts/peer_kopf_async.py) over the Sessions in ``ns``, the only operator running:
    its first start, then a SIGTERM and a SIGKILL restart, each measured by ``peer_start``."""
    ensure_bench_extra()
    install_peers(admin)   # ServiceAccounts, the peers' RBAC, the bench's priority level and FlowSchemas
    docs, names = verb_flow_schemas("kopf")
    apply(admin, docs)
    time.sleep(1.5)        # APF configuration picked up
    kubeconfig = sa_kubeconfig(admin, cp, "kopf", work / "kopf.kubeconfig")
    c = Contestant("kopf-async", ns, kubeconfig, work)
    out = []
    try:
        for how in ("first start", "SIGTERM", "SIGKILL"):
            r = peer_start(c, how, window_s, admin, ns, names)
            out.append(r)
            print(json.dumps(r), flush=True)
    finally:
        c.stop()
        remove_flow_schemas(admin, docs)
    return out


def remove_flow_schemas(admin: Any, docs: list[dict]) -> None:
    """Delete the FlowSchemas ``verb_flow_schemas`` made (bench_peer's per-identity ones stay)."""
    api = client.FlowcontrolApiserverV1Api(admin)
    for doc in docs:
        try:
            api.delete_flow_schema(doc["metadata"]["name"])
        except client.ApiException as exc:
            if exc.status != 404:
                print(f"bench_restart: WARNING could not delete FlowSchema {doc['metadata']['name']}: {exc.status}",
                      file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rest", type=float, default=600.0, help="seconds at rest (default 600)")
    ap.add_argument("--window", type=float, default=60.0, help="seconds measured after each restart (default 60)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--peers", nargs="*", default=[], choices=PEERS,
                    help="after kfold's restarts, stop kfold and measure these operators' restarts over the same Sessions")
    a = ap.parse_args(argv)
    cp = ensure_controlplane(build=False)
    from kubernetes import config as kconfig
    cfg = client.Configuration()
    kconfig.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
    cfg.connection_pool_maxsize = 32
    admin = client.ApiClient(cfg)
    install_crds(admin)   # a control plane just started has none
    time.sleep(1.0)       # CRD establishment
    nodes = ensure_capacity(admin, a.n)
    ns = f"restart-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
    co = client.CustomObjectsApi(admin)
    result: dict[str, Any] = {"n": a.n, "control_plane": control_plane_flags(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "load_average_at_start": os.getloadavg()}
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        journal = Path(tmp) / "journal.db"
        d = Daemon(Path(tmp), cp["kubeconfig"], [ns], {"journal": {"path": str(journal)}})
        try:
            d.start()
            t0 = time.monotonic()
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: co.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, session(f"r{i:05d}", ns)),
                              range(a.n)))
            while True:
                phases = world(admin, ns)["phases"]
                if sum(p == "Ready" for p in phases.values()) == a.n:
                    break
                if time.monotonic() - t0 > 120 + a.n * 0.5:
                    raise SystemExit(f"bench_restart: not all Ready after {time.monotonic() - t0:.0f} s")
                time.sleep(2)
            result["all_ready_s"] = round(time.monotonic() - t0, 1)
            time.sleep(10)   # the last status echoes and Events land
            # -- at rest
            r0, c0, j0, w0 = requests(d.port), cpu_seconds(d.proc.pid), journal_bytes(journal), world(admin, ns)
            seq0, _ = journal_rows(journal)
            t_rest = time.monotonic()
            time.sleep(a.rest)
            took = time.monotonic() - t_rest
            rest = minus(requests(d.port), r0)
            per_min = {f"{v} {r}": round(n * 60 / took, 2) for (v, r), n in sorted(rest.items())}
            result["at_rest"] = {
                "seconds": round(took), "requests_per_minute": per_min,
                "requests_per_minute_beyond_watches": round(sum(n for (v, _r), n in rest.items() if v != "watch") * 60 / took, 2),
                "cpu_cores": round((cpu_seconds(d.proc.pid) - c0) / took, 4),
                "journal_bytes_per_hour": round((journal_bytes(journal) - j0) * 3600 / took),
                "journal_rows": journal_rows(journal, seq0)[1],
                **changed(w0, world(admin, ns))}
            # -- restarts
            result["restarts"] = []
            for how, fresh in (("SIGTERM", None), ("SIGKILL", None), ("SIGKILL", Path(tmp) / "fresh.db")):
                d, out = restart(d, how, a.window, admin, ns, fresh)
                result["restarts"].append(out)
                print(json.dumps(out), flush=True)
                ok = ok and out["pod_uids_changed"] == 0 and out["not_ready"] == 0
            if "kopf-async" in a.peers:
                d.stop()   # kopf is the only operator over the Sessions
                result["kopf-async"] = kopf_restarts(admin, cp, ns, a.window, Path(tmp))
                ok = ok and all(r["pod_uids_changed"] == 0 and r["not_ready"] == 0 for r in result["kopf-async"])
        finally:
            d.stop()
            discard_namespace(admin, ns)
            remove_nodes(admin, nodes)
    result["load_average_at_end"] = os.getloadavg()
    result["ok"] = ok
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
