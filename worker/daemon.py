"""The warm worker: one long-lived Blender per backend that runs worker jobs over a UNIX socket.

The server and client here are generic: ``serve(..., handler)`` runs any ``Handler``
(prepare / fingerprint / run / between_jobs); ``call`` + ``start`` are the client side, in
``worker/daemon_client.py`` (cheap to import; every name is re-exported here). The warm worker
is the default handler (``worker.jobs`` in Blender); ``scripts/_step_host.py`` (client) and
``scripts/_step_host_server.py`` use the same machinery for the step host, a warm Python
that runs whole ``iter_step.py`` calls and streams their output back as ``{"stream":
"stdout"|"stderr", "text"}`` messages before the final reply. Everything below applies to
both (key ``host-...`` for hosts).

An agent runs ``iter_step.py`` as a fresh process every iteration. Done in that process, a
step pays ``import bpy`` (~0.5 s) and Workbench's first-render warm-up (~1 s) every time;
handed to a Blender that stays alive, it costs little more than its two renders. This module
is both ends: the client (``run_job``, used by ``worker.launch.run_job(..., daemon=...)``,
from ``worker.daemon_client``)
and the server (``serve``), plus ``python -m worker.daemon --status`` / ``--stop [--all]``.

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
``<key>.status.json``  pid, state, jobs, RSS, limits, checkout (written by the daemon)
``<key>.log``          the daemon's stdout/stderr (rotated to ``.log.1`` above 8 MiB)

Checkouts
---------
One user may run several checkouts of this repository (clones, git worktrees), each with its
own daemons: a key's digest covers the repository path, so two checkouts never share one.
"This checkout" is the real path of the repository root holding the ``worker/daemon.py``
that runs (``CHECKOUT``; for ``python -m worker.daemon``, the checkout it is imported from).
Each daemon writes the checkout of the code it runs into its status file (``checkout``).
``--status`` marks every daemon ``[this checkout]``, ``[checkout /other/path]`` or
``[checkout unknown]`` (no status file yet, or a daemon older than the field); a stopped
daemon (its status file removed, only its lock files left) is not listed;
``--stop`` stops this checkout's only and names those left running, ``--stop --all``
stops every daemon of this user in the directory, ``--stop --key K`` that one alone.
``shutdown_all`` (test teardown) stops all of them.

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
import fcntl
import gc
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from island_tools.errors import WorkerError, error_dict, unsendable_reply  # noqa: E402
from worker.daemon_client import (  # noqa: E402, F401 - re-exported
    _CODE_FILES,
    _FALSE,
    _HEADER,
    _SPAWNED,
    _TRUE,
    _UCRED,
    _UTC_FORMAT,
    DEFAULT_IDLE_S,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_RSS_MB,
    DEFAULT_TIMEOUT_S,
    ENV_DIR,
    ENV_ENABLE,
    ENV_PAUSE_FILE,
    EXIT_ALREADY_RUNNING,
    LOCK_WAIT_S,
    LOG_ROTATE_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_SOCKET_PATH,
    PROTOCOL,
    REQUEST_TIMEOUT_S,
    START_TIMEOUT_S,
    DaemonOptions,
    Paths,
    ProtocolError,
    _connect,
    _daemon_running,
    _flock,
    _InputGuard,
    _last_log_line,
    _notice,
    _one_line,
    _recv_exact,
    _start_worker,
    _utc,
    _wait_gone,
    _write_json,
    backend_key,
    call,
    code_fingerprint,
    daemon_allowed,
    daemon_command,
    default_dir,
    fingerprint,
    peer_allowed,
    peer_credentials,
    pid_alive,
    private_dir,
    read_status,
    recv_message,
    rss_mb,
    run_job,
    send_message,
    start,
)

# "This checkout": the real path of the repository root that holds this worker/daemon.py.
# Every daemon records the checkout of the code it runs in its status file, so
# ``--stop`` stops this checkout's daemons and leaves other checkouts' running.
CHECKOUT = str(_REPO)


def _known_keys(directory: Path) -> list[str]:
    keys = set()
    for suffix in (".status.json", ".sock", ".daemon.lock"):
        for path in directory.glob(f"*{suffix}"):
            keys.add(path.name[: -len(suffix)])
    return sorted(keys)


def status(directory: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """One entry per daemon key in ``directory``: its status file plus live pid/RSS checks,
    and ``this_checkout`` (its status file names ``CHECKOUT``, see "Checkouts")."""
    root = Path(directory) if directory is not None else default_dir()
    if not root.is_dir():
        return []
    out = []
    for key in _known_keys(root):
        paths = Paths(root, key)
        found = read_status(paths)
        running = _daemon_running(paths)
        if found is None and not running:
            continue   # stopped: it removed its status file; only its lock files are left
        doc = found or {"key": key}
        pid = doc.get("pid")
        alive = bool(running and isinstance(pid, int) and pid_alive(pid))
        doc.update(key=key, running=alive, socket=str(paths.sock), log=str(paths.log),
                   this_checkout=doc.get("checkout") == CHECKOUT)
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
         timeout: float = 10.0, checkout: str | None = None) -> list[int]:
    """Stop the daemon for ``key`` (all of them if None); return the pids that were running.
    ``checkout``: only the daemons whose status file names that checkout (``CHECKOUT`` is
    this one's); None: whoever's they are.

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
        if checkout is not None and doc.get("checkout") != checkout:
            continue
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
    this Blender. ``scripts/_step_host_server.py`` subclasses it for the step host."""

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
        from worker import jobs
        return {"result": jobs.run_job(job)}

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
                "last_job": self.last_job, "code": self.code, "checkout": CHECKOUT,
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
        except Exception as exc:  # noqa: BLE001 - every failure goes back as one error
            err = error_dict(exc)
            if err["type"] == "InternalError":
                traceback.print_exc()
                sys.stderr.flush()
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
        mask = request.get("umask")
        old_mask = os.umask(mask if isinstance(mask, int) and 0 <= mask <= 0o777 else 0o077)
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
        os.umask(old_mask)
        try:
            send_message(conn, reply)
        except ValueError as exc:   # not JSON-encodable (a non-finite number): say so
            self.log(f"could not encode the reply of job {self.jobs}: {exc}")
            reply = {"error": unsendable_reply(exc), "daemon": reply["daemon"]}
            with contextlib.suppress(OSError, ValueError, ProtocolError):
                send_message(conn, reply)
        except (OSError, ProtocolError) as exc:
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
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
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
    fd = os.open(paths.daemon_lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
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

def _whose(entry: dict[str, Any]) -> str:
    if entry.get("this_checkout"):
        return "this checkout"
    return f"checkout {entry['checkout']}" if entry.get("checkout") else "checkout unknown"


def _print_status(entries: list[dict[str, Any]], directory: Path) -> None:
    if not entries:
        print(f"no warm worker (directory {directory})")
        return
    print(f"this checkout: {CHECKOUT}")
    now = time.time()
    for e in entries:
        head = f"{e['key']} [{_whose(e)}]"
        if not e.get("running"):
            print(f"{head}: not running ({e.get('state') or 'no status'})")
            continue
        up = ""
        with contextlib.suppress(ValueError, TypeError):
            started = calendar.timegm(time.strptime(e["started_utc"], _UTC_FORMAT))
            up = f", up {now - started:.0f} s"
        print(f"{head}: pid {e['pid']} {e.get('state')}, {e.get('jobs')}/"
              f"{e.get('max_jobs')} jobs, rss {e.get('rss_mb') or 0:.0f}/{e.get('max_rss_mb')} "
              f"MiB, idle timeout {e.get('idle_s'):g} s{up}; log {e['log']}")


def _stop(directory: Path, key: str | None, everyone: bool) -> None:
    checkout = None if key or everyone else CHECKOUT
    pids = stop(directory, key, checkout=checkout)
    whose = (f"key {key}" if key else "every checkout" if everyone
             else f"this checkout ({CHECKOUT})")
    print(f"stopped {len(pids)} warm worker(s) of {whose}"
          + (f": pids {pids}" if pids else ""))
    if checkout is not None:
        others = [e for e in status(directory) if e.get("running")]
        if others:
            keys = ", ".join(e["key"] for e in others)
            print(f"left running: {len(others)} not of this checkout ({keys}); "
                  "--stop --all stops them too")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:  # under a Blender binary: everything after "--" is ours
        argv = argv[argv.index("--") + 1:]
    ap = argparse.ArgumentParser(prog="python -m worker.daemon",
                                 description="The warm worker (see worker/daemon.py).")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true",
                      help="list the warm workers, each marked this checkout's or another's")
    what.add_argument("--stop", action="store_true",
                      help="stop this checkout's (after a running job); --all: everyone's")
    what.add_argument("--serve", action="store_true",
                      help="run one in this process (clients normally start it)")
    ap.add_argument("--dir", default=None, help=f"daemon directory (default: ${ENV_DIR}, "
                    "$XDG_RUNTIME_DIR/island-refiner, /tmp/island-refiner-<uid>)")
    ap.add_argument("--key", default=None, help="backend key (default: this Blender's; with "
                    "--stop: only that daemon, whichever checkout it belongs to)")
    ap.add_argument("--all", action="store_true", dest="everyone",
                    help="with --stop: every warm worker and step host of this user, other "
                         "checkouts' included")
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
    _stop(directory, args.key, args.everyone)
    return 0


if __name__ == "__main__":
    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if _code:
        sys.exit(_code)
