"""The Dask batch's three tasks per scene (``scripts/batch.py``), built from the same stage
functions the director runs: ``prepare`` (validate + rebuild_islands), ``refine_island``
(one flagged group's rounds, recorded through an island marker so it ends exactly once),
``finish`` (merge_back, finalize, eval). ``finished_reason`` tells a batch a scene has
nothing left to do. Bookkeeping of markers and attempts: ``island_tools.scene.batch``.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..errors import EXIT_INTERNAL, IslandError, UsageError
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import sha256_file
from . import batch as batching
from .batch import BatchRun
from .context import StageContext
from .finalize import evaluate, finalize
from .ledger import BufferedLedger, Ledger
from .merge import merge_back
from .paths import ScenePaths
from .rebuild import rebuild_islands
from .refine import group_failed, group_gate, refine_group
from .relation_graph import load_relation_graph
from .run import fail_run, finish_run, scene_lock, session
from .state import GROUP_FAILED, DetachedState, SceneState, scene_exit_code
from .validate import island_groups, live_graph, preflight, validate


def prepare_batch(ctx: StageContext, batch: BatchRun) -> list[str]:
    """Batch task 1: validate + rebuild_islands under the batch's run (left open).
    Returns the flagged groups; each becomes an island task."""
    prep = preflight(ctx)
    with session(ctx, prep, batch.argv, batch=batch):
        flagged = validate(ctx, prep)
        rebuild_islands(ctx)
    return flagged


def refine_island(ctx: StageContext, gid: str, batch: BatchRun, key: str = "") -> dict[str, Any]:
    """Batch task 2, one per flagged group, concurrently with the scene's other groups:
    the group's rounds as ``run`` does them, recorded through an island marker.

    Returns ``{"group_id", "outcome", "reason", "skipped", "attempt", "seconds",
    "verdict"}``; ``skipped`` when the island already has a result (never refined twice);
    ``verdict`` is the group's review (``verify.review_group``: pass / fail / uncertain) of
    its accepted round, None for a failed island."""
    p = ctx.paths
    gp = p.group(gid)
    if not gp.rounds.is_dir():
        raise UsageError(f"group '{gid}' has no rebuilt island", file=str(gp.root),
                         fix="run the batch's prepare stage (or island-refine run) first")
    with scene_lock(ctx, shared=True), batching.flock(gp.island_lock):
        marker = batching.read_marker(gp.island_done)
        if marker is not None:
            batching.commit_marker(p, marker)   # a no-op unless an earlier commit died
            if marker["run_id"] != batch.run_id:
                batching.ledger_event(p, batch.run_id, gid, "skipped", marker["outcome"],
                                      f"result of {marker['attempt_id']} kept")
            return island_summary(marker, skipped=True)
        state = DetachedState(p.state, SceneState.load(p.state).doc)
        terminal = state.terminal(gid)
        ctx.state, ctx.run_id = state, batch.run_id
        if terminal and group_gate(ctx, gid, terminal):
            batching.ledger_event(p, batch.run_id, gid, "skipped", terminal,
                                  "terminal in an earlier run")
            return {"group_id": gid, "outcome": terminal, "skipped": True,
                    "reason": None, "attempt": None, "seconds": 0.0,
                    "verdict": review_verdict(state.group(gid))}
        ctx.graph = load_relation_graph(p.relation_graph)
        attempt = batching.begin_attempt(p, gp, batch, key)
        ledger = BufferedLedger()
        ctx.ledger = ledger
        t0 = time.perf_counter()
        try:
            refine_group(ctx, gid)
        finally:
            ctx.ledger = None
        outcome = state.terminal(gid) or GROUP_FAILED
        record = state.group(gid)
        marker = batching.island_marker(
            attempt, outcome, record.get("failure_reason"), record, state.new_trace,
            state.new_seconds, ledger.rows_buffered, time.perf_counter() - t0)
        atomic.write_json(gp.island_done, marker)   # the result exists from here on
        batching.commit_marker(p, marker)
        return island_summary(marker, skipped=False)


def review_verdict(record: Mapping[str, Any] | None) -> str | None:
    """The verdict of a group's record (``state.json`` groups[gid], or an island marker's
    ``group``): what ``verify_group`` wrote from ``verify.review_group``; None without one."""
    verification = (record or {}).get("verification")
    return verification.get("verdict") if isinstance(verification, Mapping) else None


def island_summary(marker: Mapping[str, Any], skipped: bool) -> dict[str, Any]:
    return {"group_id": marker["group_id"], "outcome": marker["outcome"],
            "reason": marker.get("reason"), "skipped": skipped,
            "attempt": marker.get("attempt_id"), "seconds": marker.get("seconds", 0.0),
            "verdict": review_verdict(marker.get("group"))}


def finish_batch(ctx: StageContext, batch: BatchRun) -> int:
    """Batch task 3, after every island task of the scene returned or was recorded
    failed: merge_back, finalize, eval; finishes the run. Returns the run's exit code."""
    p = ctx.paths
    flagged = list(island_groups(ctx)["groups_needing_island"])
    for gid in flagged:  # results whose commit an earlier process did not finish
        marker = batching.read_marker(p.group(gid).island_done)
        if marker is not None:
            batching.commit_marker(p, marker)
    with scene_lock(ctx):
        ctx.ledger = Ledger(p.ledger)
        try:
            ctx.state = SceneState.load(p.state)
            ctx.graph = live_graph(ctx, load_relation_graph(p.relation_graph))
            ctx.run_id = batch.run_id
            doc = ctx.state.doc
            ctx.input_sha_before = doc["inputs"]["scene_sha256"]
            try:
                for gid in flagged:
                    if not ctx.state.terminal(gid):
                        group_failed(ctx, gid, 0, "no island result reached the batch",
                                     "MissingResult", EXIT_INTERNAL)
                at_start = (doc.get("batch") or {}).get("stage_seconds_at_start", {})
                ctx.stage_seconds = {
                    k: round(v.get("seconds", 0.0) - at_start.get(k, 0.0), 4)
                    for k, v in doc["stages"].items()}
                if flagged:
                    for stage in ("refine", "verify", "resolve_unknowns"):
                        if stage in doc["stages"] or stage == "refine":
                            ctx.state.stage_finished(stage, 0.0)
                else:
                    ctx.state.trace("refine:skipped:no_flagged_group")
                merge_back(ctx)
                finalize(ctx)
                evaluate(ctx)
                ctx.exit_code = scene_exit_code(doc)
                finish_run(ctx)
            except BaseException as exc:
                fail_run(ctx, exc, batch)
                raise
        finally:
            ctx.ledger.close()
            ctx.ledger = None
    return ctx.exit_code


