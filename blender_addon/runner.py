"""Where the add-on's work runs: this Python, an external Python, or a child Blender.

Three rules (docs/ADDON.md explains why):

1. The open file is never replaced. Worker jobs open and save .blend files, so they always
   run in a child process: the Blender binary configured in ``DIRECTORYS.yaml``, else the
   running Blender's own binary (so files stay readable by it), else, under the ``bpy``
   wheel, the external Python running ``worker/entry.py`` with its ``bpy`` module.
2. Library work (``island_tools``: the loop, geometry, solver) runs in this process when
   ``island_tools`` and the packages it needs import here (the venv's ``bpy`` wheel);
   otherwise it is delegated to the external Python running the same CLIs
   (``scripts/init_iter0.py``, ``scripts/iter_step.py``, ``tasks.py``). Preference
   ``execution`` forces either.
3. Errors are ``IslandError``s either way: a delegated CLI's one-line error and exit code
   come back as an ``IslandError`` with that message and code.

No ``bpy`` import here: the running Blender's binary path comes in ``RunnerConfig``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import tasks

IN_PROCESS_MODULES = ("numpy", "trimesh", "fcl", "yaml")
TASKS_SCRIPT = Path(__file__).resolve().with_name("tasks.py")
_ERROR_LINE = re.compile(r"^\[[^\]]+\] error \(exit (\d+)\): (.*)$")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunnerConfig:
    repo: Path
    python: str
    config_path: Path
    execution: str = "AUTO"          # AUTO | IN_PROCESS | SUBPROCESS
    timeout_s: float = 600.0
    blender_binary: str = ""         # bpy.app.binary_path ("" under the bpy wheel)
    blender_version: str = ""


def find_repo(start: str | os.PathLike[str]) -> Path | None:
    """The checkout holding this add-on when it is loaded from the repository."""
    for parent in Path(start).resolve().parents:
        if (parent / "island_tools").is_dir() and (parent / "worker").is_dir():
            return parent
    return None


def default_python(repo: Path | None) -> str:
    """The project's venv Python, else this interpreter when it has the packages."""
    if repo is not None:
        venv = repo / ".venv" / "bin" / "python"
        if venv.is_file():
            return str(venv)
    return sys.executable


def can_run_in_process(repo: Path) -> bool:
    if str(repo) not in sys.path and not (repo / "island_tools").is_dir():
        return False
    return all(importlib.util.find_spec(m) is not None for m in IN_PROCESS_MODULES)


def _island_error(message: str, exit_code: int):
    from island_tools.errors import ERROR_CLASSES, IslandError

    for cls in ERROR_CLASSES.values():
        if (cls is not IslandError and cls.exit_code == exit_code
                and cls.__bases__ == (IslandError,)):
            exc = cls(message)
            break
    else:
        exc = IslandError(message)
        exc.exit_code = exit_code
    return exc


