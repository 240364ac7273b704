"""Where the add-on's work runs: this Python, a child Python, or a child Blender.

Four rules (docs/ADDON.md explains why):

1. The open file is never replaced. Worker jobs open and save .blend files, so they always
   run in a child process: the Blender binary configured in ``DIRECTORYS.yaml``, else the
   running Blender's own binary (``bpy.app.binary_path``: files stay readable by it), else,
   under the ``bpy`` module (no binary), a child of this Python with its ``bpy``.
2. The library (``island_tools``, ``worker``, the loop CLIs) is the one bundled in the
   extension's ``lib/``, or the checkout the add-on is loaded from. The third-party packages
   it needs (python-fcl, Pillow, PyYAML) come from the extension's wheels, which Blender
   4.2+ installs. Library work runs in this process when those import here; a long
   operator invoked in a window runs it in a child Python instead - this Blender's own
   interpreter with this process's ``sys.path`` (or the external Python the artist opted
   into) running the same CLIs - so the window never blocks and Esc can stop it.
3. Blender 3.4 - 4.1 do not install wheels: without an external Python the operators that
   need the packages say so in one line (``NEEDS``) and nothing else runs.
4. Errors are ``IslandError``s either way: a child CLI's one-line error and exit code come
   back as an ``IslandError`` with that message and code.

No ``bpy`` import here: the running Blender's binary path comes in ``RunnerConfig``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import tasks

IN_PROCESS_MODULES = {"numpy": "numpy", "fcl": "python-fcl", "PIL": "Pillow", "yaml": "PyYAML"}
TASKS_SCRIPT = Path(__file__).resolve().with_name("tasks.py")
_ERROR_LINE = re.compile(r"^\[[^\]]+\] error \(exit (\d+)\): (.*)$")
STOP_GRACE_S = 3.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunnerConfig:
    lib: Path                        # holds island_tools/, worker/, scripts/
    python: str | None               # the external Python; None = this Blender's own
    config_path: Path                # DIRECTORYS.yaml
    execution: str = "AUTO"          # AUTO | IN_PROCESS | SUBPROCESS
    timeout_s: float = 600.0
    blender_binary: str = ""         # bpy.app.binary_path ("" under the bpy module)
    blender_version: str = ""


def find_repo(start: str | os.PathLike[str]) -> Path | None:
    """The checkout holding this add-on when it is loaded from the repository."""
    for parent in Path(start).resolve().parents:
        if (parent / "island_tools").is_dir() and (parent / "worker").is_dir():
            return parent
    return None


def bundled_lib(addon_dir: str | os.PathLike[str]) -> Path | None:
    lib = Path(addon_dir) / "lib"
    return lib if (lib / "island_tools").is_dir() and (lib / "worker").is_dir() else None


def venv_python(repo: Path | None) -> str | None:
    if repo is not None:
        for rel in (".venv/bin/python", ".venv/Scripts/python.exe"):
            if (repo / rel).is_file():
                return str(repo / rel)
    return None


def missing_modules() -> list[str]:
    """The packages (PyPI names) the library needs that do not import in this Python."""
    return [dist for mod, dist in IN_PROCESS_MODULES.items()
            if importlib.util.find_spec(mod) is None]


def needs_line(blender_version: str) -> str:
    missing = missing_modules()
    return (f"Blender {blender_version or '?'} lacks {', '.join(missing)}: Blender 4.2+ "
            "installs them from this extension's wheels; here, tick 'External Python' in "
            "the add-on preferences and give a Python 3 that has them "
            f"(python -m pip install {' '.join(missing)})")


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


_SCRIPT_DIRS = {"startup", "modules", "addons", "addons_core", "addons_contrib", "freestyle"}


def _blender_scripts_dir(path: str) -> bool:
    """Blender's own script folders (``.../scripts/modules`` holds the Python half of
    ``bpy``, which a child must not find before the ``bpy`` module itself)."""
    parts = Path(path).parts
    return any(a == "scripts" and b in _SCRIPT_DIRS for a, b in zip(parts, parts[1:]))


def own_python_command() -> tuple[list[str], dict[str, str]]:
    """This interpreter as a child with exactly this process's ``sys.path`` (``-s -S``: no
    site directories of its own), so the child imports what this Blender imports - the
    extension's wheels, Blender's numpy, the bundled library - and nothing else."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.exists(p)
                                        and not _blender_scripts_dir(p))
    env["PYTHONNOUSERSITE"] = "1"
    env.pop("PYTHONHOME", None)
    return [sys.executable, "-s", "-S"], env


