"""scripts/buildlib.sh's apt_need: what build_node.sh (runc's gcc, libseccomp-dev, pkg-config; umoci)
and setup.sh install when missing. Run in bash with a recording ``apt-get`` and an ``id`` of the
test's choosing first on PATH, so nothing is installed and root is whatever the test says."""
from __future__ import annotations

import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "scripts" / "buildlib.sh"


def _run(tmp_path: Path, uid: int, *needs: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "apt-calls"
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (fake / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    script = f'log() {{ echo "[t] $*" >&2; }}; . {LIB}; apt_need runc {" ".join(needs)}; echo done'
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                       env={"PATH": f"{fake}:/usr/bin:/bin"})
    return p, calls.read_text().splitlines() if calls.exists() else []


def test_as_root_only_the_missing_packages_are_installed(tmp_path):
    p, calls = _run(tmp_path, 0, "sh-pkg:sh", "libnope-dev:/nonexistent/nope.h", "nope-tool:no-such-tool-here")
    assert p.returncode == 0 and p.stdout.strip() == "done", p.stderr
    assert "runc needs libnope-dev nope-tool: installing with apt-get" in p.stderr
    assert calls[0].endswith("update -qq")
    assert calls[1].endswith("install -y -qq libnope-dev nope-tool")
    assert len(calls) == 2


def test_nothing_missing_runs_no_apt_get(tmp_path):
    p, calls = _run(tmp_path, 0, "sh-pkg:sh", "bash-pkg:/bin/bash")
    assert p.returncode == 0 and calls == [], p.stderr


def test_not_root_exits_1_naming_the_command_and_installs_nothing(tmp_path):
    p, calls = _run(tmp_path, 1000, "libnope-dev:/nonexistent/nope.h")
    assert p.returncode == 1 and "done" not in p.stdout
    assert "ERROR: needs Debian packages: libnope-dev; run: sudo apt-get install -y libnope-dev" in p.stderr
    assert calls == []
