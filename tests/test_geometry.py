"""geometry.json ground truth on synthetic numpy furniture with hand-computed answers."""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from _meshes import Mesh, box, merge, prism

from island_tools.errors import GeometryError
from island_tools.measure import frames
from island_tools.measure.forward_axis import forward_axes_document
from island_tools.measure.geometry import (
    GeometryContext,
    compute_geometry,
    convex_hull_2d,
    convex_signed_distance,
    front_is_lengthwise,
    parallel_facing_target,
)

HALF = 0.225            # chair footprint half size (0.45 m square)


def chair(s: float = 1.0) -> Mesh:
    """0.45 m chair (times ``s``): seat, legs, tall back on local +Y, so its front is -Y."""
    h = HALF * s
    legs = [box([x, y, 0.0], [x + 0.03 * s, y + 0.03 * s, 0.4 * s])
            for x in (-h, h - 0.03 * s) for y in (-h, h - 0.03 * s)]
    return merge(box([-h, -h, 0.4 * s], [h, h, 0.45 * s]),
                 box([-h, h - 0.05 * s, 0.45 * s], [h, h, 0.9 * s]), *legs)


def rect_table() -> Mesh:
    """2 m x 1 m table, top at 0.70-0.75 m: long axis x, long edges +-y."""
    legs = [box([x - 0.025, y - 0.025, 0.0], [x + 0.025, y + 0.025, 0.7])
            for x in (-0.95, 0.95) for y in (-0.45, 0.45)]
    return merge(box([-1.0, -0.5, 0.7], [1.0, 0.5, 0.75]), *legs)




def at(x: float, y: float, yaw: float, scale: float = 1.0) -> np.ndarray:
    return frames.translation([x, y, 0.0]) @ frames.rot_z(yaw) @ np.diag([scale] * 3 + [1.0])


def facing_pose(edge: str, t: float, gap: float) -> np.ndarray:
    """Chair on ``edge`` of rect_table at slot offset ``t``, ``gap`` m out, facing the table."""
    d = gap + HALF
    return {"+x": at(1.0 + d, t, -90.0), "-x": at(-1.0 - d, t, 90.0),
            "+y": at(t, 0.5 + d, 0.0), "-y": at(t, -0.5 - d, 180.0)}[edge]


def spec(pattern: str, count: int, facing: str = "toward_anchor", role: str = "long_table",
         clearance: float = 0.1) -> dict[str, Any]:
    return {"anchor_role": role, "member_count": count, "pattern": pattern, "facing": facing,
            "spacing": "even_along_each_edge", "clearance_m": clearance}


AXES_MINUS_Y = {"axis_local": [0.0, -1.0]}


def run(poses: dict[str, np.ndarray], target: dict[str, Any], anchor: Mesh | None = None,
        member_mesh: Mesh | None = None, axes: dict[str, Any] | None = None) -> dict[str, Any]:
    members = [n for n in poses if n != "table"]
    meshes = {"table": anchor or rect_table(), **{n: member_mesh or chair() for n in members}}
    fa = axes or {"members": {n: AXES_MINUS_Y for n in members}}
    doc = compute_geometry(meshes, poses, "table", target, fa, 1)
    json.dumps(doc, allow_nan=False)
    return doc


def table_2_2_1(**moves: np.ndarray) -> dict[str, np.ndarray]:
    poses = {"table": np.eye(4), "a": facing_pose("+y", -0.5, 0.1),
             "b": facing_pose("+y", 0.5, 0.1), "c": facing_pose("-y", -0.5, 0.1),
             "d": facing_pose("-y", 0.5, 0.1), "e": facing_pose("+x", 0.0, 0.1)}
    poses.update(moves)
    return poses


# ---------------------------------------------------------------- polygons

