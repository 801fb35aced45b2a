"""The README's route on a stock Debian Python: a fresh clone, only /usr/bin:/bin on PATH.

`scripts/setup.sh` must build the project's own venv with the system interpreter (never pip into
it: PEP 668 refuses that on Debian), install the pinned versions from constraints.txt, and leave
`kfold --help` working through the venv, and make nothing else: no control plane, no promtool, not
even the build cache's directory (the commands that need those build them: scripts/build.sh). In
the same environment (as root) `scripts/build_image.sh` must build the image, whose tools (chroot)
live in /usr/sbin, and one of the image's tests must pass with the clone's own venv. Two builds
into one cache at once build each part once: the second waits for the first's lock, then finds
the part cached.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PY = "/usr/bin/python3"


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


MINIMAL_ENV = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
# The image build reuses the cache the suite runs with (its base layer is keyed there).
IMAGE_ENV = {**MINIMAL_ENV, **({"KFOLD_CACHE": os.environ["KFOLD_CACHE"]} if "KFOLD_CACHE" in os.environ else {})}
# Where the binaries are (the e2e suite's control plane runs from them).
BIN = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin"


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory):
    """A clone set up by scripts/setup.sh with PATH=/usr/bin:/bin: (clone, setup's output,
    the system site-packages listing before)."""
    if not os.access(SYSTEM_PY, os.X_OK):
        pytest.skip("no system /usr/bin/python3 on this machine")
    clone = tmp_path_factory.mktemp("fresh") / "kfold"
    # A clone of what is committed plus the working tree's setup files (the test runs before commit
    # in development; on CI the clone *is* main).
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    for rel in ("scripts/setup.sh", "scripts/venv.sh", "scripts/syspath.sh", "constraints.txt", "pyproject.toml"):
        shutil.copy(REPO / rel, clone / rel)
    sys_site = subprocess.run([SYSTEM_PY, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    before = sorted(os.listdir(sys_site)) if os.path.isdir(sys_site) else []
    # A build cache of its own, which setup must leave alone (the image build, later, uses it).
    env = {**MINIMAL_ENV, "KFOLD_CACHE": str(clone.parent / "cache")}
    out = subprocess.run(["bash", "scripts/setup.sh"], cwd=clone, env=env, capture_output=True, text=True)
    yield clone, out, sys_site, before, env
    shutil.rmtree(clone, ignore_errors=True)


@pytest.mark.timeout(900)
def test_setup_from_fresh_clone_with_system_python(fresh_clone):
    clone, out, sys_site, before, env = fresh_clone
    assert out.returncode == 0, out.stdout + out.stderr
    assert "creating" in out.stderr and "/usr/bin/python3" in out.stderr, out.stderr
    assert out.stderr.splitlines()[-1].startswith(f"setup: {clone / '.venv'} ready (Python 3."), out.stderr
    # The venv only: nothing built, nothing cached.
    assert not Path(env["KFOLD_CACHE"]).exists(), sorted(p.name for p in Path(env["KFOLD_CACHE"]).rglob("*"))[:20]
    assert "build_" not in out.stderr and "go: " not in out.stderr, out.stderr

    venv_py = clone / ".venv" / "bin" / "python"
    base = subprocess.run([str(venv_py), "-c", "import sys; print(sys.base_prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert base == "/usr", f"venv built from {base}, not the system Python"
    # The README's route to kfold: the venv's bin.
    helped = subprocess.run([str(clone / ".venv" / "bin" / "kfold"), "--help"], env=env,
                            capture_output=True, text=True)
    assert helped.returncode == 0 and "usage: kfold" in helped.stdout, helped.stderr
    # Exactly the pinned versions.
    frozen = subprocess.run([str(venv_py), "-m", "pip", "freeze", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout
    pins = _pins()
    for line in frozen.splitlines():
        if "==" in line:
            name, _, version = line.partition("==")
            key = name.lower().replace("_", "-")
            if key in pins:
                assert pins[key] == version, f"{name} {version} installed, constraints.txt pins {pins[key]}"
    for must in ("kubernetes", "transitions", "pydantic", "aiosqlite", "pytest", "freezegun"):
        assert must in pins and f"{must}=={pins[must]}".lower() in frozen.lower().replace("_", "-")
    # Nothing went into the system interpreter.
    after = sorted(os.listdir(sys_site)) if os.path.isdir(sys_site) else []
    assert after == before
    # A second run keeps the venv (the stamp matches) and is quick.
    again = subprocess.run(["bash", "scripts/setup.sh"], cwd=clone, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "creating" not in again.stderr, again.stderr
    assert again.stderr.strip() == f"setup: {clone / '.venv'} kept (up to date)", again.stderr


@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="the image build and chroot need root")
def test_image_build_and_an_image_test_from_the_fresh_clone(fresh_clone):
    clone, out, _, _, _ = fresh_clone
    assert out.returncode == 0, out.stdout + out.stderr
    built = subprocess.run(["bash", "scripts/build_image.sh"], cwd=clone, env=IMAGE_ENV, capture_output=True,
                           text=True, timeout=840)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.strip().splitlines()[-1].endswith(".oci.tar"), built.stdout
    ran = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/e2e/test_image.py::test_kfold_version_and_a_golden_replay_inside_the_image"],
                         cwd=clone, env=IMAGE_ENV, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-3000:] + ran.stderr[-2000:]


def test_setup_refuses_an_old_python_with_one_clear_line(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    # A python3 that reports 3.9 and fails the >= 3.11 check.
    (fake_bin / "python3").write_text('#!/bin/sh\ncase "$*" in *sys.exit*) exit 1;; *) echo 3.9;; esac\n')
    (fake_bin / "python3").chmod(0o755)
    for tool in ("bash", "cat", "sha256sum", "cut", "mkdir", "id", "dirname", "openssl", "curl", "git"):
        src = shutil.which(tool, path="/usr/bin:/bin")
        if src:
            (fake_bin / tool).symlink_to(src)
    env = {"PATH": str(fake_bin), "HOME": str(tmp_path), "KFOLD_VENV": str(tmp_path / "venv"),
           "KFOLD_SKIP_CONTROLPLANE": "1"}
    out = subprocess.run([str(fake_bin / "bash"), str(REPO / "scripts" / "setup.sh")], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 1
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "needs Python >= 3.11" in lines[0] and "python3 3.9" in lines[0], out.stderr
    assert not (tmp_path / "venv").exists()


def _stamp_of(name: str) -> str:
    return (BIN / f".{name}.version").read_text()


@pytest.mark.timeout(300)
def test_two_builds_at_once_build_a_part_once(tmp_path):
    """While one build holds etcd's lock in the cache, a second (scripts/build.sh) and a third
    (build_controlplane.sh itself) wait; when the first has put etcd in the cache and lets go, both
    find it cached and build nothing (no Go module can be fetched here: a build would fail)."""
    if not (BIN / "etcd").is_file():
        pytest.fail(f"etcd is not built in {BIN} (bash scripts/build.sh etcd builds it)")
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    env = {**os.environ, "KFOLD_CACHE": str(cache), "HOME": str(tmp_path), "GOPROXY": "off"}
    with open(cache / "bin" / ".etcd.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)    # the first build, still running
        logs = [tmp_path / "via-build.log", tmp_path / "direct.log"]
        procs = [subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
                 for cmd, log in ((["bash", "scripts/build.sh", "etcd"], logs[0]),
                                  (["bash", "scripts/build_controlplane.sh", "etcd"], logs[1]))]
        deadline = time.monotonic() + 60
        while "waiting for another build of etcd" not in logs[1].read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        assert [p.poll() for p in procs] == [None, None], [log.read_text() for log in logs]
        assert "waiting for another build of etcd" in logs[1].read_text()
        # The first build ends: etcd is in the cache with its stamp.
        (cache / "bin" / "etcd").symlink_to(BIN / "etcd")
        (cache / "bin" / ".etcd.version").write_text(_stamp_of("etcd"))
        time.sleep(1)
    rcs = [p.wait(timeout=60) for p in procs]
    out = [log.read_text() for log in logs]
    assert rcs == [0, 0], out
    version = _stamp_of("etcd").strip()
    progress = [line for line in out[0].splitlines() if line.startswith("build: etcd ")]
    assert len(progress) == 1 and f"etcd {version} cached; waited " in progress[0], out[0]
    assert f"etcd {version} cached" in out[1] and "built in" not in out[1], out[1]
    assert sorted(p.name for p in (cache / "bin").iterdir()) == [".etcd.lock", ".etcd.version", "etcd"]


@pytest.mark.timeout(120)
def test_a_failing_part_is_reported_at_once_and_stops_the_others(tmp_path):
    """The venv fails in its first second (no such interpreter) while etcd's build waits on its
    lock: build.sh names the failed part, shows its one-line reason, stops etcd's build and exits 1."""
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    env = {**os.environ, "KFOLD_CACHE": str(cache), "HOME": str(tmp_path), "GOPROXY": "off",
           "KFOLD_PYTHON": str(tmp_path / "no-python"), "KFOLD_VENV": str(tmp_path / "venv")}
    with open(cache / "bin" / ".etcd.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        t0 = time.monotonic()
        out = subprocess.run(["bash", "scripts/build.sh", "etcd", "venv"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=60)
        took = time.monotonic() - t0
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(cache) in _environ_of(p)]
    assert out.returncode == 1, out.stderr
    assert took < 30, f"build.sh took {took:.0f}s to report a failed venv"
    assert "build: venv      FAILED after" in out.stderr, out.stderr
    assert f"KFOLD_PYTHON={tmp_path / 'no-python'} is not a working Python interpreter" in out.stderr, out.stderr
    assert "build: failed: venv" in out.stderr.splitlines()[-1], out.stderr
    assert left == [], "etcd's build is still running after build.sh exited"


def _environ_of(proc: Path) -> str:
    try:
        return (proc / "environ").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_build_refuses_an_unknown_part_with_one_line():
    out = subprocess.run(["bash", "scripts/build.sh", "venv", "kubelet"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "build: unknown part 'kubelet'; the parts are venv promtool k8s kwok etcd and controlplane (etcd kwok k8s)"]
