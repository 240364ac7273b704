"""Choose a Blender and run worker jobs on it (plain Python: never imports bpy at import time).

Resolution order (``resolve_blender``), first hit wins:

1. ``--blender-bin`` (``cli_value``),
2. ``DIRECTORYS.yaml::blender_bin`` (``config_value``),
3. ``$BLENDER``,
4. the embedded ``bpy`` module, if importable,
5. ``blender`` on ``PATH``.

Empty values are "not set". The values ``bpy`` / ``embedded`` force the embedded module
(UsageError if it is not importable). Any other configured value is a path (or a command
name looked up on PATH) that must be an executable file, else UsageError naming where the
value came from. Nothing found at all -> WorkerError.

``run_job(job, backend)``: embedded -> ``worker.jobs.run_job`` in this process; binary ->
``BLENDER --background --factory-startup --disable-autoexec --python-exit-code 1 --python
worker/entry.py -- job.json result.json`` in a temporary directory (stdout/stderr captured,
timeout default 600 s; the Blender gets SIGKILL if this process dies, ``worker.lifetime``).
A result carrying ``"error"`` is re-raised as the matching
``island_tools.errors`` class with the same message; ``InternalError`` (a bug inside the
worker) becomes an ``IslandError`` with exit code 1. A Blender that dies without writing a
result -> WorkerError with the last meaningful stderr line and the exit status; so does one
that writes a result but then exits non-zero (a crash at shutdown is still a failed run).
Embedded: exceptions propagate unchanged (IslandErrors as themselves, bugs with their
traceback). Binary results carry an extra ``process_seconds`` (wall time of the subprocess).
The job must be plain JSON in both cases (numpy arrays go through npz files).

``run_job(job, backend, daemon=DaemonOptions(...))`` hands the job to the warm worker for
``backend`` instead (``worker/daemon.py``: one long-lived Blender per backend, started on
demand); results and errors are the same as the subprocess path's, without
``process_seconds``. The CLIs decide with ``worker.daemon.daemon_allowed``.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from island_tools.errors import BlendVersionError, IslandError, UsageError, WorkerError

from .daemon_common import (  # noqa: F401 - raise_result_error is the add-on's too
    DaemonDirError,
    _child_env,
    raise_result_error,
    warn_once,
)
from .lifetime import die_with_parent

if TYPE_CHECKING:
    from .daemon_common import DaemonOptions

ENTRY = Path(__file__).resolve().with_name("entry.py")
CHECKOUT = Path(__file__).resolve().parents[1]   # where its venvs (.venv*/) live
EMBEDDED_VALUES = ("bpy", "embedded")
DEFAULT_TIMEOUT_S = 600.0
_NOISE = ("EGL_BAD_MATCH", "Blender quit", "Warning: ", "Read blend:", "Color management:",
          "Fra:", "Saved:", "Time:", "Info:")


@dataclass(frozen=True)
class Backend:
    kind: str                      # "embedded" | "binary"
    path: str | None = None        # the binary (None for embedded)
    # "--blender-bin" | "DIRECTORYS.yaml blender_bin" | "$BLENDER" | "embedded bpy" | "PATH"
    source: str = ""
    version: str = ""              # "5.0.1" / "3.4.1" (first line of `blender --version`)
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def embedded(self) -> bool:
        return self.kind == "embedded"

    def describe(self) -> str:
        if self.embedded:
            return f"embedded bpy {self.version}".strip()
        return f"Blender {self.version} at {self.path} (from {self.source})"


VERSION_CACHE_TTL_S = 3600.0
VERSION_CACHE_ENTRIES = 32


def _version_cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "island-refiner" / "blender-versions.json"


def _binary_identity(path: str) -> str | None:
    """Changes when the file at ``path`` is replaced or edited (small files: by content too,
    so a rewritten wrapper script is noticed even within one mtime tick)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        ident = f"{real}|{st.st_dev}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}"
        if st.st_size < (1 << 20):
            with open(real, "rb") as fh:
                ident += "|" + hashlib.sha1(fh.read()).hexdigest()
    except OSError:
        return None
    return ident


