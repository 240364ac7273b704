"""``island-refine mcp``: the island loop as a Model Context Protocol server (stdio).

Agent hosts that call tools over MCP get the same fixed verbs the CLIs give a bash agent,
over the same library functions (one code path):

=================  =====================================================  ==============
tool               library function                                       CLI
=================  =====================================================  ==============
list_groups        ``iteration.load_group`` / ``completed_iters``         -
group_status       the above, ``adapter.phase_for``, ``review.review_     -
                   island`` (the one verdict: pass / fail / uncertain)
init_iter0         ``iteration.init_iter0``                               init_iter0.py
write_decision     ``adapter.write_decision`` (contract + magnitude       agent.py write
                   policy; a rejection names member, cap and phase)
iter_step          ``iteration.iter_step``                                iter_step.py
get_iteration      the iteration's files: renders as image content,       -
                   geometry.json / transforms.json as text
promote_final      ``adapter.promote_final`` (contract steps 4-5)         -
solve_group        ``adapter.run_group`` with the built-in solver         agent.py run
refine_scene       ``scene.pipeline.run_scene`` (policy solver)           island-refine run
report             ``scene.report.report_result``                         island-refine report
=================  =====================================================  ==============

A failure is an MCP tool error (``isError``) whose text is the CLI's one line -
``[iter_step] error (exit 3): ...`` - with ``exit_code`` beside it in the structured
content; a success carries the CLI's stdout lines (``[iter_step] sanity OK`` ...).

Confinement. The server is started with one or more ``--root`` directories. Every path a
tool is given is resolved (every symlink on the way followed; relative paths are taken from
the first root) and refused (exit 2) unless it lies inside a root; a group or scene directory
holding a symlink that leads out of the roots is refused too. That check holds for the whole
call, not only its start: a writing call runs under an ``atomic.Confined`` guard, so every
write the library makes beneath a root is made through a directory descriptor opened from
the root with ``O_NOFOLLOW`` on each component, and the call's group (or scene) directory is
pinned to the inode it had when the call began. A directory swapped for a symlink (or for
another directory) mid-call refuses the next write and ends the call with one line (exit 2);
nothing lands outside the roots. Blender's own saves go to paths: the directories a job
writes to are checked before and after every job. Files are read for a client the same way
(``get_iteration``: no symlink, no FIFO, and a file with hard links is served only when
every one of its names lies in the group's ``simple_refiner/``, see :func:`_names_in_refiner`).
No tool runs code it is sent: the policy is always the built-in solver (no ``command:``
agents), the Blender binary and ``DIRECTORYS.yaml`` are the server's own (flags at start), and
decisions are data checked by the adapter.

Every request gets an answer (``island_tools/mcp_wire.py``): a line the transport cannot
parse is a JSON-RPC error for its id, and arguments of the wrong type are the CLI's one line
with ``exit_code``.

Writing calls (init_iter0, write_decision, iter_step, promote_final, solve_group,
refine_scene) run one at a time on one worker thread - the thread that does all of this
process's Blender work, since the bpy module must not be entered from several threads - and
send every progress line of the library as an MCP progress notification. A cancelled call
(``notifications/cancelled``, or the client going away) raises :class:`Cancelled` - a
``KeyboardInterrupt`` - at the library's next checkpoint (a progress line, or before or after
a Blender job), so it unwinds exactly as Ctrl-C in the CLI and Esc in the add-on do: the
staging directory is removed, and an iteration is either fully written or absent. A
cancelled call has unwound before the next writing call starts; reads run beside them.

Blender work is injected (``run_job``), as everywhere in ``island_tools``:
``scripts/refine_scene.py`` binds the CLIs' own job runner (warm worker, embedded bpy or a
Blender binary) and calls :func:`serve`.
"""
import base64
import contextlib
import os
import signal
import stat
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import ValidationError

from . import adapter, mcp_wire, review
from .clirun import failure
from .config import Settings, with_overrides
from .errors import ECHO_LIMIT, IslandError, TransformsError, UsageError, clip
from .files import atomic
from .files.jsonio import loads_strict, read_object
from .iteration import REFINER_DIR, Group, RunJob, completed_iters, load_group
from .loop_lines import geometry_summary, init_iter0_lines, iter_step_lines, write_lines
from .scene.errors import EXIT_PARTIAL

JobRunner = Callable[[Settings], tuple[str, RunJob]]      # -> (backend description, run_job)
JobSlotsFactory = Callable[[Settings], Callable[[int], RunJob] | None]

SERVER_NAME = "island-refiner"
CLIENT_MAX_RESOLUTION = 2048   # px per view a client may ask for (see _settings)
CLIENT_MAX_SAMPLES = 1024
PROG = "mcp"
MAX_ITER_LIMIT = 200
PATH_MAX_BYTES = 4096          # Linux PATH_MAX: no longer path names anything
WORKER_MEMORY_MIB = 512        # one warm Blender worker refining a group (measured 440 MiB)
LINE_LIMIT = 4 * ECHO_LIMIT    # a reply line beyond this was cut (an echo the checks missed)
INSTRUCTIONS = (
    "Refine furniture arrangements around an anchor, one relation-group island at a time "
    "(canonical frame: anchor at the origin, metres, degrees). The loop: init_iter0; then for "
    "N = 1, 2, ...: get_iteration(N-1) (renders + geometry.json), decide per-member deltas, "
    "write_decision(N), iter_step(N); group_status says the phase and caps of the next "
    "iteration and whether the contract's stop holds (MIN_ITER 5, converged, 3 consecutive "
    "empty iterations, final, no progress (moves below 0.1 mm / 0.01 deg), exit 4); "
    "promote_final ends a run. solve_group runs the "
    "built-in solver loop; refine_scene/report work on whole scenes. Paths must lie under "
    "the server's roots.")


