"""One CLI call's outcome as the contract wants it: the exit code of an IslandError with its
one-line message on stderr, 130 on Ctrl-C, 1 with a traceback for a bug. Shared by the CLIs
(``scripts/``) and the add-on's delegated tasks (``blender_addon/tasks.py``); stdlib only."""
from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from .errors import EXIT_INTERNAL, IslandError


def run_main(prog: str, body: Callable[[], int]) -> int:
    """Run ``body``; an IslandError becomes its exit code and one line on stderr."""
    try:
        return body()
    except IslandError as exc:
        print(f"[{prog}] error (exit {exc.exit_code}): {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"[{prog}] interrupted; earlier iterations are intact", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last line of defence, still one line
        traceback.print_exc(file=sys.stderr)
        msg = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"[{prog}] error (exit {EXIT_INTERNAL}): internal: {msg}", file=sys.stderr)
        return EXIT_INTERNAL
