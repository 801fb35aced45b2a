#!/usr/bin/env python3
"""Measure ``kfold run``'s memory and CPU, idle and under a small burst, for the install's
requests and limits (kfold.daemon.manifests.RESOURCES, docs/install.md "Resources"):

    python scripts/measure_resources.py [--sessions 50] [--idle 30]

On the local control plane (scripts/controlplane.sh start), one fresh namespace: kfold run (admin
kubeconfig, a fresh journal) is sampled every 0.5 s from /proc (VmRSS, utime+stime): idle for
``--idle`` seconds after /readyz, then while ``--sessions`` Sessions are created at once and until
all are Ready, then idle again. Prints one line per phase: RSS median/max (MiB), CPU (cores).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402

from tests.e2e.conftest import Daemon, discard_namespace  # noqa: E402
from tests.e2e.controlplane import ensure_controlplane  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def sample(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds so far) of ``pid``."""
    rss = next(int(ln.split()[1]) for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
               if ln.startswith("VmRSS:")) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return rss, (int(fields[11]) + int(fields[12])) / TICK


def watch(pid: int, until, label: str) -> None:
    rss, t0, c0 = [], time.monotonic(), sample(pid)[1]
    while not until(time.monotonic() - t0):
        rss.append(sample(pid)[0])
        time.sleep(0.5)
    took, cpu = time.monotonic() - t0, sample(pid)[1] - c0
    print(f"{label}: {took:.1f}s, RSS median {statistics.median(rss):.0f} MiB max {max(rss):.0f} MiB, "
          f"CPU {cpu:.2f}s = {cpu / took:.3f} cores", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--idle", type=float, default=30.0)
    args = ap.parse_args()
    cp = ensure_controlplane(build=False)
    from kubernetes import config as kconfig
    cfg = client.Configuration()
    kconfig.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
    admin = client.ApiClient(cfg)
    ns = f"measure-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
    co = client.CustomObjectsApi(admin)
    with tempfile.TemporaryDirectory() as tmp:
        d = Daemon(Path(tmp), cp["kubeconfig"], [ns]).start()
        try:
            watch(d.proc.pid, lambda t: t > args.idle, "idle")
            created: list[int] = []

            def create_all() -> None:
                for i in range(args.sessions):
                    co.create_namespaced_custom_object("kfold.dev", "v1alpha1", ns, "sessions", {
                        "apiVersion": "kfold.dev/v1alpha1", "kind": "Session", "metadata": {"name": f"m{i}"},
                        "spec": {"image": "registry.example/sandbox:1",
                                 "apps": [{"name": "web", "ports": [{"port": 8080}]}]}})
                created.append(1)

            def all_ready(t: float) -> bool:
                if not created:   # the creates are inside the measured phase
                    create_all()
                items = co.list_namespaced_custom_object("kfold.dev", "v1alpha1", ns, "sessions")["items"]
                return t > 300 or sum((i.get("status") or {}).get("phase") == "Ready" for i in items) == args.sessions
            watch(d.proc.pid, all_ready, f"burst of {args.sessions} Sessions to Ready")
            watch(d.proc.pid, lambda t: t > args.idle, f"idle with {args.sessions} Ready")
        finally:
            d.stop()
            discard_namespace(admin, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
