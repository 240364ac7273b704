"""Section "batch" (issue 6): islands per minute of ``island-refine batch`` on a local
cluster with 1 and 2 workers, on the same batch.

The batch: 4 fixture scenes (``fixtures.scenes``), each with the four groups validation
flags - ``dining`` (6 chairs turned 90 deg), ``ring`` (6 bunched chairs), ``tv`` (3 chairs
facing away), ``lounge`` (a sofa pushed into its coffee table) - so 16 islands; 256 px
Workbench (``--quick``: 2 scenes of ``tv`` + ``ring``, 64 px), the built-in solver,
``--max-iter 20 --max-rounds 1``. Every
row starts from fresh copies of the same scenes and goes through ``scripts.batch.execute``,
the code ``island-refine batch`` runs: cluster start, prepare, islands, finish and the
orchestrator's polling all count. ``islands/min`` is over the whole wall time; ``after
start`` leaves out the cluster start (spawning the workers; their first ``import bpy`` is
part of their first task). Each row is the median of up to 3 runs (``--repeat``), the 1- and
2-worker runs interleaved so that load from elsewhere on the machine hits both alike.
"""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Any

TITLE = "batch: islands per minute, 1 vs 2 local Dask workers (issue 6)"
GROUPS = ("dining", "ring", "tv", "lounge")
QUICK_GROUPS = ("tv", "ring")
SCENES, QUICK_SCENES = 4, 2
RESOLUTION, QUICK_RESOLUTION = 256, 64
MAX_REPEAT = 3


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
    return sum(fields) - idle, sum(fields)


def _one_batch(template: Path, root: Path, n_scenes: int, workers: int, options: Any
               ) -> dict[str, Any]:
    from scripts.batch import ClusterOptions, execute

    scenes = []
    for i in range(n_scenes):
        shutil.copytree(template, root / f"scene_{i}")
        scenes.append(str(root / f"scene_{i}"))
    ready: list[float] = []
    busy0, total0 = _cpu_ticks()
    t0 = time.monotonic()
    result = execute(scenes, options, ClusterOptions(spec="local", workers=workers),
                     argv=["bench"], quiet=True,
                     on_client=lambda client: ready.append(time.monotonic()))
    wall = time.monotonic() - t0
    busy1, total1 = _cpu_ticks()
    cpus = os.cpu_count() or 1
    cores_busy = cpus * (busy1 - busy0) / max(total1 - total0, 1)
    start = ready[0] - t0 if ready else 0.0
    islands = result.islands_refined
    return {"wall_s": round(wall, 3), "cluster_start_s": round(start, 3), "islands": islands,
            "islands_failed": sum(s.islands_failed for s in result.scenes),
            "islands_per_minute": 60.0 * islands / wall,
            "islands_per_minute_after_start": 60.0 * islands / (wall - start),
            "cores_busy": round(cores_busy, 2),
            "scene_exit_codes": {s.scene_id: s.exit_code for s in result.scenes},
            "exit_code": result.exit_code}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fixtures.scenes import build_scene
    from island_tools.config import Settings
    from island_tools.scene.pipeline import RunOptions
    from worker.launch import resolve_blender

    work = Path(args.work) / "batch"
    shutil.rmtree(work, ignore_errors=True)
    smoke = bool(getattr(args, "smoke", False))
    groups = ("tv",) if smoke else QUICK_GROUPS if args.quick else GROUPS
    template = build_scene(work / "template", resolve_blender("bpy", None), groups=groups)
    n_scenes = 1 if smoke else QUICK_SCENES if args.quick else SCENES
    resolution = QUICK_RESOLUTION if args.quick else RESOLUTION
    options = RunOptions(policy="solver", max_iter=20, max_rounds=1,
                         settings=Settings(blender_bin="bpy", engine="workbench",
                                           resolution=resolution, samples=1))
    reps = 1 if args.quick else max(1, min(args.repeat, MAX_REPEAT))
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for rep in range(reps):          # interleaved, so load from elsewhere hits both alike
        for workers in (1, 2):
            runs[workers].append(_one_batch(template, work / f"r{rep}_w{workers}", n_scenes,
                                            workers, options))
    rows: list[list[Any]] = []
    data: dict[str, Any] = {}
    for workers, results in runs.items():
        median = sorted(results, key=lambda r: r["islands_per_minute"])[len(results) // 2]
        spread = [round(r["islands_per_minute"], 1) for r in results]
        rows.append([workers, n_scenes, median["islands"], median["islands_failed"],
                     round(median["wall_s"], 1), round(median["cluster_start_s"], 1),
                     round(median["islands_per_minute"], 2),
                     round(median["islands_per_minute_after_start"], 2),
                     f"{min(spread)}-{max(spread)}", median["cores_busy"]])
        data[f"workers_{workers}"] = {"median": median, "runs": results}
    speedup = rows[1][6] / rows[0][6] if rows[0][6] else None
    data["speedup_2_vs_1"] = round(speedup, 3) if speedup else None
    notes = [f"{n_scenes} scenes x {len(groups)} islands ({', '.join(groups)}), "
             f"Workbench {resolution} px, solver, max-iter 20, one round; embedded bpy in "
             "each single-threaded worker process",
             f"2 workers vs 1: {speedup:.2f}x islands/min (wall)" if speedup else "",
             "the orchestrator (scheduler, polling) shares the cores with the workers"]
    notes.append(f"median of {reps} interleaved run(s) per row; range = islands/min over "
                 "the runs")
    one = data["workers_1"]["median"]["cores_busy"]
    cpus = os.cpu_count() or 1
    notes.append(f"cores busy = the machine's mean busy CPUs during the run (/proc/stat; all "
                 f"processes): one worker already keeps {one:.2f} of {cpus} busy (Workbench "
                 f"renders through a multi-threaded software rasterizer), so on this "
                 f"machine more workers can give at most {cpus / max(one, 1e-9):.2f}x")
    return {"columns": ["workers", "scenes", "islands", "failed", "wall s", "cluster start s",
                        "islands/min", "islands/min after start", "range", "cores busy"],
            "rows": rows, "notes": [n for n in notes if n], "data": data}
