"""kfold side by side with a kopf operator and a floor, on the real control plane (issue 13).

    bash scripts/controlplane.sh start
    .venv/bin/python scripts/bench_peer.py                       # N=100 and N=300, 3 rounds each
    .venv/bin/python scripts/bench_peer.py --n 100 300 1000 3000 --json curve.json --md curve.md
    .venv/bin/python scripts/bench_plot.py curve.json -o docs/images/bench-curve.svg
                    # the cost curve (issue 38), on a quiet machine, the control plane sized for it:
                    # KFOLD_APISERVER_ARGS='--max-requests-inflight=800 --max-mutating-requests-inflight=400'
                    # KFOLD_ETCD_ARGS='--quota-backend-bytes=8589934592' bash scripts/controlplane.sh start
    .venv/bin/python scripts/bench_peer.py --n 20 --rounds 1     # a quick check
    .venv/bin/python scripts/bench_peer.py --n 100 --profile profile   # + py-spy of kfold
    .venv/bin/python scripts/bench_peer.py --n 300 --rounds 1 --contestants kfold --loop-profile /tmp/loop
                                                               # kfold's loop CPU by callback (exact)
    .venv/bin/python scripts/bench_peer.py --n 300 --rounds 5 --pin 0:1
                    # the control plane (and the bench's clients) on CPU 0, each contestant on CPU 1:
                    # an operator on a node of its own, as in production, instead of sharing the
                    # control plane's cores (the default, and the setting the issue measured in)

The bench extra (kopf, kubernetes_asyncio, py-spy, matplotlib) is installed into this venv when missing:
``pip install -c constraints.txt -e '.[bench]'``.

Contestants, each a real process under its own ServiceAccount, in a fresh namespace per run (by
default kfold, kopf-async, kopf-sync and floor; the others on request with ``--contestants``):
- ``kfold``       ``kfold run`` with a config file, at its defaults (the home client unpaced) and
                  without ``base_domain``: cluster-internal sessions, a Service and no Ingress each,
                  the job the kopf operator and the floor do;
- ``kfold-ingress`` the same with ``base_domain`` set: a Service and an Ingress per Session (what
                  every run before this option measured as ``kfold``);
- ``kfold-warnings`` ``kfold`` with ``events.level: Warning``: no Normal ``Ready`` Event per
                  Session, the Events kopf-async posts (its ``settings.posting.level`` is WARNING);
- ``kfold-50qps`` ``kfold`` with ``cluster.qps: 50, burst: 100`` (client-go's pacing, kfold's
                  home default before issue 13);
- ``kopf-async``  scripts/peer_kopf_async.py under ``kopf run --standalone``: async handlers with
                  kubernetes_asyncio, kopf's settings tuned (its docstring says which and why): the
                  peer the ratios (``kfold/kopf-async``) compare kfold with; ``kopf`` means this one;
- ``kopf-sync``   scripts/peer_kopf_operator.py the same way: sync handlers with the sync client
                  through kopf's thread pool (the peer before issue 38), a second row;
- ``kfold-threadsN`` (on request, ``--contestants``) kfold at its defaults but ``executor.threads: N``;
- ``kfold-base``  (on request, with ``--baseline CHECKOUT``) kfold at its defaults, its code taken from
                  another checkout (e.g. the main branch): a before/after comparison in one run;
                  with ``base_domain`` set only if that checkout requires it (older ones do:
                  then compare it with ``kfold-ingress``);
- ``floor``       this script's ``floor`` subcommand: one Session watch, one pod watch, and only
                  the requests the job needs (finalizer + pod create; Service + status once the pod
                  is Running and Ready; pod delete + finalizer release), 64 threads, no reconciling.
The pod is the same for every contestant: the one kfold makes of the bench's Session spec (a
``workspace`` container, an ``app-web`` container with port 8080, one ``emptyDir`` mounted by
both). Until 2026-12-01 the kopf operator and the floor made a one-container pod without the
volume: ~0.7 s less to all Ready at N=300 for each of them on this machine (same-hour runs).
Rounds interleave the contestants (the order rotates each round); each figure is the median of
the rounds. Enough kwok nodes for the largest N: the bench adds Nodes ``kfold-bench-node-*``
(label ``kfold.dev/bench-node=true``, 110 pods each) until every pod fits with 20 to spare, and
deletes the ones it added at the end (``--keep-nodes`` keeps them). The control plane's sizing
flags (kube-apiserver's inflight limits, etcd's quota) are read from its processes and reported;
from N=1,000 on the bench warns when they are at their defaults. Per run: N Sessions created at once by 16 threads (admin identity, not counted),
then all deleted at once. After each run the bench deletes its namespace and waits until it is
gone and the control plane is quiet again (apiserver + etcd + controller manager + kwok under 0.15
core over a second; ``settle``) before the next contestant starts: a namespace's deletion keeps the
control plane busy 6-10 s after the run (Services, their ClusterIPs, EndpointSlices, Endpoints,
Events), and until 2026-12-01 the next run started 2 s later and paid for part of it, the more so
after a contestant that left its Services to the namespace's deletion (the floor).

Measured:
- time to all Ready, Ready latency p50/p99 (create call sent -> status.phase Ready seen by a watch);
- teardown: delete calls sent -> every Session gone / no pod left in the namespace;
- operator CPU per Session: utime+stime of the operator's process tree (/proc), start of creates to
  end of teardown;
- operator memory: its peak resident set (VmHWM), and per Session the peak above what the started,
  idle operator held (VmRSS just before the creates) divided by N;
- requests per Session counted BY THE APISERVER: a FlowSchema per contestant identity, all mapped
  to a priority level of the bench's own, and the delta of
  ``apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}`` (watches included; the
  operator's start-up lists and watches happen before the first snapshot and are not counted);
- apiserver / etcd CPU per run (their /proc, pids in the instance's run/*.pid, `controlplane.sh env`). The control plane
  is shared: other processes' requests land in these too, and the machine's load is reported;
- kfold only, from its /metrics: event -> effect issued p50/p99 (histogram quantiles), and what its
  client sent by verb/resource/status (``kfold_client_requests_total``), per Session.
Output: a Markdown table per N and one over every N (the curve; stdout and --md) and JSON (--json:
every run, the medians, and the curve's rows that scripts/bench_plot.py draws).
"""
from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.e2e.conftest import apply, free_port, install_crds  # noqa: E402  (idempotent create; a free local port; CRDs created or updated)
from tests.e2e.controlplane import controlplane_info  # noqa: E402
GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
BENCH_NS = "kfold-bench"
LEVEL = "kfold-bench"
FINALIZER = "kfold.dev/teardown"
MANAGED = "app.kubernetes.io/managed-by=kfold"
CONTESTANTS = ("kfold", "kfold-ingress", "kfold-warnings", "kfold-50qps", "kopf-async", "kopf-sync", "floor")
DEFAULT_CONTESTANTS = ("kfold", "kopf-async", "kopf-sync", "floor")
PEER = "kopf-async"        # the kopf operator the ratios compare kfold with
ALIASES = {"kopf": PEER}   # command lines from before issue 38
PEER_SCRIPTS = {"kopf-async": "peer_kopf_async.py", "kopf-sync": "peer_kopf_operator.py"}
PODS_PER_NODE = 110        # a kwok node's pod capacity (scripts/controlplane.sh's nodes and the bench's)
PROFILE_RATE = 100   # py-spy samples per second (``--profile-rate``)
LOOP_PROFILE = ""    # ``--loop-profile``: path prefix for the loop's CPU by callback
TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------
# set-up
# --------------------------------------------------------------------------------------------
def ensure_bench_extra() -> None:
    try:
        import kopf  # noqa: F401
        import kubernetes_asyncio  # noqa: F401
        return
    except ImportError:
        pass
    print("bench_peer: installing the bench extra (kopf, kubernetes_asyncio, py-spy, matplotlib) into this venv",
          file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"),
                    "-e", f"{REPO}[bench]"], check=True)


