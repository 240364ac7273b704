"""The step host: a warm Python that runs whole ``init_iter0.py`` / ``iter_step.py`` calls.

An agent runs ``iter_step.py`` as a fresh process every iteration. The warm worker
(``worker/daemon.py``) keeps *Blender* alive, but a fresh CLI process still paid its own
start: numpy, python-fcl, pillow and the island_tools modules (~0.2 s), then geometry,
annotation and JSON on cold caches. So the CLI is now a thin client: this module's
``run_cli`` uses nothing but the standard library (plus ``island_tools.config`` /
``.errors`` and ``worker.daemon``'s socket code, all stdlib-only) and hands the whole call -
argv, working directory, environment, umask - to a long-lived Python that has everything
imported. That host runs exactly the in-process CLI (``scripts.iter_step.run(argv)``), whose
Blender jobs go on to the warm worker as before, and streams the call's stdout/stderr lines
back as they are printed; the client prints them and exits with the host's exit code.

    agent -> iter_step.py (stdlib client) -> step host (python: island_tools, numpy, fcl, PIL)
                                               -> warm worker (Blender: apply, save, render)

Same machinery as the warm worker (``worker.daemon``: private 0700 directory, 0600 socket,
SO_PEERCRED, race-safe start on demand, one call at a time, idle exit, recycling after N
calls or above an RSS ceiling, retirement when the code on disk changes), with key
``host-py<X.Y>-<hash of interpreter and checkout>``; ``python -m worker.daemon --status`` /
``--stop`` list and stop it with the workers.

When the host is used: exactly when the warm worker would be (``daemon_allowed``: not with
``--no-daemon``, ``daemon: false`` or under pytest/CI unless ``ISLAND_REFINER_DAEMON=1``),
never for ``--help``. A host that cannot be started is reported in one line and the call
runs in this process instead. A host that dies mid-call (crash, OOM kill) is replaced and
the call retried once - safe, because a step stages everything and moves
``current_state.json`` last (a killed step leaves iteration N-1 intact and iteration N
re-steppable); a second death is exit 7. If the client itself is killed, the host finishes
the call (its output is lost; the iteration is complete or untouched, never half-written).
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from island_tools.errors import EXIT_INTERNAL, IslandError  # noqa: E402
from worker import daemon  # noqa: E402

PROGS = ("init_iter0", "iter_step")
# A call waits on at most two worker jobs, each with its own timeout, plus one retry.
CALL_TIMEOUT_S = 3 * daemon.DEFAULT_TIMEOUT_S
_LOCAL_FLAGS = ("-h", "--help", "--no-daemon")


def host_key() -> str:
    digest = hashlib.sha1(f"{sys.executable}\0{REPO}".encode()).hexdigest()[:10]
    return f"host-py{sys.version_info[0]}.{sys.version_info[1]}-{digest}"


def host_fingerprint() -> str:
    """Every module a call may run: a host started from older code retires."""
    files: list[Path] = []
    for package in ("island_tools", "worker", "scripts"):
        files += sorted((REPO / package).rglob("*.py"))
    return daemon.fingerprint(files)


def host_command(paths: daemon.Paths, options: daemon.DaemonOptions) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--serve",
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
    from island_tools.config import load_settings

    if any(arg in _LOCAL_FLAGS for arg in argv):
        return None
    try:
        settings = load_settings(_config_arg(argv))
    except IslandError:
        return None  # the in-process path reports the bad config in its own words
    if not daemon.daemon_allowed(settings.daemon):
        return None
    options = daemon.DaemonOptions(idle_s=settings.daemon_idle_s,
                                   max_jobs=settings.daemon_max_jobs,
                                   max_rss_mb=settings.daemon_max_rss_mb)
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


# --------------------------------------------------------------------------- host

class _Stream(io.TextIOBase):
    """A text stream whose lines go to the client as ``{"stream": name, "text": ...}``."""

    def __init__(self, name: str, emit: Callable[[dict[str, Any]], None]) -> None:
        self.name_ = name
        self.emit = emit
        self.buffer_: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:  # type: ignore[override]
        self.buffer_.append(text)
        if "\n" in text:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self.buffer_:
            text, self.buffer_ = "".join(self.buffer_), []
            self.emit({"stream": self.name_, "text": text})


class StepHostHandler(daemon.Handler):
    name = "step host"

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        self.umask = _umask()

    def prepare(self) -> None:
        import numpy  # noqa: F401

        import island_tools.annotate  # noqa: F401
        import island_tools.forward_axis  # noqa: F401
        import island_tools.geometry  # noqa: F401
        import island_tools.iteration  # noqa: F401
        import scripts.init_iter0  # noqa: F401
        import scripts.iter_step  # noqa: F401
        import worker.launch  # noqa: F401

    def fingerprint(self) -> str:
        return host_fingerprint()

    def describe(self) -> dict[str, Any]:
        return {"executable": sys.executable}

    def label(self, job: Any) -> str:
        return str(job.get("prog")) if isinstance(job, dict) else "?"

    def run(self, job: Any, emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        from island_tools.errors import UsageError

        if not isinstance(job, dict) or job.get("prog") not in PROGS:
            raise UsageError(f"the step host runs {' / '.join(PROGS)}, not {job!r:.60}")
        argv, env, umask = job.get("argv"), job.get("env"), job.get("umask")
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
                and isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in env.items())):
            raise UsageError("malformed step-host request: argv and env must be strings")
        module = sys.modules[f"scripts.{job['prog']}"]
        os.environ.clear()
        os.environ.update(env)  # the call sees the client's environment, as if run there
        if isinstance(umask, int):
            os.umask(umask & 0o777)
        out, err = _Stream("stdout", emit), _Stream("stderr", emit)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
        try:
            code: Any = module.run(argv)
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        finally:
            out.flush()
            err.flush()
            sys.stdout, sys.stderr = saved
        return {"result": {"exit_code": int(code or 0)}}

    def between_jobs(self) -> None:
        os.environ.clear()
        os.environ.update(self.environ)
        os.umask(self.umask)
        gc.collect()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="scripts/_step_host.py",
                                 description="Run the step host (clients start it).")
    ap.add_argument("--serve", action="store_true", required=True)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--key", default=None)
    ap.add_argument("--idle-s", type=float, default=daemon.DEFAULT_IDLE_S)
    ap.add_argument("--max-jobs", type=int, default=daemon.DEFAULT_MAX_JOBS)
    ap.add_argument("--max-rss-mb", type=int, default=daemon.DEFAULT_MAX_RSS_MB)
    args = ap.parse_args(argv)
    return daemon.serve(args.dir, args.key or host_key(), args.idle_s, args.max_jobs,
                        args.max_rss_mb, StepHostHandler())


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
