"""Section ``crowded`` (issue 36): the built-in solver's decision time in crowded rooms.

Rooms (``ROOMS``; ``--quick``: ``QUICK_ROOMS``) of high-poly procedural furniture
(``assets/infinigen`` dining tables, a round cocktail table, dining, office and bar chairs,
midpoint-subdivided to at least ``TRIANGLES`` triangles, ``QUICK_TRIANGLES`` with
``--quick``, vertices at float32 as Blender holds them, so the footprint hulls carry the
many near-collinear vertices a dense mesh has), groups of 1-8 members and 1-6 obstacles
0-0.3 m from the anchor's edges: other units (chairs, a cabinet, a stool), walls and
columns. Members start near their pattern's edges with yaw errors, push-ins and slides
(``_starts``: seeded, never behind a wall; like the quality cases' starts they may overlap
an obstacle, the anchor or another member a little (``_Placer.fits``): the solver gets them
out).

Each room runs twice (after one untimed iteration that fills the per-process mesh caches
both runs share) through ``quality_cases.run_loop`` (``Solver.decide`` -> the adapter's
schema and policy checks -> the deltas applied -> ``GeometryContext.compute``, as the
Blender loop minus rendering; at most 20 iterations): *crowded* with its obstacles as the
fixed context (``context.npz``), *uncrowded* without them. Reported per room: the solver's
decision time (median and max over the crowded run's iterations; the uncrowded median
beside it), the whole run's seconds per group (solver set-up, every decision, every
geometry measurement and review; renders excluded: they do not depend on the search), the
ratio crowded / uncrowded, iterations, the loop's verdict both ways, hard violations after
(judged here with shapely on the posed vertices: a member's footprint in an obstacle's plan
- the union of its triangles - the anchor's or another member's by more than 1 cm^2; target
0) and how many decisions ran
out of the solver's time budget (``solver.DECISION_BUDGET_S``, named in the reason).

Then (unless ``--no-renders``) both twins go through the real run path
(``run_rendered``: ``adapter.run_group`` with the built-in solver on a group directory
written as ``fixtures.build`` writes one, plus ``context.npz`` for the crowded twin; embedded
bpy, Workbench at ``--resolution`` px, no warm worker; after one untimed iteration of the
uncrowded twin, which fills the caches both twins share, so only what the obstacles need is
charged to the crowded one): the run's seconds per group with renders, its decide and step
(pose, save, both views rendered with the context drawn, geometry) seconds from run.json,
the ratio crowded / uncrowded, iterations and verdicts; an ``ALL (worst)`` and a ``MEDIAN``
row. The ratio target is judged on the run with renders.

Targets (issue 36): every decision under 1 s at the median and under 3 s at the worst; a
crowded room's seconds per group within 1.5x of its uncrowded twin's. Rooms run one after
another in this process (timings, not throughput). From the repository root, one room:
``python -m scripts.benchmarks.crowded [--quick] [--room NAME] [--no-renders] [--work DIR]
[--resolution PX]``.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

TITLE = "crowded: solver decisions in crowded rooms of high-poly furniture (issue 36)"
TRIANGLES = 90_000
QUICK_TRIANGLES = 20_000
INSIDE_TOL_M2 = 1e-4
MEDIAN_TARGET_S = 1.0
WORST_TARGET_S = 3.0
RATIO_TARGET = 1.5
WALL_LENGTH_M = 6.0
WALL_THICKNESS_M = 0.1
COLUMN_M = 0.3

INF = "infinigen/"
TABLE_LONG = INF + "dining_table_TableDiningFactory_s2.glb"
TABLE_SQUARE = INF + "dining_table_TableDiningFactory_s1.glb"
TABLE_SQUARE_B = INF + "dining_table_TableDiningFactory_s3.glb"
TABLE_ROUND = INF + "round_table_TableCocktailFactory_s4.glb"
CABINET = INF + "cabinet_SingleCabinetFactory_s2.glb"


def _dining(i: int) -> str:
    return f"{INF}dining_chair_ChairFactory_s{i}.glb"


def _office(i: int) -> str:
    return f"{INF}office_chair_OfficeChairFactory_s{i}.glb"


def _bar(i: int) -> str:
    return f"{INF}bar_chair_BarChairFactory_s{i}.glb"


@dataclass(frozen=True)
class Obstacle:
    kind: str      # "wall", "column" or an asset path (another unit)
    side: str      # the anchor edge it stands by (+x -x +y -y)
    gap: float     # metres from that edge
    along: float = 0.0   # position along the edge, as a fraction of its length from its middle
    yaw: float = 0.0     # a unit's turn (deg) from facing the anchor


@dataclass(frozen=True)
class Room:
    name: str
    anchor: str
    members: tuple[str, ...]
    pattern: str
    counts: tuple[tuple[str, int], ...]   # starting edges and, for free, the layout
    obstacles: tuple[Obstacle, ...]
    clearance: float = 0.1
    seed: int = 0


ROOMS: tuple[Room, ...] = (
    Room("dining 3, chairs beside (issue 36)", TABLE_LONG, (_dining(3),) * 3, "free",
         (("-y", 2), ("+x", 1)),
         (Obstacle(_dining(1), "+y", 0.09, -0.3), Obstacle(_dining(1), "+y", 0.2, 0.0),
          Obstacle(_dining(1), "+y", 0.3, 0.3)), seed=1),
    Room("desk chair, wall 0.00", TABLE_SQUARE, (_office(2),), "row", (("-y", 1),),
         (Obstacle("wall", "+y", 0.0),), seed=2),
    Room("row 2, column + wall", TABLE_SQUARE_B, (_dining(4),) * 2, "row", (("-y", 2),),
         (Obstacle("column", "-x", 0.05), Obstacle("wall", "+x", 0.15)), seed=3),
    Room("row 4, columns + cabinet", TABLE_LONG, (_dining(2),) * 4, "row", (("-y", 4),),
         (Obstacle("column", "+x", 0.1), Obstacle("column", "-x", 0.2),
          Obstacle(CABINET, "+y", 0.25, 0.2, 180.0)), seed=4),
    Room("2+2+1, wall + chair", TABLE_LONG, (_dining(5),) * 5, "2+2+1",
         (("+y", 2), ("-y", 2), ("+x", 1)),
         (Obstacle("wall", "-x", 0.25), Obstacle(_office(4), "+y", 0.3, 0.62)), seed=5),
    Room("2+2+1+1, wall + column + 2 units", TABLE_LONG, (_dining(1),) * 6, "2+2+1+1",
         (("+y", 2), ("-y", 2), ("+x", 1), ("-x", 1)),
         (Obstacle("wall", "+y", 0.3), Obstacle("column", "-x", 0.1, 0.62),
          Obstacle(_bar(2), "-y", 0.2, 0.66), Obstacle(_dining(4), "+x", 0.3, -0.7, 90.0)),
         seed=6),
    Room("free 7, 5 obstacles", TABLE_LONG, (_dining(3),) * 7, "free",
         (("+y", 3), ("-y", 3), ("+x", 1)),
         (Obstacle("wall", "-x", 0.2), Obstacle("column", "+x", 0.3, 0.62),
          Obstacle(_bar(1), "+y", 0.3, 0.68), Obstacle(_office(1), "-y", 0.25, -0.68),
          Obstacle("column", "+x", 0.0, -0.62)), seed=7),
    Room("free 8, 6 obstacles", TABLE_LONG, (_dining(2),) * 8, "free",
         (("+y", 3), ("-y", 3), ("+x", 1), ("-x", 1)),
         (Obstacle("column", "+y", 0.2, 0.64), Obstacle("column", "+y", 0.05, -0.64),
          Obstacle("column", "-y", 0.3, 0.64), Obstacle("column", "-y", 0.1, -0.64),
          Obstacle(_dining(5), "+x", 0.3, 0.75, 30.0), Obstacle(_office(6), "-x", 0.15,
                                                                 -0.75, -30.0)), seed=8),
    Room("ring 3 stools, column + stool", TABLE_ROUND, (_bar(1),) * 3, "ring", (),
         (Obstacle("column", "+x", 0.1), Obstacle(_bar(3), "+y", 0.25)), clearance=0.05,
         seed=9),
    Room("ring 4 stools, wall + 2 chairs", TABLE_ROUND, (_bar(3),) * 4, "ring", (),
         (Obstacle("wall", "-y", 0.1), Obstacle(_office(2), "+x", 0.2),
          Obstacle(_dining(2), "-x", 0.3)), seed=10),
    Room("L 2, corner walls", TABLE_SQUARE_B, (_office(4),) * 2, "L",
         (("-x", 1), ("-y", 1)),
         (Obstacle("wall", "+x", 0.3), Obstacle("wall", "+y", 0.25)), seed=11),
    Room("free 4 round the square, 6 obstacles", TABLE_SQUARE, (_dining(5),) * 4, "free",
         (("+x", 1), ("-x", 1), ("+y", 1), ("-y", 1)),
         (Obstacle("column", "+x", 0.3, 0.8), Obstacle("column", "-x", 0.3, -0.8),
          Obstacle("column", "+y", 0.25, -0.8), Obstacle("column", "-y", 0.25, 0.8),
          Obstacle("wall", "+y", 0.3 + 0.55 + 0.4), Obstacle(_bar(2), "-x", 0.0, 0.8)),
         seed=12),
)
QUICK_ROOMS = ("dining 3, chairs beside (issue 36)", "free 8, 6 obstacles",
               "ring 3 stools, column + stool", "desk chair, wall 0.00")

SIDES = {"+x": np.array([1.0, 0.0]), "-x": np.array([-1.0, 0.0]),
         "+y": np.array([0.0, 1.0]), "-y": np.array([0.0, -1.0])}
_FACES = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                   [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])


# ------------------------------------------------------------------------- furniture
@cache
def high_poly(rel: str, triangles: int) -> Any:
    """The asset (``quality_cases.make_item``: life size, true front) midpoint-subdivided to
    >= ``triangles`` triangles (the same surface), vertices at float32 values."""
    import trimesh.remesh

    from .quality_cases import Item, make_item

    item = make_item(rel)
    v, f = np.asarray(item.vertices, dtype=float), np.asarray(item.faces, dtype=np.int64)
    while len(f) < triangles:
        v, f = trimesh.remesh.subdivide(v, f)
    v = v.astype(np.float32).astype(np.float64)
    return Item(rel, v, f, item.scale, item.front)


def _box(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                  for z in (lo[2], hi[2])], dtype=float)
    return v, _FACES.copy()


def _obstacle_mesh(ob: Obstacle, placer: Any, floor: float, triangles: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The obstacle's triangles in the room's (the anchor's canonical) frame."""
    from .quality_cases import posed_vertices, yaw_facing

    n = SIDES[ob.side]
    u = np.array([-n[1], n[0]])
    half = (placer.hi - placer.lo) / 2.0
    edge = placer.mid + n * float(np.abs(n) @ half)
    length = placer.side_length(ob.side)
    if ob.kind == "wall":
        a = edge + n * ob.gap
        b = a + n * WALL_THICKNESS_M
        lo = np.minimum(a, b) - np.abs(u) * WALL_LENGTH_M / 2.0
        hi = np.maximum(a, b) + np.abs(u) * WALL_LENGTH_M / 2.0
        return _box(np.array([lo[0], lo[1], floor]), np.array([hi[0], hi[1], floor + 2.6]))
    if ob.kind == "column":
        c = edge + u * ob.along * length + n * (ob.gap + COLUMN_M / 2.0)
        return _box(np.array([c[0] - COLUMN_M / 2, c[1] - COLUMN_M / 2, floor]),
                    np.array([c[0] + COLUMN_M / 2, c[1] + COLUMN_M / 2, floor + 2.6]))
    item = high_poly(ob.kind, triangles)
    yaw = yaw_facing(item, -n) + ob.yaw if item.front is not None else ob.yaw
    pose, _ = placer.at_side(item, ob.side, ob.along * length, ob.gap, yaw)
    return posed_vertices(item, pose), np.asarray(item.faces)


