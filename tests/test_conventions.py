"""Furniture conventions and layouts, on real furniture of the corpus, no Blender.

Each case puts real meshes (the shared kit and the Infinigen corpus, loaded with trimesh) in
a bad arrangement, lets the built-in solver drive the loop against the real geometry
definitions, then judges the result with this file's own code: the true fronts come from
the assets' manifests, footprints are shapely hulls of the posed vertices, and the bed's
headboard end, the sofa's seats and the TV stand's centre are measured here, not taken from
``island_tools``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from _assets import ASSETS_DIR, load_blender_mesh, manifest_rows
from _meshes import solve
from shapely.geometry import MultiPoint

from island_tools.measure import frames
from island_tools.measure.forward_axis import forward_axes_document
from island_tools.measure.geometry import GeometryContext
from island_tools.measure.layout import LayoutError, convention, parse_layout, parse_note
from island_tools.scene.relation_graph import GroupSpec
from island_tools.scene.validate import apply_convention
from island_tools.schemas import parse_target_spec
from island_tools.solver import Solver

FRONTS = {r.file: r.front for r in manifest_rows()}


def _mesh(rel: str) -> tuple[np.ndarray, np.ndarray]:
    return load_blender_mesh(ASSETS_DIR / rel)


def _pose(x: float, y: float, yaw: float) -> np.ndarray:
    return frames.translation([x, y, 0.0]) @ frames.rot_z(yaw)


def refine(anchor: str, members: list[str], role: str, start: list[tuple[float, float, float]],
           anchor_mesh: tuple[np.ndarray, np.ndarray] | None = None,
           extra: dict | None = None) -> tuple[dict, dict, dict]:
    """The convention's spec (``extra`` on top), then the solver's loop until it converges
    (MIN_ITER on)."""
    meshes = {"anchor": anchor_mesh or _mesh(anchor),
              **{f"m{i}": _mesh(r) for i, r in enumerate(members)}}
    names = [f"m{i}" for i in range(len(members))]
    group = GroupSpec("g", "anchor", tuple(names), {"anchor_role": role})
    doc = apply_convention({"anchor_role": role, "member_count": len(names), "pattern": "row",
                            "facing": "toward_anchor", "spacing": "even_along_each_edge",
                            "clearance_m": 0.05}, group)
    spec = parse_target_spec({**doc, **(extra or {})}, "target_spec.json", len(names)).to_dict()
    axes = forward_axes_document(meshes, "anchor", {})
    context = GeometryContext(meshes, "anchor", axes)
    solver = Solver(meshes, "anchor", axes, spec)
    poses = {"anchor": np.eye(4), **{n: _pose(*p) for n, p in zip(names, start)}}
    geometry = solve(solver, context, meshes, poses, spec)
    world = {n: frames.transform_points(poses[n], meshes[n][0]) for n in meshes}
    return world, poses, {"spec": spec, "geometry": geometry}


def true_front(rel: str, pose: np.ndarray) -> np.ndarray:
    f = pose[:3, :3] @ np.array([*FRONTS[rel], 0.0])
    return f[:2] / np.linalg.norm(f[:2])


def angle(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.acos(float(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b),
                                                -1.0, 1.0))))


def footprint(points: np.ndarray):
    return MultiPoint([tuple(p) for p in points[:, :2]]).convex_hull


BED = "infinigen/bed_BedFactory_s1.glb"
NIGHTSTANDS = ["infinigen/nightstand_KitchenCabinetFactory_s1.glb",
               "infinigen/nightstand_KitchenCabinetFactory_s11.glb"]


# bed_BedFactory_s4 is wider (2.36 m) than it is long (2.22 m): its box's long axis runs
# across its front, and the nightstands once turned to it, 90 degrees off the bed's front
@pytest.mark.parametrize("bed", [BED, "infinigen/bed_BedFactory_s3.glb",
                                 "infinigen/bed_BedFactory_s4.glb"])
def test_bed_nightstands_beside_the_headboard_facing_the_bed_front(bed: str) -> None:
    world, poses, info = refine(bed, NIGHTSTANDS, "bed", [(0.3, 1.5, 90.0), (0.5, -1.6, -40.0)])
    assert info["spec"]["layout"]["sides"] == 1 and info["spec"]["layout"]["align"] == "back"
    bed_front = true_front(bed, poses["anchor"])
    # the headboard end: the bed's extreme along its (true) front, measured here
    head = float((world["anchor"][:, :2] @ bed_front).min())
    side_of = []
    for i, rel in enumerate(NIGHTSTANDS):
        pts = world[f"m{i}"][:, :2]
        assert angle(true_front(rel, poses[f"m{i}"]), bed_front) <= 5.0       # faces the foot
        assert abs(float((pts @ bed_front).min()) - head) <= 0.03               # back flush
        gap = footprint(world[f"m{i}"]).distance(footprint(world["anchor"]))
        assert 0.02 <= gap <= 0.15                                              # beside it
        lateral = np.array([-bed_front[1], bed_front[0]])
        side_of.append(np.sign(float(pts.mean(axis=0) @ lateral
                                     - world["anchor"][:, :2].mean(axis=0) @ lateral)))
    assert sorted(side_of) == [-1.0, 1.0]                                       # one per side
    assert info["geometry"]["group"]["pattern"]["match"] is True


def test_desk_chair_at_the_desk_front_facing_it() -> None:
    desk, chair = "caysonverse/desk.glb", "infinigen/office_chair_OfficeChairFactory_s1.glb"
    world, poses, info = refine(desk, [chair], "desk", [(0.3, 0.9, 30.0)])
    desk_front = true_front(desk, poses["anchor"])
    centre = footprint(world["m0"]).centroid
    desk_centre = footprint(world["anchor"]).centroid
    offset = np.array([centre.x - desk_centre.x, centre.y - desk_centre.y])
    assert angle(offset, desk_front) <= 20.0            # on the front (kneehole) side
    assert angle(true_front(chair, poses["m0"]), -desk_front) <= 5.0
    assert info["geometry"]["members"]["m0"]["anchor_side"] == "front"


def _backrest_centre(points: np.ndarray, along: np.ndarray) -> float:
    """Where the seats are along the sofa: the mid-range of the points above 85 % height
    (this test's own estimate, not island_tools' 75 % bounding box)."""
    z = points[:, 2]
    top = points[z >= z.min() + 0.85 * np.ptp(z), :2] @ along
    return float((top.min() + top.max()) / 2.0)


def _corner_sofa() -> tuple[np.ndarray, np.ndarray]:
    """The kit's lounge sofa with a low corner seat joined to its right end (an L): the
    footprint's box moves a tenth of the sofa's length sideways, the backrest (the seats'
    line) does not."""
    v, f = _mesh("kenney-cco/loungeSofa.glb")
    lo, hi = v.min(axis=0), v.max(axis=0)
    seat = lo[2] + 0.35 * (hi[2] - lo[2])
    x0, x1, y0, y1 = hi[0], hi[0] + 0.2 * (hi[0] - lo[0]), lo[1], hi[1]
    box = np.array([[x, y, z] for x in (x0, x1) for y in (y0, y1) for z in (lo[2], seat)])
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return np.vstack([v, box]), np.vstack([f, faces + len(v)])


def test_corner_sofa_coffee_table_centred_on_the_seats_not_the_box() -> None:
    sofa = "kenney-cco/loungeSofa.glb"    # front -Y; the corner seat keeps it
    table = "kenney-cco/tableCoffee.glb"
    mesh = _corner_sofa()
    world, poses, _ = refine(sofa, [table], "sofa", [(1.5, -2.5, 20.0)], anchor_mesh=mesh)
    front = true_front(sofa, poses["anchor"])
    along = np.array([-front[1], front[0]])
    seats = _backrest_centre(world["anchor"], along)
    box = world["anchor"][:, :2] @ along
    table_centre = float(np.asarray(footprint(world["m0"]).centroid.coords[0]) @ along)
    assert abs((box.min() + box.max()) / 2.0 - seats) > 0.1    # the corner moves the box
    assert abs(table_centre - seats) <= 0.03                   # the table follows the seats
    offset = world["m0"][:, :2].mean(axis=0) - world["anchor"][:, :2].mean(axis=0)
    assert float(offset @ front) > 0.0                          # in front of the sofa


def test_seats_before_a_tv_stand_face_its_screen_centred_by_their_seats() -> None:
    stand = "infinigen/tv_stand_TVStandFactory_s1.glb"
    chairs = ["infinigen/armchair_ArmChairFactory_s2.glb",
              "infinigen/armchair_ArmChairFactory_s4.glb"]
    world, poses, _ = refine(stand, chairs, "tv_stand", [(2.5, 1.0, 0.0), (2.0, -1.5, 50.0)])
    front = true_front(stand, poses["anchor"])
    along = np.array([-front[1], front[0]])
    stand_box = world["anchor"][:, :2] @ along
    stand_mid = (stand_box.min() + stand_box.max()) / 2.0
    seats = [_backrest_centre(world[f"m{i}"], along) for i in range(2)]
    assert abs((seats[0] + seats[1]) / 2.0 - stand_mid) <= 0.03    # the pair centred on it
    def centre(pts: np.ndarray) -> np.ndarray:
        return (pts[:, :2].min(axis=0) + pts[:, :2].max(axis=0)) / 2.0

    for i, rel in enumerate(chairs):
        # square to the stand, or turned toward its centre (not past it), within 25 deg of
        # the screen's centre: the armchairs stand far enough aside that square would not be
        f, to_screen = true_front(rel, poses[f"m{i}"]), centre(world["anchor"]) - centre(
            world[f"m{i}"])
        assert angle(f, to_screen) <= 25.0
        assert angle(f, -front) <= angle(to_screen, -front) + 1.0
        offset = world[f"m{i}"][:, :2].mean(axis=0) - world["anchor"][:, :2].mean(axis=0)
        assert float(offset @ front) > 0.0                           # before its front
    assert footprint(world["m0"]).distance(footprint(world["m1"])) > 0.0


def _facing_yaw(rel: str, at: tuple[float, float], toward: np.ndarray, off_deg: float) -> float:
    """The yaw (deg) that turns ``rel``'s true front from ``at`` toward ``toward``, plus
    ``off_deg``."""
    f = FRONTS[rel]
    d = toward - np.asarray(at)
    return math.degrees(math.atan2(d[1], d[0]) - math.atan2(f[1], f[0])) + off_deg


@pytest.mark.parametrize("spacing", ["loose", "even_along_each_edge"])
def test_a_tv_seat_in_order_further_back_stays_when_the_spacing_is_loose(spacing: str) -> None:
    """Before a TV stand, one armchair turned 160 deg away at 1.0 m, the other facing the
    screen 1.1 m further back: the turned one is turned to the screen where it stands; with
    ``loose`` spacing the one in order does not move (a viewing distance is each seat's
    own), with even spacing it is moved toward its slot."""
    stand = "infinigen/tv_stand_TVStandFactory_s1.glb"
    chairs = ["infinigen/armchair_ArmChairFactory_s2.glb",
              "infinigen/armchair_ArmChairFactory_s4.glb"]
    screen = (_mesh(stand)[0][:, :2].min(axis=0) + _mesh(stand)[0][:, :2].max(axis=0)) / 2
    at = [(1.9, 0.8), (3.0, -0.8)]
    start = [(*at[0], _facing_yaw(chairs[0], at[0], screen, 160.0)),
             (*at[1], _facing_yaw(chairs[1], at[1], screen, 0.0))]
    world, poses, out = refine(stand, chairs, "tv_stand", start,
                               extra={"clearance_m": 1.0, "spacing": spacing})

    def centre(i: int, pose: np.ndarray) -> np.ndarray:
        v = frames.transform_points(pose, _mesh(chairs[i])[0])[:, :2]
        return (v.min(axis=0) + v.max(axis=0)) / 2

    for i, rel in enumerate(chairs):
        assert angle(true_front(rel, poses[f"m{i}"]), screen - centre(i, poses[f"m{i}"])) <= 25
        assert footprint(world[f"m{i}"]).distance(footprint(world["anchor"])) >= 1.0 - 0.03
    assert footprint(world["m0"]).distance(footprint(world["m1"])) > 0.0
    moved = [float(np.linalg.norm(centre(i, poses[f"m{i}"]) - centre(i, _pose(*start[i]))))
             for i in range(2)]
    if spacing == "loose":
        assert moved[1] <= 0.011 and moved[0] < 0.3, moved
    else:
        assert moved[1] > 0.05, moved


# ---------------------------------------------------------------- layouts and notes

def test_layout_forms_and_their_errors() -> None:
    assert parse_layout({"sides": 1, "align": "back"}, 2)["align"] == "back"
    assert parse_layout({"long": 2, "short": 1}, 6)["centre_on"] == "footprint"
    assert parse_layout({"+x": 1, "-y": 2}, 3) == {"+x": 1, "-y": 2, "align": "centre",
                                                   "centre_on": "footprint"}
    for bad, needle in [({}, "non-empty"), ({"front": 1, "+x": 1}, "one family"),
                        ({"left": 1}, "unknown key"), ({"front": -1}, ">= 0"),
                        ({"front": 1, "align": "up"}, "align"), ({"sides": 1}, "places 2")]:
        with pytest.raises(LayoutError, match=needle):
            parse_layout(bad, 1)


@pytest.mark.parametrize("note, k, expected", [
    ("2 chairs on -y, 1 at the +x end", 3, {"-y": 2, "+x": 1}),
    ("one nightstand on each side of the bed at the headboard", 2, {"sides": 1,
                                                                   "align": "back"}),
    ("two chairs on each long side and one on each short end", 6, {"long": 2, "short": 1}),
    ("two armchairs in front of the sofa", 2, {"front": 2}),
    ("one stool at the foot on each side", 2, {"sides": 1, "align": "front"}),
])
def test_free_note_prose_becomes_a_layout(note: str, k: int, expected: dict) -> None:
    layout = parse_note(note, k)
    assert layout is not None and {key: layout[key] for key in expected} == expected


@pytest.mark.parametrize("note, k", [("a loose cluster by the window", 3),
                                     ("2 chairs on -y, 2 on +y", 5),
                                     ("chairs wherever they fit", 4)])
def test_prose_that_is_not_understood_is_no_layout(note: str, k: int) -> None:
    assert parse_note(note, k) is None


def test_conventions_follow_the_anchor_role_and_give_way_to_hints() -> None:
    assert convention("bed", 2)[0] == {"sides": 1, "align": "back", "centre_on": "footprint"}
    assert convention("double_bed", 3) is None          # the convention is for a pair
    assert convention("tv_stand", 3)[0]["front"] == 3
    assert convention("long_table", 6) is None
    hinted = GroupSpec("g", "b", ("n1", "n2"), {"anchor_role": "bed", "pattern": "row"})
    doc = {"anchor_role": "bed", "pattern": "row", "member_count": 2}
    assert apply_convention(doc, hinted) == doc          # the graph's pattern wins
