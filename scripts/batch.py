"""``island-refine batch``: refine many scenes on Dask distributed (docs/BATCH.md).

Per scene: a *prepare* task (validate + rebuild_islands), then one task per flagged group
keyed ``<scene_id>/<group_id>`` (the island's rounds), then a *finish* task (merge_back,
finalize, eval) once every island of the scene has a result. The tasks are
``island_tools.scene.batch_tasks``, built from the same stage functions as ``island-refine
run``; the exactly-once bookkeeping is ``island_tools.scene.batch``. This module is the
orchestrator (the Dask client) plus the task functions the workers import; it sits above
``island_tools`` and ``worker`` because a task needs both the stages and a Blender
(``worker.launch.run_job``).

Blender in a worker: the embedded ``bpy`` module in the worker process itself (one Blender
per single-threaded worker process; it stays loaded, so every job after the first is warm),
or, with ``--blender-bin``/``$BLENDER``, one Blender subprocess per job that dies with its
worker (PR_SET_PDEATHSIG). The warm-worker daemon is never used here: it is shared per uid
and host, so all workers of a node would queue on one Blender, and it is built to outlive
the process that started it.

Throttling: at most one task per ``blender`` resource slot is handed to the scheduler at a
time (finish before island before prepare), so a worker never holds queued tasks: when one
dies, only the task it was running counts the death (``allowed-failures``).
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from island_tools.errors import (  # noqa: E402
    EXIT_INTERNAL,
    EXIT_USAGE,
    EXIT_WORKER,
    IslandError,
    WorkerError,
    from_oserror,
)
from island_tools.scene import batch as batching  # noqa: E402
from island_tools.scene import batch_tasks  # noqa: E402
from island_tools.scene.batch import BatchRun  # noqa: E402
from island_tools.scene.context import RunOptions, StageContext  # noqa: E402
from island_tools.scene.errors import EXIT_GROUPS_FAILED, EXIT_PARTIAL  # noqa: E402
from island_tools.scene.paths import ScenePaths  # noqa: E402
from island_tools.scene.state import scene_exit_code  # noqa: E402

RESOURCE = "blender"
TASK_RESOURCES = {RESOURCE: 1}
CLUSTERS = ("local", "slurm", "pbs")
PRIORITY = ("finish", "island", "prepare")   # what to hand out first when a slot frees up
POLL_S = 0.5
WAIT_FOR_WORKERS_S = 600.0


# =========================================================================== tasks (workers)
_LOG_REDIRECTED: list[str] = []
_BPY_SCRIPTS = re.compile(r"/bpy/[^/]+/scripts(/|$)")


def _worker_setup(log_dir: str | None) -> None:
    """Before a task's first Blender job in a worker process.

    * ``sys.path``: a process that has imported ``bpy`` carries the wheel's
      ``bpy/<ver>/scripts/modules`` on it, where a pure-Python ``bpy`` package shadows the
      compiled module; a worker spawned from such a process (a LocalCluster started by a
      program that used bpy) inherits that path and ``import bpy`` would fail. Drop it here.
    * Blender's C-level output ("Read blend:", "Saved:") and the worker's own lines go to
      ``<log_dir>/worker-<host>-<pid>.log``, not over the progress bar of the terminal
      that started the cluster.
    """
    if "bpy" not in sys.modules:
        sys.path[:] = [p for p in sys.path if not _BPY_SCRIPTS.search(p.replace(os.sep, "/"))]
    if _LOG_REDIRECTED or not log_dir:
        return
    import socket

    Path(log_dir).mkdir(parents=True, exist_ok=True)
    path = Path(log_dir) / f"worker-{socket.gethostname()}-{os.getpid()}.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    _LOG_REDIRECTED.append(str(path))


def _context(scene_dir: str, options: RunOptions) -> StageContext:
    from worker.launch import resolve_blender, run_job

    backend = resolve_blender(options.settings.blender_bin, None)
    return StageContext(scene_dir, options, lambda job: run_job(job, backend))


def _failure(exc: IslandError) -> dict[str, Any]:
    return {"ok": False, "exit_code": exc.exit_code, "error_type": type(exc).__name__,
            "message": exc.one_line()}


def prepare_task(scene_dir: str, options: RunOptions, batch: BatchRun,
                 log_dir: str | None = None,
                 identity: batching.Identity | None = None) -> dict[str, Any]:
    """validate + rebuild_islands. A bad input is returned (and already recorded); a
    Blender failure raises, so Dask retries it. ``identity``: the scene directory's when the
    batch started (``batching.scene_held``: a vanished one is refused, never re-created)."""
    _worker_setup(log_dir)
    t0 = time.perf_counter()
    with batching.scene_held(scene_dir, identity):
        try:
            flagged = batch_tasks.prepare_batch(_context(scene_dir, options), batch)
        except IslandError as exc:
            if batching.retryable(exc):
                raise
            batching.record_scene_failure(ScenePaths(scene_dir), batch, "prepare",
                                          exc.one_line(), type(exc).__name__, exc.exit_code)
            return _failure(exc)
    return {"ok": True, "groups": flagged, "seconds": round(time.perf_counter() - t0, 3)}


def island_task(scene_dir: str, group_id: str, options: RunOptions, batch: BatchRun,
                key: str = "", log_dir: str | None = None,
                identity: batching.Identity | None = None) -> dict[str, Any]:
    """One island: its rounds, recorded exactly once (see island_tools.scene.batch)."""
    _worker_setup(log_dir)
    with batching.scene_held(scene_dir, identity):
        return batch_tasks.refine_island(_context(scene_dir, options), group_id, batch, key)


def finish_task(scene_dir: str, options: RunOptions, batch: BatchRun,
                log_dir: str | None = None,
                identity: batching.Identity | None = None) -> dict[str, Any]:
    """merge_back + finalize + eval; returns the scene's exit code and figures."""
    _worker_setup(log_dir)
    t0 = time.perf_counter()
    ctx = _context(scene_dir, options)
    try:
        with batching.scene_held(scene_dir, identity):
            code = batch_tasks.finish_batch(ctx, batch)
    except IslandError as exc:
        if batching.retryable(exc) or batching.scene_gone(scene_dir, identity):
            raise
        return _failure(exc)   # the session recorded it
    doc = ctx.state.doc if ctx.state else {}
    return {"ok": True, "exit_code": code, "seconds": round(time.perf_counter() - t0, 3),
            "islands_completed": list(doc.get("islands_completed", [])),
            "islands_failed": [f["id"] for f in doc.get("islands_failed", [])],
            "islands_refused": {r["id"]: r["reason"] for r in doc.get("islands_refused", [])}}


