"""Section "step" (issue 2): one ``iter_step.py`` call as an agent makes it, versus the
contract's three-launch wrappers.

Both do the same step of the ``long_table_6`` fixture (``turned_90``: two members moved),
re-stepping iteration 1 each time so every repetition does identical work, at
``--resolution`` px Workbench with DIRECTORYS.yaml's samples:

* ``iter_step.py --no-daemon``: a fresh Python process that imports bpy, applies, saves,
  re-opens, renders both views, checks sanity and computes geometry.json;
* three launches, the way the contract's wrappers do it: (1) apply + save, a fresh Python
  process with bpy running ``worker.jobs.run_job`` on a job file; (2) render both views from
  the saved file, another such process; (3) geometry, a third Python process
  (``island_tools.measure.geometry`` on the poses read back by (2)). With ``--blender-bin`` (or a
  ``blender`` on PATH) the same two rows for that binary: Blender processes running
  ``worker/entry.py`` instead of the bpy module.

The calls are interleaved round by round (the machine may be busy with other work, which
then hits every path alike); one untimed warm-up of each path first (Mesa's shader cache).
Medians of ``--repeat`` (at least 5).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TITLE = "step: one iter_step.py call vs three Blender launches (issue 2)"
FIXTURE = ("long_table_6", "turned_90")
MOVE = {"chair_1": {"delta_xyz": [0.2, 0.0, 0.0], "delta_yaw_deg": 15.0},
        "chair_2": {"delta_xyz": [0.0, -0.1, 0.0], "delta_yaw_deg": 0.0}}

_RUN_JOB = ("import json, sys; sys.path.insert(0, sys.argv[3]); from worker.jobs import run_job; "
            "json.dump(run_job(json.load(open(sys.argv[1]))), open(sys.argv[2], 'w'))")
_GEOMETRY = (
    "import json, sys; sys.path.insert(0, sys.argv[4]); "
    "from island_tools.files import atomic; from island_tools.measure.frames import as_matrix; "
    "from island_tools.measure.geometry import compute_geometry; "
    "from island_tools.iteration import forward_axes, load_group, load_meshes; "
    "g = load_group(sys.argv[1]); meshes, props = load_meshes(g); "
    "axes = forward_axes(g, meshes, props); "
    "poses = {k: as_matrix(v) for k, v in json.load(open(sys.argv[2]))['poses'].items()}; "
    "atomic.write_json(sys.argv[3], compute_geometry(meshes, poses, g.metadata.anchor_id, "
    "g.target_spec.to_dict(), axes, 1))")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment an agent's shell would give: no pytest/CI markers."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_CURRENT_TEST", "CI", "ISLAND_REFINER_DAEMON",
                        "ISLAND_REFINER_DAEMON_DIR", "ISLAND_REFINER_DAEMON_DEBUG_PAUSE_FILE")}
    env.update(extra)
    return env


def run_timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env or clean_env(), capture_output=True,
                          text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: "
                           f"{proc.stderr.strip().splitlines()[-3:]}")
    return seconds


def stats(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values), "values": [round(v, 4) for v in values]}


def row(label: str, s: dict[str, Any], note: str = "") -> list:
    return [label, round(s["median"], 3), round(s["min"], 3), round(s["max"], 3), s["n"], note]


def smoke(args) -> bool:
    """``--smoke``: the least work through the section's code (scripts/bench.py)."""
    return bool(getattr(args, "smoke", False))


def binary_or_none(args) -> str | None:
    if smoke(args) and not getattr(args, "blender_bin", None):
        return None   # a smoke run does only what was asked for
    value = getattr(args, "blender_bin", None) or os.environ.get("BLENDER") \
        or shutil.which("blender")
    return value if value and shutil.which(value) else None


def prepare_group(work: Path, blender: str | None, resolution: int) -> Path:
    """Build the fixture (with ``blender`` if given, so it can read the file), iter_0 via a
    --no-daemon init_iter0, and iter_1/transforms.json."""
    sys.path.insert(0, str(REPO))
    from fixtures.build import build_fixture
    from island_tools.files import atomic
    from island_tools.iteration import sha256_file
    from island_tools.schemas import transforms_doc
    from worker.launch import blender_output_captured, resolve_blender

    backend = resolve_blender(blender or "bpy", None)
    with blender_output_captured():  # the embedded build's "Saved:" lines
        group = build_fixture(*FIXTURE, work, backend=backend)
    flags = ["--group-dir", str(group), "--resolution", str(resolution), "--quiet",
             "--no-daemon", "--blender-bin", blender or "bpy"]
    run_timed([sys.executable, "scripts/init_iter0.py", *flags])
    refiner = group / "simple_refiner"
    (refiner / "iter_1").mkdir(exist_ok=True)
    doc = transforms_doc({"members": MOVE, "converged": False, "reason_summary": "bench"}, 1,
                         sha256_file(refiner / "iter_0" / "render_bev.png"), model="bench",
                         generated_by="scripts/bench.py --section step")
    atomic.write_json(refiner / "iter_1" / "transforms.json", doc)
    return group


def iter_step_cmd(group: Path, resolution: int, *extra: str) -> list[str]:
    return [sys.executable, "scripts/iter_step.py", "--group-dir", str(group), "--iter", "1",
            "--resolution", str(resolution), "--quiet", *extra]


