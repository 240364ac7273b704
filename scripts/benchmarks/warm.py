"""Section "warm" (issue 7): what an iteration costs through the warm worker.

Rows, all measured in this one run on the ``long_table_6`` fixture (iteration 1 re-stepped
each time, ``--resolution`` px Workbench, DIRECTORYS.yaml's samples), calls interleaved round
by round so that load from other work on the machine hits every path alike:

* ``iter_step.py`` per call through the warm worker (a fresh CLI process each call, as an
  agent makes it; the daemon already running), and its first call (which starts it);
* the same call ``--no-daemon`` (a fresh process that imports bpy and renders cold);
* the three-launch baseline of section "step" (apply + save, render, geometry);
* the bare two-view render: a warm process that keeps the island open and renders both
  views again and again (``worker.render.render_views`` only);
* targets: warm >= 4x faster than three launches, warm <= 1.5x the bare render;
* RSS (VmRSS from /proc) of the warm worker and of the step host over 200 ``iter_step.py``
  calls of a real loop (40 with ``--quick``), growth from iteration 20 (10) to the last
  <= 10 %, recycling switched off so that a leak would show;
* the default render against the AA 16 one (mean / 99.9th percentile pixel difference);
* geometry.json for 12 members of 20k triangles around a 20k-triangle table: per call in a
  warm ``GeometryContext`` (target <= 0.15 s), and cold (a fresh process: context + BVHs +
  first compute) with identical chairs (BVHs shared) and with 12 distinct chair meshes.
With ``--blender-bin`` (or ``blender`` on PATH) the warm and fresh rows for that binary too.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .step import (
    REPO,
    ThreeLaunches,
    binary_or_none,
    clean_env,
    iter_step_cmd,
    prepare_group,
    row,
    run_timed,
    smoke,
    stats,
)

TITLE = "warm: iter_step.py through the step host and warm worker (issue 7)"
CHAIRS = ("kenney-cco/chair.glb", "kenney-cco/chairCushion.glb",
          "kenney-cco/chairModernCushion.glb", "kenney-cco/chairRounded.glb")
TABLE = "kenney-cco/table.glb"
TRIANGLES = 20000
PREVIOUS_SAMPLES = 16  # the Workbench default before it became AA 5: the render dominates

_BARE = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
out = os.fdopen(os.dup(1), "w")
quiet = os.open(os.devnull, os.O_WRONLY)
os.dup2(quiet, 1)
os.dup2(quiet, 2)
from worker import blend_io
from worker.render import render_views
job = json.loads(sys.argv[2])
blend_io.open_blend(job["blend"])
for _ in sys.stdin:
    t = time.perf_counter()
    render_views(job["out_dir"], job["anchor_id"], job["members"], **job["render"])
    out.write(json.dumps(time.perf_counter() - t) + "\n")
    out.flush()
"""