# =========================================================================== orchestrator
@dataclass
class SceneJob:
    scene_dir: Path
    scene_id: str
    # pending | running | finished | partial | failed | already finished
    # (partial: finished, but some groups were refused up front - exit 24)
    status: str = "pending"
    groups: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)   # gid -> review verdict
    refused: dict[str, str] = field(default_factory=dict)    # gid -> refusal line
    attempts: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    detail: str = ""
    started: float = 0.0
    seconds: float = 0.0
    identity: batching.Identity | None = None   # (device, inode) when the batch started

    @property
    def islands_done(self) -> int:
        return sum(1 for o in self.outcomes.values() if o == "completed")

    @property
    def islands_failed(self) -> int:
        return sum(1 for o in self.outcomes.values() if o == "failed")

    @property
    def review_counts(self) -> str | None:
        """``pass/fail/uncertain`` over the scene's completed islands (the one review,
        ``verify.review_group``, of each accepted round), None before any has one."""
        if not self.verdicts:
            return None
        return "/".join(str(sum(1 for v in self.verdicts.values() if v == k))
                        for k in ("pass", "fail", "uncertain"))


@dataclass
class BatchResult:
    run_id: str
    scenes: list[SceneJob]
    seconds: float
    islands_refined: int      # island tasks that ran to a result in this batch (not skipped)
    exit_code: int

    @property
    def islands_per_minute(self) -> float:
        return 60.0 * self.islands_refined / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ClusterOptions:
    spec: str = "local"
    workers: int | None = None
    retries: int = 2
    queue: str | None = None
    account: str | None = None
    walltime: str = "04:00:00"
    memory: str = "8GB"
    job_directives: tuple[str, ...] = ()


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def jobqueue_cluster(opts: ClusterOptions) -> Any:
    """A SLURMCluster/PBSCluster whose every job is one single-threaded worker with
    ``blender=1`` (site settings: ~/.config/dask/jobqueue.yaml; these flags win)."""
    from dask_jobqueue import PBSCluster, SLURMCluster

    cls = SLURMCluster if opts.spec == "slurm" else PBSCluster
    kwargs: dict[str, Any] = {
        "cores": 1, "processes": 1, "memory": opts.memory, "walltime": opts.walltime,
        "worker_extra_args": ["--resources", f"{RESOURCE}=1"],
        "python": sys.executable, "job_name": "island-refine",
        # No dashboard; the scheduler's HTTP endpoint (health, metrics) on a free port.
        "scheduler_options": {"dashboard": False, "dashboard_address": ":0"}}
    if opts.queue:
        kwargs["queue"] = opts.queue
    if opts.account:
        kwargs["account"] = opts.account
    if opts.job_directives:
        kwargs["job_extra_directives"] = list(opts.job_directives)
    return cls(**kwargs)


