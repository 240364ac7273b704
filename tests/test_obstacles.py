"""Obstacle-aware islands without Blender: the fixed context's floor-plane distances against
shapely, the floor and ceiling band, geometry.json's obstacle fields, verify's verdict, and
the solver keeping members out of a wall."""
from __future__ import annotations

import numpy as np
import pytest
from shapely.geometry import MultiPoint, Point, Polygon

from fixtures import specs
from island_tools.measure import frames
from island_tools.measure.forward_axis import forward_axes_document
from island_tools.measure.geometry import GeometryContext
from island_tools.measure.obstacles import Context, distances, signed_distances
from island_tools.policy import MIN_ITER
from island_tools.scene import verify
from island_tools.solver import Solver

FACES = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])


def box(lo: list[float], hi: list[float]) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                  for z in (lo[2], hi[2])], dtype=float)
    return v, FACES.copy()


@pytest.mark.parametrize("seed", range(40))
def test_signed_distance_matches_shapely(seed: int) -> None:
    """Apart: shapely's distance. Overlapping: minus the minimum translation distance, the
    distance from the origin to the boundary of the Minkowski difference (a convex hull of
    vertex differences, built with shapely here)."""
    rng = np.random.default_rng(seed)
    hull = np.array(MultiPoint(rng.normal(0.0, 0.4, (8, 2))).convex_hull.exterior.coords)[:-1]
    tris = rng.normal(0.0, 0.8, (6, 3, 2))
    tris[0, 2] = tris[0, 0] + 0.5 * (tris[0, 1] - tris[0, 0])     # a wall face seen edge-on
    poly = Polygon(hull)
    for tri, d in zip(tris, signed_distances(hull, tris)):
        shape = MultiPoint(tri).convex_hull
        common = poly.intersection(shape)
        if common.area > 1e-12 or (shape.area < 1e-12 and common.length > 1e-12):
            diff = MultiPoint((hull[:, None, :] - tri[None, :, :]).reshape(-1, 2)).convex_hull
            assert d == pytest.approx(-diff.exterior.distance(Point(0.0, 0.0)), abs=1e-9)
        else:
            assert d == pytest.approx(poly.distance(shape), abs=1e-9)


def test_penetration_depth_is_the_separating_push() -> None:
    hull = np.array([[-0.2, -0.2], [0.2, -0.2], [0.2, 0.2], [-0.2, 0.2]])
    wall_face = np.array([[[0.05, -3.0], [0.05, 3.0], [0.05, 0.0]]])     # a segment at x=.05
    assert signed_distances(hull, wall_face)[0] == pytest.approx(-0.15)   # push 0.15 to -x
    slab = np.array([[[0.1, -5.0], [0.1, 5.0], [5.0, 0.0]]])
    assert signed_distances(hull, slab)[0] == pytest.approx(-0.1)


def test_band_leaves_out_floors_and_ceilings() -> None:
    context = Context({"floor": box([-5, -5, -0.01], [5, 5, 0.0]),
                       "ceiling": box([-5, -5, 2.6], [5, 5, 2.7]),
                       "wall": box([1.0, -3.0, 0.0], [1.1, 3.0, 2.6])})
    band = context.band(0.0, 0.9)
    assert [ob.name for ob in band] == ["wall"]
    hull = np.array([[0.7, -0.2], [1.3, -0.2], [1.3, 0.2], [0.7, 0.2]])   # across the wall
    assert distances(hull, band)["wall"] < -0.1


def _wall_case(gap: float, start_in_gap: bool):
    arr = specs.arrange("long_table_5", "turned_90")
    target = arr.target_spec()
    props = specs.member_props("long_table_5")
    axes = forward_axes_document(arr.meshes, arr.anchor, {
        n: p["forward_axis"] for n, p in props.items() if "forward_axis" in p})
    table = frames.transform_points(arr.canonical[arr.anchor], arr.meshes[arr.anchor][0])
    face = float(table[:, 0].min()) - gap
    context = {"wall_west": box([face - 0.1, -3.0, 0.0], [face, 3.0, 2.5]),
               "floor": box([-6, -6, -0.01], [6, 6, 0.0])}
    poses = dict(arr.canonical)
    if start_in_gap:   # the end chair squeezed between the table and the wall
        c = poses["chair_5"]
        poses["chair_5"] = frames.translation([face + 0.05 - c[0, 3], -c[1, 3], 0.0]) @ c
    return arr, target, axes, context, poses


def _loop(arr, target, axes, context, poses):
    geo = GeometryContext(arr.meshes, arr.anchor, axes, context)
    solver = Solver(arr.meshes, arr.anchor, axes, target, context)
    geometry = geo.compute(poses, target, 0)
    first = geometry
    for n in range(1, 21):
        decision = solver.decide(poses, geometry, n)
        for name, delta in decision["members"].items():
            pivot = frames.footprint_centre_local(arr.meshes[name][0])
            poses[name] = frames.apply_member_delta(poses[name], delta["delta_xyz"],
                                                    delta["delta_yaw_deg"], pivot)
        geometry = geo.compute(poses, target, n)
        if decision["converged"] and n >= MIN_ITER:
            break
    return first, geometry


