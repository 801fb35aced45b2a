"""The two ways kfold's image is built cannot drift apart (issue 52, item 5): ``Containerfile``
(podman, buildah, docker) and ``scripts/build_image.sh`` (mmdebstrap + umoci) read one package
list, ``deploy/image/packages.txt``, and neither names a package of it itself; the image config
each states (user, entrypoint, command, environment, port, volume, working directory, version) is
the same. tests/e2e/test_containerfile.py builds the Containerfile and compares the images.
"""
from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = (REPO / "Containerfile").read_text()
BUILD_IMAGE = (REPO / "scripts" / "build_image.sh").read_text()
LIST = "deploy/image/packages.txt"


def _code(text: str) -> str:
    """``text`` without its comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def listed() -> list[str]:
    return [w for line in (REPO / LIST).read_text().splitlines() for w in line.split("#", 1)[0].split()]


def test_both_builds_read_the_one_package_list_and_name_none_of_its_packages():
    assert listed() and all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", p) for p in listed())
    for name, text in (("Containerfile", CONTAINERFILE), ("build_image.sh", BUILD_IMAGE)):
        code = _code(text)
        assert LIST in code, f"{name} does not read {LIST}"
        named = [p for p in listed() if re.search(rf"(?<![\w.-]){re.escape(p)}(?![\w.-])", code)]
        assert not named, f"{name} names {named} itself: the list is the one place they are named"


def _containerfile_config() -> dict:
    final = _code(CONTAINERFILE).split("\nFROM ")[-1]   # the last stage is the image
    words = {"ENV": [], "EXPOSE": [], "VOLUME": []}
    out: dict = {}
    joined = re.sub(r"\\\n\s*", " ", final)
    for line in joined.splitlines():
        op, _, rest = line.strip().partition(" ")
        if op in ("ENTRYPOINT", "CMD"):
            out[op] = json.loads(rest)
        elif op in ("USER", "WORKDIR"):
            out[op] = rest.strip()
        elif op in words:
            words[op] += shlex.split(rest)
    out.update(words)
    args = dict(re.findall(r"^ARG (\w+)=(\S*)$", CONTAINERFILE, re.M))
    out["version"] = args["KFOLD_VERSION"]
    return out


def _build_image_config() -> dict:
    flags = re.findall(r"--config\.(\w+) (\S+)", BUILD_IMAGE)
    def each(name: str) -> list[str]:
        return [v for k, v in flags if k == name]
    return {"ENTRYPOINT": each("entrypoint"), "CMD": each("cmd"), "USER": each("user")[0],
            "WORKDIR": each("workingdir")[0], "ENV": each("env"), "EXPOSE": each("exposedports"),
            "VOLUME": each("volume")}


def test_both_builds_state_the_same_image_config():
    mine, theirs = _containerfile_config(), _build_image_config()
    assert theirs["USER"] == "\"$UID_GID\"" or theirs["USER"] == "$UID_GID"
    assert re.search(r"^UID_GID=65532:65532\b", BUILD_IMAGE, re.M) and mine["USER"] == "65532:65532"
    for key in ("ENTRYPOINT", "CMD", "WORKDIR", "EXPOSE", "VOLUME"):
        assert mine[key] == theirs[key], key
    assert sorted(mine["ENV"]) == sorted(theirs["ENV"])
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert mine["version"] == project["version"], "Containerfile's KFOLD_VERSION is pyproject.toml's version"
    assert f'org.opencontainers.image.description="{project["description"]}"' in CONTAINERFILE