def test_hull_and_signed_distance() -> None:
    pts = np.random.default_rng(0).uniform(-1, 1, (500, 2))
    hull = convex_hull_2d(np.vstack([pts, [[-2, -2], [2, -2], [2, 2], [-2, 2]]]))
    assert np.allclose(hull, [[-2, -2], [2, -2], [2, 2], [-2, 2]])
    sq = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    assert convex_signed_distance(sq + [3.0, 4.0], sq)[0] == pytest.approx(math.hypot(2, 3))
    assert convex_signed_distance(sq + [1.0, 0.0], sq) == (0.0, None)
    depth, axis = convex_signed_distance(sq + [0.8, 0.1], sq)
    assert depth == pytest.approx(-0.2) and np.allclose(axis, [1.0, 0.0])
    # A cross overlap has no vertex inside the other polygon; the depth is still right.
    bar = np.array([[-1.0, 0.4], [2.0, 0.4], [2.0, 0.6], [-1.0, 0.6]])
    assert convex_signed_distance(bar, sq)[0] == pytest.approx(-0.6)


# ---------------------------------------------------------------- facing, clearance, edges

@pytest.mark.parametrize("turn, expected", [(0.0, 0.0), (180.0, 180.0), (90.0, 90.0),
                                            (-90.0, 90.0), (30.0, 30.0)])
def test_facing_error(turn: float, expected: float) -> None:
    poses = {n: frames.apply_member_delta(p, [0, 0, 0], turn, np.zeros(3)) if n != "table"
             else p for n, p in table_2_2_1().items()}
    doc = run(poses, spec("2+2+1", 5))
    for m in doc["members"].values():
        assert m["facing_error_deg"] == pytest.approx(expected, abs=1e-6)
        assert m["facing_note"] is None
    assert doc["group"]["facing_error_max_deg"] == pytest.approx(expected, abs=1e-6)
    assert doc["members"]["e"]["facing_target"] == [-1.0, 0.0]
    assert doc["members"]["a"]["facing_target"] == [0.0, -1.0]


def test_away_parallel_mixed_and_symmetric_facing() -> None:
    poses = table_2_2_1()
    away = run(poses, spec("2+2+1", 5, facing="away_from_anchor"))
    assert all(m["facing_error_deg"] == 180.0 for m in away["members"].values())
    par = run(poses, spec("2+2+1", 5, facing="parallel_to_anchor_long_axis"))
    assert par["members"]["a"]["facing_error_deg"] == pytest.approx(90.0)
    assert par["members"]["e"]["facing_error_deg"] == pytest.approx(0.0)
    assert par["members"]["e"]["facing_target"] == [-1.0, 0.0]
    mixed = run(poses, spec("2+2+1", 5, facing="mixed"))
    assert all(m["facing_error_deg"] is None and m["facing_note"] == "mixed: see free_note"
               for m in mixed["members"].values())
    assert mixed["group"]["facing_error_max_deg"] is None
    # symmetric without a measured order (an entry written before symmetry orders): facing
    # is not measured, and the note says so and how to fix it
    axes = {"members": {n: AXES_MINUS_Y for n in "abcd"}
            | {"e": {"axis_local": None, "status": "symmetric"}}}
    sym = run(poses, spec("2+2+1", 5), axes=axes)
    assert sym["members"]["e"]["facing_error_deg"] is None
    assert sym["members"]["e"]["forward_canonical"] is None
    assert sym["members"]["e"]["facing_symmetry_order"] is None
    assert sym["members"]["e"]["facing_note"].startswith("symmetry order not measured")
    assert "forward_axis.e " in sym["members"]["e"]["facing_note"]
    # a measured order: facing modulo 360 / order about the reference axis (e faces the
    # table along its local -Y; turned 90 degrees it is off by 90 for order 2, aligned for 4)
    turned = table_2_2_1(e=facing_pose("+x", 0.0, 0.1) @ frames.rot_z(90.0))
    for order, error in ((2, 90.0), (4, 0.0)):
        axes["members"]["e"] = {"axis_local": None, "status": "symmetric",
                                "symmetry": {"order": order, "confidence": 1.0,
                                             "reference_axis_local": [0.0, -1.0]}}
        e = run(turned, spec("2+2+1", 5), axes=axes)["members"]["e"]
        assert e["facing_error_deg"] == pytest.approx(error, abs=1e-6)
        assert (e["facing_symmetry_order"], e["facing_modulus_deg"]) == (order, 360.0 / order)
    assert run(poses, spec("2+2+1", 5))["members"]["a"]["facing_symmetry_order"] == 1
    # a front that could not be determined is not "symmetric": facing is not measured
    axes["members"]["e"] = {"axis_local": None, "method": "symmetric", "confidence": 0.3}
    unknown = run(poses, spec("2+2+1", 5), axes=axes)
    assert unknown["members"]["e"]["facing_error_deg"] is None
    assert unknown["members"]["e"]["facing_note"].startswith("front undetermined")