class Cancelled(KeyboardInterrupt):
    """The MCP client cancelled the call (see the module docstring)."""


# --------------------------------------------------------------------------- confinement
class Confinement:
    """The server's root directories and the checks every path goes through."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]]) -> None:
        resolved: list[Path] = []
        for raw in roots:
            try:
                path = Path(raw).resolve(strict=True)
            except (OSError, RuntimeError):
                raise UsageError("root directory does not exist", file=str(raw),
                                 fix="pass --root DIR for an existing directory") from None
            if not path.is_dir():
                raise UsageError("root is not a directory", file=str(raw),
                                 fix="pass --root DIR for a directory")
            resolved.append(path)
        if not resolved:
            raise UsageError("the MCP server needs at least one root directory",
                             fix="pass --root DIR (repeatable)")
        self.roots = tuple(dict.fromkeys(resolved))

    def inside(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def _fix(self) -> str:
        return f"pass a path under {', '.join(str(r) for r in self.roots)}"

    def path(self, raw: Any, what: str) -> Path:
        """``raw`` resolved (symlinks followed), or UsageError (exit 2) if it leaves the roots."""
        if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
            raise UsageError("must be a non-empty path", field=what, fix=self._fix())
        if len(raw) > PATH_MAX_BYTES or len(raw.encode("utf-8", "replace")) > PATH_MAX_BYTES:
            raise UsageError(f"is longer than any path ({PATH_MAX_BYTES} bytes at most)",
                             file=clip(raw), field=what, fix=self._fix())
        given = Path(raw)
        if not given.is_absolute():
            given = self.roots[0] / given
        try:
            resolved = given.resolve()
            if resolved.is_symlink():   # Python 3.13 returns a loop unresolved, 3.11 raises
                raise RuntimeError("symlink loop")
        except (OSError, RuntimeError) as exc:   # a symlink loop
            raise UsageError(f"cannot be resolved ({type(exc).__name__})", file=clip(raw),
                             field=what, fix=self._fix()) from None
        if not self.inside(resolved):
            how = ("leads outside the server's roots through a symlink"
                   if self.inside(Path(os.path.abspath(given))) else
                   "is outside the server's roots")
            raise UsageError(how, file=clip(raw), field=what, fix=self._fix())
        return resolved

    def tree(self, top: Path, what: str) -> None:
        """Refuse a directory that holds a symlink leading out of the roots (the library
        would follow it when it reads or writes there)."""
        if not top.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(top):  # links are listed, not entered
            for name in (*dirnames, *filenames):
                full = Path(dirpath, name)
                if not full.is_symlink():
                    continue
                try:
                    target = full.resolve()
                except (OSError, RuntimeError):
                    target = None
                if target is None or not self.inside(target):
                    raise UsageError("is a symlink leading outside the server's roots",
                                     file=str(full), field=what,
                                     fix="remove the link; the server never follows a link "
                                         "out of its roots")

    def group(self, raw: Any) -> Path:
        path = self.path(raw, "group_dir")
        self.tree(path, "group_dir")
        return path

    def scene(self, raw: Any) -> Path:
        path = self.path(raw, "scene_dir")
        self.tree(path, "scene_dir")
        return path


def _available_mib() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for row in fh:
                if row.startswith("MemAvailable:"):
                    return int(row.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1 << 20)
    except (OSError, ValueError):
        return None


def worker_cap() -> tuple[int, str]:
    """(the most groups ``refine_scene`` refines side by side, why): the cores this process
    may run on, and the available memory at ``WORKER_MEMORY_MIB`` per warm Blender worker
    (each group side by side has its own). Never below 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    avail = _available_mib()
    by_memory = cores if avail is None else avail // WORKER_MEMORY_MIB
    why = (f"{cores} cores, " + ("available memory unknown" if avail is None else
                                f"{avail} MiB available at {WORKER_MEMORY_MIB} MiB per "
                                "worker"))
    return max(1, min(cores, by_memory)), why


# --------------------------------------------------------------------------- results
def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def ok_result(lines: list[str], data: dict[str, Any],
              extra: Sequence[TextContent | ImageContent] = ()) -> CallToolResult:
    body = "\n".join(lines)
    return CallToolResult(content=[_text(body), *extra],
                          structured_content={"exit_code": 0, "lines": lines, **data})


def error_result(code: int, line: str, data: dict[str, Any] | None = None,
                 lines: list[str] | None = None) -> CallToolResult:
    """An MCP tool error carrying the CLI's one line and its exit code. Lines are cut at
    ``LINE_LIMIT``: a value echoed whole (a client's megabytes) never makes the reply."""
    line = clip(line, LINE_LIMIT)
    shown = [clip(x, LINE_LIMIT) for x in lines] if lines else [line]
    return CallToolResult(content=[_text("\n".join(shown))], is_error=True,
                          structured_content={"exit_code": code, "line": line, "lines": shown,
                                              **(data or {})})