_COLD_GEOMETRY = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from island_tools.measure import meshcache
from island_tools.measure.frames import as_matrix
from island_tools.measure.geometry import compute_geometry
meshes, _ = meshcache.load(sys.argv[2])
doc = json.load(open(sys.argv[3]))
poses = {k: as_matrix(v) for k, v in doc["poses"].items()}
t1 = time.perf_counter()
compute_geometry(meshes, poses, "table", doc["spec"], doc["axes"], 1)
t2 = time.perf_counter()
print(json.dumps({"compute": t2 - t1, "imports_and_load": t1 - t0}))
"""


class BareRender:
    """A warm process rendering both views of one open island on request."""

    def __init__(self, group: Path, work: Path, resolution: int, samples: int) -> None:
        sys.path.insert(0, str(REPO))
        from island_tools.config import load_settings
        from island_tools.iteration import load_group

        g = load_group(group)
        scratch = work / f"bare_render_{samples}"
        scratch.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(g.iter_dir(0) / "island.blend", scratch / "island.blend")
        axes = json.loads((group / "forward_axes.json").read_text())["members"]
        render = {**load_settings().render_job(), "resolution": resolution, "samples": samples,
                  "forward_axes": {k: v["axis_local"] for k, v in axes.items()
                                   if v.get("axis_local")}}
        job = {"blend": str(scratch / "island.blend"), "out_dir": str(scratch),
               "anchor_id": g.metadata.anchor_id, "members": list(g.metadata.members),
               "render": render}
        self.proc = subprocess.Popen([sys.executable, "-c", _BARE, str(REPO), json.dumps(job)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=clean_env())

    def __call__(self) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("render\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the bare-render process died")
        return float(json.loads(line))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(30)


def _warm_rows(label: str, group: Path, work: Path, resolution: int, samples: int,
               blender: str | None, repeat: int) -> tuple[list[list], dict[str, Any]]:
    from worker import daemon

    ddir = work / f"daemon_{'binary' if blender else 'bpy'}"
    env = clean_env(ISLAND_REFINER_DAEMON="1", ISLAND_REFINER_DAEMON_DIR=str(ddir))
    flag = ["--blender-bin", blender or "bpy", "--samples", str(samples)]
    three = ThreeLaunches(group, work, resolution, blender, samples)
    bare = None if blender else BareRender(group, work, resolution, samples)
    try:
        first = run_timed(iter_step_cmd(group, resolution, *flag), env=env)
        run_timed(iter_step_cmd(group, resolution, *flag), env=env)  # warm-up, untimed
        run_timed(iter_step_cmd(group, resolution, *flag, "--no-daemon"))
        three()
        if bare is not None:
            bare()
            bare()
        warm, fresh, launches, bare_s = [], [], [], []
        for r in range(repeat):
            calls = [lambda: warm.append(run_timed(iter_step_cmd(group, resolution, *flag),
                                                   env=env)),
                     lambda: fresh.append(run_timed(iter_step_cmd(group, resolution, *flag,
                                                                  "--no-daemon"))),
                     lambda: launches.append(three()["total"])]
            if bare is not None:
                calls.append(lambda: bare_s.append(bare()))
            for call in calls[r % len(calls):] + calls[:r % len(calls)]:
                call()
        entry = next(e for e in daemon.status(ddir) if e.get("running"))
    finally:
        daemon.shutdown_all(ddir)
        if bare is not None:
            bare.close()
    s_warm, s_fresh, s_three = stats(warm), stats(fresh), stats(launches)
    rows = [row(f"{label}: iter_step.py, warm path", s_warm,
                "fresh CLI -> step host -> warm worker"),
            [f"{label}: iter_step.py, warm path, first call", round(first, 3), None,
             None, 1, "starts host + worker"],
            row(f"{label}: iter_step.py --no-daemon", s_fresh, "fresh process, in-process"),
            row(f"{label}: three launches", s_three, "apply+save, render, geometry")]
    speedup = s_three["median"] / s_warm["median"]
    rows.append([f"{label}: three launches / warm", round(speedup, 2), None, None, repeat,
                 f"target >= 4: {'ok' if speedup >= 4 else 'MISSED'}"])
    rows.append([f"{label}: --no-daemon / warm", round(s_fresh["median"] / s_warm["median"], 2),
                 None, None, repeat, ""])
    data = {"warm": s_warm, "first_call": first, "no_daemon": s_fresh, "three_launches": s_three,
            "speedup_vs_three_launches": speedup, "daemon_rss_mb": entry.get("rss_mb"),
            "daemon_jobs": entry.get("jobs")}
    if bare is not None:
        s_bare = stats(bare_s)
        over = s_warm["median"] / s_bare["median"]
        rows.append(row(f"{label}: bare two-view render (warm process)", s_bare,
                        "render_views only"))
        rows.append([f"{label}: warm / bare render", round(over, 2), None, None, repeat,
                     f"target <= 1.5: {'ok' if over <= 1.5 else 'MISSED'}"])
        data.update(bare_render=s_bare, warm_over_bare=over)
    return rows, data


def _aa_difference_rows(work: Path, samples: int, reference: int
                        ) -> tuple[list[list], dict[str, Any]]:
    """How far the default render is from the AA 16 one (same island, same views): per view,
    the mean and the 99.9th percentile of the absolute 8-bit channel difference."""
    import numpy as np
    from PIL import Image

    rows, data = [], {}
    for view in ("persp", "bev"):
        a, b = (np.asarray(Image.open(work / f"bare_render_{n}" / f"render_{view}.png")
                           .convert("RGB"), dtype=np.int16) for n in (samples, reference))
        diff = np.abs(a - b)
        mean, p999 = float(diff.mean()), float(np.percentile(diff, 99.9))
        rows.append([f"render_{view}.png: |AA {samples} - AA {reference}| per channel",
                     round(mean, 3), None, round(p999, 1), int(diff.size),
                     "mean / 99.9th percentile (max column), of 255"])
        data[view] = {"mean": mean, "p99_9": p999}
    return rows, data


def _rss_rows(group: Path, work: Path, resolution: int, iterations: int, reference: int
              ) -> tuple[list[list], dict[str, Any]]:
    """A real loop of ``iterations`` ``iter_step.py`` calls (fresh CLI processes, as an agent
    makes them) through one step host and one warm worker; VmRSS of both after each step."""
    sys.path.insert(0, str(REPO))
    from island_tools.files import atomic
    from island_tools.iteration import sha256_file
    from island_tools.schemas import transforms_doc
    from worker import daemon

    ddir = work / "daemon_rss"   # private (0700): a directory open to others is not used
    shutil.rmtree(ddir, ignore_errors=True)
    ddir.mkdir(parents=True, mode=0o700)
    os.chmod(ddir, 0o700)
    config = work / "rss_config.yaml"  # no recycling during the loop: growth must show
    config.write_text("daemon_idle_s: 600\ndaemon_max_jobs: 1000000\n"
                      "daemon_max_rss_mb: 1000000\nblender_bin: bpy\n")
    env = clean_env(ISLAND_REFINER_DAEMON="1", ISLAND_REFINER_DAEMON_DIR=str(ddir),
                    ISLAND_REFINER_CONFIG=str(config))
    refiner = group / "simple_refiner"
    rss: dict[str, list[float]] = {"worker": [], "host": []}
    seconds = []
    pids: dict[str, int] = {}
    try:
        for n in range(1, iterations + 1):
            sign = 1.0 if n % 2 else -1.0
            members = {"chair_1": {"delta_xyz": [0.05 * sign, 0.0, 0.0],
                                   "delta_yaw_deg": 10.0 * sign},
                       "chair_4": {"delta_xyz": [0.0, 0.03 * sign, 0.0], "delta_yaw_deg": 0.0}}
            (refiner / f"iter_{n}").mkdir(exist_ok=True)
            atomic.write_json(refiner / f"iter_{n}" / "transforms.json", transforms_doc(
                {"members": members, "converged": False, "reason_summary": "rss"}, n,
                sha256_file(refiner / f"iter_{n - 1}" / "render_bev.png"), model="bench",
                generated_by="scripts/bench.py --section warm"))
            cmd = [sys.executable, "scripts/iter_step.py", "--group-dir", str(group), "--iter",
                   str(n), "--resolution", str(resolution), "--quiet"]
            seconds.append(run_timed(cmd, env=env))
            if len(pids) < 2:   # both processes, whichever shows up in the listing first
                for e in daemon.status(ddir):
                    if e.get("running"):
                        pids.setdefault("host" if e["key"].startswith("host-") else "worker",
                                        e["pid"])
            for kind, pid in pids.items():
                rss[kind].append(daemon.rss_mb(pid) or math.nan)
            if n > 2:  # keep the disk footprint small: only the last iterations are needed
                shutil.rmtree(refiner / f"iter_{n - 2}", ignore_errors=True)
        alive = {kind: daemon.pid_alive(pid) for kind, pid in pids.items()}
    finally:
        daemon.shutdown_all(ddir)
    rows: list[list[Any]] = []
    data: dict[str, Any] = {"step_seconds": stats(seconds), "same_processes": alive}
    for kind, label in (("worker", "warm worker (Blender)"), ("host", "step host (Python)")):
        values = rss[kind]
        if len(values) < reference:   # said, not skipped silently
            rows.append([f"{label} RSS", None, None, None, iterations,
                         f"NOT MEASURED: the process was found in {len(values)} of "
                         f"{iterations} iterations"])
            data[kind] = {"rss_mb": values, "growth": None}
            continue
        ref, last = values[reference - 1], values[-1]
        growth = (last - ref) / ref
        rows.append([f"{label} RSS at iteration {reference} / {iterations}", round(ref, 1),
                     round(min(values), 1), round(max(values), 1), iterations,
                     f"MiB; last {last:.1f}; same process throughout: {alive[kind]}"])
        rows.append([f"{label} RSS growth, iteration {reference} -> {iterations}",
                     round(100 * growth, 2), None, None, iterations,
                     f"% (target <= 10: {'ok' if growth <= 0.10 else 'MISSED'})"])
        data[kind] = {"rss_mb": [round(v, 1) for v in values], "growth": growth}
    rows.append(row("iter_step.py per call during the RSS loop", stats(seconds),
                    "fresh CLI process via host + worker, s"))
    return rows, data


# --------------------------------------------------------------------------- geometry

def densify(vertices, faces, triangles: int):
    """Subdivide (trimesh) to exactly ``triangles`` triangles."""
    import numpy as np
    import trimesh

    v, f = np.asarray(vertices, float), np.asarray(faces, np.int64)
    while len(f) * 4 <= triangles:
        v, f = trimesh.remesh.subdivide(v, f)
    extra = (triangles - len(f)) // 3
    if extra > 0:
        v, f = trimesh.remesh.subdivide(v, f, face_index=np.arange(extra))
    return v, f


def dense_island(distinct: bool, triangles: int = TRIANGLES):
    """12 dense chairs around a dense long table, mid-refinement: most near their slots,
    two tucked under the top, two overlapping. (meshes, poses, target_spec)."""
    import numpy as np

    from fixtures.assets import life_scale, load_asset
    from island_tools.measure import frames

    table = load_asset(TABLE)
    tv, tf = densify(table.vertices, table.faces, triangles)
    ts = life_scale(TABLE) * 1.5
    meshes = {"table": (tv, tf)}
    poses = {"table": np.diag([ts, ts, ts, 1.0])}
    hx = (tv[:, 0].max() - tv[:, 0].min()) / 2.0 * ts
    hy = (tv[:, 1].max() - tv[:, 1].min()) / 2.0 * ts
    slots = []
    for i in range(5):
        x = -hx + (i + 0.5) * 2.0 * hx / 5.0
        slots += [(x, -hy - 0.35, 180.0), (x, hy + 0.35, 0.0)]
    slots += [(hx + 0.35, 0.0, -90.0), (-hx - 0.35, 0.0, 90.0)]
    dense = {}
    rng = np.random.default_rng(7)
    for k, (x, y, yaw) in enumerate(slots):
        asset = CHAIRS[k % len(CHAIRS)] if distinct else CHAIRS[0]
        if asset not in dense:
            mesh = load_asset(asset)
            dense[asset] = densify(mesh.vertices, mesh.faces, triangles)
        cv, cf = dense[asset]
        if distinct:  # every chair its own mesh (no BVH sharing): the worst case
            cv = cv * (1.0 + 1e-6 * k)
        scale = life_scale(asset)
        centre = frames.footprint_centre_local(cv)
        if k in (0, 7):
            y *= 0.7          # tucked under the top
        if k == 4:
            x -= 0.25         # bumps into its neighbour
        x, y = x + rng.normal(0.0, 0.04), y + rng.normal(0.0, 0.04)
        name = f"chair_{k + 1:02d}"
        meshes[name] = (cv, cf)
        poses[name] = (frames.translation([x, y, 0.0]) @ frames.rot_z(yaw + rng.normal(0, 12))
                       @ np.diag([scale, scale, scale, 1.0])
                       @ frames.translation([-centre[0], -centre[1], 0.0]))
    spec = {"anchor_role": "long_table", "member_count": 12, "pattern": "2+2+1+1",
            "facing": "toward_anchor", "spacing": "even_along_each_edge", "clearance_m": 0.1}
    return meshes, poses, spec


def _geometry_rows(work: Path, repeat: int) -> tuple[list[list], dict[str, Any]]:
    import numpy as np

    sys.path.insert(0, str(REPO))
    from island_tools.measure import frames, meshcache
    from island_tools.measure.forward_axis import forward_axes_document
    from island_tools.measure.geometry import GeometryContext

    rows, data = [], {}
    for distinct in (False, True):
        label = "12 distinct chairs" if distinct else "12 identical chairs"
        meshes, poses, spec = dense_island(distinct)
        axes = forward_axes_document(meshes, "table", {})
        ctx = GeometryContext(meshes, "table", axes)
        doc = ctx.compute(poses, spec, 1)
        rng = np.random.default_rng(1)
        warm = []
        for i in range(max(10, 4 * repeat)):
            moved = {k: (frames.translation([*rng.normal(0.0, 0.02, 2), 0.0]) @ v
                         if k != "table" else v) for k, v in poses.items()}
            t0 = time.perf_counter()
            ctx.compute(moved, spec, i)
            warm.append(time.perf_counter() - t0)
        npz = work / f"geometry_{'distinct' if distinct else 'same'}.npz"
        meshcache.save(npz, meshes)
        side = npz.with_suffix(".json")
        side.write_text(json.dumps({"poses": {k: frames.to_list(v) for k, v in poses.items()},
                                    "spec": spec, "axes": axes}))
        cold, cold_wall = [], []
        for _ in range(max(3, repeat // 2)):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _COLD_GEOMETRY, str(REPO), str(npz),
                                  str(side)], capture_output=True, text=True, check=True,
                                 env=clean_env())
            cold_wall.append(time.perf_counter() - t0)
            cold.append(json.loads(out.stdout.strip().splitlines()[-1])["compute"])
        s_warm, s_cold, s_wall = stats(warm), stats(cold), stats(cold_wall)
        tris = sum(len(f) for _, f in meshes.values())
        rows.append(row(f"geometry, {label}: warm context, per call", s_warm,
                        f"target <= 0.15 s: {'ok' if s_warm['median'] <= 0.15 else 'MISSED'}"))
        rows.append(row(f"geometry, {label}: cold (new context + BVHs + compute)", s_cold,
                        "fresh process, imports excluded"))
        rows.append(row(f"geometry, {label}: cold process wall time", s_wall,
                        "python start + imports + npz load + compute"))
        data[label] = {"warm": s_warm, "cold": s_cold, "cold_wall": s_wall, "triangles": tris,
                       "penetration_pairs": doc["group"]["penetration_pairs"]}
    return rows, data


def run(args) -> dict[str, Any]:
    from island_tools.config import load_settings
    from worker.render import workbench_aa

    repeat = max(5, int(args.repeat)) if not args.quick else max(2, int(args.repeat) // 2)
    resolution = int(args.resolution)
    iterations, reference = (40, 10) if args.quick else (200, 20)
    if smoke(args):
        repeat, (iterations, reference) = 1, (4, 2)
    work = Path(args.work) / "warm"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rows, data, notes = [], {}, []
    group = prepare_group(work / "bpy", None, resolution)
    rss_group = work / "rss" / group.name
    shutil.copytree(group, rss_group)
    configured = load_settings().render_samples
    blender = binary_or_none(args)
    for samples in dict.fromkeys((configured, PREVIOUS_SAMPLES)):
        tag = f"AA {workbench_aa(samples)}"
        r, data[f"bpy {tag}"] = _warm_rows(f"bpy, {tag}", group, work, resolution, samples,
                                           None, repeat)
        rows += r
    if blender:
        bgroup = prepare_group(work / "binary", blender, resolution)
        tag = f"AA {workbench_aa(configured)}"
        r, data[f"binary {tag}"] = _warm_rows(f"{Path(blender).name} {_binary_version(blender)}, "
                                              f"{tag}", bgroup, work, resolution, configured,
                                              blender, repeat)
        rows += r
    if configured != PREVIOUS_SAMPLES:
        r, data["aa_difference"] = _aa_difference_rows(work, configured, PREVIOUS_SAMPLES)
        rows += r
    r, data["rss"] = _rss_rows(rss_group, work, resolution, iterations, reference)
    rows += r
    r, data["geometry"] = _geometry_rows(work, repeat)
    rows += r
    shutil.rmtree(work / "rss", ignore_errors=True)
    notes.append(f"long_table_6/turned_90 at {resolution} px Workbench; "
                 f"AA {workbench_aa(configured)}"
                 f" = the default samples ({configured}); AA {workbench_aa(PREVIOUS_SAMPLES)}"
                 f" = --samples {PREVIOUS_SAMPLES} (the old default, for comparison); "
                 "iteration 1 re-stepped per call; calls interleaved round by round")
    notes.append("warm path: iter_step.py is a stdlib-only client (~30 ms of interpreter "
                 "start) of the step host (scripts/_step_host.py: apply via the warm "
                 "worker, sanity, geometry, annotation, JSON), so it costs the bare render + "
                 "a small fixed overhead; the three launches pay three cold starts + it")
    notes.append(f"{os.cpu_count()} CPUs (shared with other work: medians of interleaved calls); "
                 "the daemon's between-job reset (read_homefile, gc, orphans_purge) runs after "
                 "the reply, off the client's clock")
    return {"columns": ["measure", "median", "min", "max", "n", "target / note"],
            "rows": rows, "notes": notes, "data": data}


def _binary_version(blender: str) -> str:
    from worker.launch import binary_version
    return binary_version(shutil.which(blender) or blender)