@pytest.mark.parametrize("gap", [0.3, 0.1, 0.0, -0.05, -0.3])
def test_clearance_sign_and_value(gap: float) -> None:
    doc = run({"table": np.eye(4), "a": facing_pose("-y", 0.0, gap)}, spec("row", 1))
    m = doc["members"]["a"]
    assert m["clearance_m"] == pytest.approx(gap, abs=1e-9)
    assert m["clearance_error_m"] == pytest.approx(gap - 0.1, abs=1e-9)
    assert doc["group"]["clearance_violations"] == (1 if gap < 0.07 else 0)


def test_clearance_at_a_corner_is_the_diagonal_gap() -> None:
    doc = run({"table": np.eye(4), "a": at(1.0 + 0.3 + HALF, 0.5 + 0.4 + HALF, 0.0)},
              spec("free", 1))
    assert doc["members"]["a"]["clearance_m"] == pytest.approx(0.5)


def test_edge_assignment_and_slots() -> None:
    doc = run(table_2_2_1(f=facing_pose("-x", 0.2, 0.1)), spec("2+2+1+1", 6))
    mem = doc["members"]
    assert {n: mem[n]["edge"] for n in mem} == {"a": "+y", "b": "+y", "c": "-y", "d": "-y",
                                                "e": "+x", "f": "-x"}
    assert [mem[n]["edge_role"] for n in "ace"] == ["long", "long", "short"]
    assert (mem["a"]["slot"], mem["b"]["slot"]) == (0, 1)
    assert mem["f"]["slot_offset_m"] == pytest.approx(0.2)
    assert doc["anchor"]["edges"]["+y"]["tangent"] == [1.0, 0.0]
    assert doc["anchor"]["long_axis"] == "x" and doc["anchor"]["half_extents_m"] == [1.0, 0.5]
    assert doc["group"]["edge_counts"] == {"+x": 1, "-x": 1, "+y": 2, "-y": 2}


def test_spacing_deviation_values() -> None:
    # +y edge: L = 2, k = 2, w_max = 0.45 -> S = max(2, 2 * 0.55) = 2, ideal t = -0.5, +0.5.
    # +x edge: L = 1, k = 3 -> S = 3 * 0.55 = 1.65, ideal t = -0.55, 0, +0.55.
    poses = {"table": np.eye(4), "a": facing_pose("+y", -0.5, 0.1),
             "b": facing_pose("+y", 0.7, 0.1), "c": facing_pose("+x", -0.5, 0.1),
             "d": facing_pose("+x", 0.05, 0.1), "e": facing_pose("+x", 0.55, 0.1)}
    doc = run(poses, spec("free", 5))
    mem, sp = doc["members"], doc["group"]["spacing"]
    assert mem["b"]["slot_target_m"] == pytest.approx(0.5)
    assert mem["b"]["slot_deviation_m"] == pytest.approx(0.2)
    assert [mem[n]["slot_target_m"] for n in "cde"] == pytest.approx([-0.55, 0.0, 0.55])
    assert mem["c"]["slot_deviation_m"] == pytest.approx(0.05)
    assert sp["per_edge_max_deviation_m"] == pytest.approx({"+y": 0.2, "+x": 0.05})
    assert sp["max_deviation_m"] == pytest.approx(0.2) and sp["ring_gap_cv"] is None