def finished_reason(p: ScenePaths) -> str | None:
    """Read-only: None when the scene is finished and its inputs unchanged (a batch has
    nothing to do), else why not. Checks the artifacts, not only state.json."""
    state = SceneState.load(p.state)
    doc = state.doc
    if doc.get("status") != "finished":
        return f"state is {doc.get('status')!r}"
    for path in (p.finalization, p.metrics, p.output_blend, p.merge_report):
        if not path.is_file():
            return f"{path.relative_to(p.root)} is missing"
    try:
        graph = load_relation_graph(p.relation_graph)
    except IslandError as exc:
        return exc.one_line()
    inputs = doc.get("inputs") or {}
    if not p.scene_blend.is_file() or inputs.get("scene_sha256") != sha256_file(
            p.scene_blend):
        return "the input scene changed"
    if inputs.get("relation_graph_structure_sha256") != graph.structure_sha256:
        return "relation_graph.json changed"
    pending = [g for g in doc.get("groups_needing_island", []) if not state.terminal(g)]
    if pending:
        return f"groups without a result: {', '.join(pending)}"
    merged = read_object(p.merge_report, UsageError, "merge_back.json", "")
    now = {g: sha256_file(p.group(g).island) for g in doc["islands_completed"]}
    if merged.get("islands") != now or merged.get("output_sha256") != sha256_file(
            p.output_blend):
        return "the merged scene does not match the islands"
    return None
