"""What differs between POSIX and Windows for the library's own files, in one place.

Standard library only (the worker and the thin ``iter_step.py`` client import it). Each name
is the POSIX value where the platform has it and a stated stand-in where it does not:

* ``O_NOFOLLOW``, ``O_DIRECTORY``, ``O_CLOEXEC``: 0 on Windows (its descriptors are not
  inherited anyway, PEP 446; ``O_NOFOLLOW`` guards shared directories, which the writes
  that need it - the MCP server's confinement, ``DIR_FD`` - refuse there);
* ``O_BINARY``: Windows' flag without which ``os.open`` gives a text-mode descriptor
  (``\\n`` written as ``\\r\\n``); 0 elsewhere;
* ``DIR_FD``: whether ``os.open`` takes ``dir_fd`` (POSIX; never on Windows);
* ``fchmod``: ``os.fchmod``, or ``os.chmod`` of the path where there is none (Windows'
  Python 3.11: only the read-only bit exists there);
* ``refuse(what, why)``: the one line a POSIX-only feature says elsewhere.
"""
from __future__ import annotations

import os
import sys

O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
O_BINARY: int = getattr(os, "O_BINARY", 0)
DIR_FD: bool = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
PLATFORM = {"win32": "Windows", "darwin": "macOS"}.get(sys.platform, sys.platform)


def fchmod(fd: int, path: str | os.PathLike[str] | None, mode: int) -> None:
    """``os.fchmod(fd, mode)``; ``os.chmod(path, mode)`` where the platform has no fchmod
    (``path`` None there: nothing to do, the file keeps what it was created with)."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    elif path is not None:
        os.chmod(path, mode)


def refuse(what: str, why: str) -> str:
    """The one line for a POSIX-only feature on this platform."""
    return f"{what}: not available on {PLATFORM}: {why}"