# ---------------------------------------------------------------- round anchors and rings

def ring_poses(angles_deg: list[float], radius: float = 0.6, gap: float = 0.1
               ) -> dict[str, np.ndarray]:
    poses = {"table": np.eye(4)}
    r = radius + gap + HALF
    for i, a in enumerate(angles_deg):
        rad = math.radians(a)
        # Local front -Y (heading -90 deg) must point at the centre (heading a + 180).
        poses[f"m{i}"] = at(r * math.cos(rad), r * math.sin(rad), a - 90.0)
    return poses


def test_ring_even_and_uneven() -> None:
    table = prism(0.6, 48)
    even = run(ring_poses([0, 90, 180, 270]), spec("ring", 4, role="round_table"), table)
    assert even["anchor"]["shape"] == "round"
    assert even["anchor"]["radius_m"] == pytest.approx(0.6)
    assert even["group"]["spacing"]["ring_gap_cv"] == pytest.approx(0.0, abs=1e-9)
    assert even["group"]["pattern"]["match"] is True
    for m in even["members"].values():
        assert m["edge"] == "ring" and m["facing_error_deg"] == pytest.approx(0.0, abs=1e-6)
        assert m["clearance_m"] == pytest.approx(0.1 + 0.6 * (1 - math.cos(math.pi / 48)),
                                                 abs=1e-6)
    uneven = run(ring_poses([0, 90, 180, 200]), spec("ring", 4, role="round_table"), table)
    # gaps 90, 90, 20, 160: mean 90, population std sqrt(2 * 70^2 / 4)
    assert uneven["group"]["spacing"]["ring_gap_cv"] == pytest.approx(
        math.sqrt(2 * 70.0 ** 2 / 4) / 90.0, abs=1e-6)
    assert sorted(uneven["group"]["spacing"]["ring_gaps_deg"]) == pytest.approx(
        [20.0, 90.0, 90.0, 160.0])
    one = run(ring_poses([30]), spec("ring", 1, role="round_table"), table)
    assert one["group"]["spacing"]["ring_gap_cv"] == 0.0


@pytest.mark.parametrize("anchor, role, pattern, shape", [
    (prism(0.6, 48), "table", "free", "round"),          # near-circular footprint
    (prism(0.6, 6), "table", "free", "round"),           # hexagon: aspect 1.155, CV 0.044
    (box([-0.5, -0.5, 0], [0.5, 0.5, 0.7]), "table", "free", "rect"),   # square: CV 0.10
    (box([-0.5, -0.5, 0], [0.5, 0.5, 0.7]), "round_table", "free", "round"),
    (rect_table(), "long_table", "ring", "round"),
])
def test_anchor_shape(anchor: Mesh, role: str, pattern: str, shape: str) -> None:
    doc = run({"table": np.eye(4), "a": at(0.0, -1.5, 180.0)}, spec(pattern, 1, role=role),
              anchor)
    assert doc["anchor"]["shape"] == shape
    assert doc["members"]["a"]["edge"] == ("ring" if shape == "round" else "-y")


# ---------------------------------------------------------------- penetration

def test_penetration_pushed_in_versus_tucked() -> None:
    # Tucked: seat under the top, back still outside the top's edge -> overlap, no contact.
    tucked = run({"table": np.eye(4), "a": at(0.0, -0.425, 180.0)}, spec("row", 1))
    assert tucked["members"]["a"]["clearance_m"] == pytest.approx(-0.3)
    assert tucked["members"]["a"]["penetrations"] == {}
    assert tucked["group"]["penetration_pairs"] == 0
    # Pushed 0.125 further: the back (y -0.525..-0.475) cuts 25 mm into the table top.
    pushed = run({"table": np.eye(4), "a": at(0.0, -0.3, 180.0)}, spec("row", 1))
    assert pushed["members"]["a"]["penetrations"]["table"] == pytest.approx(0.025, abs=0.001)
    assert pushed["group"]["penetration_pairs"] == 1