@contextlib.contextmanager
def open_client(opts: ClusterOptions) -> Iterator[Any]:
    """A Dask client on the chosen cluster. Clusters made here get
    ``allowed-failures = --retries`` (worker deaths a task may cause before it is failed);
    a ``tcp://`` farm scheduler keeps its own setting."""
    import dask
    from distributed import Client, LocalCluster

    # The batch reports failed tasks itself (table, ledger); Dask's own log lines would only
    # tear through the progress bar.
    dask_logger = logging.getLogger("distributed")
    level = dask_logger.level
    dask_logger.setLevel(logging.CRITICAL)
    cluster: Any = None
    client: Any = None
    try:
        with dask.config.set({"distributed.scheduler.allowed-failures": opts.retries}):
            if opts.spec == "local":
                cluster = LocalCluster(n_workers=opts.workers or default_workers(),
                                       threads_per_worker=1, processes=True,
                                       resources={RESOURCE: 1}, dashboard_address=None,
                                       silence_logs=logging.CRITICAL)
            elif opts.spec in ("slurm", "pbs"):
                cluster = jobqueue_cluster(opts)
                cluster.scale(jobs=opts.workers or 1)
            client = Client(cluster if cluster is not None else opts.spec, timeout="60s")
        yield client
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        dask_logger.setLevel(level)


def _reason(exc: BaseException) -> tuple[str, str, int]:
    """(one line, error type, exit code) for a task that never returned a result."""
    if isinstance(exc, IslandError):
        return exc.one_line(), type(exc).__name__, exc.exit_code
    kind = type(exc).__name__
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", kind, 130
    if isinstance(exc, SystemExit):
        return f"terminated ({exc.code})", kind, int(exc.code or 1)
    if kind == "KilledWorker":
        return ("KilledWorker: the worker process died during every try (a Blender crash, "
                "the OOM killer, a node lost); see the worker logs", kind, EXIT_WORKER)
    text = " ".join(str(exc).split())[:300]
    return f"{kind}: {text}", kind, EXIT_INTERNAL


class Display:
    """Islands done / failed / total with an ETA: a rich progress bar on a terminal, one
    plain line per event otherwise (a farm job's log)."""

    def __init__(self, stream: IO[str], quiet: bool) -> None:
        self.stream, self.quiet = stream, quiet
        self.t0 = time.monotonic()
        self.done = self.failed = self.total = 0
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> Display:
        if not self.quiet and self.stream.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("islands"), BarColumn(), TextColumn("{task.fields[counts]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(file=self.stream), transient=False)
            self.progress.start()
            self.task = self.progress.add_task("islands", total=None, counts=self.counts())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def counts(self) -> str:
        return f"{self.done} done / {self.failed} failed / {self.total} total"

    def eta(self) -> str:
        finished = self.done + self.failed
        if not finished or self.total <= finished:
            return "-"
        rate = (time.monotonic() - self.t0) / finished
        s = int(rate * (self.total - finished))
        return f"{s // 60}m{s % 60:02d}s"

    def update(self, message: str | None = None) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=self.total or None,
                                 completed=self.done + self.failed, counts=self.counts())
            if message:
                self.progress.console.print(f"[batch] {message}", markup=False,
                                            highlight=False)
        elif message and not self.quiet:
            print(f"[batch] {message} (islands: {self.done} done, {self.failed} failed, "
                  f"{self.total} total; ETA {self.eta()})", file=self.stream, flush=True)


