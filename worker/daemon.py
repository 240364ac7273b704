"""The warm worker: one long-lived Blender per backend that runs worker jobs over a UNIX socket.

The server and client here are generic: ``serve(..., handler)`` runs any ``Handler``
(prepare / fingerprint / run / between_jobs) and ``call`` + ``start`` are the client side.
The warm worker is the default handler (``worker.jobs`` in Blender); ``scripts/_step_host.py``
uses the same machinery for the step host, a warm Python that runs whole ``iter_step.py``
calls and streams their output back as ``{"stream": "stdout"|"stderr", "text"}`` messages
before the final reply. Everything below applies to both (key ``host-...`` for hosts).

An agent runs ``iter_step.py`` as a fresh process every iteration. Done in that process, a
step pays ``import bpy`` (~0.5 s) and Workbench's first-render warm-up (~1 s) every time;
handed to a Blender that stays alive, it costs little more than its two renders. This module
is both ends: the client (``run_job``, used by ``worker.launch.run_job(..., daemon=...)``)
and the server (``serve``), plus ``python -m worker.daemon --status`` / ``--stop``.

Processes
---------
* embedded backend: ``<this python> worker/daemon.py --serve ...`` (the ``bpy`` module);
* a Blender binary: ``BLENDER --background --factory-startup --disable-autoexec
  --python-exit-code 1 --python worker/daemon.py -- --serve ...`` (its own Python, e.g. 3.4's).

Both are started on demand by the first client that finds no daemon, in their own session
(no controlling terminal; the client's Ctrl-C never reaches them), with stdin from /dev/null
and stdout/stderr (Blender's C-level "Read blend:", "Saved:" lines included) appended to
``<key>.log``. A client's own stdout therefore stays clean.

Files
-----
All in one private directory: ``$ISLAND_REFINER_DAEMON_DIR`` if set, else
``$XDG_RUNTIME_DIR/island-refiner``, else ``/tmp/island-refiner-<uid>``. It must be a real
directory owned by this uid with mode 0700 (created so; tightened if merely too open; anything
else - a symlink, another owner - is refused). Per backend key, e.g. ``bpy-5.0.1-1a2b3c4d5e``
(kind, Blender version, hash of the executable path and this repository), so the bpy module
and a 3.4 binary get separate daemons:

``<key>.sock``         the socket, mode 0600
``<key>.daemon.lock``  flock held by the daemon for its whole life: at most one per key
``<key>.client.lock``  flock held by a client while it starts a daemon and runs one job
``<key>.status.json``  pid, state, jobs, RSS, limits (written by the daemon)
``<key>.log``          the daemon's stdout/stderr (rotated to ``.log.1`` above 8 MiB)

Protocol
--------
Each message is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object, at
most 64 MiB). The client sends ``{"protocol": 1, "kind": "job", "job": {...}, "cwd": ...,
"code": <fingerprint>}``; the daemon answers ``{"accepted": true, "pid", "job_number"}``
right away, then, when the job is done, ``{"result": <worker.jobs.run_job(job)>, "daemon":
{...}}`` or ``{"error": {"type", "message", "exit_code"}, "daemon": {...}}``. Errors are
re-raised in the client as the same ``island_tools.errors`` class (``launch.raise_result_error``;
a bug in the worker is an ``InternalError`` -> exit 1, traceback in the log). The job and
result are exactly what ``worker.jobs.run_job`` takes and returns. ``{"kind": "ping"}`` ->
``{"status": {...}}``; ``{"kind": "stop"}`` -> ``{"stopping": true}`` and the daemon exits.
The daemon runs each job in the client's working directory.

Only the same uid may talk to a daemon: the directory (0700) and socket (0600) permissions,
and ``SO_PEERCRED`` checked on both ends (the daemon drops other uids unanswered; a client
refuses a daemon of another uid).

Lifecycle
---------
* Start: race-safe. Only the holder of ``<key>.client.lock`` starts a daemon, after a second
  connect attempt under the lock; the daemon itself takes ``<key>.daemon.lock`` before it
  binds, so even a manual ``--serve`` cannot make two.
* One job at a time: clients queue on ``<key>.client.lock`` (a second client waits); the
  daemon is single-threaded as well.
* Between jobs (after the reply, off the client's clock): ``read_homefile(use_factory_startup
  =True)`` (~8 ms: back to a fresh Blender's data, UI and preferences, so no job can leak
  into a later save), ``gc.collect()`` and ``bpy.data.orphans_purge``. What survives is
  Blender's caches (compiled shaders: the point).
* Exit: after ``daemon_idle_s`` without a job (default 300); recycled after
  ``daemon_max_jobs`` jobs (200) or when its RSS exceeds ``daemon_max_rss_mb`` (2048),
  checked between jobs; on ``--stop``, SIGTERM or SIGINT (after the running job); when a
  client brings a different worker code fingerprint (the .py files of worker/ and the
  island_tools modules it imports changed on disk) it answers ``{"retired": ...}`` and exits,
  and the client starts a fresh one. A daemon removes its socket before it closes it.
* Death mid-job (crash, OOM kill): the client sees the connection break after the
  ``accepted`` answer and retries the job ONCE on a fresh daemon; a second death is a
  WorkerError (exit 7). Jobs are idempotent given their inputs, except that ``step`` saves its
  .blend in place, so the client keeps the input's bytes and restores them before the retry.
  The island loop stages everything and moves files only after success, so a failed step
  never half-writes an iteration. A connection that breaks *before* ``accepted`` (a daemon
  that was just exiting) is simply retried; a daemon that does not accept within the job
  timeout is hung and gets SIGKILL (the client lock means no live client is using it); one
  that accepts but does not answer within it is killed and the job fails (WorkerError).

Limits are those of the client that started the daemon; a running daemon keeps its own.
Environment variables other than the working directory are the starting client's.

When it is used
---------------
``worker.launch.run_job(job, backend, daemon=DaemonOptions(...))``; the CLIs decide with
``daemon_allowed``: ``--no-daemon`` or ``daemon: false`` in DIRECTORYS.yaml -> never.
Otherwise ``$ISLAND_REFINER_DAEMON`` = 1/0 forces it on/off; unset, it is OFF under pytest
(``$PYTEST_CURRENT_TEST``) and CI (``$CI`` true) - test runs and CI jobs must not leave
processes behind - and ON everywhere else. Tests that want one set
``ISLAND_REFINER_DAEMON=1`` and a private ``ISLAND_REFINER_DAEMON_DIR`` and call
``shutdown_all(dir)`` when done.

Output equivalence (tests/test_daemon.py)
-----------------------------------------
Renders are pixel-identical through the daemon and in a fresh ``--no-daemon`` process (the
PNGs' text chunks carry Blender's render stamp - date, render time, the .blend path with the
staging directory's pid - so their bytes differ between any two calls); poses and every JSON
output are identical (info.json's timings aside). ``island.blend`` is not byte-identical between
ANY two saves, daemon or not: Blender 5.0 writes stable pointer ids, but (1) ``FileGlobal``
carries uninitialised bytes (the tail of ``colorspace_scene_linear_name`` after its NUL, and
``_pad2``), different in every process; (2) every ID's runtime ``session_uid`` is a
per-process counter (a warm Blender that has loaded N files numbers its IDs higher); (3) the
UI data kept from the session (files are opened with ``load_ui=False``) includes screen
edges whose two vertices Blender orders by memory address. Blender regenerates (1) and (2)
on load and (3) is unordered. With exactly those normalised the files are byte-identical
(Blender 3.4 writes raw memory addresses as pointer ids, so its files differ in every save).

Debug hook
----------
``$ISLAND_REFINER_DAEMON_DEBUG_PAUSE_FILE=<path>`` in the starting client's environment:
while that file exists, the daemon pauses each job right after accepting it (status
``paused``). It lets a test (or a person) kill a daemon deterministically mid-job.
"""
from __future__ import annotations

