"""tests/safe_tar.py: the stdlib ``data`` filter where this Python has it (3.11.4+), the same rules by
hand where it does not (Debian 12's 3.11.2); both paths must extract the same tree and refuse the
same members. The refusals are the cases PEP 706 names: traversal, absolute names and links,
links out of the tree, device files; and the mode bits the filter clears."""
from __future__ import annotations

import io
import os
import stat
import tarfile

import pytest

from tests.safe_tar import HAS_FILTERS, UnsafeMember, extract_all

PATHS = [pytest.param(False, id="by-hand"),
         pytest.param(True, id="stdlib-filter",
                      marks=pytest.mark.skipif(not HAS_FILTERS, reason="this Python has no tarfile filters"))]


def _tar(tmp_path, members) -> str:
    path = tmp_path / "a.tar"
    with tarfile.open(path, "w") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return str(path)


def _file(name, data=b"x", mode=0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _link(name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _dir(name, mode=0o755):
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    return info, None


def _tree(root):
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            # A directory's mode is the umask's under the stdlib filter (see safe_tar).
            out[rel] = (stat.S_IFMT(st.st_mode), None if stat.S_ISDIR(st.st_mode) else stat.S_IMODE(st.st_mode),
                        os.readlink(p) if os.path.islink(p) else None, st.st_uid)
    return out


@pytest.mark.parametrize("use_filter", PATHS)
def test_a_good_archive_extracts_whole_with_unsafe_mode_bits_cleared(tmp_path, use_filter):
    arc = _tar(tmp_path, [_dir("d"), _file("d/a", b"hello"), _file("/abs-made-relative", b"r"),
                          _file("d/suid", b"s", mode=0o4777), _link("d/ln", "a"),
                          _link("d/hard", "d/a", tarfile.LNKTYPE)])
    out = tmp_path / "out"
    extract_all(arc, out, use_filter=use_filter)
    assert (out / "d" / "a").read_bytes() == b"hello"
    assert (out / "abs-made-relative").read_bytes() == b"r"
    assert os.readlink(out / "d" / "ln") == "a"
    assert (out / "d" / "hard").read_bytes() == b"hello"
    mode = stat.S_IMODE(os.stat(out / "d" / "suid").st_mode)
    assert mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWGRP | stat.S_IWOTH) == 0


@pytest.mark.skipif(not HAS_FILTERS, reason="this Python has no tarfile filters to compare with")
def test_both_paths_extract_the_same_tree(tmp_path):
    arc = _tar(tmp_path, [_dir("d", 0o777), _file("d/a", b"1", 0o6775), _link("d/l", "../d/a"), _file("b", b"2", 0o444),
                          _file("c", b"3", 0o677), _link("h", "b", tarfile.LNKTYPE)])
    extract_all(arc, tmp_path / "x", use_filter=True)
    extract_all(arc, tmp_path / "y", use_filter=False)
    assert _tree(tmp_path / "x") == _tree(tmp_path / "y")


@pytest.mark.parametrize("use_filter", PATHS)
@pytest.mark.parametrize("member", [
    pytest.param(lambda: _file("../escape"), id="traversal"),
    pytest.param(lambda: _file("d/../../escape"), id="nested-traversal"),
    pytest.param(lambda: _link("l", "/etc/passwd"), id="absolute-symlink"),
    pytest.param(lambda: _link("l", "../../outside"), id="symlink-out"),
    pytest.param(lambda: _link("h", "../outside", tarfile.LNKTYPE), id="hardlink-out"),
    pytest.param(lambda: (lambda i: (setattr(i, "type", tarfile.CHRTYPE), (i, None))[1])(tarfile.TarInfo("dev")),
                 id="device"),
])
def test_an_unsafe_member_is_refused_and_nothing_is_written_outside(tmp_path, use_filter, member):
    arc = _tar(tmp_path, [member()])
    out = tmp_path / "deep" / "out"
    with pytest.raises(UnsafeMember):
        extract_all(arc, out, use_filter=use_filter)
    assert not (tmp_path / "deep" / "escape").exists() and not (tmp_path / "escape").exists()
