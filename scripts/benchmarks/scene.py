"""Section "scene" (issue 15): ``island-refine run`` on generated scenes of 1, 4 and 16 dining
groups (``fixtures.scenes.dining_grid``: a table and 6 chairs turned 90 deg each), low-poly
and high-poly (chairs midpoint-subdivided to >= 65k triangles: the same surfaces, so the same
answers), built-in solver, ``--resolution`` px Workbench (``--quick``: 1 and 4 groups,
128 px).

Two modes side by side on copies of the same scenes, interleaved per scene size:

* ``before``: ``--workers 1`` and ``reuse_renders: false`` - the pipeline as it was (one
  group after another; every iteration rendered, also the quiet ones that move nothing);
* ``after``: the defaults - groups side by side, one warm worker per core, and a step that
  moves nothing links the previous iteration's renders.

Each scene size runs ``--scene-repeat`` times (default 3; 1 with ``--quick``), low- and
high-poly in both modes back to back per repetition, and the median wall is reported (all
walls are in the JSON), so a ratio compares runs taken moments apart on a machine whose
speed drifts by 10-15 % from minute to minute.

The unit is one warm ``iter_step.py`` call (a fresh CLI process through the step host and
warm worker, re-stepping iteration 1 of the long_table_6 fixture: two members moved, both
views rendered) at the same resolution, median of ``--repeat`` at the start, and again
(median of 5) before every repetition of each scene size: a run's ratio divides by the unit
measured just before it, and the reported ratio is the median over the repetitions.
Reported per run: wall seconds, seconds per group, groups per minute, the ratio (seconds
per group) / (seconds per warm iter_step call), each warm worker's peak RSS during the run
(VmHWM, reset before it through ``clear_refs``; the largest of the repetitions), and the
pipeline process's own peak RSS (its VmHWM, sampled every 20 ms while it runs: a
child's ``ru_maxrss`` would include this process's, inherited at fork; the largest of the
repetitions). Every mode has its own daemon directory whose workers are started by an
untimed 2-group run first (a scene run then pays no Blender start-up, as on a machine
where the workers are warm). Each run's outcome (groups completed, verdicts) is checked to
be the same in both modes and in every repetition.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .step import REPO, clean_env, iter_step_cmd, prepare_group, run_timed, smoke, stats

TITLE = "scene: island-refine run, groups side by side + reused quiet renders (issue 15)"
SIZES, QUICK_SIZES = (1, 4, 16), (1, 4)
QUICK_RESOLUTION = 128
MODES = {"before": (["--workers", "1"], False), "after": ([], True)}
UNIT_REPEAT = 5


def _config(work: Path, reuse: bool) -> Path:
    path = work / f"config_reuse_{str(reuse).lower()}.yaml"
    path.write_text(f"blender_bin: bpy\nengine: workbench\nreuse_renders: "
                    f"{str(reuse).lower()}\n")
    return path


def _hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        return None
    return None


def _run_scene(scene: Path, resolution: int, flags: list[str], config: Path, ddir: Path
               ) -> dict[str, Any]:
    env = clean_env(ISLAND_REFINER_DAEMON="1", ISLAND_REFINER_DAEMON_DIR=str(ddir))
    cmd = [sys.executable, "scripts/refine_scene.py", "run", "--scene-dir", str(scene),
           "--resolution", str(resolution), "--config", str(config), "--quiet", *flags]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    reader.start()
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _hwm_mb(proc.pid) or 0.0)
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    reader.join()
    state = json.loads((scene / "state.json").read_text())
    if proc.returncode != 0:
        raise RuntimeError(f"island-refine run exited {proc.returncode}: "
                           f"{''.join(err).strip().splitlines()[-3:]}")
    verdicts = {gid: (g.get("verification") or {}).get("verdict")
                for gid, g in sorted(state["groups"].items())}
    return {"wall_s": round(wall, 3), "completed": len(state.get("islands_completed", [])),
            "failed": len(state.get("islands_failed", [])), "verdicts": verdicts,
            "pipeline_peak_rss_mb": round(peak, 1)}


def _reset_hwm(ddir: Path) -> None:
    """Reset each running warm worker's peak RSS (``clear_refs`` 5), so the next reading is
    the peak of the next run alone."""
    from worker import daemon

    for e in daemon.status(ddir):
        if e.get("running"):
            try:
                Path(f"/proc/{e['pid']}/clear_refs").write_text("5")
            except OSError:
                pass


def _worker_hwm(ddir: Path) -> dict[str, float | None]:
    from worker import daemon

    return {e["key"]: _hwm_mb(e["pid"]) for e in daemon.status(ddir) if e.get("running")}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import resource

    sys.path.insert(0, str(REPO))
    from fixtures.scenes import build_scene, dining_grid
    from worker import daemon
    from worker.launch import blender_output_captured, resolve_blender

    quick = bool(getattr(args, "quick", False))
    sizes = QUICK_SIZES if quick else SIZES
    resolution = QUICK_RESOLUTION if quick else int(args.resolution)
    repeat = max(3, int(getattr(args, "repeat", 5)))
    polys: tuple[bool, ...] = (False, True)
    unit_repeat = UNIT_REPEAT
    if smoke(args):   # one low-poly group, both modes, single timings (scripts/bench.py)
        sizes, resolution, repeat, unit_repeat, polys = (1,), int(args.resolution), 1, 1, \
            (False,)
    scene_repeat = 1 if quick else max(1, int(getattr(args, "scene_repeat", 3)))
    work = Path(args.work) / "scene"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    backend = resolve_blender("bpy", None)

    # The unit: a warm iter_step.py call, measured up front (median of --repeat) and again
    # (median of UNIT_REPEAT) before every repetition of every scene size, so each ratio
    # divides by a unit taken minutes, not a quarter of an hour, from its scene run.
    unit_dir = Path(tempfile.mkdtemp(prefix="ir-bs-u-"))
    env = clean_env(ISLAND_REFINER_DAEMON="1", ISLAND_REFINER_DAEMON_DIR=str(unit_dir))
    group = prepare_group(work / "unit", None, resolution)

    def measure_unit(k: int) -> dict[str, Any]:
        return stats([run_timed(iter_step_cmd(group, resolution, "--blender-bin", "bpy"),
                                env=env) for _ in range(k)])

    ddirs = {m: Path(tempfile.mkdtemp(prefix=f"ir-bs-{m[0]}-")) for m in MODES}
    configs = {m: _config(work, reuse) for m, (_, reuse) in MODES.items()}
    rows: list[list] = []
    data: dict[str, Any] = {"resolution": resolution, "runs": []}
    try:
        measure_unit(1 if smoke(args) else 2)   # starts the unit's worker
        unit = data["unit_iter_step_s"] = measure_unit(repeat)
        templates = {}
        with blender_output_captured():
            for hp in polys:
                for n in sizes:
                    templates[(n, hp)] = build_scene(work / f"template_{n}_{int(hp)}", backend,
                                                     dining_grid(n, hp))
            warm = build_scene(work / "template_warm", backend, dining_grid(2))
        for mode, (flags, _) in MODES.items():   # start each mode's workers, untimed
            scene = work / f"warm_{mode}"
            shutil.copytree(warm, scene)
            _run_scene(scene, resolution, flags, configs[mode], ddirs[mode])
        for n in sizes:
            # Interleaved: each repetition runs low- and high-poly in both modes back to
            # back, so a ratio compares runs taken moments apart; medians over repetitions.
            walls: dict[tuple[bool, str], list[dict[str, Any]]] = {}
            for _ in range(scene_repeat):
                unit_now = measure_unit(unit_repeat)["median"]
                for hp in polys:
                    for mode, (flags, _) in MODES.items():
                        scene = work / f"run_{n}_{int(hp)}_{mode}"
                        shutil.copytree(templates[(n, hp)], scene)
                        _reset_hwm(ddirs[mode])
                        r = _run_scene(scene, resolution, flags, configs[mode], ddirs[mode])
                        r["worker_peak_rss_mb"] = _worker_hwm(ddirs[mode])
                        r["unit_s"] = unit_now
                        walls.setdefault((hp, mode), []).append(r)
                        shutil.rmtree(scene, ignore_errors=True)
            for hp in polys:
                outcome: dict[str, Any] = {}
                for mode in MODES:
                    runs = walls[(hp, mode)]
                    outcomes = {(r["completed"], r["failed"], json.dumps(r["verdicts"]))
                                for r in runs}
                    if len(outcomes) != 1:
                        raise RuntimeError(f"{n} groups (high-poly {hp}, {mode}): repetitions "
                                           f"disagree: {outcomes}")
                    r = dict(runs[0])
                    r["wall_s"] = round(statistics.median(x["wall_s"] for x in runs), 3)
                    r["wall_s_all"] = [x["wall_s"] for x in runs]
                    r["pipeline_peak_rss_mb"] = max(x["pipeline_peak_rss_mb"] for x in runs)
                    hwm: dict[str, float | None] = {}
                    for x in runs:   # each worker's largest peak over the repetitions
                        for key, mb in x["worker_peak_rss_mb"].items():
                            hwm[key] = max(filter(None, (hwm.get(key), mb)), default=None)
                    per_group = r["wall_s"] / n
                    r["worker_peak_rss_mb"] = hwm
                    # each repetition against the unit measured just before it, median
                    ratio = statistics.median(x["wall_s"] / n / x["unit_s"] for x in runs)
                    r.pop("unit_s")
                    entry = {"groups": n, "high_poly": hp, "mode": mode, **r,
                             "unit_s_all": [x["unit_s"] for x in runs],
                             "seconds_per_group": round(per_group, 3),
                             "groups_per_minute": round(60.0 * n / r["wall_s"], 2),
                             "ratio_to_warm_iter_step": round(ratio, 2)}
                    data["runs"].append(entry)
                    outcome[mode] = (r["completed"], r["failed"], r["verdicts"])
                    rows.append([f"{n} group(s), {'high' if hp else 'low'}-poly", mode,
                                 r["wall_s"], round(per_group, 3),
                                 round(60.0 * n / r["wall_s"], 1), round(ratio, 2),
                                 max((v for v in hwm.values() if v), default=None),
                                 r["pipeline_peak_rss_mb"],
                                 f"{r['completed']} ok, {r['failed']} failed"])
                if outcome["before"] != outcome["after"]:
                    raise RuntimeError(f"{n} groups (high-poly {hp}): the modes disagree: "
                                       f"{outcome}")
    finally:
        for d in (*ddirs.values(), unit_dir):
            daemon.shutdown_all(d)
            shutil.rmtree(d, ignore_errors=True)
    pipeline_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    data["pipeline_peak_rss_mb"] = round(pipeline_peak, 1)
    by = {(e["groups"], e["high_poly"], e["mode"]): e for e in data["runs"]}
    notes = [f"unit: one warm iter_step.py call = {unit['median']:.3f} s (median of "
             f"{unit['n']}, {resolution} px, at the start); each ratio divides every "
             f"repetition by the unit measured just before it (median of {UNIT_REPEAT}) "
             "and takes the median",
             f"peak RSS of the pipeline processes (largest): {pipeline_peak:.0f} MiB"]
    for n in sizes:
        for mode in MODES:
            lo, hi = by.get((n, False, mode)), by.get((n, True, mode))
            if lo and hi:
                notes.append(f"{n} group(s), {mode}: high-poly / low-poly wall = "
                             f"{hi['wall_s'] / lo['wall_s']:.2f}x")
        b, a = by.get((n, False, "before")), by.get((n, False, "after"))
        if a and b:
            notes.append(f"{n} group(s), low-poly: before / after wall = "
                         f"{b['wall_s'] / a['wall_s']:.2f}x")
    return {"columns": ["scene", "mode", "wall s", "s / group", "groups / min",
                        "s/group per warm iter_step", "worker peak RSS MiB",
                        "pipeline peak RSS MiB", "outcome"],
            "rows": rows, "notes": notes, "data": data}
