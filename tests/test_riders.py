"""Riders through the whole pipeline (bpy): a photo frame standing on a nightstand is part
of the nightstand. A bed with its nightstand out of place (pulled out and turned), a frame
on the nightstand; refined once from a hand-written relation graph and once through
``run --propose``; the merged .blend read back: the frame moved with the nightstand (the
same pose relative to it within 1 mm) and the nightstand was not pushed away by its frame
(the frame is never an obstacle of its own unit's group)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixtures import parametric as par
from fixtures import rooms

pytestmark = pytest.mark.bpy

FRONT = np.array([0.0, -1.0])


def _furniture(key: str, category: str, mesh, front=FRONT) -> rooms.Furniture:
    v, f = mesh
    return rooms.Furniture(key, category, np.asarray(v, float), np.asarray(f, np.int64),
                           front, 1.0)


def _room(room_parent: bool = False) -> rooms.Room:
    bed_p, stand_p = par.generate("bed", 3), par.generate("nightstand", 3)
    bed = _furniture("bed", "bed", (bed_p.vertices, bed_p.faces))
    stand = _furniture("nightstand", "nightstand", (stand_p.vertices, stand_p.faces))
    frame = _furniture("frame", "frame", par.photo_frame(), None)
    room = rooms.Room((8.0, 8.0), room_parent=room_parent)
    bed_depth, bed_width = bed.extents()
    s_depth, s_width = stand.extents()
    bed_y = 4.0 - bed_depth / 2 - 0.03
    room.placed.append(rooms.Placed("Object_1", bed, bed.pose(np.array([0.0, bed_y]),
                                                              FRONT), "bed", "bedroom", True))
    # out of place: 0.30 m out from the bed's side (0.08 in order) and turned 20 deg
    sx = bed_width / 2 + 0.30 + s_width / 2
    sy = 4.0 - s_depth / 2 - 0.03
    stand_pose = stand.pose(np.array([sx, sy]), FRONT, 20.0)
    room.placed.append(rooms.Placed("Object_2", stand, stand_pose, "nightstand", "bedroom"))
    top = float((stand.vertices @ stand_pose[:3, :3].T + stand_pose[:3, 3])[:, 2].max())
    room.placed.append(rooms.Placed("Object_3", frame, frame.pose(np.array([sx, sy]), None,
                                                                  35.0, floor_z=top), "prop"))
    return room


def _run_job(job: dict) -> dict:
    from worker.launch import resolve_blender, run_job

    return run_job(job, resolve_blender("bpy", None))


def _cli(*args: str) -> int:
    from scripts.refine_scene import main

    return main(list(args))


def _poses(blend: Path) -> dict[str, np.ndarray]:
    objects = _run_job({"op": "scene_read", "blend": str(blend), "names": [],
                        "export_meshes": None})["objects"]
    return {n: np.asarray(o["matrix_world"], dtype=float) for n, o in objects.items()}


def _gap_to_bed(poses: dict[str, np.ndarray], room: rooms.Room) -> float:
    from island_tools.measure.geometry import convex_hull_2d, convex_signed_distance

    hulls = {}
    for p in room.placed[:2]:
        v = p.furniture.vertices @ poses[p.name][:3, :3].T + poses[p.name][:3, 3]
        hulls[p.name] = convex_hull_2d(v[:, :2])
    return convex_signed_distance(hulls["Object_2"], hulls["Object_1"])[0]


def _check(scene: Path, room: rooms.Room, before: dict[str, np.ndarray]) -> None:
    after = _poses(scene / "blend" / "stage3-scene.blend")
    assert not np.allclose(after["Object_2"], before["Object_2"], atol=1e-4)   # refined
    rel_before = np.linalg.inv(before["Object_2"]) @ before["Object_3"]
    rel_after = np.linalg.inv(after["Object_2"]) @ after["Object_3"]
    assert np.abs(rel_after[:3, 3] - rel_before[:3, 3]).max() < 1e-3
    assert np.abs(rel_after[:3, :3] - rel_before[:3, :3]).max() < 1e-3
    assert np.array_equal(after["Object_1"], before["Object_1"])       # the anchor stays
    # not pushed away by its frame: it came back toward the bed's side
    assert _gap_to_bed(after, room) < _gap_to_bed(before, room) - 0.1
    assert _gap_to_bed(after, room) < 0.2
    scene_doc = json.loads((scene / "json" / "scene_objects.json").read_text())
    assert scene_doc["riders"] == {"Object_3": "Object_2"}
    (owners,) = scene_doc["context_owners"].values()     # one group
    assert "Object_3" not in owners
    merged = json.loads((scene / "json" / "merge_back.json").read_text())
    assert "Object_3" in merged["assigned"]


@pytest.fixture(scope="module", params=[False, True], ids=["flat", "under_a_root_empty"])
def bedroom(request, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, rooms.Room]:
    """The bedroom as a .blend; ``under_a_root_empty``: every top-level object under one
    Empty (a scene root, as importers write it)."""
    from worker.launch import resolve_blender

    room = _room(request.param)
    out = tmp_path_factory.mktemp("riders") / "bedroom"
    return rooms.build_room(room, out, resolve_blender("bpy", None)), room


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_a_frame_moves_with_its_nightstand_from_a_hand_written_graph(bedroom, tmp_path: Path
                                                                     ) -> None:
    src, room = bedroom
    scene = _copy(src, tmp_path / "hand")
    graph = {"version": 1, "groups": [
        {"id": "bedroom", "anchor": "Object_1", "members": ["Object_2"],
         "relation": {"anchor_role": "bed", "pattern": "free",
                      "facing": "parallel_to_anchor_long_axis",
                      "layout": {"+x": 1, "align": "back"}, "clearance_m": 0.05,
                      "free_note": "one nightstand at the headboard"}}]}
    (scene / "inputs").mkdir(exist_ok=True)
    (scene / "inputs" / "relation_graph.json").write_text(json.dumps(graph))
    before = _poses(scene / rooms.SCENE_BLEND)
    code = _cli("run", "--scene-dir", str(scene), "--blender-bin", "bpy", "--resolution", "64",
                "--samples", "1", "--max-iter", "6", "--quiet")
    assert code == 0, code
    _check(scene, room, before)


def test_a_frame_moves_with_its_nightstand_through_run_propose(bedroom, tmp_path: Path
                                                               ) -> None:
    src, room = bedroom
    scene = _copy(src, tmp_path / "proposed")
    before = _poses(scene / rooms.SCENE_BLEND)
    code = _cli("run", "--scene-dir", str(scene), "--propose", "--blender-bin", "bpy",
                "--resolution", "64", "--samples", "1", "--max-iter", "6", "--quiet")
    doc = json.loads((scene / "inputs" / "relation_graph.json").read_text())
    (g,) = doc["groups"]
    assert (g["anchor"], g["members"]) == ("Object_1", ["Object_2"])
    left = {u["name"]: u for u in doc["proposed"]["unassigned"]}
    assert left["Object_3"] == {"name": "Object_3", "role": "prop",
                                "reason": "rides on 'Object_2': part of that unit, it moves "
                                          "with it"}
    assert code == 0, (code, g["proposal"])
    _check(scene, room, before)