import argparse
import calendar
import contextlib
import errno
import fcntl
import gc
import hashlib
import json
import os
import re
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from island_tools.errors import EXIT_INTERNAL, IslandError, WorkerError

PROTOCOL = 1
ENV_DIR = "ISLAND_REFINER_DAEMON_DIR"
ENV_ENABLE = "ISLAND_REFINER_DAEMON"
ENV_PAUSE_FILE = "ISLAND_REFINER_DAEMON_DEBUG_PAUSE_FILE"
DEFAULT_IDLE_S = 300.0
DEFAULT_MAX_JOBS = 200
DEFAULT_MAX_RSS_MB = 2048
DEFAULT_TIMEOUT_S = 600.0
START_TIMEOUT_S = 120.0
LOCK_WAIT_S = 30.0          # a new daemon waits this long for an exiting one to let go
REQUEST_TIMEOUT_S = 10.0    # a connected client must send its request within this
MAX_MESSAGE_BYTES = 64 << 20
MAX_SOCKET_PATH = 107       # sun_path is 108 bytes with the NUL
LOG_ROTATE_BYTES = 8 << 20
EXIT_ALREADY_RUNNING = 3
# Modules a daemon runs for a job: when one changes on disk, a running daemon is stale.
_CODE_FILES = ("island_tools/errors.py", "island_tools/atomic.py", "island_tools/blendfile.py",
               "island_tools/frames.py", "island_tools/meshcache.py")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_HEADER = struct.Struct(">I")
_UCRED = struct.Struct("3i")


class ProtocolError(Exception):
    """A malformed message on the socket."""


@dataclass(frozen=True)
class DaemonOptions:
    """How a client reaches (and, if needed, starts) the warm worker."""

    idle_s: float = DEFAULT_IDLE_S
    max_jobs: int = DEFAULT_MAX_JOBS
    max_rss_mb: int = DEFAULT_MAX_RSS_MB
    directory: str | None = None    # None -> default_dir()
    # One-line notices (a daemon died and the job is retried); default: stderr.
    notice: Callable[[str], None] | None = None