# --------------------------------------------------------------------------- calls
class Call:
    """One tool call on the worker thread: progress out, cancellation in."""

    def __init__(self, token: Any = None, send: Any = None) -> None:
        self.cancelled = threading.Event()
        self.guard: atomic.Confined | None = None   # a writing call's (see _on_worker)
        self._token = token
        self._send = send
        self._count = 0
        self._lock = threading.Lock()

    def pin(self, directory: Path) -> Path:
        """Hold the call's group or scene directory to the inode it has now."""
        if self.guard is not None:
            self.guard.pin(directory)
        return directory

    def checkpoint(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def progress(self, message: str) -> None:
        """The library's progress callback (any thread): a notification, and a checkpoint."""
        self.checkpoint()
        with self._lock:
            self._count += 1
            k = self._count
        if self._send is not None:
            with contextlib.suppress(Exception):  # the client went away: the work goes on
                anyio.from_thread.run_sync(self._send.send_nowait, (k, message),
                                           token=self._token)

    def job(self, run_job: RunJob) -> RunJob:
        """``run_job`` with a checkpoint before and after each Blender job, and the
        directories it writes to (those of its paths beneath the roots) checked on both
        sides: Blender saves by path, so a directory swapped during a job ends the call."""
        def run(spec: dict[str, Any]) -> dict[str, Any]:
            self.checkpoint()
            dirs = _job_dirs(spec, self.guard)
            before = self.guard.identity(dirs) if self.guard else []
            out = run_job(spec)
            if self.guard is not None:
                after = self.guard.identity(dirs)
                for d, a, b in zip(dirs, before, after, strict=True):
                    if a is not None and b is not None and a != b:   # gone is no escape
                        raise atomic.ConfinementError(
                            "was replaced during a Blender job", file=str(d),
                            fix="put the directory back and rerun")
            self.checkpoint()
            return out
        return run


def _job_dirs(spec: dict[str, Any], guard: atomic.Confined | None) -> list[Path]:
    """The directories of a job's paths that lie beneath the guard's roots."""
    if guard is None:
        return []
    found: list[Path] = []
    values = list(spec.values())
    while values:
        value = values.pop()
        if isinstance(value, dict):
            values.extend(value.values())
        elif isinstance(value, (list, tuple)):
            values.extend(v for v in value if isinstance(v, (str, dict)))
        elif isinstance(value, str) and os.path.isabs(value) and guard.covers(value):
            found.append(Path(value).parent)
    return list(dict.fromkeys(found))


def _guarded(prog: str, work: Callable[[Call], CallToolResult], call: Call) -> CallToolResult:
    try:
        return work(call)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line, as the CLI
        code, line = failure(prog, exc)
        return error_result(code, line)


# --------------------------------------------------------------------------- the loop state
def _transforms(group: Group, n: int) -> dict[str, Any]:
    return read_object(group.iter_dir(n) / "transforms.json", TransformsError,
                       "transforms.json", "rerun the group from init_iter0")


def loop_state(group: Group, done: list[int], max_iter: int = adapter.DEFAULT_MAX_ITER
               ) -> dict[str, Any]:
    """Where the contract's loop stands, read from the complete iterations on disk (the
    rules of ``adapter.run_group``: final, converged with MIN_ITER and an earlier move,
    no progress (every delta below the movement tolerance), EMPTY_STOP consecutive empty
    iterations from MIN_ITER, max_iter)."""
    nonempty: list[int] = []
    empty_run = 0
    stop: str | None = None
    for n in (k for k in done if k >= 1):
        doc = _transforms(group, n)
        members = doc.get("members") or {}
        empty_run = 0 if members else empty_run + 1
        converged = bool(doc.get("converged")) and n >= adapter.MIN_ITER and bool(nonempty)
        if members:
            nonempty.append(n)
        if doc.get("final"):
            stop = f"iter {n} is marked final"
        elif converged:
            stop = f"converged at iter {n}"
        elif adapter.moves_nothing(members):
            stop = adapter.no_progress_reason(n)
        elif n >= adapter.MIN_ITER and empty_run >= adapter.EMPTY_STOP:
            stop = f"{empty_run} consecutive empty iterations at iter {n}"
        elif n >= max_iter:
            stop = f"max_iter ({max_iter}) reached"
        if stop:
            break
    return {"stop": stop is not None, "stop_reason": stop, "nonempty_iters": nonempty,
            "consecutive_empty": empty_run, "min_iter": adapter.MIN_ITER,
            "empty_stop": adapter.EMPTY_STOP, "max_iter": max_iter}


def _last_geometry(group: Group, n: int) -> dict[str, Any]:
    geometry = read_object(group.iter_dir(n) / "geometry.json", UsageError, "geometry.json",
                           f"rerun iter_step for iter {n}")
    return {"iter": n, "summary": geometry_summary(geometry),
            "review": review.compact(review.review_island(group, geometry)),
            "group": geometry.get("group")}


def group_status_doc(group: Group, max_iter: int = adapter.DEFAULT_MAX_ITER) -> dict[str, Any]:
    done = completed_iters(group)
    latest = done[-1] if done else None
    nxt = 0 if latest is None else latest + 1
    size = len(group.metadata.refined_members)
    doc: dict[str, Any] = {
        "group_dir": str(group.root), "anchor_id": group.metadata.anchor_id,
        "members": list(group.metadata.refined_members),
        "target_spec": group.target_spec.to_dict(), "iterations": done, "latest": latest,
        "next_iter": nxt,
        "next_step": ("init_iter0" if latest is None else "write_decision + iter_step"),
        "phase": adapter.phase_for(nxt, size).to_dict() if nxt >= 1 else None,
        "pending_decision": nxt >= 1 and (group.iter_dir(nxt) / "transforms.json").is_file(),
        "promoted": (group.root / "island.blend").is_file() and latest is not None
        and latest >= 1 and bool(_transforms(group, latest).get("final")),
        "loop": loop_state(group, done, max_iter),
        "last_geometry": _last_geometry(group, latest) if latest is not None else None,
    }
    return doc


def _status_lines(doc: dict[str, Any]) -> list[str]:
    lines = [f"[mcp] {doc['group_dir']}: iterations {doc['iterations'] or 'none'}; next: "
             f"{doc['next_step']} (iter {doc['next_iter']})"]
    phase = doc["phase"]
    if phase:
        members = (f">= {phase['members_min']}" if phase["members_max"] is None else
                   f"{phase['members_min']}-{phase['members_max']}")
        lines.append(f"[mcp] phase {phase['name']} (iter {phase['iters']}): {members} members, "
                     f"|delta_xyz| <= {phase['max_abs_delta_xyz_m']} m, yaw free")
    loop = doc["loop"]
    lines.append(f"[mcp] loop: {'STOP: ' + loop['stop_reason'] if loop['stop'] else 'continue'}")
    if doc["last_geometry"]:
        g = doc["last_geometry"]
        lines.append(f"[mcp] iter_{g['iter']} geometry: {g['summary']}")
        lines.append(f"[mcp] iter_{g['iter']} {review.status({'summary': g['review']})}"
                     + "".join(f"; not measured: {line}" for line in
                               g["review"]["not_measured"][:3])
                     + "".join(f"; {i['reason']}" for i in g["review"]["failing"][:3]))
    return lines


# --------------------------------------------------------------------------- the server
class _Server(MCPServer[Any]):
    """The SDK's server with argument errors in the CLI's form and a transport that answers
    every request (``mcp_wire``)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                tool = next((t for t in await self.list_tools() if t.name == name), None)
                return mcp_wire.argument_error(name, exc.__cause__,
                                               tool.input_schema if tool else None)
            if exc.__cause__ is None and name not in {t.name for t in await self.list_tools()}:
                err = UsageError(f"unknown tool {clip(repr(name))}", field="name",
                                 fix="call one of the tools tools/list names")
                return error_result(err.exit_code, f"[{PROG}] error (exit {err.exit_code}): "
                                                    f"{err.one_line()}")
            raise

    async def run_stdio_async(self) -> None:
        from mcp.server.stdio import stdio_server

        low = self._lowlevel_server
        async with stdio_server() as (read_stream, write_stream):
            replies = mcp_wire.Replies(write_stream)
            send, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def relay() -> None:
                async with send:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            reply = await anyio.to_thread.run_sync(mcp_wire.unreadable_reply,
                                                                   item)
                            if reply is not None:
                                await replies.send(SessionMessage(reply))
                            continue
                        await send.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                await low.run(inbox, replies, low.create_initialization_options())
                tg.cancel_scope.cancel()


class IslandMCP:
    """The tools over one set of roots, settings and Blender binding."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]], settings: Settings,
                 job_runner: JobRunner, job_slots: JobSlotsFactory | None = None) -> None:
        self.confine = Confinement(roots)
        self.settings = settings
        self.job_runner = job_runner
        self.job_slots = job_slots
        self._busy: anyio.Lock | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="island-mcp-work")
        self.server: MCPServer[Any] = _Server(SERVER_NAME, instructions=INSTRUCTIONS,
                                              version="0.1.0")
        self._register()

    # ---------------------------------------------------------------- plumbing
    def _settings(self, engine: str | None, resolution: int | None, samples: int | None
                  ) -> Settings:
        """The server's settings with a call's overrides, validated like the CLI flags and
        capped: a client may ask for up to ``CLIENT_MAX_RESOLUTION`` px and
        ``CLIENT_MAX_SAMPLES`` samples (or what the server was started with, if more), so
        a call cannot occupy the machine with an 8192 px Cycles render."""
        caps = {"resolution": max(CLIENT_MAX_RESOLUTION, self.settings.resolution),
                "samples": max(CLIENT_MAX_SAMPLES, self.settings.samples or 0)}
        for field, value in (("resolution", resolution), ("samples", samples)):
            if isinstance(value, int) and not isinstance(value, bool) and value > caps[field]:
                raise UsageError(f"at most {caps[field]} over MCP, got {value}", field=field,
                                 fix="ask for less, or start the server with a "
                                     "DIRECTORYS.yaml that sets more")
        return with_overrides(self.settings, engine=engine, resolution=resolution,
                              samples=samples)

    async def _read(self, prog: str, work: Callable[[Call], CallToolResult]) -> CallToolResult:
        return await anyio.to_thread.run_sync(_guarded, prog, work, Call())

    async def _write(self, ctx: Context[Any, Any] | None, prog: str,
                     work: Callable[[Call], CallToolResult]) -> CallToolResult:
        """A writing call: one at a time, on a worker thread, with progress notifications;
        a cancellation sets the call's flag and waits until the work has unwound."""
        if self._busy is None:
            self._busy = anyio.Lock()
        send, receive = anyio.create_memory_object_stream[tuple[int, str]](1000)
        call = Call(anyio.lowlevel.current_token(), send)

        async def pump() -> None:
            async with receive:
                async for k, message in receive:
                    if ctx is not None:
                        with contextlib.suppress(Exception):
                            await ctx.report_progress(k, None, message)

        watching = anyio.CancelScope()

        async def watch() -> None:
            with watching:
                try:
                    await anyio.sleep_forever()
                finally:   # the request was cancelled (or the work is done)
                    call.cancelled.set()

        async with self._busy:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                tg.start_soon(watch)
                try:
                    result = await self._on_worker(prog, work, call)
                finally:
                    send.close()     # pump drains what is left, then ends
                    watching.cancel()
        return result

    async def _on_worker(self, prog: str, work: Callable[[Call], CallToolResult], call: Call
                         ) -> CallToolResult:
        """Run ``work`` on the one thread that does this process's Blender work (the bpy
        module crashes when its calls come from different threads) and wait for it - not
        abandoned on cancel: the call unwinds at its next checkpoint first."""
        done = anyio.Event()
        token = anyio.lowlevel.current_token()
        box: dict[str, CallToolResult] = {}

        def job() -> None:
            try:
                call.guard = atomic.Confined(self.confine.roots)
                with atomic.confined(call.guard):
                    box["result"] = _guarded(prog, work, call)
            except BaseException as exc:  # noqa: BLE001 - SystemExit and the like: one line
                box["result"] = error_result(*failure(prog, exc))
            finally:
                with contextlib.suppress(Exception):
                    anyio.from_thread.run_sync(done.set, token=token)

        self._worker.submit(job)
        with anyio.CancelScope(shield=True):
            await done.wait()
        return box["result"]

    def _group_or_raise(self, group_dir: str) -> Group:
        return load_group(self.confine.group(group_dir))

    @staticmethod
    def _next(group: Group, n: int | None) -> int:
        if n is not None:
            return n
        done = completed_iters(group)
        return (done[-1] + 1) if done else 1

    # ---------------------------------------------------------------- tools
    def _list_groups(self, scene_dir: str) -> Callable[[Call], CallToolResult]:
        def work(_: Call) -> CallToolResult:
            scene = self.confine.path(scene_dir, "scene_dir")
            if not scene.is_dir():
                raise UsageError("scene directory does not exist", file=scene_dir,
                                 field="scene_dir", fix="pass <scene_dir> (holding "
                                                        "relation_groups/) or a folder of groups")
            top = scene / "relation_groups" if (scene / "relation_groups").is_dir() else scene
            groups: list[dict[str, Any]] = []
            for child in sorted(top.iterdir()):
                if not (child / "metadata.json").is_file():
                    continue
                entry: dict[str, Any] = {"group_id": child.name, "group_dir": str(child)}
                try:
                    real = self.confine.group(str(child))
                    group = load_group(real)
                    done = completed_iters(group)
                    entry.update(group_dir=str(real), iterations=len(done),
                                 latest=done[-1] if done else None,
                                 anchor_id=group.metadata.anchor_id,
                                 members=len(group.metadata.refined_members),
                                 pattern=group.target_spec.to_dict().get("pattern"))
                except IslandError as exc:
                    entry.update(exit_code=exc.exit_code, error=exc.one_line())
                groups.append(entry)
            lines = [f"[mcp] {len(groups)} group(s) under {top}"] + [
                f"[mcp] {g['group_id']}: " + (f"error (exit {g['exit_code']}): {g['error']}"
                                              if "error" in g else
                                              f"{g['iterations']} iteration(s), latest "
                                              f"{g['latest']}") for g in groups]
            return ok_result(lines, {"scene_dir": str(scene), "groups": groups})
        return work

    def _register(self) -> None:
        srv = self.server
        read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                    idempotent_hint=True, open_world_hint=False)
        writes = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                 idempotent_hint=False, open_world_hint=False)

        async def list_groups(scene_dir: str) -> CallToolResult:
            """The relation groups of a scene directory (its relation_groups/, or a folder
            whose subfolders are groups): id, directory, complete iterations, latest."""
            return await self._read(PROG, self._list_groups(scene_dir))

        async def group_status(group_dir: str, max_iter: int = adapter.DEFAULT_MAX_ITER
                               ) -> CallToolResult:
            """A group's complete iterations, the next iteration with its phase and
            magnitude caps, whether the contract's loop stops here (MIN_ITER 5, converged,
            3 consecutive empty iterations, final, max_iter), the last geometry summary and
            its review (the one verdict, pass / fail / uncertain, with what failed or was not
            measured)."""
            def work(_: Call) -> CallToolResult:
                doc = group_status_doc(self._group_or_raise(group_dir), _max_iter(max_iter))
                return ok_result(_status_lines(doc), doc)
            return await self._read(PROG, work)

        async def init_iter0(group_dir: str, ctx: Context[Any, Any],
                             resolution: int | None = None, samples: int | None = None,
                             engine: str | None = None) -> CallToolResult:
            """iter_0 of a group (init_iter0.py): rotates an existing simple_refiner/ to a
            backup, renders both views, writes geometry.json. Long: progress notifications;
            cancelling leaves the group as it was."""
            def work(call: Call) -> CallToolResult:
                root = call.pin(self.confine.group(group_dir))
                settings = self._settings(engine, resolution, samples)
                backend, run_job = self.job_runner(settings)
                from .iteration import init_iter0 as _init
                result = _init(root, settings, call.job(run_job), call.progress)
                lines = init_iter0_lines(result, backend)
                return ok_result(lines, {"line": lines[0], "iter": 0,
                                         "iter_dir": str(result.iter_dir),
                                         "geometry_summary": geometry_summary(result.geometry)})
            return await self._write(ctx, "init_iter0", work)

        async def write_decision(group_dir: str,
                                 decision: dict[str, Any] | str | None = None,
                                 decision_json: str = "", iter: int | None = None,
                                 model: str = "unspecified",
                                 generated_by: str = "island-refine mcp") -> CallToolResult:
            """Check a decision {"members": {name: {"delta_xyz": [dx, dy, dz],
            "delta_yaw_deg": deg}}, "converged"?, "reason_summary"?, "final"?} against the
            contract and iteration N's magnitude policy (agent.py write) and write
            iter_N/transforms.json; a rejection (exit 3) names the member, the cap and the
            phase and writes nothing. Give the decision as an object (decision) or as the
            JSON text an agent would write to a file (decision_json: parsed strictly, no
            NaN, no duplicate keys). iter defaults to the next iteration."""
            def work(call: Call) -> CallToolResult:
                root = call.pin(self.confine.group(group_dir))
                group = load_group(root)
                n = self._next(group, iter)
                if (decision is None) == (not decision_json):
                    raise UsageError("give exactly one of decision (an object) and "
                                     "decision_json (its JSON text)", field="decision",
                                     fix='send {"members": {...}, "converged": false, '
                                         '"reason_summary": "..."}')
                text = decision_json or (decision if isinstance(decision, str) else None)
                parsed = (adapter.read_decision_text(text, "<decision>")
                          if text is not None else decision)
                result = adapter.write_decision(root, n, parsed, model=model,
                                                generated_by=generated_by)
                out, err = write_lines(result)
                v = result.verdict
                return ok_result(out + err, {
                    "line": out[0], "iter": n, "path": str(result.path),
                    "verdict": {"phase": v.phase.to_dict(), "moved": list(v.moved),
                                "penetration_exception": v.exception},
                    "converged_requested": result.converged_requested,
                    "converged_honoured": result.converged_honoured,
                    "warnings": result.warnings, "transforms": result.doc})
            return await self._write(None, "agent", work)

        async def iter_step(group_dir: str, ctx: Context[Any, Any], iter: int | None = None,
                            resolution: int | None = None, samples: int | None = None,
                            engine: str | None = None) -> CallToolResult:
            """Step iteration N (iter_step.py): apply iter_N/transforms.json, save, read the
            poses back, render, sanity check, geometry. Success carries
            "[iter_step] sanity OK", the geometry summary and the state's review (the one
            verdict); exit 4 means STOP the loop.
            iter defaults to the next iteration. Long: progress; cancelling leaves iter_N
            complete or absent."""
            def work(call: Call) -> CallToolResult:
                root = call.pin(self.confine.group(group_dir))
                n = self._next(load_group(root), iter)
                settings = self._settings(engine, resolution, samples)
                _, run_job = self.job_runner(settings)
                from .iteration import iter_step as _step
                result = _step(root, n, settings, call.job(run_job), call.progress)
                out, err = iter_step_lines(result)
                return ok_result(out + err, {
                    "line": "[iter_step] sanity OK", "iter": n, "iter_dir": str(result.iter_dir),
                    "trivial": result.trivial, "warnings": result.warnings,
                    "geometry_summary": geometry_summary(result.geometry),
                    "review": review.compact(review.review_island(root, result.geometry))})
            return await self._write(ctx, "iter_step", work)

        async def get_iteration(group_dir: str, iter: int | None = None,
                                include_transforms: bool = True) -> CallToolResult:
            """An iteration's evidence (default: the latest complete one): render_persp.png
            and render_bev_annotated.png as PNG image content, geometry.json (and its
            transforms.json) as text."""
            def work(_: Call) -> CallToolResult:
                group = self._group_or_raise(group_dir)
                done = completed_iters(group)
                if not done:
                    raise UsageError(f"{REFINER_DIR}/iter_0 is missing or incomplete",
                                     file=str(group.refiner), fix="run init_iter0 first")
                n = done[-1] if iter is None else iter
                if n not in done:
                    raise UsageError(f"iter_{n} is not a complete iteration (complete: "
                                     f"{done})", file=str(group.iter_dir(n)), field="iter",
                                     fix=f"ask for one of {done}")
                d = group.iter_dir(n)
                wanted = ["render_persp.png", "render_bev_annotated.png", "geometry.json"]
                wanted += ["transforms.json"] if include_transforms else []
                files = _read_iteration(atomic.Confined(self.confine.roots), group, n, wanted)
                images: list[TextContent | ImageContent] = []
                names = []
                for name in wanted[:2]:
                    real = name if name in files else "render_bev.png"
                    images += [_text(f"{real}:"), ImageContent(
                        type="image", data=base64.b64encode(files[real]).decode("ascii"),
                        mime_type="image/png")]
                    names.append(str(d / real))
                geometry_text = files["geometry.json"].decode("utf-8", "replace")
                texts = [_text(f"geometry.json:\n{geometry_text}")]
                if include_transforms:
                    transforms = files["transforms.json"].decode("utf-8", "replace")
                    texts.append(_text(f"transforms.json:\n{transforms}"))
                try:
                    geometry = loads_strict(geometry_text)
                except ValueError as exc:
                    raise UsageError(f"geometry.json is not valid JSON ({exc})",
                                     file=str(d / "geometry.json"),
                                     fix=f"rerun iter_step for iter {n}") from None
                line = f"[mcp] iter_{n} of {group.root}: {geometry_summary(geometry)}"
                return ok_result([line], {"line": line, "iter": n, "iter_dir": str(d),
                                          "images": names,
                                          "geometry_summary": geometry_summary(geometry)},
                                 extra=[*images, *texts])
            return await self._read(PROG, work)

        async def promote_final(group_dir: str, iter: int | None = None) -> CallToolResult:
            """End a loop driven through these tools (contract steps 4-5): mark the last
            complete iteration final and copy its island.blend to <group>/island.blend."""
            def work(call: Call) -> CallToolResult:
                root = call.pin(self.confine.group(group_dir))
                n = adapter.promote_final(root, iter)
                line = (f"[agent] iter_{n} marked final; {REFINER_DIR}/iter_{n}/island.blend "
                        f"-> {root / 'island.blend'}")
                return ok_result([line], {"line": line, "final_iter": n})
            return await self._write(None, "agent", work)

        async def solve_group(group_dir: str, ctx: Context[Any, Any],
                              max_iter: int = adapter.DEFAULT_MAX_ITER,
                              resolution: int | None = None, samples: int | None = None,
                              engine: str | None = None) -> CallToolResult:
            """The whole loop with the built-in solver (agent.py run --policy solver):
            init_iter0, decisions checked against the contract, every iteration stepped,
            the contract's stop, final + promotion, the 80-word report. Long: progress per
            iteration; cancelling leaves every iteration complete or absent."""
            def work(call: Call) -> CallToolResult:
                root = call.pin(self.confine.group(group_dir))
                settings = self._settings(engine, resolution, samples)
                _, run_job = self.job_runner(settings)
                report = adapter.run_group(root, "solver", settings, call.job(run_job),
                                           max_iter=_max_iter(max_iter),
                                           progress=call.progress)
                lines = [report.report_text] + [
                    f"[agent] error (exit {report.exit_code}): {e}" for e in report.errors]
                if report.run_json is not None:
                    lines.append(f"[agent] run.json: {report.run_json}")
                data = {"final_iter": report.final_iter, "stop_reason": report.stop_reason,
                        "nonempty_iters": report.nonempty_iters, "report": report.report_text,
                        "ok": report.ok, "errors": report.errors, "review": report.review,
                        "run_json": str(report.run_json) if report.run_json else None}
                if report.exit_code:
                    return error_result(report.exit_code, lines[1] if len(lines) > 1 else
                                        lines[0], data, lines)
                return ok_result(lines, {"line": report.report_text, **data})
            return await self._write(ctx, "agent", work)

        async def refine_scene(scene_dir: str, ctx: Context[Any, Any],
                               max_iter: int = adapter.DEFAULT_MAX_ITER, max_rounds: int = 3,
                               min_delta: float = 0.01, restart: bool = False,
                               workers: int | None = None, resolution: int | None = None,
                               samples: int | None = None, engine: str | None = None
                               ) -> CallToolResult:
            """The scene pipeline on a scene directory (island-refine run --policy solver):
            validate, rebuild islands, refine + verify, merge back, finalize, eval.
            Resumable. Exit 21: finished but some groups failed. Exit 24 is a success
            with ``status: partial``: groups refused up front (keyframed, constrained...)
            were left as they are, named in ``groups_refused``. Long: progress lines;
            cancelling marks the run interrupted (exit 130) and resumes on the next call.
            ``workers`` (groups refined side by side, one warm Blender worker each) is
            capped by the machine's cores and available memory at 512 MiB per worker
            (WORKER_CAP); a larger value is cut to the cap and the reply says so."""
            def work(call: Call) -> CallToolResult:
                from .scene.pipeline import RunOptions, run_scene

                scene = call.pin(self.confine.scene(scene_dir))
                settings = self._settings(engine, resolution, samples)
                _, run_job = self.job_runner(settings)
                cap, why = worker_cap()
                capped = []
                if workers is None or (isinstance(workers, int) and workers > cap):
                    if workers is not None:
                        capped = [f"[refine_scene] workers {workers} capped at {cap} ({why})"]
                    use = cap
                else:
                    use = workers
                options = RunOptions(policy="solver", max_iter=_max_iter(max_iter),
                                     max_rounds=max_rounds, min_delta=min_delta,
                                     restart=restart, settings=settings, workers=use)
                options.check()
                slots_of = self.job_slots(settings) if self.job_slots else None
                slots = None if slots_of is None else (
                    lambda slot: call.job(slots_of(slot)))
                data = {"scene_dir": str(scene), "metrics": str(scene / "metrics.json"),
                        "workers": use, "workers_cap": cap}
                try:
                    code, line = run_scene(scene, options, call.job(run_job),
                                           progress=call.progress, job_slots=slots,
                                           argv=["mcp", "refine_scene", str(scene)],
                                           prog="refine_scene")
                except IslandError as exc:   # refused: still say what the call would use
                    code, line = failure("refine_scene", exc)
                if code not in (0, EXIT_PARTIAL):
                    return error_result(code, line, data, [*capped, line] if capped else None)
                # partial (exit 24): refused groups left as they are, the rest refined
                refused = _refused_groups(scene)
                return ok_result([*capped, line], {"line": line, "exit_code": code,
                                          "status": "partial" if code else "finished",
                                          "groups_refused": refused, **data})
            return await self._write(ctx, "refine_scene", work)

        async def report(scene_dir: str) -> CallToolResult:
            """The ledger and metrics tables of a scene (island-refine report)."""
            def work(_: Call) -> CallToolResult:
                from .scene.report import report_result

                scene = self.confine.scene(scene_dir)
                code, text = report_result(scene)
                if code:
                    line = f"[refine_scene] error (exit {code}): {text}"
                    return error_result(code, line)
                return ok_result(text.rstrip("\n").splitlines(), {"report": text})
            return await self._read("refine_scene", work)

        for fn, notes in ((list_groups, read_only), (group_status, read_only),
                          (init_iter0, writes), (write_decision, writes),
                          (iter_step, writes), (get_iteration, read_only),
                          (promote_final, writes), (solve_group, writes),
                          (refine_scene, writes), (report, read_only)):
            doc = fn.__doc__ or ""
            if fn is refine_scene:   # the cap as this machine gives it when the server starts
                cap, why = worker_cap()
                doc = doc.replace("(WORKER_CAP)", f"(here: {cap}; {why})")
            srv.add_tool(fn, name=fn.__name__, description=doc, annotations=notes,
                         structured_output=False)

    def run(self) -> int:
        """Serve until the client closes stdin (0), or SIGTERM/SIGINT (128 + the signal):
        either way the calls in flight unwind as cancelled ones do before the process
        ends, so a client that closes and then terminates the server (the SDK's stdio
        client: 2 s grace, SIGTERM, 2 s, SIGKILL) still finds whole iterations."""
        return int(anyio.run(self._serve))

    async def _serve(self) -> int:
        stopped: list[int] = []
        async with anyio.create_task_group() as tg:
            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        stopped.append(int(signum))
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(on_signal)
            await self.server.run_stdio_async()
            tg.cancel_scope.cancel()
        return 128 + stopped[0] if stopped else 0


