"""The step host: a warm Python that runs whole ``init_iter0.py`` / ``iter_step.py`` calls.

An agent runs ``iter_step.py`` as a fresh process every iteration. The warm worker
(``worker/daemon.py``) keeps *Blender* alive, but a fresh CLI process still paid its own
start: numpy, python-fcl, pillow and the island_tools modules (~0.2 s), then geometry,
annotation and JSON on cold caches. So the CLI is now a thin client: this module's
``run_cli`` uses nothing but cheap standard-library modules (plus ``island_tools.files.configfile``
/ ``.errors`` and ``worker.daemon_client``, written to stay so) and hands the whole call -
argv, working directory, environment, umask - to a long-lived Python that has everything
imported (``scripts/_step_host_server.py``). That host runs exactly the in-process CLI
(``scripts.iter_step.run(argv)``), whose Blender jobs go on to the warm worker as before,
and streams the call's stdout/stderr lines back as they are printed; the client prints them
and exits with the host's exit code.

    agent -> iter_step.py (stdlib client) -> step host (python: island_tools, numpy, fcl, PIL)
                                               -> warm worker (Blender: apply, save, render)

Same machinery as the warm worker (``worker.daemon``: private 0700 directory, 0600 socket,
SO_PEERCRED, race-safe start on demand, one call at a time, idle exit, recycling after N
calls or above an RSS ceiling, retirement when the code on disk changes), with key
``host-py<X.Y>-<hash of interpreter and checkout>``; ``python -m worker.daemon --status`` /
``--stop`` list and stop it with the workers.

When the host is used: exactly when the warm worker would be (``daemon_allowed``: not with
``--no-daemon``, ``daemon: false`` or under pytest/CI unless ``ISLAND_REFINER_DAEMON=1``),
never for ``--help``, nor from a Python that lacks the packages the host imports
(``HOST_MODULES``: the call runs in this process, whose own line says what is wrong). A host
that cannot be started is reported in one line and the call runs in this process instead.
A host that dies mid-call (crash, OOM kill) is replaced and the call retried once - safe,
because a step stages everything and moves ``current_state.json`` last (a killed step
leaves iteration N-1 intact and iteration N re-steppable); a second death is exit 7. If the
client itself is killed, the host finishes the call (its output is lost; the iteration is
complete or untouched, never half-written).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from island_tools.errors import EXIT_INTERNAL, IslandError  # noqa: E402
from island_tools.files.configfile import DEFAULTS, read_config  # noqa: E402
from worker import daemon_client as daemon  # noqa: E402

TYPE_CHECKING = False  # not typing's: the client stays cheap to import
if TYPE_CHECKING:
    from typing import Any

SERVER = Path(__file__).resolve().with_name("_step_host_server.py")

PROGS = ("init_iter0", "iter_step")
# A call waits on at most two worker jobs, each with its own timeout, plus one retry.
CALL_TIMEOUT_S = 3 * daemon.DEFAULT_TIMEOUT_S
_LOCAL_FLAGS = ("-h", "--help", "--no-daemon")
# What the host imports before it serves (``_step_host_server.Host.prepare``): a Python
# without them (a system python3 beside the venv) could never start one.
HOST_MODULES = ("numpy", "fcl", "PIL")


def host_can_run() -> bool:
    """Whether this interpreter has the packages the host imports (``find_spec``: nothing
    is imported). Without them the call runs in this process, which says what is wrong in
    its own words - no 'step host unavailable' line before it (issue 33)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(m) is not None for m in HOST_MODULES)
    except (ImportError, ValueError):
        return False


def host_key() -> str:
    digest = daemon.short_digest(f"{sys.executable}\0{REPO}")
    return f"host-py{sys.version_info[0]}.{sys.version_info[1]}-{digest}"


def host_fingerprint() -> str:
    """Every module a call may run: a host started from older code retires."""
    files: list[Path] = []
    for package in ("island_tools", "worker", "scripts"):
        files += sorted((REPO / package).rglob("*.py"))
    return daemon.fingerprint(files)


def host_command(paths: daemon.Paths, options: daemon.DaemonOptions) -> list[str]:
    return [sys.executable, str(SERVER), "--serve",
            "--dir", str(paths.directory), "--key", paths.key,
            "--idle-s", repr(float(options.idle_s)), "--max-jobs", str(int(options.max_jobs)),
            "--max-rss-mb", str(int(options.max_rss_mb))]


# --------------------------------------------------------------------------- client

def _config_arg(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def _umask() -> int:
    old = os.umask(0o077)
    os.umask(old)
    return old


def _print_stream(message: dict[str, Any]) -> None:
    out = sys.stdout if message.get("stream") == "stdout" else sys.stderr
    text = message.get("text")
    if isinstance(text, str):
        out.write(text)
        out.flush()


def run_cli(prog: str, argv: list[str]) -> int | None:
    """Run ``prog argv`` on the step host and return its exit code; None means "run it in
    this process" (host not wanted, or it could not be started)."""
    if any(arg in _LOCAL_FLAGS for arg in argv):
        return None
    try:
        config = {**DEFAULTS, **read_config(_config_arg(argv))}
    except IslandError:
        return None  # the in-process path reports the bad config in its own words
    if not daemon.daemon_allowed(config["daemon"]) or not host_can_run():
        return None
    options = daemon.DaemonOptions(idle_s=config["daemon_idle_s"],
                                   max_jobs=config["daemon_max_jobs"],
                                   max_rss_mb=config["daemon_max_rss_mb"])
    start_failed: list[str] = []
    try:
        paths = daemon.Paths(daemon.private_dir(options.directory), host_key())

        def start() -> tuple[Any, int]:
            try:
                return daemon.start(paths, host_command(paths, options), os.environ,
                                    "step host")
            except IslandError as exc:
                start_failed.append(f"{exc.reason}; log: {exc.file}" if exc.file else exc.reason)
                raise

        reply = daemon.call(paths, {"prog": prog, "argv": list(argv), "env": dict(os.environ),
                                    "umask": _umask()},
                            host_fingerprint(), start, options, timeout=CALL_TIMEOUT_S,
                            label=prog, what="step host", on_stream=_print_stream)
    except KeyboardInterrupt:
        print(f"[{prog}] interrupted; the step host finishes the call (its iteration ends "
              "complete or untouched, never half-written)", file=sys.stderr)
        return 130
    except daemon.DaemonDirError as exc:   # another user's directory, or not private
        daemon.warn_once(f"[{prog}] step host unavailable, running in this process: "
                         f"{exc.one_line()}")
        return None
    except IslandError as exc:
        if start_failed:
            print(f"[{prog}] step host unavailable, running in this process: "
                  f"{start_failed[0]}", file=sys.stderr, flush=True)
            return None
        print(f"[{prog}] error (exit {exc.exit_code}): {exc.one_line()}", file=sys.stderr)
        return int(exc.exit_code)
    result = reply.get("result")
    if isinstance(result, dict) and isinstance(result.get("exit_code"), int):
        return int(result["exit_code"])
    err = reply.get("error") if isinstance(reply.get("error"), dict) else {}
    code = err.get("exit_code") if isinstance(err.get("exit_code"), int) else EXIT_INTERNAL
    print(f"[{prog}] error (exit {code}): {err.get('message') or 'the step host sent no result'}",
          file=sys.stderr)
    return int(code)