class Process:
    """A delegated CLI: polled without blocking (for a modal timer) or waited for."""

    def __init__(self, argv: Sequence[str], cwd: Path, timeout_s: float) -> None:
        self.argv = list(argv)
        self.timeout_s = timeout_s
        self.started = time.monotonic()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._partial = {"stdout": "", "stderr": ""}
        try:
            self.popen = subprocess.Popen(
                self.argv, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            from island_tools.errors import UsageError
            raise UsageError(f"cannot start '{self.argv[0]}': {exc}",
                             fix="set the Python path in the add-on preferences") from None
        self._sel = selectors.DefaultSelector()
        for name, pipe in (("stdout", self.popen.stdout), ("stderr", self.popen.stderr)):
            os.set_blocking(pipe.fileno(), False)
            self._sel.register(pipe, selectors.EVENT_READ, name)

    def poll(self, wait_s: float = 0.0) -> list[str]:
        """New complete stderr lines (progress); reads stdout too. Never blocks longer."""
        new: list[str] = []
        for key, _ in self._sel.select(timeout=wait_s):
            chunk = key.fileobj.read()
            if not chunk:
                self._sel.unregister(key.fileobj)
                continue
            text = self._partial[key.data] + chunk.decode("utf-8", "replace")
            *lines, self._partial[key.data] = text.split("\n")
            getattr(self, key.data).extend(lines)
            if key.data == "stderr":
                new.extend(ln for ln in lines if ln.strip())
        if time.monotonic() - self.started > self.timeout_s and self.popen.poll() is None:
            self.kill()
            from island_tools.errors import WorkerError
            raise WorkerError(f"'{' '.join(self.argv[1:3])}' did not finish within "
                              f"{self.timeout_s:g} s")
        return new

    @property
    def done(self) -> bool:
        return self.popen.poll() is not None and not self._sel.get_map()

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.popen.kill()
        self.popen.wait()
        self._sel.close()

    def result(self) -> str:
        """stdout of a finished process; an ``IslandError`` for a non-zero exit code."""
        code = self.popen.wait()
        for name in ("stdout", "stderr"):
            if self._partial[name]:
                getattr(self, name).append(self._partial[name])
                self._partial[name] = ""
        if code == 0:
            return "\n".join(self.stdout)
        for line in reversed(self.stderr):
            match = _ERROR_LINE.match(line.strip())
            if match:
                raise _island_error(match.group(2), int(match.group(1)))
        last = next((ln.strip() for ln in reversed(self.stderr) if ln.strip()), "no output")
        raise _island_error(f"'{Path(self.argv[1]).name}' exited {code}: {last}",
                            code if 0 < code < 128 else 1)

    def wait(self, progress: Progress | None = None) -> str:
        while not self.done:
            for line in self.poll(wait_s=0.1):
                if progress:
                    progress(line)
        return self.result()


class Runner:
    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self._settings = None
        tasks.ensure_repo(config.repo)

    # ----------------------------------------------------------------- where things run
    @property
    def in_process(self) -> bool:
        if self.config.execution == "IN_PROCESS":
            return True
        if self.config.execution == "SUBPROCESS":
            return False
        return can_run_in_process(self.config.repo)

    def settings(self):
        """``DIRECTORYS.yaml`` (the source of truth), read as the CLIs read it; once per
        runner (an operator builds one runner per call)."""
        if self._settings is None:
            self._settings = tasks.settings_object(self.settings_dict())
        return self._settings

    def settings_dict(self) -> dict[str, Any]:
        if importlib.util.find_spec("yaml") is not None:
            return tasks.load_settings(self.config.config_path)
        out = self.tasks_cli(["settings", "--config", str(self.config.config_path)])
        return json.loads(out.strip().splitlines()[-1])

    def cli_flags(self) -> list[str]:
        """Flags that make a delegated CLI use the same config and, unless the config names
        a Blender, the running Blender's binary (its files stay readable here)."""
        flags = ["--config", str(self.config.config_path)]
        if self.config.blender_binary and not self.settings().blender_bin:
            flags += ["--blender-bin", self.config.blender_binary]
        return flags

    # ----------------------------------------------------------------- child processes
    def start(self, argv: Sequence[str]) -> Process:
        return Process([self.config.python, *argv], self.config.repo, self.config.timeout_s)

    def script(self, name: str, args: Sequence[str], progress: Progress | None = None) -> str:
        """Run ``scripts/<name>`` with the external Python (blocking, progress per line)."""
        argv = [str(self.config.repo / "scripts" / name), *args, *self.cli_flags()]
        return self.start(argv).wait(progress)

    def script_argv(self, name: str, args: Sequence[str]) -> list[str]:
        return [str(self.config.repo / "scripts" / name), *args, *self.cli_flags()]

    def tasks_argv(self, args: Sequence[str]) -> list[str]:
        return [str(TASKS_SCRIPT), "--repo", str(self.config.repo), *args]

    def tasks_cli(self, args: Sequence[str], progress: Progress | None = None) -> str:
        return self.start(self.tasks_argv(args)).wait(progress)

    def worker_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """One ``worker.jobs`` job in a child process (rule 1)."""
        from worker.launch import Backend, raise_result_error, resolve_blender, run_binary

        configured = self.settings().blender_bin
        if configured and configured.strip().lower() not in ("bpy", "embedded"):
            return run_binary(job, resolve_blender(configured, None), self.config.timeout_s)
        if self.config.blender_binary and not configured:
            backend = Backend(kind="binary", path=self.config.blender_binary,
                              source="the running Blender", version=self.config.blender_version)
            return run_binary(job, backend, self.config.timeout_s)
        with tempfile.TemporaryDirectory(prefix="island_addon_job_") as tmp:
            job_path, result_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
            job_path.write_text(json.dumps(job, allow_nan=False), encoding="utf-8")
            proc = self.start([str(self.config.repo / "worker" / "entry.py"), "--",
                               str(job_path), str(result_path)])
            while not proc.done:
                proc.poll(wait_s=0.1)
            code = proc.popen.wait()
            result = None
            if result_path.is_file():
                result = json.loads(result_path.read_text(encoding="utf-8"))
            if isinstance(result, dict) and isinstance(result.get("error"), dict):
                raise_result_error(result["error"])
            if code != 0 or not isinstance(result, dict):
                from island_tools.errors import WorkerError
                last = next((ln for ln in reversed(proc.stderr) if ln.strip()), "no output")
                raise WorkerError(f"worker process exited {code} without a result: {last}")
            return result
