"""A child Blender never outlives the process that waits for it (Linux ``PR_SET_PDEATHSIG``).

A render node kills a Dask worker with SIGKILL (OOM killer, a job scheduler, a person): no
Python code runs in it any more, so nothing can kill the Blender it started. The kernel can:
a child that asked for ``PR_SET_PDEATHSIG`` gets the signal when its parent dies.
``die_with_parent()`` returns the ``preexec_fn`` that asks for SIGKILL (stdlib ``ctypes`` and
libc's ``prctl``; the setting survives ``execve`` of the Blender binary). Elsewhere than
Linux it returns None and nothing changes.

Two caveats, both harmless where it is used (``worker.launch``'s per-job Blender):
* "parent" is the *thread* that forked. The thread that starts a job Blender waits for it in
  ``communicate()``, so it outlives the child except when the whole process dies.
* the parent may die between ``fork`` and ``prctl``; the child then finds itself re-parented
  and kills itself.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong]
    return fn


_PRCTL = _prctl()


def die_with_parent(sig: int | None = None) -> Callable[[], None] | None:
    """``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` (default SIGKILL) when
    its parent dies. None off Linux (no prctl; Windows has no SIGKILL nor preexec_fn).

    Resolved before the fork, so the child only makes one libc call."""
    prctl = _PRCTL
    if prctl is None:
        return None
    if sig is None:
        sig = signal.SIGKILL
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:   # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec
