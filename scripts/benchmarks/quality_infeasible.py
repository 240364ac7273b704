"""Infeasible (and control) rooms for the quality bench (issue 25): the bench fixtures'
real furniture (``fixtures.specs``: the hexagonal round table with 4-6 chairs, the long
table with 2+2+1+1) beside walls too close for the spec, a column in a slot, a neighbouring
group's table and chair where the end chair would sit, and the same rooms with room to
spare. ``CASES``: name -> builder; ``run(name)`` runs the solver loop in-process (solver +
GeometryContext + the fixed context, like ``quality_cases.run_loop``) and judges the final
poses with its own shapely code (footprints of the posed vertices; it never calls
``island_tools.measure.geometry``, ``island_tools.solver`` or
``island_tools.measure.obstacles``): hard violations (a member's footprint overlapping a
wall, column, neighbour unit, the anchor or another member by more than 1 cm^2) before and
after, the review's verdict and the
infeasible finding's reason line.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from shapely.geometry import MultiPoint

INSIDE_TOL_M2 = 1e-4
MAX_ITER = 20

_FACES = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                   [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])


def _box(lo: list[float], hi: list[float]) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                  for z in (lo[2], hi[2])], dtype=float)
    return v, _FACES.copy()


def _room(fixture: str, keep: int | None = None) -> dict[str, Any]:
    from fixtures import specs
    from island_tools.measure import frames
    from island_tools.measure.forward_axis import forward_axes_document

    arr = specs.arrange(fixture, "correct")
    members = list(arr.members)[:keep] if keep else list(arr.members)
    meshes = {n: m for n, m in arr.meshes.items() if n in members or n == arr.anchor}
    spec = dict(arr.target_spec())
    spec["member_count"] = len(members)
    props = specs.member_props(fixture)
    axes = forward_axes_document(meshes, arr.anchor, {
        n: p["forward_axis"] for n, p in props.items() if "forward_axis" in p and n in meshes})
    table = frames.transform_points(arr.canonical[arr.anchor], arr.meshes[arr.anchor][0])
    poses = {n: np.array(p) for n, p in arr.canonical.items() if n in meshes}
    return {"anchor": arr.anchor, "meshes": meshes, "members": members, "spec": spec,
            "axes": axes, "table": table, "poses": poses}


def _wall(side: str, gap: float) -> Callable[[np.ndarray], dict]:
    def make(table: np.ndarray) -> dict:
        if side == "north":
            f = float(table[:, 1].max()) + gap
            return {"wall_north": _box([-4.0, f, 0.0], [4.0, f + 0.1, 2.5])}
        f = float(table[:, 0].min()) - gap
        return {"wall_west": _box([f - 0.1, -4.0, 0.0], [f, 4.0, 2.5])}
    return make


def _column_at_chair(room: dict) -> dict:
    from island_tools.measure import frames

    c = frames.footprint_centre_local(room["meshes"]["chair_1"][0])
    p = frames.pivot_in_frame(room["poses"]["chair_1"], c)[:2]
    return {"column": _box([p[0] - 0.15, p[1] - 0.15, 0.0], [p[0] + 0.15, p[1] + 0.15, 2.5])}


def _neighbour_west(table: np.ndarray) -> dict:
    x0 = float(table[:, 0].min())
    return {"other_table": _box([x0 - 1.6, -0.5, 0.0], [x0 - 0.45, 0.5, 0.75]),
            "other_chair": _box([x0 - 0.44, -0.25, 0.0], [x0 - 0.1, 0.25, 0.45])}


def _cases() -> dict[str, tuple[str, int | None, Any, bool]]:
    """name -> (fixture, members kept, context maker, feasible expected)."""
    out: dict[str, tuple[str, int | None, Any, bool]] = {}
    for k in (4, 5, 6):
        for gap in (0.0, 0.05, 0.10):
            out[f"ring{k} wall {gap:.2f} m"] = ("round_table_6", k, _wall("north", gap), False)
        out[f"ring{k} wall 1.50 m"] = ("round_table_6", k, _wall("north", 1.5), True)
    for side in ("west", "north"):
        for gap in (0.20, 0.35):
            out[f"2+2+1+1 wall_{side} {gap:.2f} m"] = ("long_table_6", None,
                                                      _wall(side, gap), False)
    out["2+2+1+1 wall_west 1.20 m"] = ("long_table_6", None, _wall("west", 1.2), True)
    # the ring can turn as a whole round a column: that is feasible, and passes
    out["ring4 column in a slot"] = ("round_table_6", 4, "column", True)
    out["2+2+1+1 column at chair_1"] = ("long_table_6", None, "column", False)
    out["2+2+1+1 neighbour group west"] = ("long_table_6", None, _neighbour_west, False)
    return out


CASES = _cases()


def _violations(room: dict, context: dict, poses: dict) -> list[str]:
    feet = {n: MultiPoint(_posed(room["meshes"][n][0], poses[n])[:, :2]).convex_hull
            for n in [room["anchor"], *room["members"]]}
    fixed = {n: MultiPoint(v[:, :2]).convex_hull for n, (v, _) in context.items()}
    fixed[room["anchor"]] = feet[room["anchor"]]
    out = []
    for i, a in enumerate(room["members"]):
        out += [f"{a} in {o}" for o, poly in fixed.items()
                if feet[a].intersection(poly).area > INSIDE_TOL_M2]
        out += [f"{a} in {b}" for b in room["members"][i + 1:]
                if feet[a].intersection(feet[b]).area > INSIDE_TOL_M2]
    return out


def _posed(v: np.ndarray, pose: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=float) @ pose[:3, :3].T + pose[:3, 3]


def run(name: str) -> dict[str, Any]:
    from island_tools.measure import frames
    from island_tools.measure.geometry import GeometryContext
    from island_tools.policy import MIN_ITER
    from island_tools.scene.verify import review_group
    from island_tools.solver import Solver

    fixture, keep, maker, feasible = CASES[name]
    room = _room(fixture, keep)
    context = _column_at_chair(room) if maker == "column" else maker(room["table"])
    poses = room["poses"]
    before = _violations(room, context, poses)
    geo = GeometryContext(room["meshes"], room["anchor"], room["axes"], context)
    solver = Solver(room["meshes"], room["anchor"], room["axes"], room["spec"], context)
    geometry = geo.compute(poses, room["spec"], 0)
    given_up: list[dict[str, Any]] = []
    iters = 0
    for n in range(1, MAX_ITER + 1):
        decision = solver.decide(poses, geometry, n)
        given_up = decision.get("given_up") or []
        for member, delta in decision["members"].items():
            pivot = frames.footprint_centre_local(room["meshes"][member][0])
            poses[member] = frames.apply_member_delta(poses[member], delta["delta_xyz"],
                                                      delta["delta_yaw_deg"], pivot)
        geometry = geo.compute(poses, room["spec"], n)
        iters = n
        if decision["converged"] and n >= MIN_ITER:
            break
    finding = ({"reason": solver.infeasible_reason(given_up), "given_up": given_up}
               if given_up else None)
    rev = review_group("case", geometry, room["spec"], room["axes"], room["members"], {},
                       finding)
    after = _violations(room, context, poses)
    verdict = rev["summary"]["verdict"]
    reason = (rev.get("infeasible") or {}).get("reason", "")
    ok = not after and (verdict == "pass" if feasible else verdict == "fail" and bool(reason))
    return {"case": name, "feasible": feasible, "violations_before": len(before),
            "violations_after": len(after), "after": after, "verdict": verdict,
            "given_up": len(given_up), "iters": iters, "reason": reason, "ok": ok}
