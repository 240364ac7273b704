"""Run bookkeeping around the stages: the scene lock, the session (ledger opened, run started,
any exception marks it failed), rotation of earlier outputs on ``--restart``.

Crash safety net (seed 001): the session marks its run failed on any exception; a run killed
with -9 is found by the next session (``Ledger.mark_dead_runs``) and marked failed then.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from ..errors import EXIT_INTERNAL, IslandError, UsageError
from ..files import atomic, locks
from . import batch as batching
from .batch import BatchRun
from .context import StageContext
from .ledger import Ledger
from .paths import stamp, unique_path
from .state import (
    SceneState,
)
from .validate import Prepared


@contextlib.contextmanager
def scene_lock(ctx: StageContext, shared: bool = False) -> Iterator[None]:
    """Exclusive for a run (and a batch's prepare/finish); shared for batch islands."""
    fd = atomic.open_beneath(ctx.paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not locks.lock_fd(fd, shared=shared, blocking=False):
            raise UsageError("another refine_scene run is active on this scene",
                             file=str(ctx.paths.root), fix="wait for it to finish")
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def session(ctx: StageContext, prep: Prepared, argv: list[str] | tuple[str, ...] = (),
            batch: BatchRun | None = None) -> Iterator[StageContext]:
    """Lock the scene, open the ledger, start a run; any exception marks it failed.

    ``batch``: a batch's prepare stage. The batch's run is started (or continued by a
    retried task) and stays open; an error another attempt may cure (a Blender crash)
    is only logged as a failure - the orchestrator fails the run after the last try."""
    try:
        with scene_lock(ctx):
            ctx.ledger = Ledger(ctx.paths.ledger)
            ctx.run_id = ""
            try:
                try:
                    start_run(ctx, prep, argv, batch)
                    yield ctx
                except BaseException as exc:
                    if ctx.run_id:
                        fail_run(ctx, exc, batch)
                    raise
                if batch is None and ctx.ledger.run_status(ctx.run_id) == "started":
                    finish_run(ctx)
            finally:
                ctx.ledger.close()
                ctx.ledger = None
    finally:
        if prep.temp_dir is not None:
            atomic.remove_tree(prep.temp_dir)


def start_run(ctx: StageContext, prep: Prepared, argv: list[str] | tuple[str, ...],
              batch: BatchRun | None = None) -> None:
    ledger = ctx.run_ledger
    own = (batch.run_id,) if batch else ()
    for dead in ledger.mark_dead_runs(exclude=own):
        ctx.say(f"run {dead.run_id} (pid {dead.pid}) died without finishing: marked failed")
    # A retried prepare task continues its batch run instead of starting another.
    continuing = batch is not None and prep.state.doc.get("run_id") == batch.run_id
    if ctx.options.restart and not continuing:
        rotate_outputs(ctx)
        prep.state = SceneState.load(ctx.paths.state)
    ctx.state = prep.state
    ctx.graph = prep.graph
    doc = ctx.state.doc
    ctx.input_sha_before = prep.scene_sha256
    if continuing:
        assert batch is not None
        ctx.run_id = batch.run_id
        record_reconciled(ctx, prep)
        ctx.state.trace(f"run:{ctx.run_id}:prepare_retried")
        return
    if doc.get("status") == "running":
        doc["status"] = "failed"
        doc.setdefault("notes", []).append(f"run {doc.get('run_id')} died while running")
    ctx.run_id = batch.run_id if batch else _new_run_id(ledger)
    if ledger.run_status(ctx.run_id) is None:
        ledger.run_started(ctx.run_id, batch.argv if batch else argv,
                           batch.owner if batch else None, restart=ctx.options.restart)
    record_reconciled(ctx, prep)
    doc.pop("batch", None)
    if batch is not None:
        doc["batch"] = {"run_id": batch.run_id, "stage_seconds_at_start": {
            k: v.get("seconds", 0.0) for k, v in doc["stages"].items()}}
    resumed = bool(doc["runs"])
    doc.update(status="running", run_id=ctx.run_id, options=ctx.options.to_dict(),
               scene_dir=str(ctx.paths.root))
    doc["runs"].append(ctx.run_id)
    doc["inputs"] = {"relation_graph_structure_sha256": prep.graph.structure_sha256,
                     "scene_sha256": prep.scene_sha256}
    ctx.state.trace(f"run:{ctx.run_id}:{'resumed' if resumed else 'started'}")
    ctx.say(f"run {ctx.run_id} {'resumes' if resumed else 'starts'} on {ctx.paths.root}")


def record_reconciled(ctx: StageContext, prep: Prepared) -> None:
    """What pre-flight restored from the ledger (``state.reconcile``): one ``reconciled``
    ledger event and state note per group, and one warning line (printed even with
    --quiet: the user's state.json disagreed with the record)."""
    if not prep.reconciled:
        return
    doc = ctx.scene_state.doc
    for r in prep.reconciled:
        ctx.run_ledger.group_event(ctx.run_id, r.group_id, "reconciled", r.outcome,
                                   f"state.json lacked it; the ledger records it {r.outcome} "
                                   f"in run {r.run_id} and its files agree: not refined "
                                   "again")
    groups = ", ".join(f"'{r.group_id}' ({r.outcome})" for r in prep.reconciled)
    line = (f"{ctx.paths.state}: islands_completed/islands_failed lacked {groups}, which "
            f"{ctx.paths.ledger.name} records so and whose files agree: reconciled from the "
            "ledger, not refined again")
    doc.setdefault("notes", []).append(f"run {ctx.run_id}: {line}")
    message = f"[refine_scene] warning: {line}"
    if ctx.progress:
        ctx.progress(message)
    else:
        print(message, file=sys.stderr, flush=True)


def _new_run_id(ledger: Ledger) -> str:
    """``<UTC stamp>-<pid>``, with ``.2``, ``.3``... when a run of this process already took
    it this second (a long-lived MCP server or add-on resuming a cancelled scene at once)."""
    base = f"{stamp()}-{os.getpid()}"
    run_id, n = base, 1
    while ledger.run_status(run_id) is not None:
        n += 1
        run_id = f"{base}.{n}"
    return run_id


def rotate_outputs(ctx: StageContext) -> None:
    dest = unique_path(ctx.paths.root / "previous" / stamp())
    moved = []
    for p in (ctx.paths.state, ctx.paths.json_dir, ctx.paths.groups_dir,
              ctx.paths.output_blend, ctx.paths.metrics):
        if p.exists():
            target = dest / p.relative_to(ctx.paths.root)
            atomic.make_dir(target.parent, parents=True, exist_ok=True)
            atomic.replace(p, target)
            moved.append(p.name)
    if moved:
        ctx.say(f"--restart: moved {', '.join(moved)} to {dest}")


def finish_run(ctx: StageContext) -> None:
    ctx.run_ledger.run_finished(ctx.run_id, ctx.exit_code,
                                f"completed={len(ctx.scene_state.doc['islands_completed'])} "
                                f"failed={len(ctx.scene_state.doc['islands_failed'])} "
                                f"refused={len(ctx.scene_state.doc['islands_refused'])}")


def fail_run(ctx: StageContext, exc: BaseException, batch: BatchRun | None = None) -> None:
    if batch is not None and batching.retryable(exc):
        kind = type(exc).__name__
        code = exc.exit_code if isinstance(exc, IslandError) else EXIT_INTERNAL
        msg = exc.one_line() if isinstance(exc, IslandError) else f"internal: {kind}: {exc}"
        with contextlib.suppress(Exception):
            ctx.run_ledger.failure(ctx.run_id, None, "batch:attempt", kind, code,
                                   " ".join(msg.split()))
        return
    if isinstance(exc, IslandError):
        code, kind, msg = exc.exit_code, type(exc).__name__, exc.one_line()
    elif isinstance(exc, KeyboardInterrupt):
        code, kind, msg = 130, "KeyboardInterrupt", "interrupted"
    elif isinstance(exc, SystemExit):
        code, kind, msg = int(exc.code or 1), "SystemExit", f"terminated ({exc.code})"
    else:
        code, kind = EXIT_INTERNAL, type(exc).__name__
        msg = " ".join(f"internal: {kind}: {exc}".split())
    with contextlib.suppress(Exception):
        ctx.run_ledger.failure(ctx.run_id, None, "run", kind, code, msg)
    with contextlib.suppress(Exception):
        ctx.run_ledger.run_failed(ctx.run_id, code, msg)
    if ctx.state is not None:
        with contextlib.suppress(Exception):
            ctx.state.doc["status"] = "failed"
            ctx.state.doc["failure"] = {"run_id": ctx.run_id, "exit_code": code,
                                        "message": msg}
            ctx.state.trace(f"run:{ctx.run_id}:failed")

