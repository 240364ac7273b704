"""Roles of what a room holds, read right or called undetermined (issue 32, deliverables 3
and 6): the room shell whatever its form (a whole house as one mesh with door and window
holes, a box per wall, an L-shaped wall piece, floors, ceilings, doors, windows) and props
are context, never members nor doubts; riders (a frame on a nightstand, a TV on its stand)
are part of the unit they rest on; an L-shaped sectional, a low coffee table (not a TV
stand), a low round table with two chairs, a 1.0 m table; a swivel chair whose five-spoke
base stands at an angle to its seat gets its front from the seat and back, or none.

Pure (no Blender). Every piece is built by the test (``fixtures.parametric``) with known
truth, or taken from the tuned split of the front corpus; judged by names and the pieces'
own construction, never through the proposer's geometry.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fixtures import parametric as par
from fixtures import rooms
from island_tools.measure import frames
from island_tools.measure.forward_axis import detect_forward_axis
from island_tools.measure.riders import find_riders
from island_tools.scene.furniture import (
    CONTEXT_ROLES,
    UnitInput,
    classify,
    measure_unit,
)
from island_tools.scene.propose import propose_units
from island_tools.scene.relation_graph import parse_relation_graph
from island_tools.scene.scene_units import attach_riders


def unit(name: str, mesh: tuple[np.ndarray, np.ndarray], xy=(0.0, 0.0), yaw: float = 0.0,
         z: float = 0.0, scale: float = 1.0) -> UnitInput:
    """A unit at a pose: the mesh's footprint centre at ``xy``, turned ``yaw`` deg, its
    base at ``z`` (the mesh's own base height kept), scaled uniformly by ``scale``."""
    v, f = mesh
    lo, hi = v.min(axis=0), v.max(axis=0)
    centre = np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 0.0])
    world = (frames.translation((xy[0], xy[1], z)) @ frames.rot_z(yaw)
             @ np.diag([scale, scale, scale, 1.0]) @ frames.translation(tuple(-centre)))
    return UnitInput(name, world, np.asarray(v, float), np.asarray(f, np.int64))


def role_of(u: UnitInput, floor_z: float = 0.0) -> tuple[str | None, bool]:
    r = classify(measure_unit(u), "", floor_z)
    return r.role, r.settled