def _footprint(vertices: np.ndarray) -> Any:
    from shapely.geometry import MultiPoint

    return MultiPoint([tuple(p) for p in vertices[:, :2]]).convex_hull


def _behind_wall(point: np.ndarray, walls: list[tuple[np.ndarray, float]]) -> bool:
    return any(float(n @ point) > face for n, face in walls)


def _starts(room: Room, anchor: Any, members: list[Any], placer: Any,
            walls: list[tuple[np.ndarray, float]]) -> dict[str, np.ndarray]:
    """Seeded starting poses: near the pattern's edges (rings: evenly round, jittered), yaw
    errors up to 60 deg (one in three: 90 or 180), gaps from a 15 cm push-in to 35 cm out,
    never overlapping an obstacle or another member by more than ``_Placer.fits`` allows,
    never behind a wall."""
    from .quality_cases import yaw_facing

    rng = np.random.default_rng(room.seed)
    sides = [e for e, q in room.counts for _ in range(q)]
    poses: dict[str, np.ndarray] = {}
    k = len(members)
    for i, item in enumerate(members):
        for attempt in range(2000):
            spread = 1.0 + attempt / 100.0
            big = rng.random() < 1.0 / 3.0
            err = float(rng.choice([90.0, -90.0, 180.0])) if big else float(
                rng.uniform(-60.0, 60.0))
            gap = float(rng.uniform(-0.15, 0.35)) * min(spread, 2.0)
            if room.pattern == "ring":
                theta = 360.0 * i / k + float(rng.uniform(-30.0, 30.0)) * spread
                rho = np.array([math.cos(math.radians(theta)), math.sin(math.radians(theta))])
                yaw = (yaw_facing(item, -rho) if item.front is not None
                       else float(rng.uniform(0.0, 360.0))) + err
                pose, hull = placer.at_angle(item, theta, room.clearance + gap, yaw)
            else:
                side = sides[i] if rng.random() > 0.25 else str(rng.choice(list(SIDES)))
                t = float(rng.uniform(-0.5, 0.5)) * placer.side_length(side) * min(spread, 1.8)
                yaw = (yaw_facing(item, -SIDES[side]) if item.front is not None
                       else float(rng.uniform(0.0, 360.0))) + err
                pose, hull = placer.at_side(item, side, t, room.clearance + gap, yaw)
            centre = np.array(hull.centroid.coords[0])
            if placer.fits(hull) and not _behind_wall(centre, walls):
                break
        else:  # pragma: no cover - the rooms leave room to start
            raise RuntimeError(f"{room.name}: no free start for member {i}")
        placer.accept(hull)
        poses[f"m{i}"] = pose
    return poses


