"""Tier 3 (a Blender binary, Debian's 3.4 in CI): the scene worker ops outside the bpy wheel.

The scene is built by the binary itself (a 5.0 file would be too new for 3.4), then
validate -> rebuild_islands -> merge_back without deltas must restore every world matrix
to 1e-6, with the parented member and the unrelated parented empty included.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from island_tools.config import Settings
from island_tools.scene.pipeline import RunOptions, ScenePipeline

BLENDER = next((p for p in ("/usr/bin/blender", shutil.which("blender") or "")
                if p and os.access(p, os.X_OK)), None)
pytestmark = [pytest.mark.blender_bin,
              pytest.mark.skipif(BLENDER is None, reason="no Blender binary")]


def test_scene_round_trip_in_the_blender_binary(tmp_path: Path) -> None:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender
    from worker.launch import run_job as launch

    backend = resolve_blender(BLENDER, None, env={})

    def run_job(job: dict) -> dict:
        return launch(job, backend)

    scene = build_scene(tmp_path / "scene", backend, groups=["tv", "lounge"])
    pipeline = ScenePipeline(scene, RunOptions(settings=Settings(resolution=64)), run_job)
    prep = pipeline.preflight()
    with pipeline.session(prep, ["blender 3.4 round trip"]):
        flagged = pipeline.validate(prep)
        pipeline.rebuild_islands()
        pipeline.merge_back(group_ids=flagged)
    assert flagged == ["tv", "lounge"]
    objects = {}
    for name in ("stage3-sub-planned.blend", "stage3-scene.blend"):
        result = run_job({"op": "scene_read", "blend": str(scene / "blend" / name),
                          "names": [], "export_meshes": None})
        assert result["blender_version"].startswith(backend.version.rsplit(".", 1)[0])
        objects[name] = {n: np.asarray(o["matrix_world"]) for n, o in result["objects"].items()}
    before, after = objects["stage3-sub-planned.blend"], objects["stage3-scene.blend"]
    assert set(before) == set(after) and {"lounge.coffee_table", "tv.screen_marker"} <= set(after)
    assert max(float(np.abs(after[n] - before[n]).max()) for n in before) <= 1e-6
    meta = json.loads((scene / "relation_groups/lounge/metadata.json").read_text())
    assert np.allclose(np.asarray(meta["canonical_poses"]["lounge.sofa"])[:3, 3], 0, atol=1e-6)
    assert (scene / "relation_groups/tv/masked.png").stat().st_size > 0