def generated(category: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    p = par.generate(category, seed)
    return np.asarray(p.vertices), np.asarray(p.faces)


# --------------------------------------------------------------------------- the room shell
@pytest.mark.parametrize("yaw", [0.0, 33.0])
def test_the_room_shell_whatever_its_form_is_context(yaw: float) -> None:
    shell = {"house": par.house_shell(), "small_house": par.house_shell(9.0, 6.0, 2.4, 0.15, 2),
             "l_wall": par.l_wall(), "wall_box": par.box(0, 4.0, 0, 0.12, 0, 2.6),
             "short_wall": par.box(0, 1.6, 0, 0.2, 0, 2.5)}
    for name, mesh in shell.items():
        assert role_of(unit(name, mesh, yaw=yaw))[0] == "wall", name
    assert role_of(unit("door", par.door(), yaw=yaw))[0] == "door"
    assert role_of(unit("door_wide", par.door(1.0, 2.1, 0.05, 0.2), yaw=yaw))[0] == "door"
    win = unit("window", par.window(), yaw=yaw)
    assert role_of(win)[0] == "window"
    assert role_of(unit("window_low", par.window(0.8, 0.6, 1.2, 0.2), yaw=yaw))[0] == "window"
    # a ceiling: a flat thing high up (with the floor elsewhere, given)
    assert role_of(unit("ceiling", par.ceiling(), yaw=yaw, z=2.5))[0] == "ceiling"
    assert role_of(unit("ceiling_off", par.ceiling(), yaw=yaw, z=3.1), floor_z=0.6)[0] \
        == "ceiling"
    assert role_of(unit("floor", par.box(-3, 3, -2, 2, -0.02, 0), yaw=yaw))[0] == "flat"
    assert role_of(unit("rug", par.box(-1, 1, -0.7, 0.7, 0, 0.01), yaw=yaw))[0] == "flat"
    assert set(CONTEXT_ROLES) == {"wall", "flat", "door", "window", "ceiling", "prop"}


def test_props_smaller_than_any_member_role_are_context() -> None:
    for name, mesh in {"book": par.book(), "vase": par.vase(), "lamp": par.table_lamp(),
                       "frame": par.photo_frame(), "tv": par.television(),
                       "tv_big": par.television(1.6, 0.95, 0.3)}.items():
        assert role_of(unit(name, mesh, yaw=21.0))[0] == "prop", name
    # a stool is no prop: its footprint is a member's
    assert role_of(unit("stool", generated("stool_round", 1), yaw=10.0))[0] == "stool"


def _house(with_door_in_hole: bool = True) -> dict[str, UnitInput]:
    """A whole house (one wall mesh, 19 x 11 m) with a dining table and four chairs in its
    west room, a door standing in the west room's door hole, a window in a window hole,
    a floor and props about."""
    units = {"Object_0": unit("Object_0", par.house_shell()),
             "Object_1": unit("Object_1", par.box(-9.5, 9.5, -5.5, 5.5, -0.02, 0.0))}
    table = generated("table_rect", 3)
    chair = generated("dining_chair", 3)
    tx, ty = -6.5, 3.2
    units["Object_2"] = unit("Object_2", table, (tx, ty))
    half_y = float(np.ptp(table[0][:, 1])) / 2
    depth = float(np.ptp(chair[0][:, 1]))
    for i, (x, side) in enumerate(((-0.35, 1), (0.35, 1), (-0.35, -1), (0.35, -1))):
        # the chair faces -Y before posing: turned to face the table
        units[f"Object_{3 + i}"] = unit(f"Object_{3 + i}", chair,
                                        (tx + x, ty + side * (half_y + 0.12 + depth / 2)),
                                        yaw=0.0 if side > 0 else 180.0)
    if with_door_in_hole:   # the west room's door hole is at y in [-0.45, 0.45], x = -9.4
        units["Object_7"] = unit("Object_7", par.door(0.86, 2.05, 0.04, 0.18), (-9.4, 0.0),
                                 yaw=90.0)
    units["Object_8"] = unit("Object_8", par.window(1.1, 1.1, 0.0, 0.1), (-6.33, 5.4), z=0.95)
    units["Object_9"] = unit("Object_9", par.vase(), (-8.8, -4.8))
    return units


def test_a_whole_house_mesh_never_makes_a_group_uncertain() -> None:
    doc = propose_units(_house())
    parse_relation_graph(doc, "relation_graph.json")
    (g,) = doc["groups"]
    assert g["anchor"] == "Object_2"
    assert sorted(g["members"]) == ["Object_3", "Object_4", "Object_5", "Object_6"]
    assert g["proposal"]["status"] == "confident", g["proposal"]["reasons"]
    left = {u["name"]: u for u in doc["proposed"]["unassigned"]}
    assert left["Object_0"]["role"] == "wall" and "shell" in left["Object_0"]["reason"]
    assert left["Object_1"]["role"] == "flat"
    assert left["Object_7"]["role"] == "door"
    assert left["Object_8"]["role"] == "window"
    assert left["Object_9"]["role"] == "prop"
    for reason in g["proposal"]["reasons"]:
        assert "Object_0" not in reason and "Object_7" not in reason


def test_a_wall_box_per_wall_and_a_ceiling_are_context_in_a_proposal() -> None:
    room = rooms.Room((6.0, 5.0))
    units = rooms.room_units(room)       # a floor and four wall boxes
    table, chair = generated("table_square", 3), generated("dining_chair", 4)
    units["Object_1"] = unit("Object_1", table, (0.0, 0.0))
    half_y = float(np.ptp(table[0][:, 1])) / 2
    units["Object_2"] = unit("Object_2", chair,
                             (0.0, half_y + 0.1 + float(np.ptp(chair[0][:, 1])) / 2))
    units["Object_3"] = unit("Object_3", par.ceiling(6.0, 5.0, 2.6), z=2.6)
    doc = propose_units(units)
    (g,) = doc["groups"]
    assert g["members"] == ["Object_2"] and g["proposal"]["status"] == "confident"
    roles = {u["name"]: u["role"] for u in doc["proposed"]["unassigned"]}
    assert roles["Object_3"] == "ceiling"
    assert [roles[f"Cube.00{i}"] for i in range(1, 5)] == ["wall"] * 4


# --------------------------------------------------------------------------- pieces
def test_an_l_shaped_sectional_is_a_sofa_with_its_front_on_the_concave_side_or_none() -> None:
    from island_tools.scene.members import detect_front

    for seed, (long, short) in enumerate(((2.8, 1.9), (3.3, 2.4), (2.6, 2.6))):
        u = unit("Object_1", par.l_sofa(long, short, seed=seed), yaw=17.0 * seed)
        s = measure_unit(u)
        r = classify(s)
        assert r.role == "sofa", (long, short, r)
        front = detect_front(s, r.role, [])
        if front.world is None:
            continue   # undetermined: said so, never a guess
        # the concave side: the backs stand at +Y and -X (local), the seats open to +X/-Y
        a = math.radians(17.0 * seed)
        rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
        inward = rot @ np.array([1.0, -1.0]) / math.sqrt(2)
        assert float(front.world @ inward) > 0.3, (long, short, front)


@pytest.mark.parametrize("height", [0.30, 0.32, 0.38, 0.45])
def test_a_low_open_coffee_table_is_no_tv_stand(height: float) -> None:
    for length, width, legs in ((1.1, 0.6, True), (1.3, 0.55, True), (1.2, 0.7, False),
                                (0.9, 0.9, True)):
        got = role_of(unit("t", par.low_coffee_table(length, width, height, legs), yaw=40.0))
        assert got == ("coffee_table", True), (length, width, height, legs, got)
    for seed in range(5):   # closed, long cabinets stay TV stands
        assert role_of(unit("s", generated("tv_cabinet", seed)))[0] == "tv_stand"


def test_a_low_round_table_with_two_chairs_is_a_round_table_group() -> None:
    assert role_of(unit("t", par.round_table(0.25, 0.45)))[0] == "coffee_table"
    for h in (0.62, 0.72, 0.78):
        s = measure_unit(unit("t", par.round_table(0.25, h)))
        assert classify(s).role == "table" and s.round, h
    chair = generated("dining_chair", 5)
    depth = float(np.ptp(chair[0][:, 1]))
    units = {"Object_1": unit("Object_1", par.round_table(0.25, 0.72), (1.0, 1.0)),
             "Object_2": unit("Object_2", chair, (1.0, 1.0 + 0.25 + 0.12 + depth / 2)),
             "Object_3": unit("Object_3", chair, (1.0, 1.0 - 0.25 - 0.12 - depth / 2),
                              yaw=180.0)}
    doc = propose_units(units)
    (g,) = doc["groups"]
    assert g["anchor"] == "Object_1" and g["members"] == ["Object_2", "Object_3"]
    assert g["relation"]["anchor_role"] == "round_table"


def test_a_bar_table_is_a_table() -> None:
    for h in (0.95, 1.0, 1.05):
        assert role_of(unit("t", par.bar_table(1.2, 0.6, h), yaw=12.0)) == ("table", True)


def test_a_high_swivel_chair_is_a_chair_and_a_high_case_with_a_back_is_not() -> None:
    """A drafting chair (seat 0.8 m up on a five-spoke base, a back above it) is a seat; a
    small closed case of the same height with a raised back panel is none."""
    v, f = par.swivel_chair(star_deg=20.0, seed=2)
    lift = np.where(v[:, 2] > 0.15, 0.34, 0.0)     # the column 0.34 m longer
    high = (v + np.column_stack([np.zeros((len(v), 2)), lift]), f)
    s = measure_unit(unit("c", high, yaw=33.0))
    assert s.surface_m is not None and 0.75 < s.surface_m < 0.86
    assert classify(s).role == "chair"
    m = par._Mesh()
    m.box(-0.25, 0.25, -0.22, 0.22, 0.0, 0.82)        # the case
    m.box(-0.25, 0.25, 0.19, 0.22, 0.82, 1.15)        # its raised back
    assert role_of(unit("k", m.mesh(), yaw=33.0))[0] != "chair"


# --------------------------------------------------------------------------- riders
def _bedroom() -> dict[str, UnitInput]:
    bed = generated("bed", 3)
    stand = generated("nightstand", 3)
    bw = float(np.ptp(bed[0][:, 0]))
    sw, sd = float(np.ptp(stand[0][:, 0])), float(np.ptp(stand[0][:, 1]))
    bd = float(np.ptp(bed[0][:, 1]))
    sx, sy = bw / 2 + 0.08 + sw / 2, bd / 2 - sd / 2
    top = float(stand[0][:, 2].max())
    return {"Object_1": unit("Object_1", bed, (0.0, 0.0)),
            "Object_2": unit("Object_2", stand, (sx, sy)),
            "Object_3": unit("Object_3", par.photo_frame(), (sx, sy), yaw=8.0, z=top),
            "Object_4": unit("Object_4", par.table_lamp(), (-sx, sy), z=0.0)}   # on the floor


def test_a_frame_on_a_nightstand_rides_on_it() -> None:
    units = _bedroom()
    bodies = {n: ((u.vertices @ u.world[:3, :3].T + u.world[:3, 3]), u.faces)
              for n, u in units.items()}
    assert find_riders(bodies) == {"Object_3": "Object_2"}
    merged, left = attach_riders(units)
    assert "Object_3" not in merged and merged["Object_2"].riders == ("Object_3",)
    assert len(merged["Object_2"].faces) == len(units["Object_2"].faces) + len(
        units["Object_3"].faces)
    assert left == [{"name": "Object_3", "role": "prop",
                     "reason": "rides on 'Object_2': part of that unit, it moves with it"}]
    assert classify(measure_unit(merged["Object_2"])).role == "nightstand"
    doc = propose_units(merged)
    (g,) = doc["groups"]
    assert g["anchor"] == "Object_1" and g["members"] == ["Object_2"]


def test_a_tv_on_its_stand_rides_on_it_and_the_stand_stays_a_tv_stand() -> None:
    stand = generated("tv_cabinet", 2)
    top = float(stand[0][:, 2].max())
    units = {"Object_1": unit("Object_1", stand, (0.0, 0.0), yaw=30.0),
             "Object_2": unit("Object_2", par.television(1.0, 0.6, 0.22), (0.0, 0.0),
                              yaw=30.0, z=top),
             "Object_3": unit("Object_3", par.book(), (0.0, 0.0), yaw=30.0, z=0.0)}
    units["Object_3"] = unit("Object_3", par.book(), (0.55 * math.cos(math.radians(30)),
                                                      0.55 * math.sin(math.radians(30))),
                             yaw=30.0, z=top)
    merged, left = attach_riders(units)
    assert merged["Object_1"].riders == ("Object_2", "Object_3")
    assert {u["name"]: u["role"] for u in left} == {"Object_2": "prop", "Object_3": "prop"}
    s = measure_unit(merged["Object_1"])
    assert classify(s).role == "tv_stand"
    # alone, a TV is a prop too, never a nightstand
    assert role_of(units["Object_2"], floor_z=top)[0] == "prop"


def test_what_stands_on_the_floor_or_beside_a_unit_rides_on_nothing() -> None:
    units = _bedroom()
    table = generated("table_rect", 2)
    chair = generated("dining_chair", 2)
    units["Object_5"] = unit("Object_5", table, (4.0, 0.0))
    units["Object_6"] = unit("Object_6", chair, (4.0, 0.1))        # tucked under the table
    units["Object_7"] = unit("Object_7", par.box(-2, 2, -2, 2, -0.02, 0.0))  # the floor
    units["Object_8"] = unit("Object_8", par.vase(), (2.2, 2.5), z=0.4)   # on nothing below
    bodies = {n: ((u.vertices @ u.world[:3, :3].T + u.world[:3, 3]), u.faces)
              for n, u in units.items()}
    assert find_riders(bodies) == {"Object_3": "Object_2"}
    assert find_riders(bodies, fixed={"Object_3"}) == {}


def test_a_lamp_on_a_book_on_a_desk_rides_on_the_desk() -> None:
    desk = generated("desk", 4)
    top = float(desk[0][:, 2].max())
    units = {"Object_1": unit("Object_1", desk, (0.0, 0.0)),
             "Object_2": unit("Object_2", par.book(), (0.3, 0.0), z=top),
             "Object_3": unit("Object_3", par.table_lamp(0.06), (0.3, 0.0), z=top + 0.03)}
    merged, left = attach_riders(units)
    assert merged["Object_1"].riders == ("Object_2", "Object_3")
    assert sorted(u["reason"] for u in left) == [
        "rides on 'Object_1': part of that unit, it moves with it"] * 2


# --------------------------------------------------------------------------- swivel chair
def _err(axis: tuple[float, float] | None, yaw: float) -> float | None:
    if axis is None:
        return None
    truth = np.array([math.sin(math.radians(yaw)), -math.cos(math.radians(yaw))])
    return math.degrees(math.acos(max(-1.0, min(1.0, float(np.dot(axis, truth))))))


@pytest.mark.parametrize("seed", range(4))
def test_a_swivel_chair_front_comes_from_its_seat_and_back_or_none(seed: int) -> None:
    """High-poly swivel chairs whose five-spoke base stands at any angle to the seat,
    posed at any yaw: the front is the seat's (within 5 deg), or undetermined - never a
    confident front off by more."""
    rng = np.random.default_rng(seed)
    for k in range(6):
        star = float(rng.uniform(0.0, 72.0))
        yaw = float(rng.uniform(0.0, 360.0))
        v, f = par.swivel_chair(star_deg=star, seed=seed, arms=bool(k % 2),
                                lever=bool(k % 3 == 0), roundness=float(rng.uniform(0.3, 1.0)),
                                curve_r=float(rng.uniform(0.35, 0.8)))
        r = detect_forward_axis(par._yawed(v, yaw), f)
        err = _err(r.axis_local, yaw)
        assert err is None or err <= 5.0, (star, yaw, r.status, err, r.confidence)


# --------------------------------------------------------------------------- in the island
def _house_case(dy: float):
    """A long table's end chair pushed through the west wall of a whole-house mesh (one
    mesh, door and window holes): the wall's inner face 0.2 m from the table's end, the
    chair squeezed to straddle it; ``dy`` shifts the house along the wall (0: the chair
    stands in the wall's door hole)."""
    from fixtures import specs
    from island_tools.measure.forward_axis import forward_axes_document

    arr = specs.arrange("long_table_5", "turned_90")
    target = arr.target_spec()
    props = specs.member_props("long_table_5")
    axes = forward_axes_document(arr.meshes, arr.anchor, {
        n: p["forward_axis"] for n, p in props.items() if "forward_axis" in p})
    table = frames.transform_points(arr.canonical[arr.anchor], arr.meshes[arr.anchor][0])
    face = float(table[:, 0].min()) - 0.2
    v, f = par.house_shell()
    # the west wall's inner face (x = -9.3 in the shell's frame) at ``face``
    house = (v + np.array([face + 9.3, dy, 0.0]), f)
    poses = dict(arr.canonical)
    c = poses["chair_5"]
    poses["chair_5"] = frames.translation([face + 0.05 - c[0, 3], -c[1, 3], 0.0]) @ c
    return arr, target, axes, {"house": house}, poses


def test_a_member_pushed_through_a_whole_house_wall_fails_the_review() -> None:
    """The island's obstacles are the shell's triangles, not its hull: the whole house (its
    19 x 11 m box holds the group) is a wall where it has one."""
    from island_tools.measure.geometry import GeometryContext
    from island_tools.scene import verify

    arr, target, axes, context, poses = _house_case(dy=3.0)
    geometry = GeometryContext(arr.meshes, arr.anchor, axes, context).compute(poses, target, 0)
    chair = geometry["members"]["chair_5"]
    assert chair["obstacle_penetrations"]["house"] > 0.05
    # the others stand inside the house, clear of its walls
    assert [m for m, g in geometry["members"].items()
            if g.get("obstacle_penetrations")] == ["chair_5"]
    review = verify.review_group("g", geometry, target, axes, arr.members)
    item = {i["id"]: i for i in review["review_results"]}["object_chair_5"]
    assert item["verdict"] == "fail" and "house" in item["reason"]
    # in the wall's door hole the same chair penetrates nothing: a hole is a hole
    arr, target, axes, context, poses = _house_case(dy=0.0)
    geometry = GeometryContext(arr.meshes, arr.anchor, axes, context).compute(poses, target, 0)
    assert not geometry["members"]["chair_5"].get("obstacle_penetrations")


def test_corpus_pieces_of_the_tuned_split_keep_their_roles() -> None:
    """Other creators' pieces (the tuned split only): a 1.0 m bar table is a table, coffee
    tables are no TV stands, TV stands stay TV stands, a couch is a sofa."""
    from fixtures import fronts_corpus as fc

    reason = fc.shared_corpus_status()
    if reason and fc.corpus_required():
        pytest.fail(reason)
    want = {"shared:osrf_table": "table", "shared:kaykit_couch": "sofa",
            # swivel chairs, one a drafting chair whose seat is 0.82 m up; an L chaise sofa;
            # other creators' low coffee tables
            **{f"assets:infinigen/office_chair_OfficeChairFactory_s{i}.glb": "chair"
               for i in (1, 2, 4, 6, 10)},
            "assets:infinigen/sofa_SofaFactory_s4.glb": "sofa",
            "assets:kenney-cco/tableCoffee.glb": "coffee_table",
            "assets:caysonverse/tableCoffee.glb": "coffee_table",
            **{f"assets:infinigen/coffee_table_CoffeeTableFactory_s{i}.glb": "coffee_table"
               for i in (1, 2, 3)},
            **{f"assets:infinigen/tv_stand_TVStandFactory_s{i}.glb": "tv_stand"
               for i in (1, 2, 3, 4)}}
    seen = {}
    for p in fc.front_pieces("tuned", missing_shared="skip"):
        if p.name in want:
            v, f = p.load()
            sc = rooms._scale_of(p.name)
            u = UnitInput(p.name, np.diag([sc, sc, sc, 1.0]), np.asarray(v, float),
                          np.asarray(f, np.int64))
            seen[p.name] = classify(measure_unit(u)).role
    if reason:
        want = {k: r for k, r in want.items() if not k.startswith("shared:")}
    assert seen == want