def execute(scene_dirs: list[str], options: RunOptions, cluster: ClusterOptions,
            argv: list[str] | tuple[str, ...] = (), stream: IO[str] | None = None,
            quiet: bool = False, log_dir: str | None = None,
            on_client: Callable[[Any], None] | None = None) -> BatchResult:
    """Run the batch; every scene ends finished or failed, recorded in its own ledger."""
    from distributed import wait

    stream = stream or sys.stderr
    t_start = time.monotonic()
    batch = BatchRun.new(argv)
    scenes: list[SceneJob] = []
    seen: set[Path] = set()
    for raw in scene_dirs:
        path = Path(raw).expanduser().resolve()
        if path in seen:
            continue
        seen.add(path)
        job = SceneJob(path, batching.scene_id(path), identity=batching.dir_identity(path))
        scenes.append(job)
        if job.identity is None:
            job.status, job.detail, job.exit_code = "failed", "no such scene directory", 2
            continue
        try:   # a bad scene (a mistyped state.json) costs that scene only, named in the table
            reason = None if options.restart else batch_tasks.finished_reason(ScenePaths(path))
            if reason is None and not options.restart:
                job.status, job.exit_code = "already finished", _finished_code(path)
                job.detail = "nothing to do"
                _fill_outcomes(job)
        except (IslandError, OSError, ValueError) as exc:
            job.status, job.exit_code, job.detail = "failed", *_unusable(exc)
    todo = [s for s in scenes if s.status == "pending"]
    display = Display(stream, quiet)
    if not todo:
        if not quiet:
            done = sum(1 for s in scenes if s.status == "already finished")
            print(f"[batch] nothing to do: {done} of {len(scenes)} scene(s) already finished"
                  + (f", {len(scenes) - done} unusable" if done < len(scenes) else "")
                  + "; no task started", file=stream, flush=True)
        return BatchResult(batch.run_id, scenes, time.monotonic() - t_start, 0,
                           _batch_code(scenes))
    log_dir = log_dir or str(Path(tempfile.gettempdir()) / f"island-refine-{batch.run_id}")
    refined = 0
    queues: dict[str, deque] = {k: deque() for k in PRIORITY}
    in_flight: dict[Any, tuple[str, SceneJob, str | None]] = {}
    pending_islands: dict[str, set[str]] = {}
    by_id = {s.scene_id: s for s in todo}

    def enqueue(kind: str, job: SceneJob, gid: str | None = None) -> None:
        queues[kind].append((job, gid))

    for job in todo:
        enqueue("prepare", job)

    with open_client(cluster) as client, display:
        if on_client is not None:
            on_client(client)
        display.update(f"{len(todo)} scene(s) on {cluster.spec}; run {batch.run_id}; "
                       f"worker logs in {log_dir}")

        def slots() -> int:
            info = client.scheduler_info(n_workers=-1)
            return int(sum(w.get("resources", {}).get(RESOURCE, 0)
                           for w in info.get("workers", {}).values()))

        def submit(kind: str, job: SceneJob, gid: str | None) -> None:
            d, ident = str(job.scene_dir), job.identity
            if kind == "prepare":
                job.status, job.started = "running", time.monotonic()
                fut = client.submit(prepare_task, d, options, batch, log_dir, ident,
                                    key=f"{job.scene_id}:prepare", resources=TASK_RESOURCES,
                                    retries=cluster.retries)
            elif kind == "island":
                key = f"{job.scene_id}/{gid}"
                fut = client.submit(island_task, d, gid, options, batch, key, log_dir, ident,
                                    key=key, resources=TASK_RESOURCES,
                                    retries=cluster.retries)
            else:
                fut = client.submit(finish_task, d, options, batch, log_dir, ident,
                                    key=f"{job.scene_id}:finish", resources=TASK_RESOURCES,
                                    retries=cluster.retries)
            in_flight[fut] = (kind, job, gid)

        def lost(job: SceneJob) -> bool:
            """The scene's directory vanished or was replaced: failed, named, nothing more
            handed out or recorded for it (its old path is never written, so never
            re-created)."""
            why = batching.scene_gone(job.scene_dir, job.identity)
            if why is None:
                return False
            if job.detail != why:
                job.status, job.exit_code, job.detail = "failed", EXIT_USAGE, why
                job.seconds = time.monotonic() - job.started if job.started else 0.0
                for q in queues.values():
                    kept = [(j, g) for j, g in q if j is not job]
                    q.clear()
                    q.extend(kept)
                display.update(f"{job.scene_id}: FAILED: {why}")
            return True

        def pump() -> None:
            free = slots() - len(in_flight)
            while free > 0:
                kind = next((k for k in PRIORITY if queues[k]), None)
                if kind is None:
                    return
                job, gid = queues[kind].popleft()
                if lost(job):
                    continue
                submit(kind, job, gid)
                free -= 1

        def island_resolved(job: SceneJob, gid: str) -> None:
            pending_islands[job.scene_id].discard(gid)
            if not pending_islands[job.scene_id]:
                enqueue("finish", job)

        def scene_failed(job: SceneJob, stage: str, exc: BaseException) -> None:
            if lost(job):
                return
            reason, kind, code = _reason(exc)
            with contextlib.suppress(Exception):
                batching.record_scene_failure(ScenePaths(job.scene_dir), batch, stage,
                                              reason, kind, code)
            job.status, job.exit_code, job.detail = "failed", code, f"{stage}: {reason}"
            job.seconds = time.monotonic() - job.started
            display.update(f"{job.scene_id}: FAILED in {stage}: {reason}")

        def handle(fut: Any, kind: str, job: SceneJob, gid: str | None) -> None:
            nonlocal refined
            error = fut.exception() if fut.status == "error" else None
            result = None if error is not None else fut.result()
            fut.release()
            if job.identity is not None and job.detail in (batching.VANISHED,
                                                           batching.REPLACED):
                return   # failed when its directory went; what its tasks left is moot
            if kind == "prepare":
                if error is not None:
                    scene_failed(job, "prepare", error)
                elif not result["ok"]:
                    job.status, job.exit_code = "failed", result["exit_code"]
                    job.detail = f"prepare: {result['message']}"
                    display.update(f"{job.scene_id}: FAILED in prepare: {result['message']}")
                else:
                    job.groups = list(result["groups"])
                    pending_islands[job.scene_id] = set(job.groups)
                    display.total += len(job.groups)
                    for g in job.groups:
                        enqueue("island", job, g)
                    if not job.groups:
                        enqueue("finish", job)
                    display.update(f"{job.scene_id}: prepared, {len(job.groups)} island(s)")
                return
            if kind == "island":
                assert gid is not None
                if error is not None and lost(job):
                    return
                if error is not None:
                    reason, etype, code = _reason(error)
                    marker = batching.record_island_failure(
                        ScenePaths(job.scene_dir), ScenePaths(job.scene_dir).group(gid), batch,
                        reason, etype, code)
                    outcome, attempt, skipped = marker["outcome"], marker["attempt_id"], False
                else:
                    outcome, attempt = result["outcome"], result["attempt"]
                    skipped = result["skipped"]
                    refined += 0 if skipped else 1
                    if result.get("verdict"):
                        job.verdicts[gid] = result["verdict"]
                job.outcomes[gid] = outcome
                job.attempts[gid] = attempt or ""
                if outcome == "completed":
                    display.done += 1
                else:
                    display.failed += 1
                what = "already done" if skipped else outcome
                if job.verdicts.get(gid):
                    what += f", review {job.verdicts[gid]}"
                note = (f": {reason}" if error is not None
                        else f" ({attempt})" if attempt and not attempt.endswith("#1") else "")
                display.update(f"{job.scene_id}/{gid}: {what}{note}")
                island_resolved(job, gid)
                return
            if error is not None:
                scene_failed(job, "finish", error)
            elif not result["ok"]:
                job.status, job.exit_code = "failed", result["exit_code"]
                job.detail = f"finish: {result['message']}"
                display.update(f"{job.scene_id}: FAILED in finish: {result['message']}")
            else:
                job.exit_code = result["exit_code"]
                job.refused = dict(result.get("islands_refused") or {})
                job.status = "partial" if job.exit_code == EXIT_PARTIAL else "finished"
                job.seconds = time.monotonic() - job.started
                if job.refused:
                    job.detail = "refused: " + "; ".join(
                        f"{g}: {r}" for g, r in job.refused.items())
                display.update(f"{job.scene_id}: {job.status} (exit {job.exit_code})"
                               + (f", refused {', '.join(job.refused)}" if job.refused
                                  else ""))

        try:
            idle_since = None
            while in_flight or any(queues.values()):
                pump()
                if not in_flight:
                    # No slot: workers still starting (jobqueue), or none offers the resource.
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > WAIT_FOR_WORKERS_S:
                        raise WorkerError(
                            f"no Dask worker with the resource {RESOURCE}=1 appeared within "
                            f"{WAIT_FOR_WORKERS_S:g} s on {cluster.spec}",
                            fix=f"start workers with --nthreads 1 --resources {RESOURCE}=1")
                    time.sleep(POLL_S)
                    continue
                idle_since = None
                with contextlib.suppress(TimeoutError):
                    wait(list(in_flight), timeout=POLL_S, return_when="FIRST_COMPLETED")
                for fut in [f for f in in_flight if f.done()]:
                    kind, job, gid = in_flight.pop(fut)
                    handle(fut, kind, job, gid)
                display.update()
        except BaseException as exc:
            for job in by_id.values():
                if job.status == "running":
                    scene_failed(job, "orchestrator", exc)
            raise
    seconds = time.monotonic() - t_start
    return BatchResult(batch.run_id, scenes, seconds, refined, _batch_code(scenes))