def admin_client(kubeconfig: str):
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = 32
    return client.ApiClient(cfg)


def install(api) -> None:
    """CRDs, the bench namespace, one ServiceAccount per contestant, the peers' RBAC, and the
    FlowSchemas that make the apiserver count each identity's requests."""
    install_crds(api)   # updated too: a control plane reused from an older checkout keeps its CRDs otherwise
    apply(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BENCH_NS}}])
    apply(api, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": who, "namespace": BENCH_NS}}
                for who in ("kfold", "kopf", "floor")])
    rules = [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch", "patch", "update"]},
        {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "create", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    ]
    apply(api, [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": "kfold-bench-peer"}, "rules": rules}])
    apply(api, [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": f"kfold-bench-{who}"},
                 "subjects": [{"kind": "ServiceAccount", "name": who, "namespace": BENCH_NS}],
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kfold-bench-peer"}}
                for who in ("kopf", "floor")])
    fc = "flowcontrol.apiserver.k8s.io/v1"
    apply(api, [{"apiVersion": fc, "kind": "PriorityLevelConfiguration", "metadata": {"name": LEVEL},
                 "spec": {"type": "Limited", "limited": {
                     "nominalConcurrencyShares": 100, "lendablePercent": 0,
                     "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}}}}}])
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}
    apply(api, [{"apiVersion": fc, "kind": "FlowSchema", "metadata": {"name": flow_schema(who)},
                 "spec": {"priorityLevelConfiguration": {"name": LEVEL}, "matchingPrecedence": 200,
                          "distinguisherMethod": {"type": "ByUser"},
                          "rules": [{"subjects": [{"kind": "ServiceAccount",
                                                   "serviceAccount": {"name": who, "namespace": BENCH_NS}}],
                                     "resourceRules": [everything],
                                     "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
                for who in ("kfold", "kopf", "floor")])
    time.sleep(1.5)   # CRDs established, APF configuration picked up


def kfold_rbac(ns: str) -> list[dict]:
    """kfold's own least-privilege RBAC (``kfold manifests``) for the bench identity; the cluster-wide
    pieces renamed so they never collide with the e2e tests' ``kfold`` ClusterRoleBinding."""
    from kfold.daemon.manifests import rbac
    out = []
    for doc in rbac(BENCH_NS, [ns]):
        doc = json.loads(json.dumps(doc))
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"]["name"] = "kfold-bench-kfold"
            if doc["kind"] == "ClusterRoleBinding":
                doc["roleRef"]["name"] = "kfold-bench-kfold"
        out.append(doc)
    return out


def flow_schema(who: str) -> str:
    return f"kfold-bench-{who}"


BENCH_NODE_LABEL = "kfold.dev/bench-node"


def ensure_capacity(api, pods: int) -> list[str]:
    """Enough pod slots on the kwok nodes for ``pods`` more (and 20 spare), at ``PODS_PER_NODE`` per
    node: adds kwok Nodes ``kfold-bench-node-*`` labelled ``kfold.dev/bench-node=true`` and returns
    the names added (``remove_nodes`` deletes them after the run unless ``--keep-nodes``)."""
    from kubernetes import client
    core = client.CoreV1Api(api)
    nodes = [n for n in core.list_node().items if (n.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake"]
    capacity = sum(int(n.status.allocatable.get("pods", "0")) for n in nodes)
    used = len([p for p in core.list_pod_for_all_namespaces(field_selector="status.phase!=Succeeded,status.phase!=Failed").items
                if p.spec.node_name])
    added = []
    i = 1
    while capacity - used < pods + 20:
        name = f"kfold-bench-node-{i}"
        i += 1
        if any(n.metadata.name == name for n in nodes):
            continue
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", BENCH_NODE_LABEL: "true"}},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": str(PODS_PER_NODE)},
                       "capacity": {"cpu": "32", "memory": "256Gi", "pods": str(PODS_PER_NODE)},
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "fake",
                                    **dict.fromkeys(("bootID", "containerRuntimeVersion", "kernelVersion",
                                                     "kubeProxyVersion", "machineID", "osImage", "systemUUID"), "")}}})
        capacity += PODS_PER_NODE
        added.append(name)
    if added:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready = [n for n in core.list_node().items if n.metadata.name in added and any(
                c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))]
            if len(ready) == len(added):
                break
            time.sleep(0.5)
    return added


def remove_nodes(api, names: list[str]) -> None:
    """Delete the kwok Nodes ``ensure_capacity`` added (their Leases go with them: owned by the Node)."""
    from kubernetes import client
    core = client.CoreV1Api(api)
    for name in names:
        try:
            core.delete_node(name)
        except client.ApiException as exc:
            if exc.status != 404:
                print(f"bench_peer: WARNING could not delete node {name}: {exc.status} {exc.reason}", file=sys.stderr)


SIZED_FROM = 1000   # from this N on, the bench warns when the control plane runs at its default sizing


def control_plane_flags() -> dict[str, list[str]]:
    """The flags kube-apiserver and etcd run with (their /proc cmdline), for the report: what the
    control plane was sized with (``KFOLD_APISERVER_ARGS`` / ``KFOLD_ETCD_ARGS`` of
    scripts/controlplane.sh). Only the sizing flags are kept."""
    keep = ("--max-requests-inflight", "--max-mutating-requests-inflight", "--watch-cache", "--quota-backend-bytes",
            "--default-watch-cache-size", "--etcd-compaction-interval", "--auto-compaction", "--snapshot-count")
    out: dict[str, list[str]] = {}
    for name in ("kube-apiserver", "etcd"):
        pid = component_pid(name)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0") if pid else []
        except OSError:
            argv = []
        out[name] = [a for a in argv if a.startswith(keep)]
    return out


def warn_unsized(flags: dict[str, list[str]], n: int) -> None:
    sized = any(a.startswith("--max-requests-inflight") for a in flags.get("kube-apiserver", []))
    if n >= SIZED_FROM and not sized:
        print(f"bench_peer: WARNING N={n} on a control plane at its default sizing (kube-apiserver "
              "--max-requests-inflight=400, etcd's 2 GiB quota); for the curve start it with e.g. "
              "KFOLD_APISERVER_ARGS='--max-requests-inflight=800 --max-mutating-requests-inflight=400' "
              "KFOLD_ETCD_ARGS='--quota-backend-bytes=8589934592' bash scripts/controlplane.sh start",
              file=sys.stderr)


def sa_kubeconfig(api, cp: dict, who: str, path: Path) -> Path:
    from kubernetes import client
    import yaml
    tr = client.CoreV1Api(api).create_namespaced_service_account_token(
        who, BENCH_NS, {"spec": {"expirationSeconds": 7200}})
    ca = base64.b64encode(Path(cp["ca"]).read_bytes()).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": who,
        "clusters": [{"name": "bench", "cluster": {"server": cp["server"], "certificate-authority-data": ca}}],
        "users": [{"name": who, "user": {"token": tr.status.token}}],
        "contexts": [{"name": who, "context": {"cluster": "bench", "user": who}}]}))
    return path


def baseline_needs_domain() -> bool:
    """Does the ``--baseline`` checkout require ``base_domain`` (older than it being optional)?
    Then its kfold runs with one, an Ingress per Session: compare it with ``kfold-ingress``."""
    root = Path(os.environ["KFOLD_BENCH_BASELINE"]) / "kfold"
    config = next((p for p in (root / "daemon" / "config.py", root / "config.py") if p.exists()), root / "config.py")
    return "\n    base_domain: str\n" in config.read_text()


@functools.cache
def controlplane() -> dict:
    """The control plane instance this environment's ports name (``controlplane.sh env``)."""
    out = subprocess.run(["bash", str(REPO / "scripts" / "controlplane.sh"), "env"], check=True,
                         capture_output=True, text=True).stdout
    return controlplane_info(out)


# --------------------------------------------------------------------------------------------
# /proc and /metrics
# --------------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """utime+stime of ``pid`` and its live descendants."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(d.name))
            except (OSError, IndexError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            continue
        todo += children.get(p, [])
    return total / TICK


def cpu_by_thread(pid: int) -> dict[str, float]:
    """utime and stime of ``pid``'s live threads by OS thread name (``comm``; the main thread, which
    runs kfold's event loop, as ``loop``): ``{"loop user": s, "loop sys": s, ...}``. Threads that
    exited meanwhile are not counted."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = "loop" if task.name == str(pid) else (task / "comm").read_text().strip()
        except (OSError, IndexError):
            continue
        for what, field in (("user", 11), ("sys", 12)):
            out[f"{name} {what}"] = out.get(f"{name} {what}", 0.0) + int(fields[field]) / TICK
    return out


def loop_schedstat(pid: int) -> tuple[int, int, int]:
    """The main thread's (kfold's and kopf's event loop) ``/proc/PID/task/PID/schedstat``: ns run
    on a core, ns spent runnable but waiting for one (the run queue), and scheduling slices; zeros
    where the kernel does not keep it (no CONFIG_SCHEDSTATS)."""
    try:
        run, wait, slices = (int(x) for x in Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[:3])
        return run, wait, slices
    except (OSError, ValueError):
        return 0, 0, 0


def peak_rss_mb(pid: int, field: str = "VmHWM") -> float | None:
    """``pid``'s resident set high-water mark (``VmHWM`` in /proc/PID/status), in MB."""
    try:
        m = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) / 1024 if m else None


def rss_mb(pid: int) -> float | None:
    """``pid``'s resident set now (``VmRSS``), in MB."""
    return peak_rss_mb(pid, "VmRSS")


def identity(who: str) -> str:
    """The ServiceAccount (and FlowSchema) a contestant runs as: one per kind of operator."""
    return "kfold" if who.startswith("kfold") else "kopf" if who in PEER_SCRIPTS else who


def apiserver_log() -> Path:
    return Path(controlplane()["dir"]) / "logs" / "kube-apiserver.log"


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def clusterip_allocations(ns: str, t0_epoch: float, offset: int = 0) -> dict[str, float | None]:
    """When the apiserver allocated each of ``ns``'s Service ClusterIPs, in s after ``t0_epoch``
    (its own log line ``"allocated clusterIPs" service="NS/NAME"``, klog's local time to the us).
    kube-apiserver >= 1.33 allocates a ClusterIP under one process-wide mutex held across the
    IPAddress create (``MetaAllocator.AllocateNextService`` in
    pkg/registry/core/service/ipallocator/cidrallocator.go), so the Service creates of every
    client are answered one at a time: the first and last allocation and the median gap between
    two show how much of "time to all Ready" that queue is, for each contestant alike. Read from
    ``offset`` (the log's size when the round began; from the start if it has shrunk since)."""
    log = apiserver_log()
    pat = re.compile(r'^I(\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+)\s+\d+ alloc\.go:\d+\] "allocated clusterIPs" service="'
                     + re.escape(ns) + '/')
    year = time.localtime(t0_epoch).tm_year
    at: list[float] = []
    try:
        with log.open("rb") as f:   # bytes: a text file may only seek to what its tell() gave
            f.seek(offset if offset <= log_size(log) else 0)
            for raw in f:
                line = raw.decode(errors="replace")
                if ns in line and (m := pat.match(line)):
                    mo, d, hh, mm, ss = m.groups()
                    whole = time.mktime((year, int(mo), int(d), int(hh), int(mm), 0, 0, 0, -1))
                    at.append(whole + float(ss) - t0_epoch)
    except OSError:
        return {"clusterip_first_s": None, "clusterip_last_s": None, "clusterip_gap_p50_ms": None}
    at.sort()
    gaps = [b - a for a, b in zip(at, at[1:])]
    return {"clusterip_first_s": at[0] if at else None, "clusterip_last_s": at[-1] if at else None,
            "clusterip_gap_p50_ms": 1000 * statistics.median(gaps) if gaps else None}


def component_pid(name: str) -> int | None:
    try:
        return int((Path(controlplane()["dir"]) / "run" / f"{name}.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def cores_used(names: tuple[str, ...], seconds: float) -> float:
    """CPU of the named control plane components (their process trees) per second of wall time,
    measured over ``seconds``."""
    pids = [p for p in (component_pid(n) for n in names) if p]
    before, start = sum(cpu_seconds(p) for p in pids), time.monotonic()
    time.sleep(seconds)
    return (sum(cpu_seconds(p) for p in pids) - before) / (time.monotonic() - start)


def idle_control_plane(api, seconds: float = 5.0) -> dict:
    """The control plane's own load before a run, with nothing of the bench running: CPU of
    kube-apiserver + etcd + kube-controller-manager per second of wall time, and namespaces stuck
    Terminating (a Session whose finalizer's holder is gone keeps its namespace retried forever:
    left by crashed tests, they once held these three at ~0.7 core while idle, a load every
    contestant then paid). Printed, kept in the JSON, and a warning when it is not quiet."""
    from kubernetes import client
    cores = cores_used(("kube-apiserver", "etcd", "kube-controller-manager"), seconds)
    stuck = [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items if ns.status.phase == "Terminating"]
    out = {"idle_cores": round(cores, 2), "terminating_namespaces": len(stuck)}
    print(f"bench_peer: control plane while idle: {cores:.2f} core (apiserver + etcd + controller manager), "
          f"{len(stuck)} namespaces Terminating", file=sys.stderr)
    if cores > 0.25 or stuck:
        print("bench_peer: WARNING the control plane is not quiet; the figures carry its load (namespaces "
              f"stuck Terminating: {', '.join(stuck[:5])}{' ...' if len(stuck) > 5 else ''}; strip the "
              "finalizers of their Sessions, or `scripts/controlplane.sh stop --wipe` and start again)", file=sys.stderr)
    return out


def settle(api, ns: str, gone_timeout: float = 240.0, quiet_timeout: float = 60.0,
           quiet_cores: float = 0.15, orphan_after: float = 30.0) -> dict[str, float]:
    """After a round: wait until its namespace is gone and the control plane is quiet again, so the
    next contestant's round does not pay for this one's clean-up. Deleting a namespace leaves the
    apiserver and its controllers work to do after the bench stopped looking (Services and their
    ClusterIPs released, EndpointSlices, Endpoints and Events deleted), and a ClusterIP is released
    through the same allocator that the next round's Service creates wait for. Returns the seconds
    waited for each, and the control plane's load (cores) over the last second waited.
    A run that failed can leave Sessions whose finalizer nobody will release (its operator is
    stopped by now), which would hold the namespace Terminating for good: after
    ``orphan_after`` s their finalizers are stripped, with a warning."""
    from kubernetes import client
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    t0, stripped = time.monotonic(), False
    while time.monotonic() - t0 < gone_timeout:
        try:
            core.read_namespace(ns)
        except client.ApiException as exc:
            if exc.status == 404:
                break
        if not stripped and time.monotonic() - t0 > orphan_after:
            stripped = True
            held = [x["metadata"]["name"] for x in co.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
                    if x["metadata"].get("finalizers")]
            if held:
                print(f"bench_peer: WARNING {len(held)} Sessions in {ns} still hold a finalizer after the run; "
                      "stripping them so the namespace can go", file=sys.stderr)
            for name in held:
                try:
                    co.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, {"metadata": {"finalizers": None}})
                except client.ApiException:
                    pass
        time.sleep(0.25)
    gone = time.monotonic() - t0
    t1, cores = time.monotonic(), float("nan")
    while time.monotonic() - t1 < quiet_timeout:
        cores = cores_used(("kube-apiserver", "etcd", "kube-controller-manager", "kwok"), 1.0)
        if cores < quiet_cores:
            break
    return {"cleanup_namespace_s": round(gone, 2), "cleanup_quiet_s": round(time.monotonic() - t1, 2),
            "cleanup_cores": round(cores, 2)}


CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")
PIN: dict[str, set[int]] = {}   # "control_plane" / "contestants" -> CPUs (--pin)


def pin_control_plane(cpus: set[int] | None) -> None:
    """Every thread of the control plane's processes onto ``cpus`` (None: every CPU again). Threads
    made later inherit their creator's affinity, so pinning the existing ones pins the process."""
    every = set(range(os.cpu_count() or 1))
    for name in CONTROL_PLANE:
        pid = component_pid(name)
        for task in Path(f"/proc/{pid}/task").glob("*") if pid else ():
            try:
                os.sched_setaffinity(int(task.name), cpus or every)
            except OSError:   # a thread that just ended
                pass


def parse_pin(text: str) -> dict[str, set[int]]:
    """``--pin 0:1``: the control plane (and the bench's own Session creates and watch) on CPU 0,
    each contestant on CPU 1; lists as ``0,1:2,3``."""
    try:
        plane, contestants = text.split(":")
        out = {"control_plane": {int(c) for c in plane.split(",")}, "contestants": {int(c) for c in contestants.split(",")}}
    except ValueError:
        raise SystemExit(f"bench_peer: --pin {text!r}: expected CONTROL_PLANE_CPUS:CONTESTANT_CPUS, e.g. 0:1") from None
    if out["control_plane"] & out["contestants"]:
        raise SystemExit(f"bench_peer: --pin {text!r}: the two CPU sets overlap")
    return out


def apf_dispatched(api) -> dict[str, float]:
    """``flow_schema -> dispatched requests`` from the apiserver's /metrics."""
    resp = api.call_api("GET", api.configuration.host + "/metrics")
    text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_flowcontrol_dispatched_requests_total{"):
            m = re.search(r'flow_schema="([^"]+)"', line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except Exception:
        return ""


def histogram(text: str, name: str, held: str | None = None) -> dict[float, float]:
    """Cumulative buckets of ``name``, summed over its ``held`` label unless one is given."""
    out: dict[float, float] = {}
    for m in re.finditer(rf'^{name}_bucket\{{(?:\w+="([^"]+)",)?le="([^"]+)"\}} (\S+)$', text, re.M):
        if held is not None and m.group(1) != held:
            continue
        le = float("inf") if m.group(2) == "+Inf" else float(m.group(2))
        out[le] = out.get(le, 0.0) + float(m.group(3))
    return out


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """Prometheus' histogram_quantile: linear inside the bucket holding the q-th observation."""
    if not buckets:
        return None
    edges = sorted(buckets)
    total = buckets[edges[-1]]
    if total <= 0:
        return None
    rank, prev_edge, prev_count = q * total, 0.0, 0.0
    for e in edges:
        if buckets[e] >= rank:
            if e == float("inf"):
                return float("inf")      # beyond the last bucket: shown as "> <last edge>"
            width = buckets[e] - prev_count
            return prev_edge + (e - prev_edge) * ((rank - prev_count) / width if width else 1.0)
        prev_edge, prev_count = e, buckets[e]
    return prev_edge


def client_requests(text: str) -> dict[str, float]:
    """kfold's ``kfold_client_requests_total`` as ``"verb resource code" -> count``, summed over
    clusters; labels are read by name (prometheus_client prints them sorted, not as declared)."""
    out: dict[str, float] = {}
    for labels, n in re.findall(r'^kfold_client_requests_total\{([^}]*)\} (\S+)$', text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        key = f"{lab.get('verb', '')} {lab.get('resource', '')} {lab.get('code', '')}"
        out[key] = out.get(key, 0.0) + float(n)
    return out


def minus(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


# --------------------------------------------------------------------------------------------
# contestants as processes
# --------------------------------------------------------------------------------------------
class Contestant:
    def __init__(self, name: str, ns: str, kubeconfig: Path, work: Path):
        self.name, self.ns, self.kubeconfig, self.work = name, ns, kubeconfig, work
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = work / f"{name}.log"

    @property
    def identity(self) -> str:
        return identity(self.name)

    def start(self) -> None:
        import yaml
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1"}
        if self.name.startswith("kfold"):
            cluster = {"name": "local", "kubeconfig": str(self.kubeconfig)}
            if self.name == "kfold-50qps":
                cluster.update(qps=50, burst=100)
            threads = re.fullmatch(r"kfold-threads(\d+)", self.name)
            cfg = {"executor": {"threads": int(threads.group(1))}} if threads else {}
            cfg |= {"cluster": cluster, "namespaces": [self.ns],
                   "journal": {"path": str(self.work / "journal.db")},
                   "log": {"format": "plain", "level": "warning"}, "http": {"listen": f"127.0.0.1:{self.port}"}}
            if self.name == "kfold-warnings":
                cfg["events"] = {"level": "Warning"}   # the Events kopf-async posts: warnings only
            if self.name == "kfold-ingress" or (self.name == "kfold-base" and baseline_needs_domain()):
                cfg["base_domain"] = "sessions.bench"   # endpoints with an Ingress each (kopf makes none)
            (self.work / "config.yaml").write_text(yaml.safe_dump(cfg))
            cmd = [sys.executable, "-m", "kfold", "run", "--config", str(self.work / "config.yaml")]
        elif self.name in PEER_SCRIPTS:
            cmd = [sys.executable, "-m", "kopf", "run", str(REPO / "scripts" / PEER_SCRIPTS[self.name]),
                   "--standalone", "--namespace", self.ns, "--quiet",
                   f"--liveness=http://127.0.0.1:{self.port}/healthz"]
        else:
            cmd = [sys.executable, str(Path(__file__).resolve()), "floor", "--namespace", self.ns,
                   "--ready-file", str(self.work / "floor.ready")]
        cwd = REPO
        if self.name == "kfold-base":   # ``python -m kfold`` imports kfold from the working directory
            cwd = Path(os.environ["KFOLD_BENCH_BASELINE"])
            env["PYTHONPATH"] = str(cwd)
        if LOOP_PROFILE and self.name.startswith("kfold"):   # scripts/loopprof/sitecustomize.py
            env["KFOLD_LOOP_PROFILE"] = f"{LOOP_PROFILE}.{self.name}"
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "scripts" / "loopprof"), env.get("PYTHONPATH")]))
        cpus = PIN.get("contestants")
        if cpus:   # taskset execs the command (same pid): no preexec_fn, unsafe with the bench's threads
            cmd = ["taskset", "-c", ",".join(map(str, sorted(cpus))), *cmd]
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.port}/" + ("healthz" if self.name in PEER_SCRIPTS else "readyz")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            if self.name == "floor":
                if (self.work / "floor.ready").exists():
                    break
            else:
                try:
                    with urllib.request.urlopen(url, timeout=1) as r:
                        if r.status == 200:
                            break
                except Exception:
                    pass
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{self.name} not ready in {timeout}s: {self.log.read_text()[-2000:]}")
        time.sleep(1.0)   # its watches established

    def metrics(self) -> str:
        return scrape(f"http://127.0.0.1:{self.port}/metrics") if self.name.startswith("kfold") else ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --------------------------------------------------------------------------------------------
# one run
# --------------------------------------------------------------------------------------------
def session(name: str, ns: str) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Session", "metadata": {"name": name, "namespace": ns},
            "spec": {"image": "registry.example/sandbox:1",
                     "apps": [{"name": "web", "ports": [{"port": 8080, "protocol": "TCP"}]}]}}


class Watcher:
    """The driver's own eyes (admin identity, not counted): when each Session became Ready and when
    it was gone; the set of pods in the namespace and when it last became empty."""

    def __init__(self, api, ns: str):
        self.api, self.ns = api, ns
        self.ready: dict[str, float] = {}
        self.gone: dict[str, float] = {}
        self.pods: set[str] = set()
        self.pods_empty_at: float | None = None
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(k,), daemon=True) for k in ("sessions", "pods")]

    def start(self) -> "Watcher":
        for t in self._threads:
            t.start()
        time.sleep(0.5)
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self, kind: str) -> None:
        from kubernetes import client, watch
        co, core = client.CustomObjectsApi(self.api), client.CoreV1Api(self.api)
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                if kind == "sessions":
                    stream = w.stream(co.list_namespaced_custom_object, GROUP, VERSION, self.ns, PLURAL, timeout_seconds=3600)
                else:
                    stream = w.stream(core.list_namespaced_pod, self.ns, timeout_seconds=3600)
                for ev in stream:
                    now = time.monotonic()
                    obj = ev["object"]
                    if kind == "sessions":
                        name = obj["metadata"]["name"]
                        if ev["type"] == "DELETED":
                            self.gone.setdefault(name, now)
                        elif (obj.get("status") or {}).get("phase") == "Ready":
                            self.ready.setdefault(name, now)
                    else:
                        name = obj.metadata.name
                        if ev["type"] == "DELETED":
                            self.pods.discard(name)
                            if not self.pods:
                                self.pods_empty_at = now
                        else:
                            self.pods.add(name)
                            self.pods_empty_at = None
                    if self._stop.is_set():
                        break
            except Exception:
                time.sleep(0.2)
            finally:
                w.stop()