def test_a_chair_inside_a_wall_is_measured_and_fails_verify() -> None:
    arr, target, axes, context, poses = _wall_case(0.2, start_in_gap=True)
    geometry = GeometryContext(arr.meshes, arr.anchor, axes, context).compute(poses, target, 0)
    chair = geometry["members"]["chair_5"]
    assert chair["nearest_obstacle"] == "wall_west"
    assert chair["obstacle_penetrations"]["wall_west"] > 0.05
    assert geometry["group"]["obstacles"] == ["wall_west"]       # the floor is no obstacle
    assert geometry["group"]["obstacle_penetrations"] == 1
    review = verify.review_group("g", geometry, target, axes, arr.members)
    item = {i["id"]: i for i in review["review_results"]}["object_chair_5"]
    assert item["verdict"] == "fail" and "wall_west" in item["reason"]
    assert review["summary"]["verdict"] == "fail"


def test_the_solver_takes_the_free_short_end_when_the_other_is_against_a_wall() -> None:
    arr, target, axes, context, poses = _wall_case(0.2, start_in_gap=True)
    _, final = _loop(arr, target, axes, context, poses)
    assert final["group"]["obstacle_penetrations"] == 0
    assert final["group"]["edge_counts"]["-x"] == 0 and final["group"]["edge_counts"]["+x"] == 1
    assert final["group"]["pattern"]["match"] is True
    for m in final["members"].values():
        assert m["obstacle_clearance_m"] > 0.0 and m["clearance_m"] >= 0.07


def test_a_slot_that_fits_beside_the_wall_is_kept() -> None:
    arr, target, axes, context, poses = _wall_case(0.6, start_in_gap=True)
    _, final = _loop(arr, target, axes, context, poses)
    assert final["group"]["obstacle_penetrations"] == 0
    assert final["members"]["chair_5"]["edge"] == "-x"


@pytest.mark.parametrize("seed", range(12))
def test_narrow_phase_on_near_triangles_agrees_with_the_whole_obstacle(seed: int) -> None:
    """The obstacle penetration test builds its BVH over the obstacle's triangles near the
    member's footprint only (a 200k-triangle neighbour would cost ~1 s per iteration whole).
    Judged against fcl on the whole obstacle: same verdict for members that hit, graze and
    miss a dense obstacle (a subdivided sphere: many triangles, curved)."""
    import fcl
    import trimesh

    from island_tools.measure.geometry import _near_triangles

    rng = np.random.default_rng(seed)
    sphere = trimesh.creation.icosphere(subdivisions=5, radius=0.4)   # 20k triangles
    verts = np.asarray(sphere.vertices) + [0.0, 0.0, 0.45]
    [ob] = Context({"ball": (verts, np.asarray(sphere.faces))}).band(0.0, 1.0)
    model = fcl.BVHModel()
    model.beginModel(len(ob.vertices), len(ob.faces))
    model.addSubModel(ob.vertices, ob.faces.astype(np.int32))
    model.endModel()
    whole = fcl.CollisionObject(model, fcl.Transform())
    outcomes = set()
    for _ in range(25):
        c = rng.uniform(-0.6, 0.6, 2)
        half = rng.uniform(0.03, 0.2, 2)
        v, f = box([c[0] - half[0], c[1] - half[1], 0.0], [c[0] + half[0], c[1] + half[1], 0.5])
        member_model = fcl.BVHModel()
        member_model.beginModel(len(v), len(f))
        member_model.addSubModel(v, f.astype(np.int32))
        member_model.endModel()
        member = fcl.CollisionObject(member_model, fcl.Transform())
        want = fcl.collide(member, whole, fcl.CollisionRequest(), fcl.CollisionResult()) > 0
        near = _near_triangles(ob, v[:, :2].min(axis=0), v[:, :2].max(axis=0))
        got = near is not None and fcl.collide(member, near, fcl.CollisionRequest(),
                                               fcl.CollisionResult()) > 0
        assert got == want, (c, half)
        outcomes.add(want)
    assert outcomes == {True, False}   # both cases really exercised


def test_member_bvh_is_shared_across_groups_whose_scale_differs_by_noise(monkeypatch) -> None:
    """The same scaled chair in another group decomposes to a scale that differs in the 8th
    digit (seen: 0.646551658 vs 0.646551669); its BVH must be built once per process, not
    once per group (0.5-0.85 s each for a 200k-triangle chair). A real change of scale
    builds a new one."""
    from island_tools.measure import geometry as geometry_module
    from island_tools.measure import meshcache

    arr, target, axes, context, poses = _wall_case(0.2, start_in_gap=True)
    built: list[int] = []
    real = geometry_module._bvh

    def counting(v, f):
        built.append(len(f))
        return real(v, f)

    monkeypatch.setattr(geometry_module, "_bvh", counting)
    monkeypatch.setattr(meshcache, "_REMEMBERED", {})
    scaled = {}
    for s in (0.646551658, 0.646551669, 0.646551669 * 1.01):
        p = dict(poses)
        p["chair_5"] = poses["chair_5"] @ np.diag([s, s, s, 1.0])
        geo = GeometryContext(arr.meshes, arr.anchor, axes, context).compute(p, target, 0)
        scaled[s] = geo["members"]["chair_5"]["obstacle_penetrations"]
        assert scaled[s].get("wall_west", 0) > 0.0   # the narrow phase really ran
    chair_builds = [n for n in built if n == len(arr.meshes["chair_5"][1])]
    assert len(chair_builds) == 2, built   # noise shares one BVH; 1 % more scale builds one