def _unusable(exc: BaseException) -> tuple[int, str]:
    """(exit code, cause) of a scene the batch cannot start: its one line."""
    if isinstance(exc, IslandError):
        return exc.exit_code, exc.one_line()
    known = from_oserror(exc) if isinstance(exc, OSError) else None
    if known is not None:
        return known.exit_code, known.one_line()
    return EXIT_USAGE, f"state.json: {' '.join(str(exc).split())[:300]}"


def _finished_code(path: Path) -> int:
    import json

    doc = json.loads((path / "state.json").read_text(encoding="utf-8"))
    return scene_exit_code(doc)


def _fill_outcomes(job: SceneJob) -> None:
    import json

    doc = json.loads((job.scene_dir / "state.json").read_text(encoding="utf-8"))
    job.groups = list(doc.get("groups_needing_island", []))
    for gid in doc.get("islands_completed", []):
        job.outcomes[gid] = "completed"
    for f in doc.get("islands_failed", []):
        job.outcomes[f["id"]] = "failed"
    job.refused = {r["id"]: r["reason"] for r in doc.get("islands_refused", [])}
    for gid in job.outcomes:
        verdict = batch_tasks.review_verdict((doc.get("groups") or {}).get(gid))
        if verdict and job.outcomes[gid] == "completed":
            job.verdicts[gid] = verdict


