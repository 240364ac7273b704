"""The client side of the warm worker and the step host (see worker/daemon.py).

Split from ``worker.daemon`` so that a thin CLI client (``iter_step.py`` handing its call to
the step host, scripts/_step_host.py) imports only this: standard-library modules that cost
little to import (no dataclasses, typing, subprocess or argparse at import time), plus
``island_tools.errors`` and ``worker.daemon_common`` (the options and errors it shares with
``worker.launch``, which imports this module and never the other way round).
``worker.daemon`` re-exports every name here.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import stat
import struct
import sys
import time
import zlib
from pathlib import Path

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``typing`` costs a thin client ~4 ms
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from island_tools.errors import WorkerError  # noqa: E402
from island_tools.files.locks import flock  # noqa: E402

from .daemon_common import (  # noqa: E402, F401 - re-exported (worker.daemon, the CLIs)
    DEFAULT_IDLE_S,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_RSS_MB,
    DaemonDirError,
    DaemonOptions,
    _child_env,
    raise_result_error,
    warn_once,
)

PROTOCOL = 1
ENV_DIR = "ISLAND_REFINER_DAEMON_DIR"
ENV_ENABLE = "ISLAND_REFINER_DAEMON"
ENV_PAUSE_FILE = "ISLAND_REFINER_DAEMON_DEBUG_PAUSE_FILE"
DEFAULT_TIMEOUT_S = 600.0
START_TIMEOUT_S = 120.0
LOCK_WAIT_S = 30.0          # a new daemon waits this long for an exiting one to let go
REQUEST_TIMEOUT_S = 10.0    # a connected client must send its request within this
MAX_MESSAGE_BYTES = 64 << 20
MAX_SOCKET_PATH = 107       # sun_path is 108 bytes with the NUL
LOG_ROTATE_BYTES = 8 << 20
EXIT_ALREADY_RUNNING = 3
# Modules a daemon runs for a job: when one changes on disk, a running daemon is stale.
_CODE_FILES = ("island_tools/errors.py", "island_tools/files/atomic.py",
               "island_tools/files/blendfile.py", "island_tools/measure/frames.py",
               "island_tools/measure/meshcache.py", "island_tools/files/locks.py",
               "island_tools/files/portable.py")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_HEADER = struct.Struct(">I")
_UCRED = struct.Struct("3i")


class ProtocolError(Exception):
    """A malformed message on the socket."""


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


def _own_private(path: Path, created: bool, fix: str) -> Path:
    """``path`` as a private directory of ours: lstat (a symlink is refused), our uid, no
    access for group or others. Only a directory this call created is chmod-ed."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise DaemonDirError("warm-worker directory is not a directory (a symlink?)",
                             file=str(path), fix=fix)
    if st.st_uid != os.getuid():
        raise DaemonDirError(f"warm-worker directory belongs to uid {st.st_uid}, not "
                             f"{os.getuid()}", file=str(path), fix=fix)
    if created and stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    elif stat.S_IMODE(st.st_mode) & 0o077:
        raise DaemonDirError(f"warm-worker directory is open to others (mode "
                             f"{stat.S_IMODE(st.st_mode):o}, not 700)", file=str(path), fix=fix)
    return path


def _make(path: Path) -> bool:
    """mkdir 0700; True if this call created it, False if something was there already."""
    try:
        os.mkdir(path, 0o700)
        return True
    except FileExistsError:
        return False


