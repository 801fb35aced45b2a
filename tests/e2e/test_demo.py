"""The README's `bash scripts/demo.sh`, warm: on a cache holding only what the demo runs (etcd,
kube-apiserver, kube-scheduler, kube-controller-manager, kwok; no kubectl, no promtool) and with no
Go module reachable, it builds nothing, reports one line per part, and runs to its end (the sample
Session Ready, stopped, deleted, the journal replayed and checked) on a control plane of its own."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin"
DEMO_PARTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
PORT_VARS = ("KFOLD_ETCD_PORT", "KFOLD_ETCD_PEER_PORT", "KFOLD_APISERVER_PORT", "KFOLD_SCHEDULER_PORT",
             "KFOLD_KCM_PORT", "KFOLD_KWOK_PORT")


@pytest.mark.timeout(600)
def test_warm_demo_builds_nothing_and_needs_only_its_parts(tmp_path):
    if not all((BIN / name).is_file() for name in DEMO_PARTS):
        pytest.fail(f"the control plane is not built in {BIN} (bash scripts/build.sh controlplane builds it)")
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    for name in DEMO_PARTS:
        (cache / "bin" / name).symlink_to(BIN / name)
        (cache / "bin" / f".{name}.version").write_text((BIN / f".{name}.version").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("KFOLD_CP_DIR", "KFOLD_K8S_BINS")}
    env.update({k: str(free_port()) for k in PORT_VARS})
    env.update({"KFOLD_CACHE": str(cache), "GOPROXY": "off"})   # a build would fail: no module reachable
    t0 = time.monotonic()
    try:
        out = subprocess.run(["bash", "scripts/demo.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=540)
    finally:
        subprocess.run(["bash", "scripts/controlplane.sh", "stop", "--wipe"], cwd=REPO, env=env,
                       capture_output=True, timeout=120)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "check: every journaled effect matches the current code" in out.stdout, out.stdout[-3000:]
    assert "phase=Ready generation=1 pod=demo-g1" in out.stdout and "Session demo is gone" in out.stdout
    progress = [line.split()[1] for line in out.stderr.splitlines() if line.startswith("build: ")][1:]
    assert sorted(progress) == ["etcd", "k8s", "kwok", "venv"], out.stderr
    assert "built in" not in out.stderr and "promtool" not in out.stderr, out.stderr
    assert sorted(p.name for p in (cache / "bin").iterdir() if not p.name.startswith(".")) == sorted(DEMO_PARTS)
    print(f"warm demo.sh: {took:.1f}s")