def fan_out(fn, items: list, threads: int = 16) -> dict[str, float]:
    sent: dict[str, float] = {}

    def one(x):
        sent[x] = time.monotonic()
        fn(x)
    with ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(one, x) for x in items]:
            f.result()
    return sent


class FsyncProbe:
    """The disk's fsync latency beside a journal, sampled while a contestant runs (issue 38 item 4:
    event -> effect issued p99 against this disk's fsync p99, in the same run): every ``every_s`` a
    thread appends 4 KiB to a file in ``folder`` and fsyncs it, timing the fsync alone."""

    def __init__(self, folder: Path, every_s: float = 0.02):
        self.path, self.every_s = folder / "fsync-probe.bin", every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fsync-probe", daemon=True)

    def start(self) -> "FsyncProbe":
        self._thread.start()
        return self

    def _loop(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            block = b"\0" * 4096
            while not self._stop.wait(self.every_s):
                os.write(fd, block)
                t = time.perf_counter()
                os.fsync(fd)
                self.samples.append(time.perf_counter() - t)
        finally:
            os.close(fd)

    def stop(self) -> dict[str, float | None]:
        self._stop.set()
        self._thread.join(10)
        xs = sorted(self.samples)
        pick = (lambda q: round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else None)
        return {"disk_fsync_p50_ms": pick(0.5), "disk_fsync_p99_ms": pick(0.99), "disk_fsync_samples": len(xs)}


def run_once(api, cp: dict, who: str, n: int, work_root: Path, profile: Path | None) -> dict[str, Any]:
    from kubernetes import client
    ns = f"bench-{who}-{uuid.uuid4().hex[:6]}"
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": ns}})
    work = Path(tempfile.mkdtemp(prefix=f"{who}-", dir=work_root))
    ident = identity(who)
    if ident == "kfold":
        apply(api, kfold_rbac(ns))
    kubeconfig = sa_kubeconfig(api, cp, ident, work / "kubeconfig")
    c = Contestant(who, ns, kubeconfig, work)
    result: dict[str, Any] = {"contestant": who, "n": n, "namespace": ns}
    watcher = Watcher(api, ns).start()
    spy = None
    try:
        c.start()
        apiserver, etcd = component_pid("kube-apiserver"), component_pid("etcd")
        rss_start = rss_mb(c.proc.pid)
        before = dict(apf=apf_dispatched(api), op=cpu_seconds(c.proc.pid),
                      api=cpu_seconds(apiserver) if apiserver else 0.0, etcd=cpu_seconds(etcd) if etcd else 0.0,
                      metrics=c.metrics(), load=os.getloadavg()[0], threads=cpu_by_thread(c.proc.pid),
                      sched=loop_schedstat(c.proc.pid))
        if profile is not None and ident == "kfold" and shutil.which("py-spy", path=str(Path(sys.executable).parent)):
            # --gil: only the thread holding the GIL is sampled, so the shares are of Python CPU,
            # not of threads blocked in recv/select (which py-spy does not always see as idle)
            spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(c.proc.pid),
                                    "--rate", str(PROFILE_RATE), "--gil", "--nonblocking", "--format", "raw", "--output", str(profile)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        names = [f"s{i:04d}" for i in range(n)]
        fsync_probe = FsyncProbe(work).start() if ident == "kfold" else None
        log_from = log_size(apiserver_log())
        t0 = time.monotonic()
        t0_epoch = time.time()
        sent = fan_out(lambda x: co.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, session(x, ns)), names)
        deadline = t0 + 60 + 1.0 * n
        while len(watcher.ready) < n and time.monotonic() < deadline and c.proc.poll() is None:
            time.sleep(0.05)
        result["ready"] = len(watcher.ready)
        lat = sorted(watcher.ready[x] - sent[x] for x in names if x in watcher.ready)
        result["all_ready_s"] = (max(watcher.ready.values()) - t0) if len(watcher.ready) == n else None
        result["ready_p50_s"] = lat[len(lat) // 2] if lat else None
        result["ready_p99_s"] = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None
        pods = [p for p in core.list_namespaced_pod(ns).items if p.metadata.deletion_timestamp is None]
        svcs = core.list_namespaced_service(ns).items
        result["pods_at_ready"], result["services_at_ready"] = len(pods), len(svcs)
        mid_metrics = c.metrics()
        if fsync_probe is not None:   # the bring-up burst only: the disk as the journal met it
            result.update(fsync_probe.stop())
        # teardown
        d0 = time.monotonic()
        fan_out(lambda x: co.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, x), names)
        deadline = d0 + 60 + 0.5 * n
        while (len(watcher.gone) < n or watcher.pods) and time.monotonic() < deadline and c.proc.poll() is None:
            time.sleep(0.05)
        result["sessions_gone_s"] = (max(watcher.gone.values()) - d0) if len(watcher.gone) == n else None
        result["no_pod_left_s"] = (watcher.pods_empty_at - d0) if not watcher.pods and watcher.pods_empty_at else None
        if result["no_pod_left_s"] is not None and result["no_pod_left_s"] < 0:
            result["no_pod_left_s"] = 0.0
        time.sleep(1.0)   # trailing requests (last finalizer patches) land in the counters
        after = dict(apf=apf_dispatched(api), op=cpu_seconds(c.proc.pid),
                     api=cpu_seconds(apiserver) if apiserver else 0.0, etcd=cpu_seconds(etcd) if etcd else 0.0,
                     metrics=c.metrics(), load=os.getloadavg()[0], threads=cpu_by_thread(c.proc.pid),
                     sched=loop_schedstat(c.proc.pid))
        result["wall_s"] = time.monotonic() - t0
        result["requests_per_session"] = (after["apf"].get(flow_schema(ident), 0) - before["apf"].get(flow_schema(ident), 0)) / n
        result["operator_cpu_ms_per_session"] = 1000 * (after["op"] - before["op"]) / n
        result["apiserver_cpu_s"] = after["api"] - before["api"]
        result["etcd_cpu_s"] = after["etcd"] - before["etcd"]
        result["load1"] = (before["load"] + after["load"]) / 2
        result["operator_peak_rss_mb"] = peak_rss_mb(c.proc.pid)
        result["operator_rss_at_start_mb"] = rss_start
        # memory per Session: the high-water mark above what the idle, started operator held
        result["operator_rss_kb_per_session"] = (round(1024 * (result["operator_peak_rss_mb"] - rss_start) / n, 1)
                                                 if result["operator_peak_rss_mb"] is not None and rss_start is not None
                                                 else None)
        # How long the event loop's thread waited for a core each time it became runnable (mean):
        # on a saturated machine, the floor under any latency measured inside the operator.
        run, wait, slices = (a - b for a, b in zip(after["sched"], before["sched"]))
        result["loop_runqueue_wait_ms_per_slice"] = round(wait / slices / 1e6, 3) if slices > 0 else None
        result["loop_runqueue_wait_per_run"] = round(wait / run, 3) if run > 0 else None
        result["operator_cpu_ms_per_session_by_thread"] = {
            name: round(1000 * (v - before["threads"].get(name, 0.0)) / n, 2)
            for name, v in sorted(after["threads"].items()) if v - before["threads"].get(name, 0.0) > 0}
        if ident == "kfold":
            name = "kfold_event_to_effect_issued_seconds"
            for suffix, held in (("", None), ("_unheld", "false")):
                issued = minus(histogram(after["metrics"], name, held), histogram(before["metrics"], name, held))
                result[f"event_to_issued{suffix}_p50_ms"] = _ms(quantile(issued, 0.5))
                result[f"event_to_issued{suffix}_p99_ms"] = _ms(quantile(issued, 0.99))
            for key, name, held in (("event_to_fold", "kfold_event_to_fold_seconds", None),
                                    ("fold_to_issued_unheld", "kfold_fold_to_effect_issued_seconds", "false"),
                                    ("flush_to_durable", "kfold_journal_flush_to_durable_seconds", None),
                                    ("gc_pause", "kfold_gc_pause_seconds", None)):
                part = minus(histogram(after["metrics"], name, held), histogram(before["metrics"], name, held))
                result[f"{key}_p50_ms"], result[f"{key}_p99_ms"] = _ms(quantile(part, 0.5)), _ms(quantile(part, 0.99))
            trip = {}
            for m in re.finditer(r'^kfold_effect_round_trip_seconds_(sum|count)\{type="([^"]+)"\} (\S+)$', after["metrics"], re.M):
                trip.setdefault(m.group(2), {})[m.group(1)] = float(m.group(3))
            result["round_trip_mean_ms"] = {t: round(1000 * v["sum"] / v["count"], 2) for t, v in trip.items() if v.get("count")}
            bring_up = minus(client_requests(mid_metrics), client_requests(before["metrics"]))
            teardown = minus(client_requests(after["metrics"]), client_requests(mid_metrics))
            result["client_requests_per_session"] = {
                "bring_up": {k: round(v / n, 2) for k, v in sorted(bring_up.items())},
                "teardown": {k: round(v / n, 2) for k, v in sorted(teardown.items())}}
            wait_re = r'^kfold_client_limiter_wait_seconds_total\{cluster="local"\} (\S+)$'
            w0, w1 = re.search(wait_re, before["metrics"], re.M), re.search(wait_re, after["metrics"], re.M)
            result["limiter_wait_s"] = float(w1.group(1)) - float(w0.group(1)) if w0 and w1 else None
        result.update(clusterip_allocations(ns, t0_epoch, log_from))
        result["ok"] = (result["ready"] == n and result["pods_at_ready"] == n and result["services_at_ready"] == n
                        and result["sessions_gone_s"] is not None and result["no_pod_left_s"] is not None)
        return result
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
            raw = profile
            if raw is not None and raw.exists():
                result["profile"] = {"raw": str(raw), **profile_summary(raw)}
        watcher.stop()
        c.stop()
        try:
            core.delete_namespace(ns)
        except Exception:
            pass


