"""``flock`` as a context manager: the one lock helper of the daemons and the batch markers.

Standard library only (``contextlib``, ``fcntl``, ``os``, ``sys``): the worker may import it, and so
may the thin ``iter_step.py`` client (worker/daemon_client.py), which must stay cheap to
import. Locks are released by the kernel when their process dies.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import sys

TYPE_CHECKING = False  # not typing's: a thin client imports this module
if TYPE_CHECKING:
    from collections.abc import Iterator


@contextlib.contextmanager
def flock(path: str | os.PathLike[str], *, shared: bool = False, blocking: bool = True,
          mode: int = 0o600) -> Iterator[bool]:
    """Hold ``flock`` on ``path`` (created with ``mode`` if needed) while in the block;
    yields False instead when ``blocking`` is off and another process holds it."""
    # O_NOFOLLOW: a lock file planted as a symlink (in a shared directory) is refused, never
    # followed to truncate or create something else
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    # A confinement guard (``atomic.confined``, the MCP server's) can only be installed once
    # atomic is imported: then the lock file is created beneath its root like every write.
    atomic = sys.modules.get("island_tools.files.atomic")
    fd = (atomic.open_beneath(path, flags, mode) if atomic is not None
          and atomic.current_guard() is not None else os.open(path, flags, mode))
    try:
        kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, kind | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
