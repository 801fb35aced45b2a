"""controlplane.sh's liveness check must not flake: `status` and an idempotent `start` on a
running control plane, many times over, always report every component running (the old check
piped `tr | grep -q` under pipefail and could read a running apiserver as exited)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "controlplane.sh"


def test_status_and_start_agree_many_times(cp):
    for i in range(60):
        st = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True)
        assert st.returncode == 0, f"status round {i}: {st.stdout}{st.stderr}"
        for name in ("etcd", "kube-apiserver", "kube-scheduler", "kwok"):
            assert f"{name}: running" in st.stdout, f"status round {i}: {st.stdout}"
    for i in range(10):
        out = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True)
        assert out.returncode == 0, f"start round {i}: {out.stderr}"
        assert "export KUBECONFIG=" in out.stdout
        assert "started" not in out.stderr, f"start round {i} restarted a running component: {out.stderr}"
