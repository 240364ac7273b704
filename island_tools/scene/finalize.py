"""Stage 6, finalize + eval: the input scene proven untouched, ``finalization.json`` and
``metrics.json`` written (``island_tools.scene.metrics``)."""
from __future__ import annotations

import time
from typing import Any

from ..files import atomic
from ..iteration import sha256_file
from .context import StageContext
from .errors import IntegrityError
from .ledger import utc_now
from .metrics import build_metrics


def finalize(ctx: StageContext) -> None:
    t0 = time.perf_counter()
    state, p = ctx.scene_state, ctx.paths
    after = sha256_file(p.scene_blend)
    state.doc["inputs"]["scene_sha256_after"] = after
    if after != ctx.input_sha_before:
        raise IntegrityError("the input scene changed during the run (sha256 "
                             f"{ctx.input_sha_before[:12]} -> {after[:12]})",
                             file=str(p.scene_blend), fix="never write the input scene")
    doc = {"run_id": ctx.run_id, "runs": state.doc["runs"],
           "groups_needing_island": state.doc["groups_needing_island"],
           "islands_completed": state.doc["islands_completed"],
           "islands_failed": state.doc["islands_failed"],
           "islands_refused": state.doc["islands_refused"],
           "output_blend": str(p.output_blend),
           "output_sha256": sha256_file(p.output_blend),
           "input_sha256_before": ctx.input_sha_before, "input_sha256_after": after,
           "stage_trace": state.doc["stage_trace"], "at_utc": utc_now()}
    atomic.write_json(p.finalization, doc)
    state.doc["status"] = "finished"
    ctx.time("finalize", time.perf_counter() - t0)
    state.stage_finished("finalize", 0.0)
    state.trace("finalize")


def evaluate(ctx: StageContext) -> dict[str, Any]:
    t0 = time.perf_counter()
    state, p = ctx.scene_state, ctx.paths
    assert ctx.graph is not None
    metrics = build_metrics(ctx.graph, p, state.doc)
    ctx.time("eval", time.perf_counter() - t0)
    metrics["stage_seconds_this_run"] = dict(ctx.stage_seconds)
    metrics["stage_seconds_total"] = {k: v.get("seconds", 0.0)
                                      for k, v in state.doc["stages"].items()}
    atomic.write_json(p.metrics, metrics)
    state.stage_finished("eval", 0.0)
    state.trace("eval")
    scene = metrics["scene"]
    after = scene["after"]
    ctx.say(f"eval: pass rate {scene['before']['pass_rate']:.2f} -> "
            f"{after['pass_rate']:.2f}, violation score "
            f"{scene['before']['violation_score']:.3f} -> "
            f"{after['violation_score']:.3f}; groups: {after['groups_pass']} pass, "
            f"{after['groups_fail']} fail, {after['groups_uncertain']} uncertain")
    for r in scene["refused"]:
        ctx.say(f"eval: {r['id']} REFUSED (left as the input holds it) {r['reason']}")
    for gid, entry in metrics["groups"].items():
        for line in (entry["after"] or {}).get("not_measured", []):
            ctx.say(f"eval: {gid} UNCERTAIN {line}")
    return metrics

