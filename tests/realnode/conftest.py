"""The real-node set: a control plane started with KFOLD_REAL_NODE=1 (scripts/controlplane.sh) and
its one real node (scripts/node.sh: containerd, kubelet, kube-proxy in their own namespaces).

Selected with ``-m realnode``. Skipped only when KFOLD_REAL_NODE=0; otherwise a machine where the
node cannot start fails every test here with the scripts' own reason. The instance uses the ports
of the environment (KFOLD_APISERVER_PORT, ...) and is stopped at the end of the session."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.controlplane import _parse_env

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.realnode)
            if os.environ.get("KFOLD_REAL_NODE") == "0":
                item.add_marker(pytest.mark.skip(reason="KFOLD_REAL_NODE=0: the real-node set is off"))


def _run(*args: str, env: dict[str, str], check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), env=env, capture_output=True, text=True, check=check, timeout=timeout)


@pytest.fixture(scope="session")
def node():
    """{'env': the environment the scripts and kubectl need, 'kubectl': its path, ...node.sh env}."""
    env = {**os.environ, "KFOLD_REAL_NODE": "1"}
    built = _run("bash", str(SCRIPTS / "build_node.sh"), env=env, check=False, timeout=3600)
    if built.returncode:
        pytest.fail(f"the real node could not be built: {built.stderr.strip().splitlines()[-1:]}")
    started = _run("bash", str(SCRIPTS / "controlplane.sh"), "start", "--fresh", env=env, check=False)
    if started.returncode:
        tail = "\n".join(started.stderr.strip().splitlines()[-5:])
        pytest.fail(f"the real node could not start (set KFOLD_REAL_NODE=0 to skip this set):\n{tail}")
    env.update(_parse_env(started.stdout))
    env.update(_parse_env(_run("bash", str(SCRIPTS / "node.sh"), "env", env=env).stdout))
    cache = Path(env.get("KFOLD_CACHE", Path.home() / ".cache/kfold"))
    yield {"env": env, "kubectl": str(cache / "bin" / "kubectl"), **env}
    _run("bash", str(SCRIPTS / "controlplane.sh"), "stop", env=env, check=False)