def test_member_member_penetration_and_gap() -> None:
    poses = {"table": np.eye(4), "a": facing_pose("-y", -0.3, 0.1),
             "b": facing_pose("-y", 0.0, 0.1), "c": facing_pose("-y", 0.8, 0.1)}
    doc = run(poses, spec("row", 3))
    mem = doc["members"]
    # a and b overlap by 0.15 m along x: moving a 0.15 m apart separates them.
    assert mem["a"]["penetrations"] == {"b": pytest.approx(0.15, abs=0.001)}
    assert mem["b"]["penetrations"] == {"a": pytest.approx(0.15, abs=0.001)}
    assert mem["c"]["penetrations"] == {}
    assert doc["group"]["penetration_pairs"] == 1


# ---------------------------------------------------------------- patterns

def test_pattern_2_2_1_match_and_mismatch() -> None:
    good = run(table_2_2_1(), spec("2+2+1", 5))["group"]
    assert good["pattern"]["match"] is True
    assert good["pattern"]["observed"] == {"long": [2, 2], "short": [1, 0]}
    assert good["member_count"] == {"observed": 5, "target": 5, "match": True}
    bad = run(table_2_2_1(d=facing_pose("-x", 0.0, 0.1)), spec("2+2+1", 5))["group"]
    assert bad["pattern"]["match"] is False
    assert bad["pattern"]["observed"] == {"long": [2, 1], "short": [1, 1]}
    six = run(table_2_2_1(f=facing_pose("-x", 0.0, 0.1)), spec("2+2+1+1", 5))["group"]
    assert six["pattern"]["match"] is True and six["member_count"]["match"] is False


def test_row_l_t_and_uncheckable_patterns() -> None:
    row = {"table": np.eye(4), "a": facing_pose("-y", -0.5, 0.1),
           "b": facing_pose("-y", 0.5, 0.1)}
    assert run(row, spec("row", 2))["group"]["pattern"]["match"] is True
    assert run(row, spec("L", 2))["group"]["pattern"]["match"] is False
    ell = dict(row, b=facing_pose("+x", 0.0, 0.1))
    assert run(ell, spec("L", 2))["group"]["pattern"]["match"] is True
    assert run(ell, spec("row", 2))["group"]["pattern"]["match"] is False
    opposite = dict(row, b=facing_pose("+y", 0.0, 0.1))
    assert run(opposite, spec("L", 2))["group"]["pattern"]["match"] is False
    centred = {"table": np.eye(4), "a": facing_pose("-y", 0.2, 0.1)}
    t_doc = run(centred, spec("T", 1))["group"]["pattern"]
    assert t_doc["match"] is True and t_doc["expected"]["max_abs_offset_m"] == 0.275
    assert run({"table": np.eye(4), "a": facing_pose("-y", 0.5, 0.1)},
               spec("T", 1))["group"]["pattern"]["match"] is False
    assert run({"table": np.eye(4), "a": facing_pose("+x", 0.0, 0.1)},
               spec("T", 1))["group"]["pattern"]["match"] is False
    free = run(row, spec("cluster", 2))["group"]["pattern"]
    assert free["match"] is None and free["note"] == "cluster: not checkable"


# ---------------------------------------------------------------- scale, caching, errors

def test_scaled_poses_match_unscaled() -> None:
    plain = run(table_2_2_1(), spec("2+2+1", 5))
    half_chair = chair(0.5)
    poses = {n: (p @ np.diag([2.0, 2.0, 2.0, 1.0]) if n != "table" else p)
             for n, p in table_2_2_1().items()}
    # The anchor too: a half-size table mesh scaled x2 by its canonical pose.
    tv, tf = rect_table()
    poses["table"] = np.diag([2.0, 2.0, 2.0, 1.0])
    scaled = run(poses, spec("2+2+1", 5), anchor=(tv / 2.0, tf), member_mesh=half_chair)
    assert scaled["members"] == plain["members"]
    assert scaled["group"] == plain["group"]
    pushed = run({"table": poses["table"], "a": at(0.0, -0.3, 180.0, 2.0)}, spec("row", 1),
                 anchor=(tv / 2.0, tf), member_mesh=half_chair)
    assert pushed["members"]["a"]["penetrations"]["table"] == pytest.approx(0.025, abs=0.001)