def daemon_allowed(configured: bool, env: Mapping[str, str] | None = None) -> bool:
    """Use the warm worker? ``configured`` is DIRECTORYS.yaml ``daemon`` after ``--no-daemon``."""
    if not configured:
        return False
    env = os.environ if env is None else env
    forced = env.get(ENV_ENABLE, "").strip().lower()
    if forced in _TRUE:
        return True
    if forced in _FALSE:
        return False
    under_test = bool(env.get("PYTEST_CURRENT_TEST"))
    return not (under_test or env.get("CI", "").strip().lower() in _TRUE)


# --------------------------------------------------------------------------- paths

def default_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR]).expanduser().absolute()
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "island-refiner"
    return Path(f"/tmp/island-refiner-{os.getuid()}")


def private_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The daemon directory, created 0700; WorkerError if it is not safely ours."""
    path = Path(path) if path is not None else default_dir()
    fix = f"remove it, or set ${ENV_DIR} to a directory of your own"
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        raise WorkerError(f"cannot create the warm-worker directory: {exc.strerror}",
                          file=str(path), fix=fix) from None
    if not stat.S_ISDIR(st.st_mode):
        raise WorkerError("warm-worker directory is not a directory (a symlink?)",
                          file=str(path), fix=fix)
    if st.st_uid != os.getuid():
        raise WorkerError(f"warm-worker directory belongs to uid {st.st_uid}, not "
                          f"{os.getuid()}", file=str(path), fix=fix)
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def backend_key(backend: Any) -> str:
    """``bpy-5.0.1-<hash>`` / ``blender-3.4.1-<hash>``: one daemon per Blender and checkout."""
    embedded = getattr(backend, "embedded", True)
    exe = sys.executable if embedded else str(backend.path)
    digest = hashlib.sha1(f"{exe}\0{_REPO}".encode()).hexdigest()[:10]
    version = re.sub(r"[^0-9A-Za-z.]", "", getattr(backend, "version", "") or "") or "unknown"
    return f"{'bpy' if embedded else 'blender'}-{version}-{digest}"


@dataclass(frozen=True)
class Paths:
    directory: Path
    key: str

    def _file(self, suffix: str) -> Path:
        return self.directory / f"{self.key}{suffix}"

    @property
    def sock(self) -> Path:
        return self._file(".sock")

    @property
    def daemon_lock(self) -> Path:
        return self._file(".daemon.lock")

    @property
    def client_lock(self) -> Path:
        return self._file(".client.lock")

    @property
    def status(self) -> Path:
        return self._file(".status.json")

    @property
    def log(self) -> Path:
        return self._file(".log")

    def check(self) -> None:
        if len(os.fsencode(str(self.sock))) > MAX_SOCKET_PATH:
            raise WorkerError(f"socket path is longer than {MAX_SOCKET_PATH} bytes",
                              file=str(self.sock),
                              fix=f"set ${ENV_DIR} to a shorter directory")


def code_fingerprint() -> str:
    """Changes whenever a module the daemon runs jobs with changes on disk."""
    return fingerprint(sorted((_REPO / "worker").glob("*.py")) + [_REPO / f for f in _CODE_FILES])


def fingerprint(files: Iterable[Path]) -> str:
    """A digest of the files' names, sizes and mtimes (a daemon started from other code on
    disk retires instead of running a job)."""
    digest = hashlib.sha1()
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        digest.update(f"{path.name}:{st.st_mtime_ns}:{st.st_size};".encode())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- protocol

def send_message(sock: socket.socket, obj: Mapping[str, Any]) -> None:
    data = json.dumps(obj, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            if got:
                raise ConnectionError("connection closed in the middle of a message")
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket) -> dict[str, Any] | None:
    """The next message; None if the peer closed the connection cleanly before one."""
    head = _recv_exact(sock, _HEADER.size)
    if head is None:
        return None
    (length,) = _HEADER.unpack(head)
    if length > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message length {length} exceeds {MAX_MESSAGE_BYTES}")
    body = _recv_exact(sock, length) if length else b""
    if body is None:
        raise ConnectionError("connection closed in the middle of a message")
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"message is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("message is not a JSON object")
    return obj


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected UNIX socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def peer_allowed(uid: int) -> bool:
    """Only our own uid may talk to a daemon (root included: root talks to root's)."""
    return uid == os.getuid()


# --------------------------------------------------------------------------- processes

_SPAWNED: dict[int, subprocess.Popen] = {}


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone and is reaped if it is our child)."""
    proc = _SPAWNED.get(pid)
    if proc is not None and proc.poll() is not None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if state in ("Z", "X"):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def rss_mb(pid: int | None = None) -> float | None:
    """Resident set size in MiB from /proc/<pid>/status (None where unavailable)."""
    where = "self" if pid is None else str(pid)
    try:
        with open(f"/proc/{where}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _utc() -> str:
    return time.strftime(_UTC_FORMAT, time.gmtime())


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _write_json(path: Path, obj: Mapping[str, Any]) -> None:
    """Replace ``path`` atomically (status files: no fsync, they are advisory)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1)
    os.replace(tmp, path)


