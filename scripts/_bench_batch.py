"""Section "batch" (issue 6): islands per minute of ``island-refine batch`` on a local
cluster with 1 and 2 workers, on the same batch.

The batch: 4 fixture scenes (``fixtures.scenes``), each with the ``tv`` (3 chairs facing
away) and ``ring`` (6 bunched chairs at a round table) groups, so 8 islands; 256 px Workbench
(``--quick``: 2 scenes, 64 px), the built-in solver, ``--max-iter 20 --max-rounds 1``. Every
row starts from fresh copies of the same scenes and goes through ``scripts.batch.execute``,
the code ``island-refine batch`` runs: cluster start, prepare, islands, finish and the
orchestrator's polling all count. ``islands/min`` is over the whole wall time; ``after
start`` leaves out the cluster start (spawning the workers; their first ``import bpy`` is
part of their first task).
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

TITLE = "batch: islands per minute, 1 vs 2 local Dask workers (issue 6)"
GROUPS = ("tv", "ring")
SCENES, QUICK_SCENES = 4, 2
RESOLUTION, QUICK_RESOLUTION = 256, 64


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fixtures.scenes import build_scene
    from island_tools.config import Settings
    from island_tools.scene.pipeline import RunOptions
    from scripts.batch import ClusterOptions, execute
    from worker.launch import resolve_blender

    work = Path(args.work) / "batch"
    shutil.rmtree(work, ignore_errors=True)
    template = build_scene(work / "template", resolve_blender("bpy", None), groups=GROUPS)
    n_scenes = QUICK_SCENES if args.quick else SCENES
    resolution = QUICK_RESOLUTION if args.quick else RESOLUTION
    options = RunOptions(policy="solver", max_iter=20, max_rounds=1,
                         settings=Settings(blender_bin="bpy", engine="workbench",
                                           resolution=resolution, samples=1))
    rows, data = [], {}
    for workers in (1, 2):
        scenes = []
        for i in range(n_scenes):
            dest = work / f"w{workers}" / f"scene_{i}"
            shutil.copytree(template, dest)
            scenes.append(str(dest))
        ready: list[float] = []
        t0 = time.monotonic()
        result = execute(scenes, options, ClusterOptions(spec="local", workers=workers),
                         argv=["bench"], quiet=True,
                         on_client=lambda client: ready.append(time.monotonic()))
        wall = time.monotonic() - t0
        start = ready[0] - t0 if ready else 0.0
        islands = result.islands_refined
        failed = sum(s.islands_failed for s in result.scenes)
        per_min = 60.0 * islands / wall
        per_min_after = 60.0 * islands / (wall - start)
        rows.append([workers, n_scenes, islands, failed, round(wall, 1), round(start, 1),
                     round(per_min, 2), round(per_min_after, 2)])
        data[f"workers_{workers}"] = {
            "wall_s": round(wall, 3), "cluster_start_s": round(start, 3),
            "islands": islands, "islands_failed": failed,
            "islands_per_minute": round(per_min, 3),
            "islands_per_minute_after_start": round(per_min_after, 3),
            "scene_exit_codes": {s.scene_id: s.exit_code for s in result.scenes},
            "exit_code": result.exit_code}
    speedup = rows[1][6] / rows[0][6] if rows[0][6] else None
    data["speedup_2_vs_1"] = round(speedup, 3) if speedup else None
    notes = [f"{n_scenes} scenes x {len(GROUPS)} islands ({', '.join(GROUPS)}), "
             f"Workbench {resolution} px, solver, max-iter 20, one round; embedded bpy in "
             "each single-threaded worker process",
             f"2 workers vs 1: {speedup:.2f}x islands/min (wall)" if speedup else "",
             "the orchestrator (scheduler, polling) shares the cores with the workers"]
    return {"columns": ["workers", "scenes", "islands", "failed", "wall s", "cluster start s",
                        "islands/min", "islands/min after start"],
            "rows": rows, "notes": [n for n in notes if n], "data": data}
