"""Extract a tar archive without letting it write outside the destination, on every supported Python.

Python 3.11.4+ (and 3.12+) has extraction filters (PEP 706); ``filter="data"`` is used when
present. Debian 12's Python 3.11.2 has none, so the data filter's rules are applied here before
extraction, to a copy of each member:

- a member name is made relative (leading ``/`` stripped) and must stay inside the destination;
- a symlink's or hard link's target must stay inside the destination (an absolute target is refused);
- device files and FIFOs are refused;
- a regular file is made owner-readable and -writable, loses the setuid, setgid and sticky bits and
  the group/other write bits, and group/other execute when its owner has none; a directory keeps
  only rwxr-xr-x of its bits (the filter leaves its mode to the umask, which 3.11.2 cannot express);
- owners are not taken from the archive (files belong to whoever extracts).

A refused member raises :class:`UnsafeMember` naming it (by hand: before anything is written).
"""
from __future__ import annotations

import copy
import os
import tarfile
from pathlib import Path

HAS_FILTERS = hasattr(tarfile, "tar_filter")


class UnsafeMember(Exception):
    """A member the ``data`` extraction filter would refuse."""


def checked_members(tf: tarfile.TarFile, dest: str | os.PathLike) -> list[tarfile.TarInfo]:
    """Copies of ``tf``'s members made safe as the ``data`` filter makes them, or UnsafeMember."""
    root = os.path.realpath(dest)
    out = []
    for member in tf.getmembers():
        m = copy.copy(member)
        name = m.name.lstrip("/" + os.sep)
        target = os.path.realpath(os.path.join(root, name))
        if os.path.commonpath([root, target]) != root:
            raise UnsafeMember(f"{member.name!r} would be extracted outside {dest}")
        if m.ischr() or m.isblk() or m.isfifo():
            raise UnsafeMember(f"{member.name!r} is a device or FIFO")
        if m.issym() or m.islnk():
            link = m.linkname
            if os.path.isabs(link):
                raise UnsafeMember(f"{member.name!r} links to the absolute path {link!r}")
            base = os.path.dirname(target) if m.issym() else root
            if os.path.commonpath([root, os.path.realpath(os.path.join(base, link))]) != root:
                raise UnsafeMember(f"{member.name!r} links outside {dest} ({link!r})")
        m.name = name
        if m.isreg() or m.islnk():
            mode = (m.mode | 0o600) & 0o755
            if not mode & 0o100:
                mode &= ~0o011
            m.mode = mode
        else:
            m.mode = (m.mode & 0o755) | 0o700
        m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""
        out.append(m)
    return out


def extract_all(archive: str | os.PathLike, dest: str | os.PathLike, *, use_filter: bool | None = None) -> None:
    """Extract ``archive`` into ``dest`` with the ``data`` filter's rules; ``use_filter`` picks the
    path (default: the stdlib filter when this Python has it)."""
    use_filter = HAS_FILTERS if use_filter is None else use_filter
    Path(dest).mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tf:
        if use_filter:
            try:
                tf.extractall(dest, filter="data")
            except tarfile.FilterError as exc:
                raise UnsafeMember(str(exc)) from exc
        else:
            tf.extractall(dest, members=checked_members(tf, dest))
