"""One CLI call's outcome as the contract wants it: the exit code of an IslandError with its
one-line message on stderr, 130 on Ctrl-C, exit 10 for a write the filesystem refused, and 1
for a bug - one line naming a log file that keeps the traceback (``$ISLAND_REFINER_DEBUG=1``
prints it too). Shared by the CLIs (``scripts/``) and the add-on's delegated tasks
(``blender_addon/tasks.py``); stdlib only."""
from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from .errors import EXIT_INTERNAL, IslandError, from_oserror, printable

ENV_DEBUG = "ISLAND_REFINER_DEBUG"


def crash_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "island-refiner" / "crashes"


def _keep_traceback(prog: str, text: str) -> Path | None:
    """Write the traceback where the user can find it; None when nowhere is writable."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in (crash_dir(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{prog.replace(' ', '_')}-{stamp}-{os.getpid()}.txt"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            return path
        except OSError:
            continue
    return None


def _fail(prog: str, exc: IslandError) -> int:
    print(error_line(prog, exc), file=sys.stderr)
    return exc.exit_code


def error_line(prog: str, exc: IslandError) -> str:
    """``[prog] error (exit N): <one line>`` - how every tool reports an IslandError."""
    return f"[{prog}] error (exit {exc.exit_code}): {exc.one_line()}"


def interrupted_line(prog: str) -> str:
    return f"[{prog}] interrupted; earlier iterations are intact"


def failure(prog: str, exc: BaseException) -> tuple[int, str]:
    """(exit code, the one line) for an exception that ended a call: an IslandError's own
    code, 130 for an interrupt, 10 for a write the filesystem refused, else 1 with the
    traceback kept in a file the line names (call it where the exception is handled)."""
    if isinstance(exc, IslandError):
        return exc.exit_code, error_line(prog, exc)
    if isinstance(exc, KeyboardInterrupt):
        return 130, interrupted_line(prog)
    known = from_oserror(exc) if isinstance(exc, OSError) else None
    if known is not None:
        return known.exit_code, error_line(prog, known)
    text = "".join(traceback.format_exception(exc))
    if os.environ.get(ENV_DEBUG, "").strip() not in ("", "0"):
        sys.stderr.write(text)
    kept = _keep_traceback(prog, text)
    msg = printable(" ".join(f"{type(exc).__name__}: {exc}".split()))
    where = f"traceback in {kept}" if kept else "traceback not kept (nowhere writable)"
    return EXIT_INTERNAL, (f"[{prog}] error (exit {EXIT_INTERNAL}): internal: {msg} ({where}; "
                           f"set {ENV_DEBUG}=1 to print it)")


def run_main(prog: str, body: Callable[[], int]) -> int:
    """Run ``body``; an IslandError becomes its exit code and one line on stderr."""
    try:
        return body()
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - still one line
        code, line = failure(prog, exc)
        print(line, file=sys.stderr)
        return code