def test_a_repeated_state_gets_its_kept_document_as_a_fresh_compute_gives_it() -> None:
    """``compute_geometry`` keeps the last states' documents (a quiet iteration measures the
    state before it again): a repeat is the fresh document with its own ``iter``, a copy
    the caller may change, and any change of pose, spec, axes or mesh is measured anew."""
    meshes = {"table": rect_table(), **{n: chair() for n in "abcde"}}
    axes = forward_axes_document(meshes, "table", {})
    target = spec("2+2+1", 5)
    poses = table_2_2_1()
    first = compute_geometry(meshes, poses, "table", target, axes, 1)
    assert first == GeometryContext(meshes, "table", axes).compute(poses, target, 1)
    first["members"]["a"]["edge"] = "scribbled"
    again = compute_geometry(meshes, dict(poses), "table", target, axes, 4)
    assert again == GeometryContext(meshes, "table", axes).compute(poses, target, 4)
    assert again["iter"] == 4 and again["members"]["a"]["edge"] != "scribbled"
    moved = dict(poses, a=at(0.0, -0.3, 180.0))
    wider = dict(target, clearance_m=0.3)
    bigger = dict(meshes, e=(chair()[0] * 1.3, chair()[1]))
    turned = {"members": dict(axes["members"], b={"axis_local": [1.0, 0.0]})}
    for m, p, t, a in ((meshes, moved, target, axes), (meshes, poses, wider, axes),
                       (bigger, poses, target, axes), (meshes, poses, target, turned)):
        fresh = GeometryContext(m, "table", a).compute(p, t, 2)
        assert compute_geometry(m, p, "table", t, a, 2) == fresh != dict(again, iter=2)


def test_context_reuse_equals_fresh_compute() -> None:
    meshes = {"table": rect_table(), **{n: chair() for n in "abcde"}}
    axes = forward_axes_document(meshes, "table", {})
    target = spec("2+2+1", 5)
    first = table_2_2_1()
    second = table_2_2_1(a=at(0.0, -0.3, 180.0), e=facing_pose("+x", 0.3, 0.4),
                         c=frames.apply_member_delta(first["c"], [0.1, 0, 0], 37.0,
                                                     np.zeros(3)))
    ctx = GeometryContext(meshes, "table", axes)
    doc1 = ctx.compute(first, target, 1)
    doc2 = ctx.compute(second, target, 2)
    assert doc2 == compute_geometry(meshes, second, "table", target, axes, 2)
    assert ctx.compute(first, target, 1) == doc1
    assert doc2 != dict(doc1, iter=2)
    assert doc2["members"]["a"]["penetrations"] and not doc1["members"]["a"]["penetrations"]


def test_document_shape() -> None:
    doc = run(table_2_2_1(), spec("2+2+1", 5))
    assert doc["iter"] == 1 and doc["frame"] == "canonical"
    assert set(doc["anchor"]) >= {"id", "shape", "centre", "half_extents_m", "long_axis",
                                  "edges"}
    assert set(doc["target"]) == {"anchor_role", "member_count", "pattern", "facing", "spacing",
                                  "clearance_m"}
    assert set(doc["members"]["a"]) >= {
        "footprint_centre", "yaw_deg", "forward_canonical", "facing_target",
        "facing_error_deg", "facing_note", "clearance_m", "clearance_error_m", "penetrations",
        "edge", "edge_role", "slot", "slot_offset_m", "slot_target_m", "slot_deviation_m",
        "angle_deg"}
    assert set(doc["group"]) >= {
        "edge_counts", "pattern", "spacing", "facing_error_max_deg", "facing_error_mean_deg",
        "clearance_error_max_m", "clearance_violations", "penetration_pairs"}


