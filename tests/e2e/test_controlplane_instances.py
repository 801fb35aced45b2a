"""controlplane.sh keeps each instance's state (pids, certs, etcd data, kubeconfig, logs) in a
directory of its own: two instances on different port sets run side by side, and one's `stop`
stops only its own processes."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port
from tests.e2e.controlplane import api_get, controlplane_info

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "controlplane.sh"
BIN = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin"
PORT_VARS = ("KFOLD_ETCD_PORT", "KFOLD_ETCD_PEER_PORT", "KFOLD_APISERVER_PORT", "KFOLD_SCHEDULER_PORT",
             "KFOLD_KCM_PORT", "KFOLD_KWOK_PORT")
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")


def _env(cache: Path, ports: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PORT_VARS and k != "KFOLD_CP_DIR"}
    return {**env, "KFOLD_CACHE": str(cache), **(ports or {}), **extra}


def _run(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


def _ports() -> dict[str, str]:
    return {k: str(free_port()) for k in PORT_VARS}


def _cp_dir(env: dict[str, str]) -> str:
    out = _run(env, "env")
    assert out.returncode == 0, out.stderr
    return controlplane_info(out.stdout)["dir"]


def test_each_port_set_has_its_own_state_directory(tmp_path):
    cache = tmp_path / "cache"
    default = _cp_dir(_env(cache))
    assert default == str(cache / "cp")   # the default ports keep the directory they always had
    ports = _ports()
    assert _cp_dir(_env(cache, ports)) == str(cache / f"cp-{ports['KFOLD_APISERVER_PORT']}")
    assert _cp_dir(_env(cache, ports, KFOLD_CP_DIR=str(tmp_path / "mine"))) == str(tmp_path / "mine")
    # A control plane started on these ports before instances had their own directory is still found.
    (cache / "cp").mkdir(parents=True)
    (cache / "cp" / "kubeconfig").write_text(f"    server: https://127.0.0.1:{ports['KFOLD_APISERVER_PORT']}\n")
    assert _cp_dir(_env(cache, ports)) == str(cache / "cp")
    assert _cp_dir(_env(cache, _ports())) != str(cache / "cp")


def _pids(cp_dir: str) -> dict[str, int]:
    run = Path(cp_dir) / "run"
    return {p.stem: int(p.read_text()) for p in run.glob("*.pid")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.mark.timeout(600)
def test_two_instances_side_by_side_and_stop_stops_only_its_own(tmp_path):
    if not all((BIN / c).is_file() for c in COMPONENTS):
        pytest.fail(f"the control plane is not built in {BIN} (bash scripts/build_controlplane.sh builds it)")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "bin").symlink_to(BIN)
    a, b = _env(cache, _ports()), _env(cache, _ports())
    try:
        started = {}
        for name, env in (("a", a), ("b", b)):
            out = _run(env, "start")
            assert out.returncode == 0, f"instance {name}: {out.stderr[-3000:]}"
            assert "started kube-apiserver" in out.stderr, f"instance {name} did not start its own: {out.stderr}"
            started[name] = controlplane_info(out.stdout)
        ia, ib = started["a"], started["b"]
        assert ia["dir"] != ib["dir"] and ia["server"] != ib["server"]
        pa, pb = _pids(ia["dir"]), _pids(ib["dir"])
        assert set(pa) == set(pb) == set(COMPONENTS) and not set(pa.values()) & set(pb.values())
        for info in (ia, ib):
            with api_get(info, "/readyz") as r:
                assert r.status == 200

        stopped = _run(a, "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert not [n for n, pid in pa.items() if _alive(pid)], "a's stop left some of its processes running"
        assert all(_alive(pid) for pid in pb.values()), "a's stop killed some of b's processes"
        with api_get(ib, "/readyz") as r:
            assert r.status == 200
        st = _run(b, "status")
        assert st.returncode == 0 and all(f"{c}: running" in st.stdout for c in COMPONENTS), st.stdout
        assert _run(a, "status").returncode == 1
    finally:
        for env in (a, b):
            _run(env, "stop", "--wipe")
