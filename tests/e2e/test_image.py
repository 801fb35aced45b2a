"""The container image ``scripts/build_image.sh`` builds, run the way the Deployment runs it.

The OCI archive is unpacked with umoci, and each command runs inside its root filesystem like a
container runtime would start it: the image config's entrypoint, environment and user (65532), in
its own mount and PID namespace (kfold is PID 1), the root filesystem mounted read-only, ``/tmp`` a
tmpfs, the journal directory a writable mount, the config and the service-account files mounted
where the kubelet puts them. ``kfold run`` gets only the in-cluster configuration a pod has
(``KUBERNETES_SERVICE_HOST``/``_PORT`` and ``/var/run/secrets/kubernetes.io/serviceaccount``) and
must bring a Session to Ready on the real control plane.

The build is cached under ~/.cache/kfold/image (a warm run is a hash check); a cold one takes a
few minutes, hence the timeout. Needs root (chroot, mounts), as the build does.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client

from kfold import __version__
from kfold.daemon.manifests import DEFAULT_IMAGE, NONROOT, install
from tests.safe_tar import extract_all
from tests.e2e.conftest import REPO, free_port, install_rbac, service_account_token, wait_for
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, World, session_manifest

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="the image build and chroot need root"),
]
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def archive() -> Path:
    out = subprocess.run(["bash", str(REPO / "scripts" / "build_image.sh")], cwd=REPO, check=True,
                         stdout=subprocess.PIPE, text=True, timeout=840)
    return Path(out.stdout.strip().splitlines()[-1])


class Image:
    """An unpacked image: its config (entrypoint, env, user, labels) and a scratch root filesystem."""

    def __init__(self, archive: Path, work: Path):
        layout = work / "layout"
        layout.mkdir()
        extract_all(archive, layout)
        (self.index_entry,) = json.loads((layout / "index.json").read_text())["manifests"]
        self.manifest = self._blob(layout, self.index_entry["digest"])
        self.config = self._blob(layout, self.manifest["config"]["digest"])
        tag = self.index_entry["annotations"]["org.opencontainers.image.ref.name"]
        subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", str(work / "bundle")], check=True,
                       stdout=subprocess.DEVNULL)
        self.root = work / "bundle" / "rootfs"

    def path(self, inside: str) -> Path:
        """``inside`` resolved within the root filesystem, symlinks included (/var/run -> /run), the
        way a runtime resolves a mount point: never a path on the host."""
        here = self.root
        parts = [p for p in inside.split("/") if p]
        for _ in range(40):
            if not parts:
                return here
            part = parts.pop(0)
            nxt = here / part
            if nxt.is_symlink():
                link = os.readlink(nxt)
                parts = [p for p in link.split("/") if p] + parts
                here = self.root if link.startswith("/") else here
            elif part == "..":
                here = here.parent if here != self.root else here
            else:
                here = nxt
        raise RuntimeError(f"too many symlinks resolving {inside} in {self.root}")

    @staticmethod
    def _blob(layout: Path, digest: str) -> dict:
        return json.loads((layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_text())

    def command(self, args: list[str] | None, mounts: dict[str, tuple[Path, bool]]) -> list[str]:
        """The argv that runs the image's entrypoint with ``args`` (its Cmd when None) as a runtime
        would: ``mounts`` maps a path in the image to (host path, writable)."""
        cfg = self.config["config"]
        argv = cfg["Entrypoint"] + (cfg.get("Cmd") or [] if args is None else args)
        uid, _, gid = cfg["User"].partition(":")
        lines = ["set -e", 'R="$1"; shift', 'mount --bind "$R" "$R"', 'mount -t proc proc "$R/proc"',
                 'mount --rbind /dev "$R/dev"', 'mount -t tmpfs -o mode=1777,size=64m tmpfs "$R/tmp"']
        for inside, (host, writable) in sorted(mounts.items()):
            target = self.path(inside)
            target.mkdir(parents=True, exist_ok=True)  # the runtime's mount point
            lines.append(f'mount --bind "{host}" "{target}"')
            if not writable:
                lines.append(f'mount -o remount,bind,ro "{target}"')
        lines += ['mount -o remount,bind,ro "$R"',
                  f'exec chroot --userspec={uid}:{gid} --groups={gid} "$R" "$@"']
        return ["unshare", "--mount", "--pid", "--fork", "--", "sh", "-c", "\n".join(lines), "image", str(self.root), *argv]

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return dict(kv.split("=", 1) for kv in self.config["config"]["Env"]) | (extra or {})

    def run(self, args: list[str], mounts: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(args, mounts or {}), env=self.env(), capture_output=True, text=True,
                              timeout=timeout)


@pytest.fixture(scope="module")
def image(archive, tmp_path_factory):
    work = tmp_path_factory.mktemp("image")
    yield Image(archive, work)
    shutil.rmtree(work, ignore_errors=True)  # ~270 MB unpacked


def test_the_image_is_what_the_deployment_expects(image):
    cfg = image.config["config"]
    (dep,) = [d for d in install() if d["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert image.index_entry["annotations"]["io.containerd.image.name"] == DEFAULT_IMAGE == container["image"]
    assert cfg["User"] == f"{NONROOT}:{NONROOT}" == f'{pod["securityContext"]["runAsUser"]}:{pod["securityContext"]["runAsGroup"]}'
    assert cfg["Entrypoint"] == ["/usr/local/bin/kfold"] and cfg["Cmd"] == container["args"]
    assert f'{container["ports"][0]["containerPort"]}/tcp' in cfg["ExposedPorts"]
    journal_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "journal")
    assert journal_mount in cfg["Volumes"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "PYTHONDONTWRITEBYTECODE=1" in cfg["Env"]
    labels = cfg["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert {"title", "description", "revision", "created"} <= {k.rpartition(".")[2] for k in labels}
    owner = (image.root / journal_mount.lstrip("/")).stat()
    assert (owner.st_uid, owner.st_gid) == (NONROOT, NONROOT)
    # Every module is precompiled for the image's interpreter: nothing to write on a read-only root.
    for lib in ("usr/lib/python3.11", "usr/local/lib/python3.11/dist-packages"):
        sources = list((image.root / lib).rglob("*.py"))
        missing = [p for p in sources if not (p.parent / "__pycache__" / f"{p.stem}.cpython-311.pyc").is_file()]
        assert sources and not missing, missing[:5]


def test_kfold_version_and_a_golden_replay_inside_the_image(image):
    version = image.run(["--version"])
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"kfold {__version__}"
    golden = sorted((REPO / "tests" / "data").glob("*.jsonl"))
    assert golden
    for path in golden:
        out = image.run(["replay", f"/golden/{path.name}", "--check"], {"/golden": (path.parent, False)})
        assert out.returncode == 0, out.stdout + out.stderr
        assert "divergence" not in out.stdout + out.stderr


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and mtime (mount points' contents are not on it)."""
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def _stop(proc: subprocess.Popen) -> int:
    """SIGTERM to kfold (PID 1 of its namespace, the only child of unshare), as the kubelet sends it."""
    if proc.poll() is None:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for pid in children:
            os.kill(int(pid), signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def test_kfold_run_in_the_image_with_the_in_cluster_config_brings_a_session_to_ready(
        image, admin, cp, namespace, tmp_path):
    kfold_ns = "kfold-e2e"
    install_rbac(admin, kfold_ns, [namespace])
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(service_account_token(admin, kfold_ns))
    shutil.copy(cp["ca"], sa / "ca.crt")
    (sa / "namespace").write_text(kfold_ns)
    port = free_port()
    text = yaml.safe_dump({
        "cluster": {"name": "local", "kubeconfig": None}, "namespaces": [namespace],
        "base_domain": "sessions.test", "journal": {"path": "/var/lib/kfold/journal.db"},
        "log": {"format": "plain", "level": "info"}, "http": {"listen": f"127.0.0.1:{port}"},
    })
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.yaml").write_text(text)
    journal = tmp_path / "journal"
    journal.mkdir()
    os.chown(journal, NONROOT, NONROOT)
    # What the Deployment mounts, from the manifests rendered for this config (rendered listening on
    # every address, as an install must; this run stays on loopback, on the same port).
    rendered = text.replace(f"127.0.0.1:{port}", f"0.0.0.0:{port}")
    (dep,) = [d for d in install("kfold", DEFAULT_IMAGE, rendered) if d["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    paths = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    mounts = {paths["config"]: (etc, False), paths["journal"]: (journal, True), SA_DIR: (sa, False)}
    server = urlsplit(cp["server"])
    env = image.env({"KUBERNETES_SERVICE_HOST": server.hostname, "KUBERNETES_SERVICE_PORT": str(server.port)})
    log = tmp_path / "kfold.log"
    argv = image.command(None, mounts)  # makes the mount points, as a runtime does
    before = _tree(image.root)
    proc = subprocess.Popen(argv, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        probe = container["readinessProbe"]["httpGet"]

        def ready():
            assert proc.poll() is None, f"kfold run in the image exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{probe['port']}{probe['path']}", timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(ready, 60, what=f"{probe['path']} of kfold run in the image")
        w = World(admin, namespace)
        w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
        st = w.phase_is("Ready", 1)
        assert st["podName"] == "demo-g1"
        w.co.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")

        def gone():
            try:
                w.co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")
                return False
            except client.ApiException as e:
                return e.status == 404
        wait_for(gone, 45, what="Session demo deleted after kfold's teardown")
    finally:
        rc = _stop(proc)
    assert rc == 0, log.read_text()[-3000:]
    assert _tree(image.root) == before, "kfold run changed the image's root filesystem"
    assert (journal / "journal.db").is_file()
    replay = image.run(["replay", "/var/lib/kfold/journal.db", "--check"], {"/var/lib/kfold": (journal, True)})
    assert replay.returncode == 0, replay.stdout + replay.stderr