def private_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The daemon directory: a private directory of ours (0700, owned by us, not a symlink).

    A directory others may write to (``/tmp``, or ``$ISLAND_REFINER_DAEMON_DIR`` pointing at
    one) is never used or chmod-ed itself: a private ``island-refiner-<uid>`` directory is
    made inside it. DaemonDirError (the caller runs in this process) when the directory, or
    that subdirectory, belongs to someone else or is open to others."""
    path = Path(path) if path is not None else default_dir()
    fix = f"remove it, or set ${ENV_DIR} to a directory of your own"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        created = _make(path)
        st = os.lstat(path)
        if not created and stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o022:
            sub = path / f"island-refiner-{os.getuid()}"   # a shared directory: our own in it
            return _own_private(sub, _make(sub), fix)
        return _own_private(path, created, fix)
    except OSError as exc:
        raise DaemonDirError(f"cannot create the warm-worker directory: {exc.strerror}",
                             file=str(path), fix=fix) from None


def _binary_stamp(exe: str) -> str:
    """The binary as a file (device, inode, size, mtime): a Blender replaced at the same path
    gets a new key, so its old daemon is never asked again."""
    try:
        st = os.stat(exe)
    except OSError:
        return "?"
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def backend_key(backend: Any) -> str:
    """``bpy-5.0.1-<hash>`` / ``blender-3.4.1-<hash>``: one daemon per Blender binary (path
    and file identity) and checkout."""
    embedded = getattr(backend, "embedded", True)
    exe = sys.executable if embedded else str(backend.path)
    digest = short_digest(f"{exe}\0{_binary_stamp(exe)}\0{_REPO}")
    raw = getattr(backend, "version", "") or ""
    version = "".join(c for c in raw if c.isascii() and (c.isalnum() or c == ".")) or "unknown"
    return f"{'bpy' if embedded else 'blender'}-{version}-{digest}"


class Paths:
    """The files of one daemon key in the daemon directory."""

    __slots__ = ("directory", "key")

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = Path(directory)
        self.key = key

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Paths) and (self.directory, self.key)
                == (other.directory, other.key))

    def __hash__(self) -> int:
        return hash((self.directory, self.key))

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
    parts = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        parts.append(f"{path.name}:{st.st_mtime_ns}:{st.st_size};")
    return short_digest("".join(parts), 16)


def short_digest(text: str, width: int = 10) -> str:
    """A hex digest of ``text`` for file names and change detection (not security: zlib's
    crc32 and adler32, because ``hashlib`` costs a thin client ~4 ms of imports)."""
    data = text.encode()
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"[:width]


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

_SPAWNED: dict[int, subprocess.Popen] = {}  # started here, reaped by pid_alive


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
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)   # a leftover of a killed writer, or a planted link: never followed
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
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


def _flock(path: Path, *, blocking: bool = True) -> contextlib.AbstractContextManager[bool]:
    return flock(path, blocking=blocking)


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
    script = str(Path(__file__).resolve().with_name("daemon.py"))
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
    env = dict(os.environ) if getattr(backend, "embedded", True) else _child_env(backend)
    return start(paths, daemon_command(backend, paths, options), env)


def start(paths: Paths, command: list[str], env: Mapping[str, str], what: str = "warm worker"
          ) -> tuple[socket.socket, int]:
    """Start a daemon with ``command`` (caller holds the client lock) and connect to it."""
    import subprocess

    with contextlib.suppress(OSError):
        if paths.log.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(paths.log, paths.log.with_name(paths.log.name + ".1"))
    log_fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
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
            from island_tools.files.atomic import write_bytes
            write_bytes(self.path, self.data)


def _notice(options: DaemonOptions, message: str) -> None:
    if options.notice is not None:
        options.notice(message)
    else:
        print(message, file=sys.stderr, flush=True)


def run_job(job: Mapping[str, Any], backend: Any, options: DaemonOptions | None = None,
            timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """Run one ``worker.jobs`` job on the warm worker for ``backend`` (see the docstring)."""
    options = options or DaemonOptions()
    key = backend_key(backend) + (f"-w{int(options.slot)}" if options.slot else "")
    paths = Paths(private_dir(options.directory), key)
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
    mask = os.umask(0o077)
    os.umask(mask)   # the daemon writes the job's files with the caller's umask
    request = {"protocol": PROTOCOL, "kind": "job", "job": job, "cwd": os.getcwd(), "code": code,
               "umask": mask}
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


