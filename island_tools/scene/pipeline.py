"""The scene pipeline director: validate -> rebuild_islands -> refine (+ verify, unknowns,
repair rounds, score gate) -> merge_back -> finalize -> eval.

Each stage is a function over a :class:`~island_tools.scene.context.StageContext` in a
module of its own, with its completion gate beside it:

==================  ==========================  ==============================================
stage               module                      completion gate (checked on disk)
==================  ==========================  ==============================================
validate            ``validate``                ``json/island_groups.json`` matches the graph
                                                structure and scene hash (``validation_gate``)
rebuild_islands     ``rebuild``                 island, metadata, caches and ``round_0`` per
                                                flagged group (``GroupPaths.rebuilt``)
refine + verify     ``refine``, ``verify_stage``  accepted round, verification and island agree
                                                (``refine.group_gate``)
merge_back          ``merge``                   ``merge_back.json`` names the islands and the
                                                output by hash
finalize + eval     ``finalize``                ``finalization.json``, ``metrics.json``
==================  ==========================  ==============================================

Resumable: before a stage does any work its gate is checked against the artifacts on disk
(not against ``state.json`` alone) and what is complete is skipped, recorded as
``<stage>:skipped:<why>`` in the stage trace. A group that was not completed or failed when
a run died is reset from ``rounds/round_0`` and redone; the island loop itself rotates the
old ``simple_refiner/`` (the contract's no-resume policy). Nothing is written before the
inputs validate. Blender work is injected as ``run_job(job) -> dict`` and the island loop as
``run_group`` (default ``island_tools.adapter.run_group``); the run's bookkeeping (lock,
ledger, crash safety net) is ``island_tools.scene.run``. The Dask batch runs the same stage
functions as three tasks per scene (``island_tools.scene.batch_tasks``). See
docs/SCENE_PIPELINE.md.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ..iteration import RunJob
from . import finalize, merge, rebuild, refine, run, validate
from .batch import BatchRun
from .context import JobSlots, Progress, RunOptions, StageContext
from .paths import OUTPUT_BLEND, RELATION_GRAPH, SCENE_BLEND, GroupPaths, ScenePaths
from .state import scene_exit_code
from .validate import Prepared

__all__ = ["OUTPUT_BLEND", "RELATION_GRAPH", "SCENE_BLEND", "GroupPaths", "Prepared",
           "RunOptions", "ScenePaths", "ScenePipeline", "run_scene"]


class ScenePipeline(StageContext):
    """One scene directory. ``run()`` is the whole flow; the stages are also methods so a
    test (or a caller that wants only some of them) can drive them inside ``session()``."""

    def run(self, argv: list[str] | tuple[str, ...] = ()) -> int:
        prep = self.preflight()
        with self.session(prep, argv):
            self.validate(prep)
            self.rebuild_islands()
            self.refine()
            self.merge_back()
            self.finalize()
            self.evaluate()
            self.exit_code = scene_exit_code(self.scene_state.doc)
            run.finish_run(self)
        return self.exit_code

    # ------------------------------------------------------------------ session
    def preflight(self) -> Prepared:
        """Parse and check every input; measure the scene if validation must (re)run.
        Writes nothing."""
        return validate.preflight(self)

    @contextlib.contextmanager
    def session(self, prep: Prepared, argv: list[str] | tuple[str, ...] = (),
                batch: BatchRun | None = None) -> Iterator[ScenePipeline]:
        """Lock the scene, open the ledger, start (or resume) a run; an exception marks the
        run failed (``island_tools.scene.run``)."""
        with run.session(self, prep, argv, batch):
            yield self

    # ------------------------------------------------------------------ the stages
    def validate(self, prep: Prepared) -> list[str]:
        return validate.validate(self, prep)

    def island_groups(self) -> dict[str, Any]:
        return validate.island_groups(self)

    def rebuild_islands(self) -> None:
        rebuild.rebuild_islands(self)

    def refine(self) -> None:
        refine.refine(self)

    def merge_back(self, group_ids: list[str] | None = None) -> dict[str, Any]:
        return merge.merge_back(self, group_ids)

    def finalize(self) -> None:
        finalize.finalize(self)

    def evaluate(self) -> dict[str, Any]:
        return finalize.evaluate(self)


def run_scene(scene_dir: str | os.PathLike[str], options: RunOptions, run_job: RunJob, *,
              progress: Progress | None = None, job_slots: JobSlots | None = None,
              argv: list[str] | tuple[str, ...] = (), prog: str = "refine_scene"
              ) -> tuple[int, str]:
    """``island-refine run`` as a function: the whole pipeline on one scene, then (exit code,
    the closing ``[prog] done: ...`` line). The CLI and the MCP server's ``refine_scene``."""
    pipeline = ScenePipeline(scene_dir, options, run_job, progress=progress, job_slots=job_slots)
    code = pipeline.run(argv)
    state = pipeline.state.doc if pipeline.state else {}
    refused = [r["id"] for r in state.get("islands_refused", [])]
    doubted = [r["id"] for r in state.get("islands_uncertain", [])]
    partial = "; ".join(([f"refused {', '.join(refused)}"] if refused else [])
                        + ([f"membership uncertain {', '.join(doubted)}"] if doubted else []))
    partial = f" (partial: {partial})" if partial else ""
    return code, (f"[{prog}] done: {len(state.get('islands_completed', []))} completed, "
                  f"{len(state.get('islands_failed', []))} failed, "
                  f"{len(refused)} refused{partial}; "
                  f"{pipeline.paths.output_blend}; {pipeline.paths.metrics}")
