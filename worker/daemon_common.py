"""What ``worker.launch`` and the warm-worker client (``worker.daemon_client``) both take.

Kept below both so that every import between them runs one way (``launch`` ->
``daemon_client`` -> here): the daemon's options (``DaemonOptions`` and its defaults), its
errors (``DaemonDirError`` and the one-warning rule, ``raise_result_error`` for an error a
worker sent across the process boundary) and the environment a Blender binary is started
with (``_child_env``), which the subprocess runner and a binary's warm worker share.

Cheap to import, like ``daemon_client`` (a thin CLI client loads it): stdlib modules and
``island_tools.errors`` only; no dataclasses or typing at import time.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from island_tools.errors import ERROR_CLASSES, EXIT_INTERNAL, IslandError, WorkerError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``typing`` costs a thin client ~4 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

DEFAULT_IDLE_S = 300.0
DEFAULT_MAX_JOBS = 200
DEFAULT_MAX_RSS_MB = 2048


class DaemonOptions:
    """How a client reaches (and, if needed, starts) a daemon: the limits a daemon it
    starts gets, the directory (None -> ``daemon_client.default_dir()``) and where one-line
    notices go (a daemon died and the job is retried; None -> stderr). A plain class:
    ``dataclasses`` would cost a thin client ~8 ms of imports."""

    __slots__ = ("idle_s", "max_jobs", "max_rss_mb", "directory", "notice", "slot")

    def __init__(self, idle_s: float = DEFAULT_IDLE_S, max_jobs: int = DEFAULT_MAX_JOBS,
                 max_rss_mb: int = DEFAULT_MAX_RSS_MB, directory: str | None = None,
                 notice: Callable[[str], None] | None = None, slot: int = 0) -> None:
        self.idle_s = idle_s
        self.max_jobs = max_jobs
        self.max_rss_mb = max_rss_mb
        self.directory = directory
        self.notice = notice
        self.slot = slot   # > 0: the slot-th extra warm worker of this Blender (parallel use)

    def with_slot(self, slot: int) -> DaemonOptions:
        return DaemonOptions(self.idle_s, self.max_jobs, self.max_rss_mb, self.directory,
                             self.notice, slot)

    def __repr__(self) -> str:
        return (f"DaemonOptions(idle_s={self.idle_s!r}, max_jobs={self.max_jobs!r}, "
                f"max_rss_mb={self.max_rss_mb!r}, directory={self.directory!r}, "
                f"slot={self.slot!r})")


class DaemonDirError(WorkerError):
    """The warm-worker directory cannot be used safely (another user's, or not private):
    callers run in this process instead, with one warning line (``warn_once``)."""


_WARNED: list[str] = []


def warn_once(message: str) -> None:
    """Print ``message`` on stderr the first time only (one line per process)."""
    if not _WARNED:
        _WARNED.append(message)
        print(message, file=sys.stderr, flush=True)


def raise_result_error(err: Mapping) -> None:
    """Re-raise a worker's ``{"type", "message", "exit_code"}`` as the same
    ``island_tools.errors`` class (an unknown type keeps its exit code)."""
    name = str(err.get("type", "IslandError"))
    message = str(err.get("message", "worker failed"))
    cls = ERROR_CLASSES.get(name)
    if cls is None:
        exc = IslandError(f"{name}: {message}" if name != "InternalError" else message)
        exc.exit_code = int(err.get("exit_code", EXIT_INTERNAL) or EXIT_INTERNAL)
        raise exc
    raise cls(message)


def _child_env(backend: Any) -> dict[str, str]:
    """The environment a Blender binary runs in (a job's subprocess or its warm worker)."""
    env = dict(os.environ)
    # The binary must use its own Python and numpy, never this interpreter's packages.
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE"):
        env.pop(key, None)
    env["PYTHONNOUSERSITE"] = "1"
    # The bpy 5.2 module setenv()s OCIO to its own colour config (OCIO v2.5) when imported;
    # every process started from one that imported it inherits that, and an older binary's
    # OpenColorIO aborts on it (Debian's 3.4: "minor version 5 is not supported"). A binary
    # uses its own config; an OCIO the user set (pointing elsewhere) is kept.
    if _is_bpy_module_ocio(env.get("OCIO", "")):
        env.pop("OCIO")
    env.update(getattr(backend, "extra_env", None) or {})
    return env


def _is_bpy_module_ocio(value: str) -> bool:
    parts = Path(value).parts if value else ()
    return ("bpy" in parts and "colormanagement" in parts
            and any(p in ("site-packages", "dist-packages") for p in parts))
