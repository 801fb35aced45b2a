"""The Containerfile builds kfold's image with buildah from a Debian base a user names, and that
image is the one ``scripts/build_image.sh`` builds (issue 52, item 5).

The base here is made the way Debian's own bookworm images are: mmdebstrap, the Essential set plus
apt, merged /usr (what ``debian:bookworm-slim`` holds), imported into a buildah store of this test's cache, so
the Containerfile's apt step really installs ``deploy/image/packages.txt``. The build runs as a
user runs it (``buildah bud -f Containerfile .``, chroot isolation), reaching Debian's archive and
PyPI; the host's CA bundle is mounted for pip (``CA_BUNDLE``, as docs/install.md says for a
TLS-inspecting proxy).

The oracle is build_image.sh's archive (tests/e2e/test_image.py's fixture) and the package list:
the same image config (user, entrypoint, command, environment, port, volume, working directory,
the title/description/version labels), every listed package installed at the version
build_image.sh's base has, every Debian package of that base present, the same Python
distributions at the same versions, the same ``/usr/local/bin/kfold``, every module precompiled,
and ``kfold --version`` answering inside it as uid 65532 with a read-only root. Cached under
``$KFOLD_CACHE/containerfile`` (the base tar, buildah's layers): a warm run rebuilds only what
changed.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kfold import __version__
from tests.e2e.conftest import REPO
from tests.e2e.test_image import Image, archive  # noqa: F401  (fixture)

pytestmark = [
    pytest.mark.timeout(1500),
    pytest.mark.skipif(os.geteuid() != 0, reason="buildah's chroot isolation and mmdebstrap's root mode need root"),
]
CACHE = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "containerfile"
STORE = ["--root", str(CACHE / "storage"), "--runroot", str(CACHE / "run"), "--storage-driver", "overlay"]
# Debian's bookworm images: the Essential set and apt, merged /usr.
BASE_ARGS = ["--mode=root", "--variant=apt", "--format=tar", "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr", "bookworm"]
BASE_IMAGE = "localhost/kfold-test-base:bookworm"
BUILT = "localhost/kfold:containerfile"
CA = Path("/etc/ssl/certs/ca-certificates.crt")


def buildah(*args: str, timeout: float = 1200) -> str:
    out = subprocess.run(["buildah", *STORE, *args], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"buildah {' '.join(args)}: rc {out.returncode}\n{out.stdout[-4000:]}{out.stderr[-4000:]}"
    return out.stdout


def _base() -> None:
    """The Debian base in buildah's store, made once per mmdebstrap arguments."""
    key = hashlib.sha256(" ".join(BASE_ARGS).encode()).hexdigest()[:12]
    tar = CACHE / f"base-{key}.tar"
    if not tar.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        part = tar.with_suffix(".part")
        made = subprocess.run(["mmdebstrap", "--quiet", *BASE_ARGS, str(part)], capture_output=True, text=True,
                              timeout=900)
        assert made.returncode == 0, made.stderr[-4000:]
        part.rename(tar)
    if buildah("images", "--format", "{{.Name}}:{{.Tag}}", "--filter", f"reference={BASE_IMAGE}").strip():
        return
    ctr = buildah("from", "scratch").strip()
    try:
        buildah("add", ctr, str(tar), "/")
        buildah("config", "--cmd", "/bin/bash", ctr)
        buildah("commit", "-q", ctr, BASE_IMAGE)
    finally:
        buildah("rm", ctr)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Image:
    if shutil.which("buildah") is None:
        pytest.fail("buildah is not installed: apt-get install -y buildah (bash scripts/setup.sh does, as root)")
    _base()
    volume = ["--volume", f"{CA.parent}:/run/host-certs:ro", "--build-arg",
              f"CA_BUNDLE=/run/host-certs/{CA.name}"] if CA.is_file() else []
    buildah("bud", "--isolation=chroot", "--layers", "--build-arg", f"BASE={BASE_IMAGE}", *volume,
            "-f", "Containerfile", "-t", BUILT, str(REPO))
    work = tmp_path_factory.mktemp("containerfile")
    oci = work / "kfold.oci.tar"
    buildah("push", "-q", BUILT, f"oci-archive:{oci}:{__version__}")
    image = Image(oci, work)
    yield image
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def reference(archive, tmp_path_factory) -> Image:  # noqa: F811
    work = tmp_path_factory.mktemp("build_image")
    yield Image(archive, work)
    shutil.rmtree(work, ignore_errors=True)


def listed() -> list[str]:
    text = (REPO / "deploy" / "image" / "packages.txt").read_text()
    return [w for line in text.splitlines() for w in line.split("#", 1)[0].split()]


def dpkg(image: Image) -> dict[str, str]:
    """Installed Debian package -> version, read from the image's dpkg database."""
    out, pkg, status = {}, {}, (image.root / "var/lib/dpkg/status").read_text()
    for block in status.split("\n\n"):
        pkg = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(" "))
        if pkg.get("Status", "").endswith(" installed"):
            out[pkg["Package"]] = pkg["Version"]
    return out


def distributions(image: Image) -> set[str]:
    site = image.root / "usr/local/lib/python3.11/dist-packages"
    return {p.name.removesuffix(".dist-info") for p in site.glob("*.dist-info")}


def test_the_containerfile_image_has_build_image_shs_config(built, reference):
    mine, theirs = built.config["config"], reference.config["config"]
    for field in ("User", "Entrypoint", "Cmd", "ExposedPorts", "Volumes", "WorkingDir"):
        assert mine.get(field) == theirs.get(field), field
    assert sorted(mine["Env"]) == sorted(theirs["Env"])
    for label in ("title", "description", "version"):
        name = f"org.opencontainers.image.{label}"
        assert mine["Labels"][name] == theirs["Labels"][name], name
    assert mine["Labels"]["org.opencontainers.image.version"] == __version__


def test_the_same_packages_and_distributions(built, reference):
    mine, theirs = dpkg(built), dpkg(reference)
    assert listed() and all(p in mine and mine[p] == theirs[p] for p in listed()), \
        {p: (mine.get(p), theirs.get(p)) for p in listed()}
    assert set(theirs) <= set(mine), sorted(set(theirs) - set(mine))   # the base adds apt and what it needs
    assert distributions(built) == distributions(reference) and any(d.startswith("kfold-") for d in distributions(built))
    script = "usr/local/bin/kfold"
    assert (built.root / script).read_bytes() == (reference.root / script).read_bytes()


def test_every_module_is_precompiled_and_the_journal_directory_is_nonroots(built):
    for lib in ("usr/lib/python3.11", "usr/local/lib/python3.11/dist-packages"):
        sources = list((built.root / lib).rglob("*.py"))
        missing = [p for p in sources if not (p.parent / "__pycache__" / f"{p.stem}.cpython-311.pyc").is_file()]
        assert sources and not missing, missing[:5]
    owner = (built.root / "var/lib/kfold").stat()
    assert (owner.st_uid, owner.st_gid) == (65532, 65532)


def test_kfold_answers_inside_the_containerfile_image(built):
    version = built.run(["--version"])
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"kfold {__version__}"
    help_ = built.run(["run", "--help"])
    assert help_.returncode == 0 and "--listen" in help_.stdout, help_.stderr