_RESET_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                 "os.execv(sys.argv[1], sys.argv[1:])")


def interruptible(argv: Sequence[str]) -> list[str]:
    """``argv`` started with SIGINT at its default. A Blender launched where SIGINT is
    ignored (a shell's background job, a farm launcher, nohup-like wrappers) hands that on,
    and a Python started so never raises KeyboardInterrupt: Esc (``Process.stop``) would
    stop nothing until the kill after the grace time. A tiny isolated interpreter resets
    it and execs the command (same pid, so the session and process group stay)."""
    argv = list(argv)
    if os.name != "posix":
        return argv
    return [argv[0], "-I", "-S", "-c", _RESET_SIGINT, *argv]


class Cancelled(Exception):
    """Raised by ``Process.poll`` callers that asked the process to stop."""


class Process:
    """A child CLI: polled without blocking (for a modal timer) or waited for."""

    def __init__(self, argv: Sequence[str], cwd: Path, timeout_s: float,
                 env: dict[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.timeout_s = timeout_s
        self.started = time.monotonic()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._partial = {"stdout": "", "stderr": ""}
        try:
            self.popen = subprocess.Popen(
                self.argv, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, env=env)
        except OSError as exc:
            from island_tools.errors import UsageError
            raise UsageError(f"cannot start '{self.argv[0]}': {exc}",
                             fix="set the Python path in the add-on preferences") from None
        # One reader thread per pipe (blocking reads, the GIL released): polled without
        # blocking on every platform - selectors cannot wait on Windows' pipes.
        self._chunks: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self._open = {"stdout", "stderr"}
        for name, pipe in (("stdout", self.popen.stdout), ("stderr", self.popen.stderr)):
            threading.Thread(target=self._read, args=(name, pipe), daemon=True,
                             name=f"island-{name}").start()

    def _read(self, name: str, pipe: Any) -> None:
        try:
            while True:
                chunk = pipe.read1(1 << 16)   # what is there, waiting only for the first byte
                if not chunk:
                    break
                self._chunks.put((name, chunk))
        except (OSError, ValueError):   # closed under us by stop()
            pass
        finally:
            self._chunks.put((name, b""))  # end of this stream, after all of its data

    def poll(self, wait_s: float = 0.0) -> list[str]:
        """New complete stderr lines (progress); reads stdout too. Never blocks longer."""
        new: list[str] = []
        timeout: float | None = max(wait_s, 0.0)
        while self._open:
            try:
                name, chunk = (self._chunks.get(timeout=timeout) if timeout is not None
                               else self._chunks.get_nowait())
            except queue.Empty:
                break
            timeout = None   # the first chunk waited; the rest is what has arrived
            if not chunk:
                self._open.discard(name)
                continue
            text = self._partial[name] + chunk.decode("utf-8", "replace")
            *lines, self._partial[name] = text.split("\n")
            getattr(self, name).extend(lines)
            if name == "stderr":
                new.extend(ln for ln in lines if ln.strip())
        if time.monotonic() - self.started > self.timeout_s and self.popen.poll() is None:
            self.stop(grace_s=0.0)
            from island_tools.errors import WorkerError
            raise WorkerError(f"'{self.name}' did not finish within {self.timeout_s:g} s",
                              fix="raise Timeout in the add-on preferences")
        return new

    @property
    def name(self) -> str:
        """The script run (``iter_step.py``), for messages."""
        script = next((a for a in self.argv if a.endswith(".py")), self.argv[0])
        return Path(script).name

    @property
    def done(self) -> bool:
        return self.popen.poll() is not None and not self._open

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Ask the child to stop (SIGINT: the CLIs remove their staging and exit 130), and
        kill its process group when it has not ended within ``grace_s``."""
        if self.popen.poll() is None:
            try:
                if hasattr(os, "killpg"):
                    os.killpg(self.popen.pid, signal.SIGINT)
                else:
                    self.popen.terminate()
                self.popen.wait(timeout=grace_s)
            except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                pass
        if self.popen.poll() is None or hasattr(os, "killpg"):
            try:
                if hasattr(os, "killpg"):
                    os.killpg(self.popen.pid, signal.SIGKILL)  # its Blender children too
                else:
                    self.popen.kill()
            except (ProcessLookupError, PermissionError):
                pass
        self.popen.wait()
        self._open.clear()   # what a stopped child still had in its pipes is not read

    kill = stop

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
        raise _island_error(f"'{self.name}' exited {code}: {last}",
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
        tasks.ensure_repo(config.lib)

    # ----------------------------------------------------------------- where things run
    @property
    def own_python(self) -> bool:
        return self.config.python is None

    @property
    def in_process(self) -> bool:
        if self.config.execution == "IN_PROCESS":
            return True
        if self.config.execution == "SUBPROCESS":
            return False
        return not self.own_python_blocked and self.own_python

    @property
    def own_python_blocked(self) -> bool:
        return self.own_python and bool(missing_modules())

    def require_library(self) -> None:
        """Library work needs python-fcl & co. here or in the external Python (rule 3)."""
        if self.own_python_blocked and self.config.execution != "IN_PROCESS":
            from island_tools.errors import UsageError
            raise UsageError(needs_line(self.config.blender_version))

    def settings(self):
        """``DIRECTORYS.yaml`` (the source of truth), read as the CLIs read it; once per
        runner (an operator builds one runner per call)."""
        if self._settings is None:
            self._settings = tasks.settings_object(self.settings_dict())
        return self._settings

    def settings_dict(self) -> dict[str, Any]:
        try:
            return tasks.load_settings(self.config.config_path)
        except ImportError:  # not flat key: value lines and no PyYAML here
            self.require_library()
            out = self.tasks_cli(["settings", "--config", str(self.config.config_path)])
            return json.loads(out.strip().splitlines()[-1])

    def blender_flags(self) -> list[str]:
        """Make a child CLI use the running Blender's binary for its worker jobs unless
        ``DIRECTORYS.yaml`` names one (the files it writes stay readable here)."""
        if self.config.blender_binary and not self.settings().blender_bin:
            return ["--blender-bin", self.config.blender_binary]
        return []

    def cli_flags(self) -> list[str]:
        """``--no-daemon``: the child does the whole call itself, so stopping it (Esc)
        stops the work; a warm step host would finish a call its client gave up on."""
        return ["--config", str(self.config.config_path), "--no-daemon", *self.blender_flags()]

    # ----------------------------------------------------------------- child processes
    def python_command(self) -> tuple[list[str], dict[str, str] | None]:
        if self.own_python:
            self.require_library()
            return own_python_command()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        return [str(self.config.python)], env

    def start(self, argv: Sequence[str]) -> Process:
        cmd, env = self.python_command()
        return Process(interruptible([*cmd, *argv]), self.config.lib, self.config.timeout_s,
                       env)

    def script_argv(self, name: str, args: Sequence[str]) -> list[str]:
        """``lib/scripts/<name>`` (init_iter0.py, iter_step.py), the agents' own CLIs."""
        return [str(self.config.lib / "scripts" / name), *args, *self.cli_flags()]

    def script(self, name: str, args: Sequence[str], progress: Progress | None = None) -> str:
        return self.start(self.script_argv(name, args)).wait(progress)

    def tasks_argv(self, args: Sequence[str]) -> list[str]:
        return [str(TASKS_SCRIPT), "--repo", str(self.config.lib), *args]

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
            proc = self.start([str(self.config.lib / "worker" / "entry.py"), "--",
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