def _refused_groups(scene: Path) -> dict[str, str]:
    """Group id -> refusal line of a finished scene run (``state.json::islands_refused``)."""
    try:
        doc = read_object(scene / "state.json", UsageError, "state.json", "")
    except UsageError:
        return {}
    return {r["id"]: r["reason"] for r in doc.get("islands_refused") or []}


def _max_iter(value: int) -> int:
    if not 1 <= value <= MAX_ITER_LIMIT:
        raise UsageError(f"max_iter must be in 1..{MAX_ITER_LIMIT}, got {value}",
                         field="max_iter", fix="pass e.g. 20")
    return value


def _read_iteration(guard: atomic.Confined, group: Group, n: int, names: list[str]
                    ) -> dict[str, bytes]:
    """The named files of ``iter_n`` as a client is sent them: the iteration reached from
    its root without a symlink on the way, each file opened with ``O_NOFOLLOW`` (no link
    planted since the tree check is followed), a regular file (a FIFO would hang the read),
    and one with hard links only when every one of its names is in the group's
    ``simple_refiner/`` (``_names_in_refiner``). ``render_bev_annotated.png`` falls back to
    ``render_bev.png``."""
    refiner = guard.open_dir(group.refiner)
    try:
        d = group.iter_dir(n)
        try:
            iter_fd = os.open(d.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                              | os.O_CLOEXEC, dir_fd=refiner)
        except OSError:
            raise UsageError("cannot be opened as a directory (a symlink?)", file=str(d),
                             fix="rerun iter_step for this iteration") from None
        try:
            out: dict[str, bytes] = {}
            for name in names:
                if name == "render_bev_annotated.png" and not _exists(name, iter_fd):
                    name = "render_bev.png"
                out[name] = _read_for_client(refiner, iter_fd, d / name)
            return out
        finally:
            os.close(iter_fd)
    finally:
        os.close(refiner)


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _read_for_client(refiner: int, dir_fd: int, path: Path) -> bytes:
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        raise UsageError("is missing", file=str(path),
                         fix="rerun iter_step for this iteration") from None
    except OSError as exc:
        raise UsageError(f"cannot be read ({exc.strerror}; a symlink is never followed)",
                         file=str(path), fix="rerun iter_step for this iteration") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError("is not a regular file", file=str(path),
                             fix="rerun iter_step for this iteration")
        if st.st_nlink > 1:
            inside = _names_in_refiner(refiner, st)
            again = os.fstat(fd)
            if inside != st.st_nlink or (again.st_nlink, again.st_ctime_ns) != (
                    st.st_nlink, st.st_ctime_ns):
                raise UsageError(
                    f"has {st.st_nlink} hard links and only {inside} of them in this group's "
                    f"{REFINER_DIR}/; a file linked from elsewhere is not served",
                    file=str(path), fix="replace the link with a copy of the file, or rerun "
                                        "iter_step for this iteration")
        return fh.read()


