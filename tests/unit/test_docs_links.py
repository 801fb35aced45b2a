"""Every relative link in README.md and docs/ points at a file that exists (and, with a #fragment,
at a heading of that file), so a reader following the doorway never meets a dead end."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", page.read_text(), re.M)}


def _links():
    for page in PAGES:
        for m in LINK.finditer(page.read_text()):
            target = m.group(1)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            yield page, target


@pytest.mark.parametrize("page,target", list(_links()),
                         ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else v)
def test_a_relative_link_resolves(page: Path, target: str):
    path, _, fragment = target.partition("#")
    dest = (page.parent / path).resolve()
    assert dest.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"
    if fragment and dest.suffix == ".md":
        assert fragment in _anchors(dest), \
            f"{page.relative_to(ROOT)} links to {target}: {dest.name} has no heading #{fragment}"


def test_the_links_are_found():
    assert sum(1 for _ in _links()) > 20
