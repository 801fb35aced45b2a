#!/usr/bin/env python3
"""Record a golden journal: a short real scenario through the real daemon, exported as JSONL.

    python scripts/record_golden.py [-o tests/data/golden_session.jsonl]

Needs the local control plane (scripts/controlplane.sh start; built by scripts/build_controlplane.sh).
Scenario, on a fresh namespace with ``kfold run`` (admin kubeconfig) as a real process:
  a Secret labelled managed-by=kfold holding a sentinel value (observed, so the journal must redact it)
  -> Session create (one app, one env reference to that Secret) -> Ready
  -> suspend -> Suspended -> resume -> Ready (generation 2) -> stop -> Stopped
  -> Session deleted (kfold removes its finalizer) -> SIGTERM (exit 0).
The journal is exported with ``kfold export`` and checked: ``kfold replay --check`` passes and the
sentinel value appears nowhere in it (neither plain nor base64). tests/unit/test_golden_journals.py
replays every tests/data/*.jsonl with the current code; re-record when a decision changes on purpose.
"""
from __future__ import annotations

import argparse
import base64
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GROUP, VERSION, PLURAL, NAME = "kfold.dev", "v1alpha1", "sessions", "demo"
SENTINEL = "golden-sentinel-" + "do-not-journal"


def wait_for(fn, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise SystemExit(f"record_golden: timed out waiting for {what}; last: {last!r}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(REPO / "tests" / "data" / "golden_session.jsonl"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory and the namespace")
    args = ap.parse_args(argv)

    from kubernetes import client, config, utils
    from kubernetes.client.exceptions import ApiException

    from kfold.daemon.manifests import crds
    from tests.e2e.controlplane import ensure_controlplane

    cp = ensure_controlplane(build=False)
    cfg = client.Configuration()
    config.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
    api = client.ApiClient(cfg)
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for doc in crds():
        try:
            utils.create_from_dict(api, doc)
        except utils.FailToCreateError as exc:
            if not all(getattr(e, "status", 0) == 409 for e in exc.api_exceptions):
                raise
    time.sleep(1.0)

    ns = f"golden-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    work = Path(tempfile.mkdtemp(prefix="kfold-golden-"))
    journal = work / "journal.db"
    port = free_port()
    (work / "config.yaml").write_text(yaml.safe_dump({
        "cluster": {"name": "local", "kubeconfig": cp["kubeconfig"]},
        "namespaces": [ns], "base_domain": "sessions.test",
        "journal": {"path": str(journal), "snapshot_every": 1000, "retention": {"keep_snapshots": 0}},
        "log": {"format": "plain", "level": "info"},
        "http": {"listen": f"127.0.0.1:{port}"},
    }))
    log = open(work / "kfold.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "kfold", "run", "--config", str(work / "config.yaml")],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                raise SystemExit(f"kfold run exited {proc.returncode}; see {work / 'kfold.log'}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    return r.status == 200
            except Exception:
                return False
        wait_for(ready, "kfold run /readyz")

        core.create_namespaced_secret(ns, {
            "metadata": {"name": "golden-token", "labels": {"app.kubernetes.io/managed-by": "kfold"}},
            "stringData": {"token": SENTINEL}})
        co.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session", "metadata": {"name": NAME, "namespace": ns},
            "spec": {"image": "registry.example/sandbox:1",
                     "apps": [{"name": "web", "ports": [{"port": 8080, "protocol": "TCP"}]}],
                     "env": [{"name": "TOKEN", "secretRef": {"name": "golden-token", "key": "token"}}]}})

        def phase() -> str:
            s = co.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME)
            return (s.get("status") or {}).get("phase", "")

        def pods() -> list[str]:
            return sorted(p.metadata.name for p in core.list_namespaced_pod(ns).items)

        def step(spec: dict, want: str) -> None:
            if spec:
                co.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME, {"spec": spec})
            wait_for(lambda: phase() == want, f"Session {want}")
            print(f"record_golden: {spec or 'created'} -> {want}; pods {pods()}", file=sys.stderr)

        step({}, "Ready")
        step({"suspended": True}, "Suspended")
        wait_for(lambda: pods() == [], "the g1 pod gone")
        step({"suspended": False}, "Ready")
        step({"stopped": True}, "Stopped")
        wait_for(lambda: pods() == [], "the g2 pod gone")
        co.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME)

        def gone() -> bool:
            try:
                co.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME)
                return False
            except ApiException as exc:
                return exc.status == 404
        wait_for(gone, "the Session deleted (finalizer removed by kfold)")
        time.sleep(0.5)  # let the last watch events land in the journal
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        if not args.keep:
            try:
                core.delete_namespace(ns)
            except Exception:
                pass
    if proc.returncode != 0:
        raise SystemExit(f"kfold run exited {proc.returncode} on SIGTERM; see {work / 'kfold.log'}")

    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = work / "golden.jsonl"
    kfold = [sys.executable, "-m", "kfold"]
    # unsealed: plain records from seq 1, which the tests edit line by line (tests/golden_facts.py)
    subprocess.run(kfold + ["export", str(journal), "-o", str(tmp_out), "--unsealed"], cwd=REPO, check=True)
    text = tmp_out.read_text()
    for needle in (SENTINEL, base64.b64encode(SENTINEL.encode()).decode()):
        if needle in text:
            raise SystemExit(f"record_golden: the secret value leaked into the export ({needle!r}); not written")
    check = subprocess.run(kfold + ["replay", str(tmp_out), "--check"], cwd=REPO, capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"record_golden: replay --check failed:\n{check.stdout}{check.stderr}")
    shutil.copyfile(tmp_out, out)
    print(f"record_golden: {len(text.splitlines())} records -> {out}", file=sys.stderr)
    print(check.stdout, file=sys.stderr)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