class ThreeLaunches:
    """The contract's wrappers: apply + save, render, geometry as three fresh processes."""

    def __init__(self, group: Path, work: Path, resolution: int, blender: str | None,
                 samples: int | None = None) -> None:
        sys.path.insert(0, str(REPO))
        from island_tools.config import load_settings
        from island_tools.iteration import load_current_poses, load_group, load_meshes, plan_poses
        from island_tools.measure import frames
        from island_tools.schemas import load_transforms

        self.group, self.blender = group, blender
        self.dir = work / f"three_launch_{'binary' if blender else 'bpy'}_{samples}"
        self.dir.mkdir(parents=True, exist_ok=True)
        g = load_group(group)
        meshes, _ = load_meshes(g)
        transforms = load_transforms(g.iter_dir(1) / "transforms.json", 1, g.metadata)
        planned = plan_poses(load_current_poses(g, 0), transforms, meshes)
        axes = json.loads((group / "forward_axes.json").read_text())
        settings = load_settings()
        blend = str(self.dir / "island.blend")
        base = {"op": "step", "blend": blend, "members": list(g.metadata.members),
                "anchor_id": g.metadata.anchor_id, "export_meshes": None}
        self.apply_job = self.dir / "apply.json"
        self.apply_job.write_text(json.dumps({
            **base, "poses": {k: frames.to_list(planned[k]) for k in transforms.members},
            "render": None}))
        fwd = {k: v["axis_local"] for k, v in axes["members"].items() if v.get("axis_local")}
        self.render_job = self.dir / "render.json"
        self.render_job.write_text(json.dumps({
            **base, "poses": None,
            "render": {**settings.render_job(), "resolution": resolution,
                       **({} if samples is None else {"samples": samples}),
                       "forward_axes": fwd}}))
        self.source = g.iter_dir(0) / "island.blend"

    def _launch(self, job: Path, result: Path) -> float:
        if self.blender:
            from worker.launch import ENTRY
            cmd = [self.blender, "--background", "--factory-startup", "--disable-autoexec",
                   "--python-exit-code", "1", "--python", str(ENTRY), "--", str(job),
                   str(result)]
        else:
            cmd = [sys.executable, "-c", _RUN_JOB, str(job), str(result), str(REPO)]
        return run_timed(cmd)

    def __call__(self) -> dict[str, float]:
        shutil.copyfile(self.source, self.dir / "island.blend")
        apply = self._launch(self.apply_job, self.dir / "apply_result.json")
        render = self._launch(self.render_job, self.dir / "render_result.json")
        geometry = run_timed([sys.executable, "-c", _GEOMETRY, str(self.group),
                              str(self.dir / "render_result.json"),
                              str(self.dir / "geometry.json"), str(REPO)])
        return {"apply_save": apply, "render": render, "geometry": geometry,
                "total": apply + render + geometry}


def run(args) -> dict[str, Any]:
    repeat = max(5, int(args.repeat)) if not args.quick else max(2, int(args.repeat) // 2)
    repeat = 1 if smoke(args) else repeat
    resolution = int(args.resolution)
    work = Path(args.work) / "step"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    variants = [("bpy 5.0.1 (embedded)", None)]
    blender = binary_or_none(args)
    if blender:
        variants.append((f"binary {blender}", blender))
    rows, data, notes = [], {}, []
    for label, binary in variants:
        group = prepare_group(work / ("binary" if binary else "bpy"), binary, resolution)
        extra = ["--no-daemon", "--blender-bin", binary or "bpy"]
        three = ThreeLaunches(group, work, resolution, binary)
        run_timed(iter_step_cmd(group, resolution, *extra))  # warm-up, untimed
        three()
        single, parts = [], []
        for _ in range(repeat):
            single.append(run_timed(iter_step_cmd(group, resolution, *extra)))
            parts.append(three())
        s_single = stats(single)
        s_three = stats([p["total"] for p in parts])
        ratio = s_three["median"] / s_single["median"]
        rows.append(row(f"{label}: iter_step.py --no-daemon", s_single, "one fresh process"))
        rows.append(row(f"{label}: three launches", s_three, "apply+save, render, geometry"))
        for part in ("apply_save", "render", "geometry"):
            rows.append(row(f"  launch: {part}", stats([p[part] for p in parts])))
        rows.append([f"{label}: ratio three launches / iter_step.py", round(ratio, 2), None,
                     None, repeat, "median / median"])
        data[label] = {"iter_step": s_single, "three_launches": s_three, "ratio": ratio,
                       "parts": {k: stats([p[k] for p in parts])
                                 for k in ("apply_save", "render", "geometry")}}
    notes.append(f"{FIXTURE[0]}/{FIXTURE[1]}, {resolution} px Workbench, samples from "
                 "DIRECTORYS.yaml; iteration 1 re-stepped each repetition; calls interleaved")
    if not blender:
        notes.append("no Blender binary (--blender-bin, $BLENDER, PATH): binary rows skipped")
    return {"columns": ["path", "median_s", "min_s", "max_s", "n", "note"], "rows": rows,
            "notes": notes, "data": data}