def _batch_code(scenes: list[SceneJob]) -> int:
    """21 if a scene or island failed, else 24 if a scene is partial (groups refused up
    front, every other group refined), else 0."""
    if any(s.status == "failed" or (s.exit_code or 0) not in (0, EXIT_PARTIAL)
           for s in scenes):
        return EXIT_GROUPS_FAILED
    if any(s.exit_code == EXIT_PARTIAL for s in scenes):
        return EXIT_PARTIAL
    return 0


def render_table(result: BatchResult) -> str:
    from island_tools.scene.report import table

    rows = []
    for s in result.scenes:
        redone = sum(1 for a in s.attempts.values() if a and not a.endswith("#1"))
        rows.append((s.scene_id, s.status, len(s.groups), s.islands_done, s.islands_failed,
                     len(s.refused), s.review_counts, redone, s.exit_code,
                     f"{s.seconds:.1f}" if s.seconds else None, s.detail or str(s.scene_dir)))
    head = ("scene", "status", "islands", "completed", "failed", "refused", "review p/f/u",
            "redone",
            "exit", "s", "detail")
    finished = sum(1 for s in result.scenes if s.status in ("finished", "already finished")
                   and s.exit_code != EXIT_PARTIAL)
    partial = sum(1 for s in result.scenes if s.exit_code == EXIT_PARTIAL
                  and s.status != "failed")
    failed = sum(1 for s in result.scenes if s.status == "failed")
    summary = (f"batch {result.run_id}: {len(result.scenes)} scene(s), {finished} finished, "
               f"{failed} failed{f', {partial} partial' if partial else ''}; "
               f"{result.islands_refined} island(s) refined in "
               f"{result.seconds:.1f} s ({result.islands_per_minute:.2f} islands/min)")
    return table(head, rows, max_width=80) + "\n" + summary + "\n"


def print_job_script(cluster: ClusterOptions) -> int:
    if cluster.spec not in ("slurm", "pbs"):
        print(f"error: --print-job-script needs --cluster slurm or pbs, not {cluster.spec}",
              file=sys.stderr)
        return 2
    jq = jobqueue_cluster(cluster)
    try:
        print(jq.job_script())
    finally:
        jq.close()
    return 0