def build(room: Room, triangles: int) -> tuple[Any, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(a ``quality_cases.Case``, its obstacles as context meshes)."""
    from .quality_cases import Case, _Placer, _spec

    anchor = high_poly(room.anchor, triangles)
    members = [high_poly(r, triangles) for r in room.members]
    rng = np.random.default_rng(room.seed)
    placer = _Placer(anchor, rng)
    context: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    walls: list[tuple[np.ndarray, float]] = []
    for j, ob in enumerate(room.obstacles):
        name = f"{'unit' if '/' in ob.kind else ob.kind}_{j}"
        context[name] = _obstacle_mesh(ob, placer, placer.floor, triangles)
        placer.accept(_footprint(context[name][0]))
        if ob.kind == "wall":
            n = SIDES[ob.side]
            walls.append((n, float((context[name][0][:, :2] @ n).min())))
    poses = {"anchor": placer.anchor_pose, **_starts(room, anchor, members, placer, walls)}
    k = len(members)
    role = "round_table" if room.pattern == "ring" else (
        "long_table" if room.anchor == TABLE_LONG else "dining_table")
    layout = dict(room.counts) if room.pattern == "free" else None
    note = ("layout: " + ", ".join(f"{q} on {e}" for e, q in room.counts)
            if layout else None)
    spacing = "even_around_anchor" if room.pattern == "ring" else "even_along_each_edge"
    spec = _spec(role, k, room.pattern, "toward_anchor", spacing, room.clearance, note, layout)
    return Case(room.pattern, room.seed, spec, anchor, members, poses, [], role), context


# ------------------------------------------------------------------------- the judge
def violations(case: Any, context: dict[str, tuple[np.ndarray, np.ndarray]],
               poses: dict[str, np.ndarray]) -> list[str]:
    """Hard violations of the final poses, with shapely on the posed vertices (never the
    solver's or geometry's code): a member's footprint (convex hull) in an obstacle's plan
    (``_plan_overlap``), the anchor's footprint or another member's by more than
    ``INSIDE_TOL_M2``."""
    from .quality_cases import posed_vertices

    items = case.items()
    feet = {n: _footprint(posed_vertices(it, poses[n])) for n, it in items.items()}
    out = []
    names = case.names
    for i, a in enumerate(names):
        if feet[a].intersection(feet["anchor"]).area > INSIDE_TOL_M2:
            out.append(f"{a} in anchor")
        out += [f"{a} in {o}" for o, (v, f) in context.items()
                if _plan_overlap(feet[a], v, f) > INSIDE_TOL_M2]
        out += [f"{a} in {b}" for b in names[i + 1:]
                if feet[a].intersection(feet[b]).area > INSIDE_TOL_M2]
    return out


def _plan_overlap(foot: Any, vertices: np.ndarray, faces: np.ndarray) -> float:
    """Area of ``foot`` covered by an obstacle's plan: the union of its triangles'
    projections (a chair's plan is not its convex hull), of those whose box meets the
    footprint's."""
    from shapely.geometry import Polygon
    from shapely.ops import unary_union

    tris = np.asarray(vertices)[np.asarray(faces)][:, :, :2]
    lo, hi = np.array(foot.bounds[:2]), np.array(foot.bounds[2:])
    near = np.all((tris.max(axis=1) >= lo) & (tris.min(axis=1) <= hi), axis=1)
    polys = [Polygon(t) for t in tris[near]]
    polys = [p for p in polys if p.area > 1e-12]
    if not polys:
        return 0.0
    return float(foot.intersection(unary_union(polys)).area)


# ------------------------------------------------------------------- the real run path
def write_group(root: Any, case: Any, context: dict[str, tuple[np.ndarray, np.ndarray]] | None,
                run_job: Any) -> Any:
    """``case`` as a relation-group directory (the contract's layout, as
    ``fixtures.build`` writes one: ``island.blend`` built by the worker from the meshes at
    their starting poses, ``metadata.json`` with the canonical frame = the world,
    ``target_spec.json``) and, for a crowded room, ``context.npz`` (its obstacles, what the
    scene pipeline's rebuild writes)."""
    import shutil
    from pathlib import Path

    from island_tools.files.atomic import write_json
    from island_tools.iteration import CONTEXT_CACHE
    from island_tools.measure import frames, meshcache

    root = Path(root)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    items = case.items()
    names = ["anchor", *case.names]
    npz = root / "objects.npz"
    meshcache.save(npz, {n: (items[n].vertices, items[n].faces) for n in names})
    run_job({"op": "build_island", "out_blend": str(root / "island.blend"),
             "objects_npz": str(npz),
             "objects": [{"name": n, "matrix_world": frames.to_list(case.poses[n])}
                         for n in names]})
    npz.unlink()
    write_json(root / "metadata.json", {
        "anchor_id": "anchor", "M_anchor_4x4": frames.to_list(np.eye(4)),
        "M_inv_4x4": frames.to_list(np.eye(4)), "members": names,
        "canonical_poses": {n: frames.to_list(case.poses[n]) for n in names}})
    write_json(root / "target_spec.json", dict(case.spec))
    if context:
        meshcache.save(root / CONTEXT_CACHE, context)
    return root


def run_rendered(room: Room, case: Any, context: dict[str, tuple[np.ndarray, np.ndarray]],
                 work: Any, resolution: int) -> dict[str, Any]:
    """Both twins through ``adapter.run_group`` with the built-in solver - what
    ``island-refine run`` does: init_iter0 (the meshes cached, the first renders), then per
    iteration the decision, ``iter_step`` (the .blend posed and saved, both views rendered
    with the context drawn, geometry, review) - embedded bpy, Workbench at ``resolution``
    px, no warm worker. Seconds per group = the whole ``run_group`` call; run.json's
    per-iteration ``decide_write`` and ``step`` split it."""
    import json
    import re
    from pathlib import Path

    from island_tools.adapter import run_group
    from island_tools.config import Settings
    from scripts._cli import job_runner

    settings = Settings(blender_bin="bpy", daemon=False, resolution=resolution)
    _, run_job = job_runner(settings)
    slug = re.sub(r"[^a-z0-9]+", "_", room.name.lower()).strip("_")
    # untimed: one iteration of the uncrowded twin fills what both twins share in this
    # process (the members' and anchor's render proxies and hulls, Blender's first render);
    # what only the crowded twin needs (its obstacles') stays its own cost
    run_group(write_group(Path(work) / f"{slug}__warm", case, None, run_job), "solver",
              settings, run_job, max_iter=1)
    out: dict[str, Any] = {}
    for mode, ctx in (("crowded", context), ("uncrowded", None)):
        root = write_group(Path(work) / f"{slug}__{mode}", case, ctx, run_job)
        t0 = time.perf_counter()
        report = run_group(root, "solver", settings, run_job)
        seconds = time.perf_counter() - t0
        doc = json.loads(Path(report.run_json).read_text()) if report.run_json else {}
        its = [e for e in doc.get("iterations", []) if isinstance(e.get("seconds"), dict)]
        decide = [e["seconds"]["decide_write"] for e in its]
        step = [e["seconds"]["step"] for e in its]
        out[mode] = {"seconds_per_group": round(seconds, 3), "ok": report.ok,
                     "iters": report.final_iter, "stop": report.stop_reason,
                     "verdict": (report.review or {}).get("verdict"),
                     "decide_s": round(sum(decide), 3), "step_s": round(sum(step), 3),
                     "decide_max_s": round(max(decide, default=0.0), 3),
                     "step_median_s": round(statistics.median(step), 3) if step else None,
                     "init_and_rest_s": round(seconds - sum(decide) - sum(step), 3)}
    return out


def _hull_vertices(case: Any) -> int:
    from island_tools.measure.geometry import convex_hull_2d
    from island_tools.measure.meshcache import keyed_vertices

    return max(len(convex_hull_2d(keyed_vertices(it.vertices)[:, :2]))
               for it in case.items().values())


def evaluate(room: Room, triangles: int, work: Any = None, resolution: int = 512
             ) -> dict[str, Any]:
    """Both runs of one room, judged; with ``work``, both through the real run path with
    renders too (``run_rendered``)."""
    from island_tools.solver import BUDGET_NOTE

    from .quality_cases import run_loop

    case, context = build(room, triangles)
    out: dict[str, Any] = {"room": room.name, "members": len(case.members),
                           "obstacles": len(context),
                           "min_gap_m": min(o.gap for o in room.obstacles),
                           "hull_vertices_max": _hull_vertices(case),
                           "triangles_min": min(len(it.faces) for it in case.items().values())}
    start = {n: np.array(p) for n, p in case.poses.items()}
    run_loop(case, max_iter=1)   # untimed: the meshes' cached hulls and axes, for both runs
    case.poses.update({n: np.array(p) for n, p in start.items()})
    for mode, ctx in (("crowded", context), ("uncrowded", None)):
        t0 = time.perf_counter()
        loop = run_loop(case, context=ctx)
        seconds = time.perf_counter() - t0
        case.poses.update({n: np.array(p) for n, p in start.items()})
        verdict = loop.review["summary"]["verdict"] if loop.review else None
        infeasible = (loop.solver.infeasible_reason(loop.given_up)
                      if loop.given_up and loop.solver is not None else "")
        out[mode] = {
            "decide_s": [round(s, 4) for s in loop.decide_seconds],
            "decide_median_s": round(statistics.median(loop.decide_seconds), 4),
            "decide_max_s": round(max(loop.decide_seconds), 4),
            "seconds_per_group": round(seconds, 3), "iters": loop.iters,
            "converged": loop.converged, "stop": loop.stop, "rejected": loop.rejected,
            "verdict": verdict, "infeasible": infeasible,
            "budget_hit": sum(BUDGET_NOTE in r for r in loop.reasons),
            "violations_after": violations(case, ctx or {}, loop.poses)}
    if work is not None:
        out["rendered"] = run_rendered(room, case, context, work, resolution)
    return out


def _select(quick: bool, names: list[str] | None) -> list[Room]:
    if names:
        rooms = [r for r in ROOMS if r.name in names]
        missing = set(names) - {r.name for r in rooms}
        if missing:
            raise SystemExit(f"bench crowded: unknown room(s) {sorted(missing)}; known: "
                             + "; ".join(r.name for r in ROOMS))
        return rooms
    return [r for r in ROOMS if r.name in QUICK_ROOMS] if quick else list(ROOMS)


COLUMNS = ["room", "members", "obstacles", "min gap m", "hull verts", "decide med s",
           "decide max s", "uncrowded med s", "s/group", "uncrowded s/group", "ratio",
           "iters", "uncrowded iters", "verdict", "uncrowded verdict", "hard after",
           "budget hit"]
RENDER_COLUMNS = ["run s/group", "uncrowded run s/group", "run ratio", "run decide s",
                  "uncrowded run decide s", "run step s", "uncrowded run step s", "run iters",
                  "uncrowded run iters", "run verdict", "uncrowded run verdict"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pathlib import Path

    quick = bool(getattr(args, "quick", False))
    triangles = QUICK_TRIANGLES if quick else TRIANGLES
    chosen = _select(quick, getattr(args, "room", None))
    if getattr(args, "smoke", False):   # one room through the code (scripts/bench.py --smoke)
        chosen = chosen[:1]
    renders = not getattr(args, "no_renders", False)
    work = Path(getattr(args, "work", None) or "out/bench") / "crowded"
    resolution = int(getattr(args, "resolution", 512) or 512)
    results = [evaluate(r, triangles, work if renders else None, resolution) for r in chosen]
    rows = []
    for r in results:
        c, u = r["crowded"], r["uncrowded"]
        rows.append([r["room"], r["members"], r["obstacles"], r["min_gap_m"],
                     r["hull_vertices_max"], c["decide_median_s"], c["decide_max_s"],
                     u["decide_median_s"], c["seconds_per_group"], u["seconds_per_group"],
                     round(c["seconds_per_group"] / u["seconds_per_group"], 2), c["iters"],
                     u["iters"], c["verdict"], u["verdict"], len(c["violations_after"]),
                     c["budget_hit"]])
        if renders:
            rc, ru = r["rendered"]["crowded"], r["rendered"]["uncrowded"]
            rows[-1] += [rc["seconds_per_group"], ru["seconds_per_group"],
                         round(rc["seconds_per_group"] / ru["seconds_per_group"], 2),
                         rc["decide_s"], ru["decide_s"], rc["step_s"], ru["step_s"],
                         rc["iters"], ru["iters"], rc["verdict"], ru["verdict"]]
    medians = [r["crowded"]["decide_median_s"] for r in results]
    worst = max(r["crowded"]["decide_max_s"] for r in results)
    ratios = [row[10] for row in rows]
    hard = sum(len(r["crowded"]["violations_after"]) for r in results)
    rows.append(["ALL (worst)", max(r["members"] for r in results),
                 max(r["obstacles"] for r in results), None, None, max(medians), worst,
                 max(r["uncrowded"]["decide_median_s"] for r in results),
                 None, None, max(ratios), None, None, None, None, hard,
                 sum(r["crowded"]["budget_hit"] for r in results)])
    columns = list(COLUMNS)
    run_ratios: list[float] = []
    if renders:
        columns += RENDER_COLUMNS
        run_ratios = [row[len(COLUMNS) + 2] for row in rows[:-1]]
        med = {m: statistics.median(r["rendered"][m]["seconds_per_group"] for r in results)
               for m in ("crowded", "uncrowded")}
        rows[-1] += [None, None, max(run_ratios)] + [None] * (len(RENDER_COLUMNS) - 3)
        rows.append(["MEDIAN", None, None, None, None,
                     statistics.median(medians), None, None,
                     statistics.median(r["crowded"]["seconds_per_group"] for r in results),
                     statistics.median(r["uncrowded"]["seconds_per_group"] for r in results),
                     round(statistics.median(ratios), 2), None, None, None, None, None, None,
                     med["crowded"], med["uncrowded"],
                     round(statistics.median(run_ratios), 2)]
                    + [None] * (len(RENDER_COLUMNS) - 3))
    ratio_judged = max(run_ratios) if renders else max(ratios)
    met = (max(medians) < MEDIAN_TARGET_S and worst < WORST_TARGET_S
           and ratio_judged <= RATIO_TARGET and hard == 0)
    notes = [
        f"targets: decision median < {MEDIAN_TARGET_S:g} s (worst room {max(medians):.3f} s), "
        f"max < {WORST_TARGET_S:g} s ({worst:.3f} s), crowded s/group <= {RATIO_TARGET:g}x "
        f"uncrowded ({'run with renders' if renders else 'loop without renders'}: worst "
        f"{ratio_judged:.2f}x), hard violations after 0 ({hard}): "
        + ("MET" if met else "NOT MET"),
        f"meshes midpoint-subdivided to >= {triangles} triangles, float32 vertices; one "
        "process, rooms one after another; s/group = the loop without renders (decisions, "
        "geometry, review)"
        + (f"; run s/group = adapter.run_group with renders (embedded bpy, Workbench "
           f"{resolution} px, no warm worker): init_iter0 + per iteration decide_write + "
           "step (pose, save, render both views with the context drawn, geometry)"
           if renders else "; renders not run (--no-renders)"),
    ]
    for r in results:
        if r["crowded"]["infeasible"]:
            notes.append(f"{r['room']}: {r['crowded']['infeasible']}")
    return {"columns": columns, "rows": rows, "notes": notes,
            "data": {"triangles": triangles, "rooms": results}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--room", action="append", help="only this room (repeatable)")
    ap.add_argument("--json", default=None, help="write the section's result here")
    ap.add_argument("--no-renders", action="store_true",
                    help="skip the real run path (run_group with renders)")
    ap.add_argument("--work", default="out/bench", help="scratch dir for the groups")
    ap.add_argument("--resolution", type=int, default=512)
    args = ap.parse_args(argv)
    result = run(args)
    from scripts.bench import print_table

    print_table(TITLE, result["columns"], result["rows"])
    for note in result["notes"]:
        print(f"  note: {note}")
    if args.json:
        from island_tools.files.atomic import write_json

        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