def test_degenerate_input_names_the_object() -> None:
    meshes = {"table": rect_table(), "a": chair()}
    axes = {"members": {"a": AXES_MINUS_Y}}
    poses = {"table": np.eye(4), "a": facing_pose("-y", 0.0, 0.1)}
    target = spec("row", 1)
    with pytest.raises(GeometryError, match="'a' has no pose"):
        compute_geometry(meshes, {"table": np.eye(4)}, "table", target, axes, 0)
    with pytest.raises(GeometryError, match="'ghost', which has no mesh"):
        compute_geometry(meshes, dict(poses, ghost=np.eye(4)), "table", target, axes, 0)
    with pytest.raises(GeometryError, match="anchor 'nope' has no mesh"):
        compute_geometry(meshes, poses, "nope", target, axes, 0)
    with pytest.raises(GeometryError, match="'a' has no vertices"):
        compute_geometry(dict(meshes, a=(np.zeros((0, 3)), np.zeros((0, 3), int))), poses,
                         "table", target, axes, 0)
    with pytest.raises(GeometryError, match="members.a.axis_local"):
        compute_geometry(meshes, poses, "table", target, {"members": {}}, 0)
    with pytest.raises(GeometryError, match="pose of 'a'"):
        compute_geometry(meshes, dict(poses, a=np.full((4, 4), np.nan)), "table", target,
                         axes, 0)


def test_parallel_facing_follows_a_lengthwise_front_across_the_box_long_axis() -> None:
    """A bed wider than it is long (bed_BedFactory_s4: 2.22 m head to foot, 2.36 m across)
    has its box's long axis across its front; nightstands packed at its headboard
    (``align: back``) still face the bed's front, so geometry measures them against it."""
    long_y, front_x = np.array([0.0, 1.0]), np.array([1.0, 0.0])
    assert not front_is_lengthwise({"sides": 1, "align": "centre"})
    assert front_is_lengthwise({"sides": 1, "align": "back"})
    # front along the long axis: resolved against it either way
    np.testing.assert_allclose(parallel_facing_target(long_y, -long_y, long_y), -long_y)
    # front across it: the box axis (closer to the member's forward) unless lengthwise
    np.testing.assert_allclose(parallel_facing_target(long_y, front_x, -long_y), -long_y)
    np.testing.assert_allclose(parallel_facing_target(long_y, front_x, -long_y, True), front_x)
    np.testing.assert_allclose(parallel_facing_target(long_y, -front_x, None, True), -front_x)
    # no front known: the box axis nearer the member's forward
    np.testing.assert_allclose(parallel_facing_target(long_y, None, -long_y, True), -long_y)


def test_a_seat_watching_a_tv_faces_within_15_deg_of_its_screen_or_is_off_by_the_rest() -> None:
    """Square before the stand (inward +y) with the screen's centre 40 deg aside: only the
    15 deg of the arc nearest the screen passes; square itself is 25 deg off that arc."""
    from island_tools.measure.geometry import watch_facing

    def unit(deg: float) -> np.ndarray:
        return np.array([math.cos(math.radians(deg)), math.sin(math.radians(deg))])

    square, centre = unit(90.0), unit(130.0)   # the screen's centre 40 deg to the left
    assert watch_facing(unit(120.0), square, centre)[1] == pytest.approx(0.0, abs=1e-6)
    assert watch_facing(unit(130.0), square, centre)[1] == pytest.approx(0.0, abs=1e-6)
    target, err = watch_facing(square, square, centre)
    assert err == pytest.approx(25.0) and target @ unit(115.0) == pytest.approx(1.0)
    assert watch_facing(unit(140.0), square, centre)[1] == pytest.approx(10.0)
    # near the stand's axis the whole arc passes, square included
    assert watch_facing(unit(90.0), square, unit(100.0))[1] == pytest.approx(0.0, abs=1e-6)