def read_status(paths: Paths) -> dict[str, Any] | None:
    try:
        with open(paths.status, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


@contextlib.contextmanager
def _flock(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _daemon_running(paths: Paths) -> bool:
    """Is some process holding the key's daemon lock?"""
    if not paths.daemon_lock.exists():
        return False
    with _flock(paths.daemon_lock, blocking=False) as got:
        return not got


# --------------------------------------------------------------------------- client

def _connect(paths: Paths, timeout: float = 5.0) -> tuple[socket.socket, int] | None:
    """A connection to a live daemon of our uid and its pid, or None if there is none."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(paths.sock))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EAGAIN, errno.ECONNRESET, errno.ENOTSOCK):
            return None
        raise WorkerError(f"cannot connect to the warm worker: {exc.strerror or exc}",
                          file=str(paths.sock), fix="run with --no-daemon") from None
    pid, uid, _ = peer_credentials(sock)
    if not peer_allowed(uid):
        sock.close()
        raise WorkerError(f"the warm-worker socket is served by uid {uid}, not {os.getuid()}",
                          file=str(paths.sock), fix="remove the socket; run with --no-daemon")
    return sock, pid


def daemon_command(backend: Any, paths: Paths, options: DaemonOptions) -> list[str]:
    args = ["--serve", "--dir", str(paths.directory), "--key", paths.key,
            "--idle-s", repr(float(options.idle_s)), "--max-jobs", str(int(options.max_jobs)),
            "--max-rss-mb", str(int(options.max_rss_mb))]
    script = str(Path(__file__).resolve())
    if getattr(backend, "embedded", True):
        return [sys.executable, script, *args]
    return [str(backend.path), "--background", "--factory-startup", "--disable-autoexec",
            "--python-exit-code", "1", "--python", script, "--", *args]


def _last_log_line(paths: Paths) -> str:
    try:
        with open(paths.log, "rb") as fh:
            fh.seek(max(0, paths.log.stat().st_size - 8192))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    lines = [_one_line(ln) for ln in lines if ln.strip()]
    return lines[-1] if lines else ""


def _start_worker(backend: Any, paths: Paths, options: DaemonOptions
                  ) -> tuple[socket.socket, int]:
    if getattr(backend, "embedded", True):
        env = dict(os.environ)
    else:
        from .launch import _child_env
        env = _child_env(backend)
    return start(paths, daemon_command(backend, paths, options), env)


def start(paths: Paths, command: list[str], env: Mapping[str, str], what: str = "warm worker"
          ) -> tuple[socket.socket, int]:
    """Start a daemon with ``command`` (caller holds the client lock) and connect to it."""
    with contextlib.suppress(OSError):
        if paths.log.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(paths.log, paths.log.with_name(paths.log.name + ".1"))
    log_fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_fd,
                                stderr=log_fd, cwd=str(paths.directory), env=dict(env),
                                start_new_session=True, close_fds=True)
    except OSError as exc:
        raise WorkerError(f"cannot start the {what}: {exc}", file=str(paths.log),
                          fix="run with --no-daemon") from None
    finally:
        os.close(log_fd)
    _SPAWNED[proc.pid] = proc
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        conn = _connect(paths)
        if conn is not None:
            return conn
        code = proc.poll()
        if code is not None:
            raise WorkerError(f"the {what} exited with status {code} while starting: "
                              f"{_last_log_line(paths) or 'no output'}", file=str(paths.log),
                              fix="see the log, or run with --no-daemon")
        if time.monotonic() > deadline:
            proc.kill()
            raise WorkerError(f"the {what} did not start within {START_TIMEOUT_S:g} s",
                              file=str(paths.log), fix="see the log, or run with --no-daemon")
        time.sleep(0.01)


class _InputGuard:
    """Keeps what a job overwrites in place, to restore it before a retry.

    ``step`` with poses saves its ``blend`` in place; every other job only writes fresh
    outputs (or nothing), so running it again from the same inputs gives the same result.
    """

    def __init__(self, job: Mapping[str, Any]) -> None:
        self.path: str | None = None
        self.data: bytes | None = None
        blend = job.get("blend")
        if job.get("op") == "step" and job.get("poses") and isinstance(blend, str):
            path = os.path.abspath(blend)
            if os.path.isfile(path):
                with open(path, "rb") as fh:
                    self.path, self.data = path, fh.read()

    def restore(self) -> None:
        if self.path is not None and self.data is not None:
            from island_tools.atomic import write_bytes
            write_bytes(self.path, self.data)


def _notice(options: DaemonOptions, message: str) -> None:
    if options.notice is not None:
        options.notice(message)
    else:
        print(message, file=sys.stderr, flush=True)


def run_job(job: Mapping[str, Any], backend: Any, options: DaemonOptions | None = None,
            timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """Run one ``worker.jobs`` job on the warm worker for ``backend`` (see the docstring)."""
    from .launch import raise_result_error

    options = options or DaemonOptions()
    paths = Paths(private_dir(options.directory), backend_key(backend))
    op = str(job.get("op"))
    guard = _InputGuard(job)
    reply = call(paths, dict(job), code_fingerprint(),
                 lambda: _start_worker(backend, paths, options), options, timeout=timeout,
                 label=f"job '{op}'", before_retry=guard.restore)
    if isinstance(reply.get("error"), dict):
        raise_result_error(reply["error"])
    result = reply.get("result")
    if not isinstance(result, dict):
        raise WorkerError(f"the warm worker sent no result for job '{op}'", file=str(paths.log))
    return result


def call(paths: Paths, job: dict[str, Any], code: str,
         start_daemon: Callable[[], tuple[socket.socket, int]], options: DaemonOptions, *,
         timeout: float = DEFAULT_TIMEOUT_S, label: str = "the job", what: str = "warm worker",
         on_stream: Callable[[dict[str, Any]], None] | None = None,
         before_retry: Callable[[], None] | None = None) -> dict[str, Any]:
    """Hand ``job`` to the daemon at ``paths`` (``start_daemon`` starts one if there is none)
    and return its final reply: ``{"result": ...}`` or ``{"error": {...}}``.

    Messages with a ``stream`` key that arrive before it go to ``on_stream``. Clients queue on
    the key's client lock; a daemon that dies after accepting is replaced and the job retried
    once (``before_retry`` first restores whatever the job overwrites in place)."""
    paths.check()
    request = {"protocol": PROTOCOL, "kind": "job", "job": job, "cwd": os.getcwd(), "code": code}
    try:
        json.dumps(request, allow_nan=False)
    except (TypeError, ValueError) as exc:
        from island_tools.errors import UsageError
        raise UsageError(f"{label} is not plain JSON: {exc}") from None
    died: list[int] = []
    unaccepted = 0
    with _flock(paths.client_lock, blocking=False) as got:
        if not got:
            _notice(options, f"[worker] waiting for the {what} (another job is running)")
    with _flock(paths.client_lock):
        while True:
            sock, pid = _connect(paths) or start_daemon()
            with sock:
                try:
                    sock.settimeout(timeout)
                    send_message(sock, request)
                    ack = recv_message(sock)
                except TimeoutError:
                    # We hold the client lock, so no live client keeps it busy: it is hung
                    # (or still on the job of a client that was killed, for over `timeout`).
                    _notice(options, f"[worker] the {what} (pid {pid}) did not take "
                                     f"{label} within {timeout:g} s; replacing it")
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                    ack = None
                except (OSError, ProtocolError):
                    ack = None
                if ack is None or ack.get("retired"):
                    # Not accepted: the daemon was exiting (idle, recycled, stale code).
                    unaccepted += 1
                    if unaccepted > 5:
                        raise WorkerError(f"the {what} (pid {pid}) keeps refusing {label}",
                                          file=str(paths.log),
                                          fix="see the log, or run with --no-daemon")
                    _wait_gone(pid, LOCK_WAIT_S)
                    continue
                try:
                    reply = recv_message(sock)
                    while reply is not None and "stream" in reply:
                        if on_stream is not None:
                            on_stream(reply)
                        reply = recv_message(sock)
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                    raise WorkerError(f"the {what} (pid {pid}) did not finish {label} "
                                      f"within {timeout:g} s and was killed",
                                      file=str(paths.log)) from None
                except (OSError, ProtocolError):
                    reply = None
            if reply is None:
                died.append(pid)
                if len(died) > 1:
                    raise WorkerError(f"the {what} died twice during {label} (pids "
                                      f"{died[0]}, {died[1]})", file=str(paths.log),
                                      fix="see the log, or run with --no-daemon")
                _notice(options, f"[worker] the {what} (pid {pid}) died during {label}; "
                                 "retrying once on a fresh one")
                _wait_gone(pid, LOCK_WAIT_S)
                if before_retry is not None:
                    before_retry()
                continue
            return reply


def _known_keys(directory: Path) -> list[str]:
    keys = set()
    for suffix in (".status.json", ".sock", ".daemon.lock"):
        for path in directory.glob(f"*{suffix}"):
            keys.add(path.name[: -len(suffix)])
    return sorted(keys)


def status(directory: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """One entry per daemon key in ``directory``: its status file plus live pid/RSS checks."""
    root = Path(directory) if directory is not None else default_dir()
    if not root.is_dir():
        return []
    out = []
    for key in _known_keys(root):
        paths = Paths(root, key)
        doc = read_status(paths) or {"key": key}
        pid = doc.get("pid")
        running = _daemon_running(paths)
        alive = bool(running and isinstance(pid, int) and pid_alive(pid))
        doc.update(key=key, running=alive, socket=str(paths.sock), log=str(paths.log))
        if alive:
            doc["rss_mb"] = rss_mb(pid)
        elif doc.get("state") not in (None, "stopped"):
            doc["state"] = "dead"
        out.append(doc)
    return out


def _remove_stale(paths: Paths) -> None:
    with _flock(paths.daemon_lock, blocking=False) as got:
        if got:  # no daemon: whatever is left is stale
            for path in (paths.sock, paths.status):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def stop(directory: str | os.PathLike[str] | None = None, key: str | None = None,
         timeout: float = 10.0) -> list[int]:
    """Stop the daemon for ``key`` (all of them if None); return the pids that were running.

    A stop request waits for a running job; after ``timeout`` the daemon gets SIGTERM, then
    SIGKILL.
    """
    root = Path(directory) if directory is not None else default_dir()
    if not root.is_dir():
        return []
    stopped = []
    for k in ([key] if key else _known_keys(root)):
        paths = Paths(root, k)
        doc = read_status(paths) or {}
        pid = doc.get("pid") if isinstance(doc.get("pid"), int) else None
        if not _daemon_running(paths):
            _remove_stale(paths)
            continue
        conn = None
        with contextlib.suppress(WorkerError, OSError):
            conn = _connect(paths, timeout=timeout)
        if conn is not None:
            sock, pid = conn
            with sock, contextlib.suppress(OSError, ProtocolError):
                sock.settimeout(timeout)
                send_message(sock, {"protocol": PROTOCOL, "kind": "stop"})
                recv_message(sock)
        if pid is not None:
            stopped.append(pid)
            for sig, wait in ((None, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
                if _wait_gone(pid, wait):
                    break
        _remove_stale(paths)
    return stopped


def shutdown_all(directory: str | os.PathLike[str] | None = None,
                 timeout: float = 10.0) -> list[int]:
    """Stop every daemon in ``directory`` (tests call this in their teardown)."""
    return stop(directory, None, timeout)


# --------------------------------------------------------------------------- server

class Handler:
    """What a daemon does with a job. The default is the warm worker's: ``worker.jobs`` in
    this Blender. ``scripts/_step_host.py`` subclasses it for the step host."""

    name = "warm worker"

    def prepare(self) -> None:
        """Imports and warm-up, before the socket is bound (a client never waits on them)."""
        import bpy  # noqa: F401

        import worker.jobs  # noqa: F401

    def fingerprint(self) -> str:
        return code_fingerprint()

    def describe(self) -> dict[str, Any]:
        import bpy
        return {"blender_version": ".".join(str(v) for v in bpy.app.version)}

    def label(self, job: Any) -> str:
        return str(job.get("op")) if isinstance(job, dict) else "?"

    def run(self, job: Any, emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """``{"result": ...}``; an exception becomes ``{"error": ...}``. ``emit`` sends a
        ``{"stream": ...}`` message to the client right away."""
        from worker.jobs import run_job
        return {"result": run_job(job)}

    def between_jobs(self) -> None:
        import bpy
        # Back to the state of a fresh Blender: the job's data goes, and so does whatever
        # a job did to the session (UI, preferences) that a later save would write.
        with contextlib.suppress(RuntimeError):
            bpy.ops.wm.read_homefile(use_factory_startup=True)
        gc.collect()
        purge = getattr(bpy.data, "orphans_purge", None)
        if purge is not None:
            with contextlib.suppress(RuntimeError, TypeError):
                purge(do_local_ids=True, do_linked_ids=True, do_recursive=True)


class _Server:
    def __init__(self, paths: Paths, idle_s: float, max_jobs: int, max_rss_mb: int,
                 handler: Handler) -> None:
        self.paths = paths
        self.handler = handler
        self.idle_s = float(idle_s)
        self.max_jobs = int(max_jobs)
        self.max_rss_mb = int(max_rss_mb)
        self.jobs = 0
        self.started = _utc()
        self.state = "starting"
        self.last_job: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.code = ""
        self.listener: socket.socket | None = None
        self.bound: tuple[int, int] | None = None
        self.pause_file = os.environ.get(ENV_PAUSE_FILE) or None

    # ------------------------------------------------------------------ bookkeeping

    def log(self, message: str) -> None:
        print(f"[daemon {os.getpid()} {_utc()}] {message}", flush=True)

    def snapshot(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "key": self.paths.key, "state": self.state,
                "kind": self.handler.name, **self.handler.describe(),
                "python": sys.version.split()[0], "started_utc": self.started,
                "jobs": self.jobs, "rss_mb": rss_mb(), "idle_s": self.idle_s,
                "max_jobs": self.max_jobs, "max_rss_mb": self.max_rss_mb,
                "last_job": self.last_job, "code": self.code,
                "socket": str(self.paths.sock), "log": str(self.paths.log)}

    def set_state(self, state: str) -> None:
        self.state = state
        with contextlib.suppress(OSError):
            _write_json(self.paths.status, self.snapshot())

    # ------------------------------------------------------------------ socket

    def bind(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.paths.sock.unlink()  # we hold the daemon lock: any socket here is stale
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(self.paths.sock))
        finally:
            os.umask(old)
        os.chmod(self.paths.sock, 0o600)
        listener.listen(16)
        st = os.stat(self.paths.sock)
        self.bound = (st.st_dev, st.st_ino)
        self.listener = listener

    def unbind(self) -> None:
        """Remove our socket (only ours) so no new client connects, then close it."""
        if self.listener is None:
            return
        with contextlib.suppress(OSError):
            st = os.stat(self.paths.sock)
            if (st.st_dev, st.st_ino) == self.bound:
                self.paths.sock.unlink()
        self.listener.close()
        self.listener = None

    # ------------------------------------------------------------------ jobs

    def run_one(self, job: Any, emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        try:
            return self.handler.run(job, emit)
        except IslandError as exc:
            err = {"type": type(exc).__name__, "message": _one_line(exc),
                   "exit_code": int(exc.exit_code)}
        except Exception as exc:  # noqa: BLE001 - every bug goes back as InternalError
            traceback.print_exc()
            sys.stderr.flush()
            err = {"type": "InternalError", "message": _one_line(f"{type(exc).__name__}: {exc}"),
                   "exit_code": EXIT_INTERNAL}
        self.log(f"job failed: {err['type']}: {err['message']}")
        return {"error": err}

    def pause_for_debugging(self) -> None:
        if not self.pause_file or not os.path.exists(self.pause_file):
            return
        self.set_state("paused")
        self.log(f"debug pause: waiting while {self.pause_file} exists")
        while os.path.exists(self.pause_file):
            time.sleep(0.02)
        self.set_state("busy")

    def handle_job(self, conn: socket.socket, request: dict[str, Any]) -> None:
        if request.get("protocol") != PROTOCOL or request.get("code") != self.code:
            why = ("protocol mismatch" if request.get("protocol") != PROTOCOL
                   else "its code changed on disk")
            self.stop_reason = f"retired: {why}"
            self.unbind()
            with contextlib.suppress(OSError):
                send_message(conn, {"retired": why})
            return
        self.jobs += 1
        send_message(conn, {"accepted": True, "pid": os.getpid(), "job_number": self.jobs})
        self.set_state("busy")
        self.pause_for_debugging()
        job = request.get("job")
        op = self.handler.label(job)
        cwd = request.get("cwd")
        try:
            os.chdir(cwd if isinstance(cwd, str) and os.path.isdir(cwd) else "/")
        except OSError:
            os.chdir("/")
        gone: list[str] = []

        def emit(message: dict[str, Any]) -> None:
            if gone:
                return
            try:
                send_message(conn, {**message, "stream": message.get("stream", "stderr")})
            except (OSError, ValueError, ProtocolError) as exc:
                gone.append(str(exc))  # the client went away: finish the job regardless
                self.log(f"job {self.jobs}: client gone ({exc}); finishing the job")

        t0 = time.perf_counter()
        reply = self.run_one(job, emit)
        seconds = time.perf_counter() - t0
        reply["daemon"] = {"pid": os.getpid(), "job_number": self.jobs,
                           "seconds": round(seconds, 4)}
        try:
            send_message(conn, reply)
        except (OSError, ValueError, ProtocolError) as exc:
            self.log(f"could not send the reply of job {self.jobs}: {exc}")
        os.chdir("/")
        self.handler.between_jobs()
        memory = rss_mb()
        self.last_job = {"op": op, "seconds": round(seconds, 4), "finished_utc": _utc(),
                         "ok": "result" in reply}
        self.log(f"job {self.jobs} {op} {seconds:.3f} s, rss {memory or 0:.0f} MiB"
                 + ("" if "result" in reply else " (error)"))
        if self.jobs >= self.max_jobs:
            self.stop_reason = f"recycled after {self.jobs} jobs"
        elif memory is not None and memory > self.max_rss_mb:
            self.stop_reason = f"recycled: rss {memory:.0f} MiB > {self.max_rss_mb} MiB"
        if self.stop_reason is None:
            self.set_state("idle")

    def handle(self, conn: socket.socket) -> None:
        _pid, uid, _gid = peer_credentials(conn)
        if not peer_allowed(uid):
            self.log(f"refused a connection from uid {uid}")
            return
        conn.settimeout(REQUEST_TIMEOUT_S)
        try:
            request = recv_message(conn)
        except (OSError, ProtocolError) as exc:
            self.log(f"bad request: {exc}")
            return
        if request is None:
            return
        conn.settimeout(None)
        kind = request.get("kind")
        if kind == "job":
            self.handle_job(conn, request)
        elif kind == "ping":
            send_message(conn, {"status": self.snapshot()})
        elif kind == "stop":
            self.stop_reason = "stop requested"
            self.unbind()
            send_message(conn, {"stopping": True, "pid": os.getpid()})
        else:
            send_message(conn, {"error": {"type": "UsageError", "exit_code": 2,
                                          "message": f"unknown request kind {kind!r}"}})

    # ------------------------------------------------------------------ main loop

    def serve(self) -> int:
        self.handler.prepare()
        self.code = self.handler.fingerprint()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signals: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda num, _frame: signals.append(num))
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self.bind()
        self.set_state("idle")
        self.log(f"ready: {self.paths.sock} (idle {self.idle_s:g} s, max {self.max_jobs} jobs, "
                 f"max {self.max_rss_mb} MiB, {sys.executable})")
        last = time.monotonic()
        try:
            while self.stop_reason is None:
                if signals:
                    self.stop_reason = f"signal {signals[0]}"
                    break
                remaining = self.idle_s - (time.monotonic() - last)
                if remaining <= 0:
                    self.stop_reason = f"idle for {self.idle_s:g} s"
                    break
                assert self.listener is not None
                ready, _, _ = select.select([self.listener, wake_r], [], [], remaining)
                if wake_r in ready:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 64)
                if self.listener not in ready:
                    continue
                try:
                    conn, _ = self.listener.accept()
                except OSError:
                    continue
                with conn:
                    try:
                        self.handle(conn)
                    except (OSError, ProtocolError) as exc:
                        self.log(f"connection error: {exc}")
                last = time.monotonic()
        finally:
            self.unbind()
            self.log(f"exiting: {self.stop_reason or 'error'} after {self.jobs} job(s)")
            self.state = "stopped"
            with contextlib.suppress(FileNotFoundError):
                self.paths.status.unlink()
        return 0


def _redirect_output(log: Path) -> None:
    """Point fds 1 and 2 (Python's and Blender's C-level output) at the log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]


def serve(directory: str | os.PathLike[str] | None, key: str | None, idle_s: float,
          max_jobs: int, max_rss_mb: int, handler: Handler | None = None) -> int:
    """Run a daemon in this process until it exits (see the module docstring)."""
    handler = handler or Handler()
    paths = Paths(private_dir(directory), key or _own_key())
    paths.check()
    _redirect_output(paths.log)
    deadline = time.monotonic() + LOCK_WAIT_S
    fd = os.open(paths.daemon_lock, os.O_RDWR | os.O_CREAT, 0o600)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                print(f"[daemon {os.getpid()}] another {handler.name} holds {paths.daemon_lock}; "
                      "exiting", flush=True)
                return EXIT_ALREADY_RUNNING
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    try:
        return _Server(paths, idle_s, max_jobs, max_rss_mb, handler).serve()
    finally:
        os.close(fd)


def _own_key() -> str:
    """The key a client would compute for the Blender running this process."""
    import bpy

    from worker.launch import Backend
    version = ".".join(str(v) for v in bpy.app.version)
    binary = getattr(bpy.app, "binary_path", "") or ""  # "" for the bpy module
    if not binary:
        return backend_key(Backend(kind="embedded", version=version))
    return backend_key(Backend(kind="binary", path=binary, version=version))


# --------------------------------------------------------------------------- CLI

def _print_status(entries: list[dict[str, Any]], directory: Path) -> None:
    if not entries:
        print(f"no warm worker (directory {directory})")
        return
    now = time.time()
    for e in entries:
        if not e.get("running"):
            print(f"{e['key']}: not running ({e.get('state') or 'no status'})")
            continue
        up = ""
        with contextlib.suppress(ValueError, TypeError):
            started = calendar.timegm(time.strptime(e["started_utc"], _UTC_FORMAT))
            up = f", up {now - started:.0f} s"
        print(f"{e['key']}: pid {e['pid']} {e.get('state')}, {e.get('jobs')}/"
              f"{e.get('max_jobs')} jobs, rss {e.get('rss_mb') or 0:.0f}/{e.get('max_rss_mb')} "
              f"MiB, idle timeout {e.get('idle_s'):g} s{up}; log {e['log']}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:  # under a Blender binary: everything after "--" is ours
        argv = argv[argv.index("--") + 1:]
    ap = argparse.ArgumentParser(prog="python -m worker.daemon",
                                 description="The warm worker (see worker/daemon.py).")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="list the warm workers")
    what.add_argument("--stop", action="store_true", help="stop them (after a running job)")
    what.add_argument("--serve", action="store_true",
                      help="run one in this process (clients normally start it)")
    ap.add_argument("--dir", default=None, help=f"daemon directory (default: ${ENV_DIR}, "
                    "$XDG_RUNTIME_DIR/island-refiner, /tmp/island-refiner-<uid>)")
    ap.add_argument("--key", default=None, help="backend key (default: this Blender's)")
    ap.add_argument("--json", action="store_true", help="--status as JSON")
    ap.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S)
    ap.add_argument("--max-jobs", type=int, default=DEFAULT_MAX_JOBS)
    ap.add_argument("--max-rss-mb", type=int, default=DEFAULT_MAX_RSS_MB)
    args = ap.parse_args(argv)
    directory = Path(args.dir) if args.dir else default_dir()
    if args.serve:
        return serve(directory, args.key, args.idle_s, args.max_jobs, args.max_rss_mb)
    if args.status:
        entries = status(directory)
        if args.json:
            print(json.dumps(entries, indent=2))
        else:
            _print_status(entries, directory)
        return 0
    pids = stop(directory, args.key)
    print(f"stopped {len(pids)} warm worker(s)" + (f": pids {pids}" if pids else ""))
    return 0


if __name__ == "__main__":
    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if _code:
        sys.exit(_code)
