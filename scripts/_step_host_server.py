"""The step host's server side: a warm Python running whole CLI calls (see _step_host.py).

Started by the client (``_step_host.host_command``) as ``python scripts/_step_host_server.py
--serve ...``; runs ``worker.daemon.serve`` with ``StepHostHandler``.
"""
from __future__ import annotations

import contextlib
import gc
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts._step_host import PROGS, _umask, host_fingerprint, host_key  # noqa: E402
from worker import daemon  # noqa: E402


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
        import island_tools.iteration  # noqa: F401
        import island_tools.measure.forward_axis  # noqa: F401
        import island_tools.measure.geometry  # noqa: F401
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

    ap = argparse.ArgumentParser(prog="scripts/_step_host_server.py",
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
