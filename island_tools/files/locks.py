"""File locks: ``flock`` as a context manager (the daemons, the batch markers) and ``lock_fd``
(the scene, group and agent-run locks on descriptors their callers open).

POSIX: ``fcntl.flock``, shared or exclusive, released by the kernel when the process dies.
Windows has no ``fcntl``: there ``filelock.lock_descriptor`` (``LockFileEx`` on the file's
first byte; the extension carries filelock's wheel) takes an exclusive lock for a shared
one too (fewer readers at once, never a missed conflict), also released when the process
dies. A Python with neither refuses in one line (``LockUnavailable``, exit 2).

Standard library only on POSIX (``contextlib``, ``fcntl``, ``os``, ``sys``): the worker may
import it, and so may the thin ``iter_step.py`` client (worker/daemon_client.py), which must
stay cheap to import; filelock is imported only where ``fcntl`` is missing.
"""
from __future__ import annotations

import contextlib
import os
import sys

from .portable import O_BINARY, O_CLOEXEC, O_NOFOLLOW, refuse

try:
    import fcntl
except ImportError:      # Windows
    fcntl = None  # type: ignore[assignment]

TYPE_CHECKING = False  # not typing's: a thin client imports this module
if TYPE_CHECKING:
    from collections.abc import Iterator


def _unavailable(why: str) -> Exception:
    from ..errors import UsageError

    return UsageError(refuse("file locks", why),
                      fix="install filelock>=3.30 into this Python (the Blender extension "
                          "carries it)")


def lock_fd(fd: int, *, shared: bool = False, blocking: bool = True) -> bool:
    """Lock the open descriptor ``fd`` (released when it is closed); False when
    ``blocking`` is off and another process holds a conflicting lock."""
    if fcntl is not None:
        kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, kind | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True
    try:
        from filelock import lock_descriptor
    except ImportError:
        raise _unavailable("this Python has no fcntl (POSIX) and no filelock") from None
    try:
        return bool(lock_descriptor(fd, blocking=blocking))
    except OSError as exc:   # filelock without a native lock on this platform (ENOSYS)
        raise _unavailable(f"filelock cannot lock here ({exc.strerror or exc})") from None


@contextlib.contextmanager
def flock(path: str | os.PathLike[str], *, shared: bool = False, blocking: bool = True,
          mode: int = 0o600) -> Iterator[bool]:
    """Hold a lock on ``path`` (created with ``mode`` if needed) while in the block;
    yields False instead when ``blocking`` is off and another process holds it."""
    # O_NOFOLLOW: a lock file planted as a symlink (in a shared directory) is refused, never
    # followed to truncate or create something else
    flags = os.O_RDWR | os.O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_BINARY
    # A confinement guard (``atomic.confined``, the MCP server's) can only be installed once
    # atomic is imported: then the lock file is created beneath its root like every write.
    atomic = sys.modules.get("island_tools.files.atomic")
    fd = (atomic.open_beneath(path, flags, mode) if atomic is not None
          and atomic.current_guard() is not None else os.open(path, flags, mode))
    try:
        yield lock_fd(fd, shared=shared, blocking=blocking)
    finally:
        os.close(fd)
