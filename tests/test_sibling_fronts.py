"""Issue 32: a member's front from what is in order (``island_tools.scene.sibling_fronts``).

Real TUNED meshes (``fixtures/fronts_split.json``: parametric nightstands s13 and s25, whose
fronts the detector leaves undetermined; an Infinigen bed whose front it finds) beside a
bed against a wall. Two nightstands of one model, one turned 100 deg: the one in order
settles the model's front, the turned one is measured against it and repaired by
``run --propose``; a lone one turned, a lone one whose mesh settles no front line (square
footprint, no single mirror plane), siblings turned opposite ways: undetermined, never a
guess.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fixtures import rooms
from island_tools.measure.forward_axis import detect_forward_axis, front_line_local
from island_tools.scene.doubt import hold_doubted_members, inferred_fronts
from island_tools.scene.propose import propose_units
from island_tools.scene.relation_graph import parse_relation_graph

BED = "assets:infinigen/bed_BedFactory_s2.glb"
LINED = "parametric:nightstand_s13"      # one mirror plane: the front line is settled
PLAIN = "parametric:nightstand_s25"      # featureless: no front line from the mesh
KEY = "forward_axis."


def _piece(key: str) -> rooms.Furniture:
    pool = rooms.catalog("tuned")
    return next(f for f in (*pool["nightstand"], *pool["bed"]) if f.key == key)


def _squared(f: rooms.Furniture) -> rooms.Furniture:
    """``f`` stretched to a square footprint (the same mesh, its x scaled)."""
    ext = np.ptp(f.vertices[:, :2], axis=0)
    v = f.vertices * np.array([ext[1] / ext[0], 1.0, 1.0])
    return rooms.Furniture(f.key + ":square", f.category, v, f.faces, f.front, f.scale)


def _bedroom(stands: list[tuple[rooms.Furniture, float]]) -> rooms.Room:
    """A bed against the south wall facing +y; one nightstand per (piece, turn in deg)
    beside its head end (right, then left), each turned about its centre."""
    bed = _piece(BED)
    room = rooms.Room((10.0, 10.0))
    wall, inward, tangent = np.array([0.0, -5.0]), np.array([0.0, 1.0]), np.array([1.0, 0.0])
    _, pose = rooms._against_wall(bed, wall, inward, 0.0, tangent)
    room.placed.append(rooms.Placed("Object_1", bed, pose, "bed", "bedroom", True))
    _, bed_w = bed.extents()
    for i, ((stand, turn), side) in enumerate(zip(stands, (1.0, -1.0))):
        # 0.32 m out from the wall and 0.30 m from the bed's side: room to turn it in place
        c = wall + inward * 0.35 + tangent * side * (bed_w / 2 + 0.32)
        room.placed.append(rooms.Placed(f"Object_{i + 2}", stand,
                                        stand.pose(c, inward, yaw_deg=turn), "nightstand",
                                        "bedroom"))
    return room


def _bed_group(room: rooms.Room) -> dict:
    doc = propose_units(rooms.room_units(room))
    return next(g for g in doc["groups"] if g["anchor"] == "Object_1"), doc


def _fronts(group: dict) -> dict[str, str]:
    inferred = group["proposal"]["evidence"]["target_spec_inferred"]
    return {k[len(KEY):]: v for k, v in inferred.items() if k.startswith(KEY)}


def _facing_deg(room: rooms.Room, name: str, local: list[float]) -> float:
    """How far ``local`` (the member's inferred front) points from the bed's front (+y)."""
    p = next(x for x in room.placed if x.name == name)
    w = p.pose[:2, :2] @ np.asarray(local, dtype=float)
    return math.degrees(math.acos(max(-1.0, min(1.0, float(w[1] / np.linalg.norm(w))))))


def _true_facing_deg(room: rooms.Room, name: str) -> float:
    p = next(x for x in room.placed if x.name == name)
    assert p.furniture.front is not None
    return _facing_deg(room, name, list(p.furniture.front))


# ------------------------------------------------------------------ the mesh's front line
def test_a_mirror_plane_settles_the_front_line_not_its_way() -> None:
    lined, plain = _piece(LINED), _piece(PLAIN)
    found = detect_forward_axis(lined.vertices * lined.scale, lined.faces)
    assert found.status == "undetermined"
    line = front_line_local(found)
    assert line is not None and abs(abs(float(np.dot(line, lined.front))) - 1.0) < 1e-6
    found = detect_forward_axis(plain.vertices * plain.scale, plain.faces)
    assert found.status == "undetermined" and front_line_local(found) is None


# ------------------------------------------------------------------ siblings
def test_two_nightstands_of_one_model_one_turned_take_the_front_of_the_one_in_order() -> None:
    stand = _piece(LINED)
    room = _bedroom([(stand, 0.0), (stand, 100.0)])
    group, doc = _bed_group(room)
    assert set(group["members"]) == {"Object_2", "Object_3"}
    fronts = _fronts(group)
    for name in ("Object_2", "Object_3"):
        assert "front from siblings in order" in fronts[name], fronts
        # the inferred front is the manifest's (the judge's), not a guess
        local = json.loads(fronts[name].split(":")[0])
        assert _facing_deg(room, name, local) == pytest.approx(_true_facing_deg(room, name),
                                                               abs=1.0)
    assert _true_facing_deg(room, "Object_3") == pytest.approx(100.0, abs=1.0)
    # the run reads it: the group's forward_axis, so facing is measured and repaired
    graph = hold_doubted_members(parse_relation_graph(doc, "relation_graph.json"))
    g = graph.group(group["id"])
    assert set(g.forward_axis) == {"Object_2", "Object_3"}
    assert inferred_fronts(g) == g.forward_axis


def test_siblings_turned_opposite_ways_leave_the_front_undetermined() -> None:
    stand = _piece(LINED)
    group, doc = _bed_group(_bedroom([(stand, 0.0), (stand, 180.0)]))
    fronts = _fronts(group)
    assert all(v.startswith("undetermined: the members of its model in order disagree")
               for v in fronts.values()) and len(fronts) == 2, fronts
    graph = hold_doubted_members(parse_relation_graph(doc, "relation_graph.json"))
    assert graph.group(group["id"]).forward_axis == {}


# ------------------------------------------------------------------ alone
def test_a_lone_square_nightstand_whose_mesh_settles_no_line_stays_undetermined() -> None:
    group, doc = _bed_group(_bedroom([(_squared(_piece(PLAIN)), 0.0)]))
    fronts = _fronts(group)
    assert fronts["Object_2"].startswith("undetermined: its mesh settles no front line"), fronts
    graph = hold_doubted_members(parse_relation_graph(doc, "relation_graph.json"))
    assert graph.group(group["id"]).forward_axis == {}


def test_a_lone_turned_nightstand_stays_undetermined_and_one_in_order_takes_the_convention(
        ) -> None:
    stand = _piece(LINED)
    group, _ = _bed_group(_bedroom([(stand, 102.0)]))   # generator 200's disorder
    assert _fronts(group)["Object_2"].startswith("undetermined: none of the 1 member"), group
    room = _bedroom([(stand, 0.0)])
    group, _ = _bed_group(room)
    line = _fronts(group)["Object_2"]
    assert "front from the anchor's convention" in line
    assert _facing_deg(room, "Object_2", json.loads(line.split(":")[0])) < 1.0


# ------------------------------------------------------------------ the run's reading
def test_the_run_reads_only_an_axis_and_a_person_s_front_wins() -> None:
    stand = _piece(LINED)
    group, doc = _bed_group(_bedroom([(stand, 0.0), (stand, 100.0)]))
    inferred = group["proposal"]["evidence"]["target_spec_inferred"]
    inferred[f"{KEY}Object_2"] = "edited: no axis here"
    group["forward_axis"] = {"Object_3": "+X"}
    graph = hold_doubted_members(parse_relation_graph(doc, "relation_graph.json"))
    assert graph.group(group["id"]).forward_axis == {"Object_3": "+X"}


@pytest.mark.bpy
def test_run_propose_repairs_the_turned_sibling(tmp_path: Path) -> None:
    from tests.room_judge import dump, judge_scene, scene_names
    from tests.test_propose_rooms import run_propose

    stand = _piece(LINED)
    room = _bedroom([(stand, 0.0), (stand, 100.0)])
    scene = rooms.build_room(room, tmp_path / "room")
    truth = json.loads((scene / rooms.TRUTH_FILE).read_text())
    names = scene_names(truth)
    before = dump(scene / "blend" / "stage3-sub-planned.blend", names)
    assert not judge_scene(truth, before)["groups"]["bedroom"]["pass"]
    run_propose(scene)
    judged = judge_scene(truth, dump(scene / "blend" / "stage3-scene.blend", names), before)
    assert judged["groups"]["bedroom"]["pass"], judged
    assert judged["in_wall"] == [] and judged["penetrations"] == [], judged


def test_a_lone_nightstand_turned_half_round_is_not_taken_for_one_in_order() -> None:
    # its front line lies along the bed's front, the wrong way: the convention alone would
    # settle it backwards; the mesh's weaker cue (the detector's best guess) opposes that
    group, doc = _bed_group(_bedroom([(_piece(LINED), 180.0)]))
    assert _fronts(group)["Object_2"].startswith("undetermined: what is in order turns"), group
    graph = hold_doubted_members(parse_relation_graph(doc, "relation_graph.json"))
    assert graph.group(group["id"]).forward_axis == {}