def profile_summary(path: Path, top: int = 25) -> dict[str, list]:
    """py-spy's raw output (``frame;frame;... count`` per line): the functions with the most samples
    on top of the stack (self) and anywhere in it (inclusive), as shares of all samples."""
    self_n: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]   # "func (file)"
        self_n[frames[-1]] = self_n.get(frames[-1], 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n
    share = lambda d: [(f, round(100 * c / total, 1)) for f, c in sorted(d.items(), key=lambda x: -x[1])[:top]]  # noqa: E731
    return {"samples": total, "self_pct": share(self_n), "inclusive_pct": share(incl)} if total else {}


def _ms(x: float | None) -> float | None:
    return None if x is None else round(1000 * x, 2)


# --------------------------------------------------------------------------------------------
# the floor (a subcommand: its own process, its own identity)
# --------------------------------------------------------------------------------------------
def floor_main(ns: str, ready_file: str) -> int:
    """Only the requests the job needs, full concurrency, no reconciling (see module doc)."""
    from kubernetes import client, config, watch
    from kubernetes.client.exceptions import ApiException
    cfg = client.Configuration()
    config.load_kube_config(client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    api = client.ApiClient(cfg)
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    pool = ThreadPoolExecutor(64)
    started, served, torn = set(), set(), set()
    lock = threading.Lock()

    def first(seen: set, key: str) -> bool:
        with lock:
            if key in seen:
                return False
            seen.add(key)
            return True

    def quiet(call, *args):
        try:
            call(*args)
        except ApiException as exc:
            print(f"floor: {call.__name__} {exc.status}", flush=True)

    def labels(s: str, gen: bool = False) -> dict:
        return {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": s, **({"kfold.dev/generation": "1"} if gen else {})}

    def on_session(ev: dict) -> None:
        obj = ev["object"]
        md = obj["metadata"]
        name = md["name"]
        if ev["type"] == "DELETED":
            return
        if md.get("deletionTimestamp"):
            if first(torn, name):
                def teardown():
                    quiet(core.delete_namespaced_pod, f"{name}-g1", ns)
                    quiet(co.patch_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, name,
                          {"metadata": {"finalizers": None}})
                pool.submit(teardown)
            return
        if first(started, name):
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{name}-g1", "labels": labels(name, True),
                                "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "Session",
                                                     "name": name, "uid": md["uid"]}]},
                   "spec": {"restartPolicy": "Never", "volumes": [{"name": "workspace", "emptyDir": {}}],
                            "containers": [
                       {"name": "workspace", "image": obj["spec"]["image"], "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}]},
                       {"name": "app-web", "image": obj["spec"]["image"], "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}],
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}}
            pool.submit(quiet, co.patch_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, name,
                        {"metadata": {"finalizers": [FINALIZER]}})
            pool.submit(quiet, core.create_namespaced_pod, ns, pod)

    def on_pod(ev: dict) -> None:
        pod = ev["object"]
        if ev["type"] == "DELETED" or pod.metadata.deletion_timestamp:
            return
        conds = {c.type: c.status for c in (pod.status.conditions or [])}
        if pod.status.phase != "Running" or conds.get("Ready") != "True" or not first(served, pod.metadata.uid):
            return
        s = pod.metadata.labels["kfold.dev/session"]
        svc = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": s, "labels": labels(s), "ownerReferences": [
                   {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid}]},
               "spec": {"type": "ClusterIP", "selector": labels(s, True),
                        "ports": [{"name": "tcp-8080", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}}
        def serve():   # Ready is said only once the Service exists
            quiet(core.create_namespaced_service, ns, svc)
            quiet(co.patch_namespaced_custom_object_status, GROUP, VERSION, ns, PLURAL, s,
                  {"status": {"phase": "Ready", "podName": pod.metadata.name}})
        pool.submit(serve)

    def follow(list_fn, args: tuple, handle, kw: dict) -> None:
        while True:
            listed = list_fn(*args, **kw)
            rv = listed["metadata"]["resourceVersion"] if isinstance(listed, dict) else listed.metadata.resource_version
            ready.release()
            w = watch.Watch()
            try:
                for ev in w.stream(list_fn, *args, resource_version=rv, timeout_seconds=300, **kw):
                    handle(ev)
            except ApiException as exc:
                print(f"floor: watch {exc.status}", flush=True)

    ready = threading.Semaphore(0)
    threading.Thread(target=follow, args=(co.list_namespaced_custom_object, (GROUP, VERSION, ns, PLURAL), on_session, {}),
                     daemon=True).start()
    threading.Thread(target=follow, args=(core.list_namespaced_pod, (ns,), on_pod, {"label_selector": MANAGED}),
                     daemon=True).start()
    ready.acquire()
    ready.acquire()
    Path(ready_file).write_text("ready\n")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    pool.shutdown(wait=False, cancel_futures=True)
    return 0


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
def median(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


ROWS = [
    ("time to all Ready (s)", "all_ready_s", 1),
    ("Ready latency p50 (s)", "ready_p50_s", 2),
    ("Ready latency p99 (s)", "ready_p99_s", 2),
    ("teardown: Sessions gone (s)", "sessions_gone_s", 2),
    ("teardown: no pod left (s)", "no_pod_left_s", 2),
    ("operator CPU per Session (ms)", "operator_cpu_ms_per_session", 1),
    ("operator peak resident memory (MB, VmHWM)", "operator_peak_rss_mb", 0),
    ("operator memory per Session (kB, VmHWM above the started operator's VmRSS)", "operator_rss_kb_per_session", 1),
    ("requests per Session (apiserver APF count, watches incl.)", "requests_per_session", 1),
    ("apiserver: first ClusterIP allocated (s, its log)", "clusterip_first_s", 2),
    ("apiserver: last ClusterIP allocated (s, its log)", "clusterip_last_s", 2),
    ("apiserver: gap between two allocations, p50 (ms)", "clusterip_gap_p50_ms", 1),
    ("apiserver CPU per run (s)", "apiserver_cpu_s", 1),
    ("etcd CPU per run (s)", "etcd_cpu_s", 1),
    ("after the round: namespace gone in (s; the next round waits)", "cleanup_namespace_s", 1),
]


def summarize(runs: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for n in sorted({r["n"] for r in runs}):
        for who in dict.fromkeys([*CONTESTANTS, *(r["contestant"] for r in runs)]):
            rs = [r for r in runs if r["n"] == n and r["contestant"] == who]
            if not rs:
                continue
            s = {key: median([r.get(key) for r in rs]) for _, key, _ in ROWS}
            s.update(rounds=len(rs), ok=all(r.get("ok") for r in rs), load1=median([r.get("load1") for r in rs]))
            for key in ("event_to_issued_p50_ms", "event_to_issued_p99_ms", "event_to_issued_unheld_p50_ms",
                        "event_to_issued_unheld_p99_ms", "event_to_fold_p99_ms", "fold_to_issued_unheld_p99_ms",
                        "flush_to_durable_p50_ms", "flush_to_durable_p99_ms", "gc_pause_p99_ms", "limiter_wait_s",
                        "loop_runqueue_wait_ms_per_slice", "loop_runqueue_wait_per_run",
                        "disk_fsync_p50_ms", "disk_fsync_p99_ms"):
                if any(key in r for r in rs):
                    s[key] = median([r.get(key) for r in rs])
            out[f"{who}@{n}"] = s
    return out


def fmt(x: float | None, digits: int) -> str:
    return "—" if x is None else ("> 120000" if x == float("inf") else f"{x:.{digits}f}")


def ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or not b else f"{a / b:.2f}x"


def markdown(summary: dict, machine: str) -> str:
    ns = sorted({int(k.split("@")[1]) for k in summary})
    lines = []
    for n in ns:
        cols = [k.split("@")[0] for k in summary if k.endswith(f"@{n}")]
        s = {w: summary[f"{w}@{n}"] for w in cols}
        head = [f"{w} N={n}" for w in cols] + [f"kfold/{PEER}", "kfold/floor"]
        lines += [f"| N={n} | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
        for label, key, digits in ROWS:
            vals = [fmt(s[w].get(key), digits) for w in cols]
            k = s.get("kfold", {}).get(key)
            vals += [ratio(k, s.get(PEER, {}).get(key)), ratio(k, s.get("floor", {}).get(key))]
            lines.append(f"| {label} | " + " | ".join(vals) + " |")
        for label, key in (("kfold event -> effect issued p99, all effects (ms, /metrics)", "event_to_issued_p99_ms"),
                           ("kfold event -> effect issued p99, not held behind its key (ms)", "event_to_issued_unheld_p99_ms"),
                           ("  of which: event -> folded p99 (ms)", "event_to_fold_p99_ms"),
                           ("  of which: folded -> issued p99 (ms)", "fold_to_issued_unheld_p99_ms"),
                           ("  the journal's share: flush -> durable p99 (ms)", "flush_to_durable_p99_ms"),
                           ("  the collector: a pause p99 (ms)", "gc_pause_p99_ms"),
                           ("the disk: fsync p50 (ms, a 4 KiB append beside the journal, during bring-up)", "disk_fsync_p50_ms"),
                           ("the disk: fsync p99 (ms, same probe)", "disk_fsync_p99_ms")):
            extra = [fmt(s[w].get(key), 1) if w.startswith("kfold") else "—" for w in cols]
            lines.append(f"| {label} | " + " | ".join(extra) + " | | |")
        kf = s.get("kfold", {})
        for label, key in (("kfold event -> effect issued p99 (not held behind its key) / the disk's fsync p99 (target <= 1.3)",
                            "event_to_issued_unheld_p99_ms"),
                           ("kfold event -> effect issued p99 (all effects) / the disk's fsync p99", "event_to_issued_p99_ms")):
            lines.append(f"| {label} | " + " | ".join("—" for _ in cols)
                         + f" | {ratio(kf.get(key), kf.get('disk_fsync_p99_ms'))} | |")
        for label, key, digits in (("event loop thread: run-queue wait per wake-up, mean (ms, /proc schedstat)", "loop_runqueue_wait_ms_per_slice", 2),
                                   ("event loop thread: run-queue wait / time on a core", "loop_runqueue_wait_per_run", 2)):
            lines.append(f"| {label} | " + " | ".join(fmt(s[w].get(key), digits) for w in cols) + " | | |")
        lines.append("| rounds (all correct?) | " + " | ".join(f"{s[w]['rounds']} ({'yes' if s[w]['ok'] else 'NO'})" for w in cols) + " | | |")
        lines.append("| load average (1 min, median) | " + " | ".join(fmt(s[w].get("load1"), 1) for w in cols) + " | | |")
        lines.append("")
    lines += curve_markdown(summary)
    lines.append(f"Machine: {machine}")
    return "\n".join(lines)


CURVE = [   # (column, summary key, digits): the cost curve, one row per N and contestant
    ("all Ready (s)", "all_ready_s", 1),
    ("Ready p99 (s)", "ready_p99_s", 2),
    ("Sessions gone (s)", "sessions_gone_s", 1),
    ("no pod left (s)", "no_pod_left_s", 1),
    ("CPU per Session (ms)", "operator_cpu_ms_per_session", 1),
    ("peak RSS (MB)", "operator_peak_rss_mb", 0),
    ("RSS per Session (kB)", "operator_rss_kb_per_session", 1),
    ("requests per Session", "requests_per_session", 1),
]


def curve(summary: dict) -> list[dict]:
    """The curve as rows ``{"n", "contestant", <CURVE keys>..., "vs_<PEER>", "vs_floor"}`` (kfold's
    rows carry its ratios to the peer and the floor at the same N), for the JSON and bench_plot.py."""
    rows = []
    for key in summary:
        who, n = key.split("@")
        row = {"n": int(n), "contestant": who, "rounds": summary[key]["rounds"], "ok": summary[key]["ok"],
               **{k: summary[key].get(k) for _, k, _ in CURVE}}
        if who == "kfold":
            for other in (PEER, "floor"):
                o = summary.get(f"{other}@{n}", {})
                row[f"vs_{other}"] = {k: (round(row[k] / o[k], 3) if row[k] is not None and o.get(k) else None)
                                      for _, k, _ in CURVE}
        rows.append(row)
    return sorted(rows, key=lambda r: r["n"])


def curve_markdown(summary: dict) -> list[str]:
    """One table over every N (the curve), kfold's ratios to the peer and the floor under its rows."""
    rows = curve(summary)
    lines = ["The curve (medians of the rounds):", "",
             "| N | contestant | " + " | ".join(label for label, _, _ in CURVE) + " |",
             "|---|---|" + "---|" * len(CURVE)]
    for r in rows:
        lines.append(f"| {r['n']} | {r['contestant']} | " + " | ".join(fmt(r[k], d) for _, k, d in CURVE) + " |")
        for other in (PEER, "floor"):
            if f"vs_{other}" in r:
                lines.append(f"| {r['n']} | kfold/{other} | " + " | ".join(
                    "—" if r[f"vs_{other}"][k] is None else f"{r[f'vs_{other}'][k]:.2f}x" for _, k, _ in CURVE) + " |")
    return [*lines, ""]


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} vCPU {cpu}, Python {sys.version.split()[0]}, shared control plane (kube-apiserver + etcd + kwok)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    fl = sub.add_parser("floor")
    fl.add_argument("--namespace", required=True)
    fl.add_argument("--ready-file", required=True)
    ap.add_argument("--n", type=int, nargs="+", default=[100, 300])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--contestants", default=",".join(DEFAULT_CONTESTANTS),
                    help=f"comma-separated, of {', '.join(CONTESTANTS)}, kfold-threadsN, kfold-base "
                         f"(default: {','.join(DEFAULT_CONTESTANTS)}; kopf = {PEER})")
    ap.add_argument("--keep-nodes", action="store_true",
                    help="keep the kwok Nodes added for N's pods (default: deleted at the end)")
    ap.add_argument("--baseline", default=None, help="a checkout whose kfold runs as contestant kfold-base")
    ap.add_argument("--json", default=None, help="write every run and the medians here")
    ap.add_argument("--md", default=None, help="write the Markdown table here")
    ap.add_argument("--profile-rate", type=int, default=100, help="py-spy samples per second (--profile)")
    ap.add_argument("--loop-profile", default="",
                    help="kfold's loop CPU by callback (scripts/loopprof): PATH.<contestant>.<pid>, rewritten every 2 s")
    ap.add_argument("--profile", default=None,
                    help="py-spy (raw, collapsed stacks) of each kfold contestant's first run per N: PATH.WHO.N.txt")
    ap.add_argument("--pin", default="",
                    help="CONTROL_PLANE_CPUS:CONTESTANT_CPUS, e.g. 0:1: the control plane, with the bench's own "
                         "clients, and the contestant on CPUs of their own (an operator on a node of its own); "
                         "restored to every CPU at the end")
    ap.add_argument("--workdir", default=None,
                    help="keep each operator's files here (kfold's journals: scripts/bench_phases.py reads them)")
    args = ap.parse_args()
    if args.cmd != "floor":
        if any(n < 1 for n in args.n) or args.rounds < 1:
            ap.error("--n and --rounds take positive integers")
        known = re.compile(r"kfold-threads\d+|kfold-base|" + "|".join(map(re.escape, (*CONTESTANTS, *ALIASES))))
        bad = [w for w in args.contestants.split(",") if w and not known.fullmatch(w)]
        if bad:
            ap.error(f"--contestants: unknown {', '.join(bad)} (known: {', '.join(CONTESTANTS)}, kfold-threadsN, kfold-base)")
    global PROFILE_RATE, LOOP_PROFILE
    PROFILE_RATE, LOOP_PROFILE = args.profile_rate, str(Path(args.loop_profile).resolve()) if args.loop_profile else ""
    if args.cmd == "floor":
        return floor_main(args.namespace, args.ready_file)
    if args.baseline:
        os.environ["KFOLD_BENCH_BASELINE"] = str(Path(args.baseline).resolve())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # run the clean-ups of the run in progress
    ensure_bench_extra()
    cp = controlplane()
    api = admin_client(cp["kubeconfig"])
    install(api)
    if args.pin:
        if not shutil.which("taskset"):
            raise SystemExit("bench_peer: --pin needs taskset (Debian: apt-get install util-linux)")
        PIN.update(parse_pin(args.pin))
        pin_control_plane(PIN["control_plane"])
        os.sched_setaffinity(0, PIN["control_plane"])   # the bench's own Session creates and watch
        print(f"bench_peer: control plane and bench on CPUs {sorted(PIN['control_plane'])}, contestants on "
              f"{sorted(PIN['contestants'])}", file=sys.stderr)
    try:
        return _run(args, api, cp)
    finally:
        if args.pin:
            pin_control_plane(None)


def _run(args, api, cp) -> int:
    quiet = idle_control_plane(api)
    work_root = Path(args.workdir or tempfile.mkdtemp(prefix="bench_peer-"))
    work_root.mkdir(parents=True, exist_ok=True)
    who_all = list(dict.fromkeys(ALIASES.get(w, w) for w in args.contestants.split(",") if w))
    flags = control_plane_flags()
    runs: list[dict] = []
    added = ensure_capacity(api, max(args.n))
    if added:
        print(f"bench_peer: added {len(added)} kwok nodes for N={max(args.n)} ({PODS_PER_NODE} pods each)", file=sys.stderr)
    try:
        for n in args.n:
            warn_unsized(flags, n)
            profiled: set[str] = set()
            for r in range(args.rounds):
                order = who_all[r % len(who_all):] + who_all[:r % len(who_all)]
                for who in order:
                    prof = None
                    if args.profile and who.startswith("kfold") and who not in profiled:
                        prof = Path(f"{args.profile}.{who}.{n}.txt")
                        profiled.add(who)
                    res = run_once(api, cp, who, n, work_root, prof)
                    res["round"] = r + 1
                    res.update(settle(api, res["namespace"], gone_timeout=240.0 + 0.2 * n))
                    runs.append(res)
                    print(json.dumps({k: v for k, v in res.items() if k != "client_requests_per_session"}),
                          file=sys.stderr, flush=True)
    finally:
        if not args.keep_nodes:
            remove_nodes(api, added)
    summary = summarize(runs)
    pinned = (f"; pinned (--pin): control plane and the bench's clients on CPUs {sorted(PIN['control_plane'])}, each "
              f"contestant on CPUs {sorted(PIN['contestants'])}") if PIN else ""
    sizing = "; ".join(f"{name} {' '.join(f) or 'at its default sizing'}" for name, f in flags.items())
    md = markdown(summary, machine() + f"; control plane while idle before the run: {quiet['idle_cores']:.2f} core, "
                  f"{quiet['terminating_namespaces']} namespaces Terminating; {sizing}" + pinned)
    print(md)
    if args.md:
        Path(args.md).write_text(md + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "idle_control_plane": quiet,
                                               "control_plane_flags": flags, "peer": PEER, "summary": summary,
                                               "curve": curve(summary), "runs": runs}, indent=1) + "\n")
    return 0 if all(r.get("ok") for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