def _names_in_refiner(refiner: int, st: os.stat_result) -> int:
    """How many names the file ``st`` has in ``simple_refiner/`` and its direct subfolders
    (iterations, a step's staging directory, an iteration renamed aside).

    The tool hard-links an iteration's files only within one group's ``simple_refiner/``
    (a quiet step links iter_(N-1)'s renders and island.blend into its staging directory,
    which becomes iter_N): when every name of a file is found there, none is outside, so a
    file with more links than that was linked in from elsewhere - perhaps from outside the
    roots - and is refused. Counting the names of one inode costs a stat per file of the
    group's iterations; listing an inode's names anywhere else is not possible."""
    key = (st.st_dev, st.st_ino)
    count = 0

    def scan(fd: int) -> list[str]:
        nonlocal count
        subdirs = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    est = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (est.st_dev, est.st_ino) == key:
                    count += 1
                elif stat.S_ISDIR(est.st_mode):
                    subdirs.append(entry.name)
        return subdirs

    for name in scan(refiner):
        try:
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=refiner)
        except OSError:
            continue
        try:
            scan(sub)
        finally:
            os.close(sub)
    return count


def serve(roots: Sequence[str | os.PathLike[str]], settings: Settings, job_runner: JobRunner,
          job_slots: JobSlotsFactory | None = None) -> int:
    """Serve the tools over stdio until the client closes the connection."""
    app = IslandMCP(roots, settings, job_runner, job_slots)
    import sys
    print(f"[{PROG}] {SERVER_NAME} serving over stdio; roots: "
          f"{', '.join(str(r) for r in app.confine.roots)}", file=sys.stderr, flush=True)
    return app.run()
