"""Tier 2 (bpy wheel): scene throughput (issue 15).

* Groups refined side by side (``island-refine run --workers 2``, one warm worker each) give
  the same outcome as one after another: the same groups completed, verdicts, accepted
  rounds, final poses read back from each island and poses in the merged scene - and they
  really overlapped (both groups started before either finished, two warm workers ran).
* kill -9 of a side-by-side run, then resume: every group exactly once.
* A step whose transforms move nothing links the previous iteration's renders, and those
  bytes are what a re-render gives (Workbench is deterministic and the renders carry no
  metadata); other render settings render again.

Renders are 64 px, loops 6 iterations; the daemons live in the ``ddir`` fixture's private
directory and are stopped afterwards.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from island_tools.config import Settings
from island_tools.scene.pipeline import OUTPUT_BLEND, RunOptions, ScenePipeline
from tests._helpers import ledger_rows, load, running_groups
from tests.test_daemon import (  # noqa: F401 - fixtures
    MOVES,
    REPO,
    backend,
    ddir,
    group,
    live,
    prepared,
    write_decision,
)
from worker import daemon
from worker.launch import resolve_blender, run_job

pytestmark = pytest.mark.bpy
SETTINGS = Settings(blender_bin="bpy", resolution=64, samples=1)
GROUPS = ["dining", "ring", "tv"]
FLAGS = ["--blender-bin", "bpy", "--resolution", "64", "--samples", "1", "--max-iter", "6",
         "--quiet"]


@pytest.fixture(scope="module")
def three_groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.scenes import build_scene

    return build_scene(tmp_path_factory.mktemp("par") / "scene", resolve_blender("bpy", None),
                       groups=GROUPS)


def in_process(job: dict) -> dict:
    return run_job(job, resolve_blender("bpy", None))


def outcome(scene: Path) -> dict:
    """What a run decided, read from the files it wrote."""
    state = load(scene / "state.json")
    out: dict = {"completed": sorted(state["islands_completed"]),
                 "failed": sorted(f["id"] for f in state["islands_failed"])}
    for gid in GROUPS:
        g = state["groups"][gid]
        gdir = scene / "relation_groups" / gid
        k = g["accepted_round"]
        result = load(gdir / "rounds" / f"round_{k}" / "result.json")
        final = result["contract"]["final_iter"]
        poses = load(gdir / "simple_refiner" / f"iter_{final}" / "current_state.json")["poses"]
        out[gid] = {"verdict": g["verification"]["verdict"], "accepted_round": k,
                    "final_iter": final,
                    "poses": {n: np.asarray(p["matrix_4x4"]) for n, p in poses.items()}}
    out["merged"] = {n: np.asarray(o["matrix_world"]) for n, o in in_process(
        {"op": "scene_read", "blend": str(scene / OUTPUT_BLEND), "names": [],
         "export_meshes": None})["objects"].items()}
    return out


def same(a: dict, b: dict) -> None:
    assert a["completed"] == b["completed"] == sorted(GROUPS) and a["failed"] == b["failed"]
    for gid in GROUPS:
        for key in ("verdict", "accepted_round", "final_iter"):
            assert a[gid][key] == b[gid][key], (gid, key, a[gid][key], b[gid][key])
        for name, pose in a[gid]["poses"].items():
            assert np.allclose(pose, b[gid]["poses"][name], atol=1e-9), (gid, name)
    assert a["merged"].keys() == b["merged"].keys()
    for name, m in a["merged"].items():
        assert np.allclose(m, b["merged"][name], atol=1e-6), name


def test_side_by_side_equals_one_after_another(three_groups: Path, tmp_path: Path,
                                               ddir: Path) -> None:
    seq = tmp_path / "seq"
    shutil.copytree(three_groups, seq)
    assert ScenePipeline(seq, RunOptions(settings=SETTINGS, max_iter=6), in_process).run() == 0

    par = tmp_path / "par"
    shutil.copytree(three_groups, par)
    be = resolve_blender("bpy", None)
    opts = daemon.DaemonOptions(directory=str(ddir))
    slots = lambda slot: (lambda job: run_job(job, be, daemon=opts.with_slot(slot)))  # noqa: E731
    pipeline = ScenePipeline(par, RunOptions(settings=SETTINGS, max_iter=6, workers=2),
                             lambda job: run_job(job, be, daemon=opts), job_slots=slots)
    assert pipeline.run() == 0
    same(outcome(seq), outcome(par))

    keys = {e["key"] for e in live(ddir)}
    assert any(k.endswith("-w1") for k in keys) and any(not k.endswith("-w1") for k in keys)
    events = [(r["group_id"], r["event"]) for r in ledger_rows(par, "groups")]
    first_done = min(i for i, (_, e) in enumerate(events) if e == "completed")
    started_before = {g for g, e in events[:first_done] if e == "started"}
    assert len(started_before) >= 2, f"the groups did not overlap: {events}"


def test_kill9_side_by_side_then_resume(three_groups: Path, tmp_path: Path, ddir: Path
                                        ) -> None:
    scene = tmp_path / "scene"
    shutil.copytree(three_groups, scene)
    cmd = [sys.executable, str(REPO / "scripts/refine_scene.py"), "run", "--scene-dir",
           str(scene), "--workers", "2", *FLAGS]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            state, running = running_groups(scene)
            looping = [g for g in running if (scene / "relation_groups" / g / "simple_refiner"
                                              / "iter_1" / "current_state.json").is_file()]
            if len(running) >= 2 and looping:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    killed = load(scene / "state.json")
    interrupted = [g for g, s in killed["groups"].items() if s["status"] == "running"]
    assert len(interrupted) >= 2

    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False,
                           timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    state = load(scene / "state.json")
    outcome_ids = state["islands_completed"] + [f["id"] for f in state["islands_failed"]]
    assert sorted(outcome_ids) == sorted(GROUPS)             # every group, exactly once
    second = state["run_id"]
    done = [r["group_id"] for r in ledger_rows(scene, "groups")
            if r["run_id"] == second and r["event"] == "completed"]
    assert sorted(done) == sorted(set(done)) and set(interrupted) <= set(done)
    resets = {r["group_id"] for r in ledger_rows(scene, "groups")
              if r["run_id"] == second and r["event"] == "reset"}
    assert set(interrupted) <= resets


# --------------------------------------------------------------------------- reused renders

def _step(group: Path, n: int, settings: Settings, backend) -> dict:
    from island_tools.iteration import iter_step

    iter_step(group, n, settings, lambda job: run_job(job, backend))
    return load(group / "simple_refiner" / f"iter_{n}" / "info.json")


def test_quiet_step_reuses_renders_byte_identical_to_a_rerender(group: Path, tmp_path: Path,
                                                                backend) -> None:
    settings = Settings(blender_bin="bpy", engine="workbench", resolution=64, samples=1)
    write_decision(group, 1, MOVES[0])
    _step(group, 1, settings, backend)
    twin = tmp_path / "twin"
    shutil.copytree(group, twin)
    write_decision(group, 2, {})
    write_decision(twin, 2, {})
    info = _step(group, 2, settings, backend)
    fresh = _step(twin, 2, replace(settings, reuse_renders=False), backend)
    assert info["renders_reused_from"] == "iter_1" and "renders_reused_from" not in fresh
    assert info["island_reused_from"] == info["annotated_reused_from"] == "iter_1"
    assert "island_reused_from" not in fresh and "annotated_reused_from" not in fresh
    it1, it2 = group / "simple_refiner" / "iter_1", group / "simple_refiner" / "iter_2"
    for name in ("render_persp.png", "render_bev.png", "render_bev_annotated.png",
                 "island.blend", "geometry.json", "current_state.json"):
        mine = (it2 / name).read_bytes()
        rerendered = (twin / "simple_refiner" / "iter_2" / name).read_bytes()
        assert mine == rerendered, f"{name}: the reused file differs from a re-render"
    assert (it2 / "render_bev.png").read_bytes() == (it1 / "render_bev.png").read_bytes()
    for name in ("island.blend", "render_bev_annotated.png"):   # linked, not written again
        assert os.path.samefile(it1 / name, it2 / name), name
    assert info["render"]["resolution"] == 64

    # Other render settings: rendered again (a 32 px image is not a 64 px one).
    write_decision(group, 3, {})
    other = _step(group, 3, replace(settings, resolution=32), backend)
    assert "renders_reused_from" not in other and other["render"]["resolution"] == 32
    from PIL import Image

    with Image.open(group / "simple_refiner" / "iter_3" / "render_bev.png") as img:
        assert img.size == (32, 32)


def test_masked_views_from_one_render_and_windows_equal_whole_renders(tmp_path: Path) -> None:
    """The masked views: one render of the scene with every unit blue-grey, then per group
    the window its colours reach, re-rendered and pasted (``worker.scene.render_masked``).
    Decoded by pillow, each must equal that group's whole-view render (``whole=True``, one
    full render per group as before) but for a few edge pixels a different viewport
    rasterizes differently - and the colours must be where the group is."""
    import bpy
    from PIL import Image

    from fixtures.scenes import build_scene, dining_grid
    from worker import scene as wscene

    scene = build_scene(tmp_path / "grid", resolve_blender("bpy", None), dining_grid(9))
    bpy.ops.wm.open_mainfile(filepath=str(scene / "blend/stage3-sub-planned.blend"),
                             load_ui=False)
    roots = sorted(o.name for o in bpy.data.objects
                   if o.parent is None and o.name.startswith("dining_"))
    ids = sorted({r.split(".")[0] for r in roots})
    pictures = {}
    for mode in ("whole", "window"):
        (tmp_path / mode).mkdir()
        groups = [{"id": g, "anchor_id": f"{g}.table",
                   "members": [r for r in roots if r.startswith(f"{g}.")],
                   "masked_png": str(tmp_path / mode / f"{g}.png")} for g in ids]
        done = wscene.render_masked(groups, roots, 256, whole=mode == "whole")
        assert {d["drawn"] for d in done.values()} == {mode}
        pictures[mode] = {g: np.asarray(Image.open(tmp_path / mode / f"{g}.png").convert("RGB"),
                                        dtype=int) for g in ids}
    orange = np.array([255, 194, 0])   # MASK_MEMBER through the view transform, lit
    for g in ids:
        whole, window = pictures["whole"][g], pictures["window"][g]
        assert whole.shape == window.shape == (256, 256, 3)
        differ = np.abs(whole - window).max(axis=2)
        assert int((differ > 0).sum()) <= 40 and int(differ.max()) <= 40, (g, differ.max())
        # the group's own members are the orange pixels, in both, and nowhere else
        hot = [np.argwhere(np.abs(p - orange).max(axis=2) < 90) for p in (whole, window)]
        assert len(hot[0]) > 20 and abs(len(hot[0]) - len(hot[1])) <= 4
    centres = {g: np.argwhere(np.abs(pictures["window"][g] - orange).max(axis=2) < 90)
               .mean(axis=0) for g in ids}
    assert len({tuple(np.round(c / 20)) for c in centres.values()}) == len(ids)
