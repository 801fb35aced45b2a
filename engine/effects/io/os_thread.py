"""Give the calling OS thread a name (Linux ``prctl(PR_SET_NAME)``), so ``top -H``,
``/proc/<pid>/task/*/comm`` and the benchmarks can tell kfold's threads apart: Python 3.11's
``threading`` names only its own ``Thread`` objects, never the OS thread.

Best effort: off Linux, or without a usable libc, nothing happens. The kernel keeps 15 bytes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

_PR_SET_NAME = 15
_prctl = None
if sys.platform.startswith("linux"):
    try:
        _prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        _prctl = None


def name_this_thread(name: str) -> None:
    if _prctl is not None:
        _prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