def _cached_version(ident: str) -> str | None:
    try:
        entry = json.loads(_version_cache_file().read_text(encoding="utf-8")).get(ident)
        if time.time() - float(entry["at"]) < VERSION_CACHE_TTL_S:
            return str(entry["version"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return None


def _remember_version(ident: str, version: str) -> None:
    """Best effort: a cache that cannot be written is simply not used."""
    path = _version_cache_file()
    try:
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
            entries = entries if isinstance(entries, dict) else {}
        except (OSError, ValueError):
            entries = {}
        entries.pop(ident, None)
        entries[ident] = {"version": version, "at": time.time()}
        keep = dict(list(entries.items())[-VERSION_CACHE_ENTRIES:])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(keep), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


@cache
def binary_version(path: str) -> str:
    """Version from the first line of ``blender --version`` ("Blender 3.4.1" -> "3.4.1").

    Asking costs a Blender start (0.4-0.7 s), paid by every CLI call that resolves a binary,
    so the answer is cached per binary identity (real path, inode, size, mtime; content for
    small wrapper scripts) in ``$XDG_CACHE_HOME/island-refiner/blender-versions.json`` for
    an hour.
    """
    ident = _binary_identity(path)
    cached = _cached_version(ident) if ident else None
    if cached:
        return cached
    version = _query_version(path)
    if ident:
        _remember_version(ident, version)
    return version


VERSION_ATTEMPTS = 3  # a start killed by a signal is asked again, at most this many times


def _query_version(path: str) -> str:
    # Debian's blender 3.4 has been seen to die by SIGABRT on '--version' (once, in a CI
    # run; 200 starts here did not repeat it): a signal is asked again; a binary
    # that answers with an exit code, or dies every time, is an error naming its exit status
    # and the last line it printed.
    for _attempt in range(VERSION_ATTEMPTS):
        try:
            proc = subprocess.run([path, "--version"], capture_output=True, text=True,
                                  timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise WorkerError(f"cannot run '{path} --version': {exc}") from None
        for line in proc.stdout.splitlines():
            line = line.strip()
            if line.startswith("Blender "):
                return line.split()[1]
        if proc.returncode >= 0:
            break
    said = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
    raise WorkerError(f"'{path} --version' printed no 'Blender x.y.z' line "
                      f"(exit {proc.returncode}{'; last line: ' + said[:200] if said else ''})")


def _embedded_version() -> str:
    # The wheel's dist-info beside the package names the version; importlib.metadata finds
    # the same but costs ~30 ms, a tenth of a warm step's client side.
    spec = importlib.util.find_spec("bpy")
    if spec is not None and spec.origin:
        site = Path(spec.origin).resolve().parent.parent
        found = sorted(site.glob("bpy-*.dist-info"))
        if len(found) == 1:
            return found[0].name[len("bpy-"):-len(".dist-info")]
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("bpy")
    except PackageNotFoundError:
        return ""


def _embedded(source: str) -> Backend:
    if importlib.util.find_spec("bpy") is None:
        raise UsageError(f"{source} asks for the embedded bpy module, but 'import bpy' is not "
                         "available", fix="pip install 'bpy>=5.0,<5.1' or give a Blender binary")
    return Backend(kind="embedded", source=source, version=_embedded_version())


def _binary(value: str, source: str, env: Mapping[str, str]) -> Backend:
    expanded = os.path.expanduser(value)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        path = expanded
    else:
        path = shutil.which(expanded, path=env.get("PATH")) or expanded
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UsageError(f"{source} '{value}' is not an executable file",
                         fix="point it at a Blender binary, or use 'bpy' for the embedded module")
    path = os.path.abspath(path)
    return Backend(kind="binary", path=path, source=source, version=binary_version(path))


def resolve_blender(cli_value: str | None = None, config_value: str | None = None,
                    env: Mapping[str, str] | None = None) -> Backend:
    """Pick the Blender to use (see the module docstring for the order)."""
    env = os.environ if env is None else env
    for value, source in ((cli_value, "--blender-bin"),
                          (config_value, "DIRECTORYS.yaml blender_bin"),
                          (env.get("BLENDER"), "$BLENDER")):
        if value is None or not str(value).strip():
            continue
        value = str(value).strip()
        if value.lower() in EMBEDDED_VALUES:
            return _embedded(source)
        return _binary(value, source, env)
    if importlib.util.find_spec("bpy") is not None:
        return Backend(kind="embedded", source="embedded bpy", version=_embedded_version())
    found = shutil.which("blender", path=env.get("PATH"))
    if found:
        return _binary(found, "PATH", env)
    raise WorkerError("no Blender found: no --blender-bin, no DIRECTORYS.yaml blender_bin, "
                      "no $BLENDER, 'import bpy' fails and no 'blender' on PATH",
                      fix="pip install 'bpy>=5.0,<5.1' or pass --blender-bin")


def command(backend: Backend, job_path: str, result_path: str) -> list[str]:
    return [str(backend.path), "--background", "--factory-startup", "--disable-autoexec",
            "--python-exit-code", "1", "--python", str(ENTRY), "--", job_path, result_path]


def _last_meaningful(text: str) -> str:
    lines = [" ".join(ln.split()) for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(_NOISE)]
    return lines[-1] if lines else ""


def _run(cmd: list[str], timeout: float, env: dict, backend: Backend, job: Mapping
         ) -> subprocess.CompletedProcess:
    """Run Blender in its own process group; on timeout the whole group is killed. It also
    dies with this process (PR_SET_PDEATHSIG, ``worker.lifetime``): a render node's worker
    killed with SIGKILL leaves no orphan Blender."""
    try:
        popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, errors="replace", env=env,
                                 start_new_session=True, preexec_fn=die_with_parent())
    except OSError as exc:
        raise WorkerError(f"cannot start Blender {backend.path}: {exc}") from None
    try:
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(popen)
        raise WorkerError(f"Blender {backend.version} ({backend.path}) did not finish "
                          f"job '{job.get('op')}' within {timeout:g} s") from None
    except BaseException:
        _kill_group(popen)
        raise
    return subprocess.CompletedProcess(cmd, popen.returncode, out, err)


def _kill_group(popen: subprocess.Popen) -> None:
    killpg = getattr(os, "killpg", None)   # Windows: no process groups; the child only
    try:
        if killpg is None:
            raise PermissionError
        killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        popen.kill()
    popen.communicate()


def run_binary(job: Mapping, backend: Backend, timeout: float = DEFAULT_TIMEOUT_S) -> dict:
    with tempfile.TemporaryDirectory(prefix="island_worker_") as tmp:
        job_path = os.path.join(tmp, "job.json")
        result_path = os.path.join(tmp, "result.json")
        try:
            text = json.dumps(job, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"worker job '{job.get('op')}' is not plain JSON: {exc}") from None
        with open(job_path, "w", encoding="utf-8") as fh:
            fh.write(text)
        cmd = command(backend, job_path, result_path)
        t0 = time.perf_counter()
        proc = _run(cmd, timeout, _child_env(backend), backend, job)
        seconds = time.perf_counter() - t0
        result = None
        if os.path.isfile(result_path):
            try:
                with open(result_path, encoding="utf-8") as fh:
                    result = json.load(fh)
            except ValueError:
                result = None
        if isinstance(result, dict) and isinstance(result.get("error"), dict):
            raise_result_error(result["error"])
        if not isinstance(result, dict) or proc.returncode != 0:
            last = _last_meaningful(proc.stderr) or _last_meaningful(proc.stdout) or "no output"
            what = ("after writing its result" if isinstance(result, dict)
                    else "without a result")
            raise WorkerError(f"Blender {backend.version} ({backend.path}) exited with status "
                              f"{proc.returncode} {what} for job '{job.get('op')}': {last}")
        result["process_seconds"] = round(seconds, 4)
        return result


@contextlib.contextmanager
def blender_output_captured() -> Iterator[None]:
    """Keep the embedded Blender's C-level output ("Read blend:", "Saved:", its log lines)
    off the terminal, as a Blender subprocess's output is: stdout belongs to the CLIs' own
    lines (an agent greps it for "[iter_step] sanity OK") and stderr to one line per failure.
    The output goes to a scratch file; if the job fails with anything but an IslandError
    (whose message is complete), its last lines are shown on stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as log:
        shown = False
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield
        except IslandError:
            raise
        except BaseException:
            shown = True
            raise
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            if shown:
                log.seek(0)
                tail = log.read().decode("utf-8", "replace").splitlines()[-20:]
                for line in tail:
                    print(f"[blender] {line}", file=sys.stderr)


def embedded_blenders(checkout: Path | None = None) -> list[tuple[str, str]]:
    """(python, bpy version) of each Python that runs an embedded Blender: this interpreter
    when it has the ``bpy`` wheel, then the checkout's venvs (``.venv*/bin/python`` beside a
    ``bpy-*.dist-info``: ``.venv`` with 5.0, ``.venv313`` with 5.2)."""
    found: list[tuple[str, str]] = []
    own = Path(sys.prefix).resolve()
    if importlib.util.find_spec("bpy") is not None:
        found.append((sys.executable, _embedded_version()))
    for venv in sorted((checkout or CHECKOUT).glob(".venv*")):
        python = venv / "bin" / "python"
        wheels = sorted(venv.glob("lib/python3*/site-packages/bpy-*.dist-info"))
        if not (python.is_file() and wheels) or (found and venv.resolve() == own):
            continue
        found.append((str(python), wheels[-1].name[len("bpy-"):-len(".dist-info")]))
    return found


_SAVED_BY = re.compile(r"saved by Blender (\d+)\.(\d+), this Blender is")  # worker.blend_io


def _major_minor(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2])


def _shown(python: str) -> str:
    rel = os.path.relpath(python)
    return rel if not rel.startswith("..") else python


def with_embedded_hint(exc: BlendVersionError, backend: Backend) -> BlendVersionError:
    """``exc`` (a file saved by a newer Blender than ``backend``) with a fix that names the
    embedded Blenders able to open the file, when there is one; else ``exc`` itself."""
    found = _SAVED_BY.search(exc.reason)
    if found is None:
        return exc
    saved = (int(found.group(1)), int(found.group(2)))
    ways = []
    for python, version in embedded_blenders():
        if _major_minor(version) < saved:
            continue
        if python == sys.executable and not backend.embedded:
            ways.append(f"drop {backend.source} (this Python's embedded Blender {version} "
                        "can open it)")
        elif python != sys.executable:
            ways.append(f"run with {_shown(python)} (embedded Blender {version})")
    if not ways:
        return exc
    head, cut, _ = exc.reason.rpartition(" (fix: ")
    fix = ", or ".join(ways) + f", or --blender-bin a Blender >= {saved[0]}.{saved[1]}"
    return BlendVersionError(head if cut else exc.reason, file=exc.file, field=exc.field,
                             fix=fix)


_IN_PROCESS = threading.Lock()


def run_job(job: Mapping, backend: Backend, timeout: float = DEFAULT_TIMEOUT_S,
            daemon: DaemonOptions | None = None) -> dict:
    """Run one worker job on ``backend``: on its warm worker when ``daemon`` is given, else
    in-process for embedded and as a subprocess for a binary. A file saved by a newer
    Blender than ``backend`` says which embedded Blender could open it
    (``with_embedded_hint``)."""
    try:
        return _run_job(job, backend, timeout, daemon)
    except BlendVersionError as exc:
        hinted = with_embedded_hint(exc, backend)
        if hinted is exc:
            raise
        raise hinted from None


def _run_job(job: Mapping, backend: Backend, timeout: float,
             daemon: DaemonOptions | None) -> dict:
    if daemon is not None:
        from .daemon_client import run_job as run_on_daemon
        try:
            return run_on_daemon(job, backend, daemon, timeout=timeout)
        except DaemonDirError as exc:   # raised before any job was handed over
            warn_once(f"[worker] warm worker unavailable, running in this process: "
                      f"{exc.one_line()}")
    if backend.embedded:
        from worker.jobs import run_job as run_in_process
        with _IN_PROCESS, blender_output_captured():   # bpy is one per process: one job
            return run_in_process(job)                  # at a time, whatever the threads
    return run_binary(job, backend, timeout=timeout)
