"""Deterministic floor-plane geometry of an island: the ground truth in ``iter_N/geometry.json``.

Everything is measured in the island's canonical frame (anchor rigid frame, metres, floor =
XY). Poses are canonical ``matrix_world`` values and may carry scale, so vertices are always
transformed with the full matrix. The definitions implemented here are written up in
``docs/ARCHITECTURE.md`` (section "Geometry definitions"); the constants below are the documented
thresholds.

Per group, :class:`GeometryContext` does the expensive work once (local convex footprint
hulls, footprint pivots, fcl BVHs); each :meth:`GeometryContext.compute` call only moves
transforms. No scipy/shapely: the convex-polygon code is plain numpy.

Cost (``scripts/bench.py --section warm``): a BVH costs ~55 ms per 20k-triangle mesh, about
everything a cold call spends, so BVHs are built lazily (only for objects in a pair whose
footprints and height ranges overlap) and shared by objects with identical mesh arrays at
the same scale (a dining set's chairs). The pair broad phase compares the footprint hulls'
bounding boxes first, so far-apart pairs cost a few comparisons.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fcl
import numpy as np

from ..errors import GeometryError
from . import frames
from .layout import layout_of
from .layout import opposite as opposite_edge
from .layout import resolve as resolve_layout
from .meshcache import keyed_vertices, mesh_digest, remembered
from .obstacles import Context as ObstacleContext
from .obstacles import Obstacle
from .obstacles import nearest as obstacle_nearest

Meshes = Mapping[str, tuple[np.ndarray, np.ndarray]]

PENETRATION_MIN_DEPTH_M = 0.005
CLEARANCE_VIOLATION_TOL_M = 0.03
SLOT_GAP_M = 0.10
T_CENTRE_TOL_M = 0.05
ROUND_MAX_ASPECT = 1.2
ROUND_MAX_RADIUS_CV = 0.08
# Bisection resolution of the horizontal penetration depth (well below the 5 mm threshold).
PENETRATION_RESOLUTION_M = 0.0005
NEAREST_MEMO = 256   # footprints whose nearest obstacle the process remembers (_NEAREST)
_NEAREST: dict[tuple[bytes, tuple[int, ...]], Any] = {}
_RADIUS_SAMPLES = 256

EDGE_ORDER = ("+x", "-x", "+y", "-y")
_EDGE_RANK = {e: i for i, e in enumerate(EDGE_ORDER + ("ring",))}
_EDGE_NORMAL = {"+x": (1.0, 0.0), "-x": (-1.0, 0.0), "+y": (0.0, 1.0), "-y": (0.0, -1.0)}
# Slot coordinates run along a canonical axis (never "around" the table) so that a slot
# correction is directly a delta_xyz component.
_EDGE_TANGENT = {"+x": (0.0, 1.0), "-x": (0.0, 1.0), "+y": (1.0, 0.0), "-y": (1.0, 0.0)}


# --------------------------------------------------------------------------- polygons

def _half_hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    # a point that does not turn left of the last two pops them (the cross product written
    # out inline: a third of the time of a helper call per point)
    out: list[tuple[float, float]] = []
    for p in points:
        px, py = p
        while len(out) >= 2:
            o, a = out[-2], out[-1]
            if (a[0] - o[0]) * (py - o[1]) - (a[1] - o[1]) * (px - o[0]) <= 0.0:
                out.pop()
            else:
                break
        out.append(p)
    return out


def _drop_interior(pts: np.ndarray) -> np.ndarray:
    """Akl-Toussaint: discard points strictly inside the polygon of the 8 extreme points.

    The monotone chain below is a Python loop; dense meshes (200k vertices) would make it the
    bottleneck, and nearly all their points are interior.
    """
    keys = (pts[:, 0], pts[:, 1], pts[:, 0] + pts[:, 1], pts[:, 0] - pts[:, 1])
    idx = sorted({int(f(k)) for k in keys for f in (np.argmin, np.argmax)})
    poly = _monotone_chain(pts[idx])
    if len(poly) < 3:
        return pts
    a, b = poly, np.roll(poly, -1, axis=0)
    cross = ((b[:, 0] - a[:, 0])[None, :] * (pts[:, 1:2] - a[:, 1][None, :])
             - (b[:, 1] - a[:, 1])[None, :] * (pts[:, 0:1] - a[:, 0][None, :]))
    scale = float(np.abs(pts).max()) or 1.0
    inside = np.all(cross > 1e-9 * scale * scale, axis=1)
    return pts[~inside]


def _monotone_chain(pts: np.ndarray) -> np.ndarray:
    """Hull of lexicographically sorted unique points (CCW, collinear points removed)."""
    if len(pts) < 3:
        return pts.copy()
    plist = list(zip(pts[:, 0].tolist(), pts[:, 1].tolist()))
    lower = _half_hull(plist)
    upper = _half_hull(plist[::-1])
    return np.array(lower[:-1] + upper[:-1], dtype=float)


def _unique_rows(pts: np.ndarray) -> np.ndarray:
    """``np.unique(pts, axis=0)`` (rows sorted by x, then y; duplicates dropped), ~3x faster."""
    ordered = pts[np.lexsort((pts[:, 1], pts[:, 0]))]
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    return ordered[keep]


def convex_hull_2d(points: np.ndarray) -> np.ndarray:
    """Convex hull (k, 2), counter-clockwise, no repeated end point; k < 3 if degenerate."""
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    if len(pts) == 0:
        return np.zeros((0, 2))
    pts = _unique_rows(pts)
    if len(pts) > 64:
        pts = _drop_interior(pts)
    return _monotone_chain(pts)


def simplify_hull(hull: np.ndarray, tol: float) -> np.ndarray:
    """A convex CCW polygon with fewer vertices that CONTAINS ``hull`` and is within ``tol``
    of it (Hausdorff): runs of edges are replaced by the two supporting lines that bound
    them, kept only while the corner those lines make is within ``tol`` of the skipped
    chain (the farthest point of the added sliver from the original is that corner: the
    distance to a convex set is convex, so its maximum over the sliver is at a vertex).
    A dense mesh's float32 footprint carries hundreds of near-collinear vertices; every
    footprint test costs in proportion to them."""
    h = np.asarray(hull, dtype=float)
    n = len(h)
    if n <= 4 or not tol > 0.0:
        return h.copy()
    d = np.roll(h, -1, axis=0) - h                      # edge i: h[i] -> h[i+1]
    kept = [0]
    a = 0
    while True:
        b = a + 1
        while b < n:
            # the corner of edge a's and edge (b + 1)'s lines; the chain h[a+1 .. b+1]
            nxt = (b + 1) % n
            cross = float(d[a, 0] * d[nxt, 1] - d[a, 1] * d[nxt, 0])
            if cross <= 1e-12 * float(np.dot(d[a], d[a]) + np.dot(d[nxt], d[nxt])):
                break                                   # they turn 180 deg or more: no corner
            w = h[nxt] - h[a]
            t = float(w[0] * d[nxt, 1] - w[1] * d[nxt, 0]) / cross
            corner = h[a] + t * d[a]
            chain = h[[(j % n) for j in range(a + 1, b + 2)]]
            if _point_chain_distance(corner, chain) > tol:
                break
            b += 1
        # edges a+1 .. b-1 are skipped; edge b is the next kept one
        if b >= n:
            break
        kept.append(b)
        a = b
    if len(kept) < 3:
        return h.copy()
    out = []
    for i, e in enumerate(kept):
        f = kept[(i + 1) % len(kept)]      # consecutive kept edges meet at a corner
        cross = float(d[e, 0] * d[f, 1] - d[e, 1] * d[f, 0])
        if f == (e + 1) % n or abs(cross) < 1e-300:
            out.append(h[(e + 1) % n])
            continue
        w = h[f] - h[e]
        out.append(h[e] + float(w[0] * d[f, 1] - w[1] * d[f, 0]) / cross * d[e])
    return np.array(out, dtype=float)


def _point_chain_distance(p: np.ndarray, chain: np.ndarray) -> float:
    """Distance from ``p`` to the polyline ``chain`` (k >= 1 points)."""
    if len(chain) == 1:
        return float(np.linalg.norm(p - chain[0]))
    a, b = chain[:-1], chain[1:]
    ab = b - a
    t = np.clip(np.einsum("ij,ij->i", p - a, ab) / np.maximum(
        np.einsum("ij,ij->i", ab, ab), 1e-300), 0.0, 1.0)
    return float(np.sqrt(((a + t[:, None] * ab - p) ** 2).sum(axis=1).min()))


def polygon_area(hull: np.ndarray) -> float:
    if len(hull) < 3:
        return 0.0
    x, y = hull[:, 0], hull[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def polygon_centroid(hull: np.ndarray) -> np.ndarray:
    """Area centroid of a CCW polygon."""
    x, y = hull[:, 0], hull[:, 1]
    xn, yn = np.roll(x, -1), np.roll(y, -1)
    c = x * yn - xn * y
    area = 0.5 * float(c.sum())
    return np.array([float(((x + xn) * c).sum()), float(((y + yn) * c).sum())]) / (6.0 * area)


@dataclass(frozen=True)
class Rect:
    """An oriented rectangle around a hull: ``angle`` of its u side in radians, [0, pi/2)."""

    angle: float
    extent_u: float
    extent_v: float

    @property
    def area(self) -> float:
        return self.extent_u * self.extent_v


def min_area_rects(hull: np.ndarray, rel_tol: float = 1e-6) -> list[Rect]:
    """Minimum-area bounding rectangles of a convex hull (rotating calipers).

    One side of a minimum rectangle is flush with a hull edge, so only the hull edge
    directions are tried; the result is exact to floating point. Several rectangles are
    returned only when their areas tie within ``rel_tol`` (regular polygons), distinct modulo
    90 degrees, best first.
    """
    edges = np.roll(hull, -1, axis=0) - hull
    angles = np.mod(np.arctan2(edges[:, 1], edges[:, 0]), math.pi / 2.0)
    c, s = np.cos(angles), np.sin(angles)
    pu = hull @ np.stack([c, s])              # (k, n_angles)
    pv = hull @ np.stack([-s, c])
    eu = pu.max(axis=0) - pu.min(axis=0)
    ev = pv.max(axis=0) - pv.min(axis=0)
    area = eu * ev
    order = np.argsort(area, kind="stable")
    best = float(area[order[0]])
    out: list[Rect] = []
    for i in order:
        if area[i] > best * (1.0 + rel_tol) + 1e-300:
            break
        a = float(angles[i])
        diff = [abs((a - r.angle + math.pi / 4.0) % (math.pi / 2.0) - math.pi / 4.0) for r in out]
        if all(d > 1e-6 for d in diff):
            out.append(Rect(a, float(eu[i]), float(ev[i])))
    return out


def _outward_normals(hull: np.ndarray) -> np.ndarray:
    d = np.roll(hull, -1, axis=0) - hull
    n = np.stack([d[:, 1], -d[:, 0]], axis=1)
    length = np.linalg.norm(n, axis=1)
    keep = length > 0
    return n[keep] / length[keep, None]


def _point_segment_distance(points: np.ndarray, hull: np.ndarray) -> float:
    a = hull
    d = np.roll(hull, -1, axis=0) - hull
    rel = points[:, None, :] - a[None, :, :]
    dd = np.maximum((d * d).sum(axis=1), 1e-300)
    t = np.clip((rel * d[None, :, :]).sum(axis=2) / dd[None, :], 0.0, 1.0)
    closest = a[None, :, :] + t[:, :, None] * d[None, :, :]
    return float(np.linalg.norm(points[:, None, :] - closest, axis=2).min())


_GAP_SEEDS = 4
_GAP_SLACK_M = 1e-9


def _gap(p: np.ndarray, q: np.ndarray, pp: np.ndarray, qq: np.ndarray, push_pos: np.ndarray,
         push_neg: np.ndarray) -> float:
    """The gap of two disjoint convex polygons: the least vertex-to-edge distance either way,
    measured only for the vertices that can hold it. Along the axis that separates them
    most, a vertex's distance past the other polygon's extreme is a lower bound of its
    distance to it; the few vertices with the lowest bounds give an upper bound of the gap,
    and a vertex whose lower bound exceeds it cannot be the nearest. The same pairs hold the
    minimum, so the same float as measuring every vertex (a 900-vertex round table against
    a stool: a tenth of the pairs)."""
    sep_pos, sep_neg = -push_pos, -push_neg
    k_pos, k_neg = int(np.argmax(sep_pos)), int(np.argmax(sep_neg))
    if sep_pos[k_pos] >= sep_neg[k_neg]:   # p lies on the axis' positive side of q
        lb_p, lb_q = pp[:, k_pos] - qq[:, k_pos].max(), pp[:, k_pos].min() - qq[:, k_pos]
    else:
        lb_p, lb_q = qq[:, k_neg].min() - pp[:, k_neg], qq[:, k_neg] - pp[:, k_neg].max()
    seed_p = np.argsort(lb_p)[:_GAP_SEEDS]
    seed_q = np.argsort(lb_q)[:_GAP_SEEDS]
    bound = min(_point_segment_distance(p[seed_p], q), _point_segment_distance(q[seed_q], p))
    bound += _GAP_SLACK_M
    return min(_point_segment_distance(p[lb_p <= bound], q),
               _point_segment_distance(q[lb_q <= bound], p))


def convex_signed_distance(p: np.ndarray, q: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Signed floor-plane distance between two CCW convex polygons (>= 3 vertices each).

    Disjoint: (gap > 0, None). Touching: (0, None). Overlapping: (-depth, axis) where depth
    is the minimum translation distance (separating-axis theorem over both polygons' edge
    normals) and ``axis`` the unit direction in which to move ``p`` by ``depth`` to clear ``q``.
    """
    axes = np.vstack([_outward_normals(p), _outward_normals(q)])
    pp, qq = p @ axes.T, q @ axes.T
    push_pos = qq.max(axis=0) - pp.min(axis=0)
    push_neg = pp.max(axis=0) - qq.min(axis=0)
    if np.any(push_pos <= 0.0) or np.any(push_neg <= 0.0):
        return _gap(p, q, pp, qq, push_pos, push_neg), None
    i_pos, i_neg = int(np.argmin(push_pos)), int(np.argmin(push_neg))
    if push_pos[i_pos] <= push_neg[i_neg]:
        return -float(push_pos[i_pos]), axes[i_pos]
    return -float(push_neg[i_neg]), -axes[i_neg]


def _radius_cv(hull: np.ndarray, centre: np.ndarray) -> float:
    """Coefficient of variation of the boundary's distance to ``centre``, sampled uniformly
    by arc length (vertex radii would call a square circular)."""
    d = np.roll(hull, -1, axis=0) - hull
    seg = np.linalg.norm(d, axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    s = (np.arange(_RADIUS_SAMPLES) + 0.5) / _RADIUS_SAMPLES * cum[-1]
    i = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(hull) - 1)
    pts = hull[i] + ((s - cum[i]) / np.maximum(seg[i], 1e-300))[:, None] * d[i]
    r = np.linalg.norm(pts - centre, axis=1)
    return float(r.std() / r.mean())


# --------------------------------------------------------------------------- helpers

def _num(x: float) -> float:
    v = float(x)
    if not math.isfinite(v):
        raise GeometryError(f"non-finite value in geometry computation ({v})")
    return round(v, 6) + 0.0


def _vec(v: np.ndarray | None) -> list[float] | None:
    return None if v is None else [_num(x) for x in v]


def _unit(v: np.ndarray) -> np.ndarray | None:
    n = float(np.linalg.norm(v))
    return None if n < 1e-12 else v / n


def _angle_between_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.atan2(abs(a[0] * b[1] - a[1] * b[0]), float(np.dot(a, b))))


# Anchors whose members watch them (seats before a TV stand): such a seat faces its anchor
# square to the edge it stands before OR turned toward the anchor's centre - designers and
# the generator turn a seat beside the sofa toward the screen, the solver sets it square -
# but never more than WATCH_CAP_DEG off the screen's centre: square to the front, a seat
# far beside the stand would see the screen from the side (with the review's 10 deg
# tolerance, a passing seat faces within 25 deg of the screen's centre).
WATCHED_ROLES = ("tv_stand",)
WATCH_CAP_DEG = 15.0


def watch_arc(square: np.ndarray, to_centre: np.ndarray) -> np.ndarray:
    """The far end of a watching seat's arc (its near end is ``to_centre``): ``square``,
    or the direction WATCH_CAP_DEG from ``to_centre`` toward it when square is further."""
    c = to_centre / float(np.linalg.norm(to_centre))
    if _angle_between_deg(square, c) <= WATCH_CAP_DEG:
        return square
    turn = math.radians(WATCH_CAP_DEG) * (1.0 if c[0] * square[1] - c[1] * square[0] >= 0
                                          else -1.0)
    cos, sin = math.cos(turn), math.sin(turn)
    return np.array([cos * c[0] - sin * c[1], sin * c[0] + cos * c[1]])


def watch_facing(forward: np.ndarray, square: np.ndarray, to_centre: np.ndarray
                 ) -> tuple[np.ndarray, float]:
    """(target, error in degrees) of a seat watching its anchor: 0 anywhere on the arc from
    ``square`` (the edge's inward normal; ``watch_arc``: capped) to ``to_centre`` (toward
    the anchor's centre), else the angle to the arc's nearer end, which is the target."""
    far = watch_arc(square, to_centre)
    e_sq, e_c = _angle_between_deg(forward, far), _angle_between_deg(forward, to_centre)
    if e_sq + e_c <= _angle_between_deg(far, to_centre) + 1e-6:
        return forward, 0.0
    return (far, e_sq) if e_sq <= e_c else (to_centre, e_c)


def _near_triangles(ob: Obstacle, lo: np.ndarray, hi: np.ndarray,
                    margin: float = 1e-6) -> fcl.CollisionObject | None:
    """The obstacle's triangles whose plan bounding box meets [lo, hi] (a member's footprint
    box), as an fcl object; None if there are none. Exact for the 3-D test: the member lies
    inside its footprint in plan, so no other triangle can touch it. A high-poly neighbour
    (another group's 200k-triangle chair) then costs a BVH over the few triangles near the
    member, not over the whole chair, at every iteration."""
    tmin, tmax = ob.tris2.min(axis=1), ob.tris2.max(axis=1)
    keep = np.all(tmax >= lo - margin, axis=1) & np.all(tmin <= hi + margin, axis=1)
    if not keep.any():
        return None
    faces = ob.faces[keep]
    used, inverse = np.unique(faces, return_inverse=True)
    return fcl.CollisionObject(_bvh(ob.vertices[used], inverse.reshape(-1, 3)),
                               fcl.Transform())


def _wrap_deg(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


def _bvh(vertices: np.ndarray, faces: np.ndarray) -> fcl.BVHModel:
    model = fcl.BVHModel()
    model.beginModel(len(vertices), len(faces))
    model.addSubModel(np.ascontiguousarray(vertices, dtype=np.float64),
                      np.ascontiguousarray(faces, dtype=np.int32))
    model.endModel()
    return model


@dataclass
class _MeshData:
    vertices: np.ndarray
    faces: np.ndarray
    local_hull: np.ndarray
    bbox_corners: np.ndarray
    pivot_local: np.ndarray
    axis_local: np.ndarray | None
    seat_local: np.ndarray = field(default_factory=lambda: np.zeros(3))
    # Identifies the mesh arrays: objects with the same digest at the same scale share a BVH.
    digest: str = ""
    bvh_scale: tuple[float, ...] | None = None
    # Held here too so the model's lifetime never depends on fcl's Python wrapper.
    bvh: fcl.BVHModel | None = None
    obj: fcl.CollisionObject | None = None


@dataclass
class _Placed:
    """One object at its pose for the current compute() call."""

    name: str
    hull: np.ndarray
    z_range: tuple[float, float]
    rotation: np.ndarray
    translation: np.ndarray
    scale_key: tuple[float, ...]
    hull_lo: np.ndarray = field(init=False)
    hull_hi: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.hull_lo = self.hull.min(axis=0)
        self.hull_hi = self.hull.max(axis=0)


@dataclass(frozen=True)
class _Anchor:
    shape: str
    shape_reason: str
    centre: np.ndarray
    half: np.ndarray
    long_axis: str
    hull: np.ndarray
    aspect: float
    radius_cv: float


# forward_axes.json entries say whether a member's front was found ("front"), the member is
# measurably symmetric ("symmetric": facing is checked modulo its symmetry order), or neither
# could be told ("undetermined": facing is not measured and verify raises an unknown).
# Entries written before the field existed are read by the rule the detector used then.
SYMMETRIC_MIN_CONFIDENCE = 0.8
PARALLEL_COS = math.cos(math.radians(30.0))   # an anchor front this close to its long axis
# Symmetry orders (forward_axes.json ``symmetry.order``): 1 = a front; 2 / 4 = facing is
# checked modulo 180 / 90 degrees about the entry's ``reference_axis_local``; "continuous" =
# round, facing does not apply; None = the order was not measured, so facing is not either.
SYMMETRY_ORDERS = (1, 2, 4, "continuous")
ROUND_FACING_NOTE = "round (continuous rotational symmetry): facing does not apply"
DECLARED_SYMMETRIC_NOTE = "declared symmetric (forward_axis override): facing does not apply"
UNMEASURED_ORDER_NOTE = "symmetry order not measured"
DECLARE_FIX = ("declare it with relation_graph.json groups[].forward_axis.{name} or the "
               "object's custom property forward_axis (a front, or \"symmetric\" for no "
               "facing)")
UNDETERMINED_FACING_NOTE = ("front undetermined: facing is not measured (forward_axes.json; "
                            "declare the front with a forward_axis override)")


@dataclass(frozen=True)
class FacingSymmetry:
    """How a member's facing is measured, read from its forward_axes.json entry.

    ``order``: 1 (``axis`` is the front), 2 or 4 (``axis`` is the reference axis: the member
    is placed right when it points along the facing target modulo ``modulus_deg``),
    ``"continuous"`` (round or declared symmetric: facing does not apply) or None (not
    measured: ``note`` says why and what fixes it). ``source``: ``front``, ``measured``,
    ``declared`` (a forward_axis override), ``legacy`` (an entry written before symmetry
    orders), ``unmeasured`` (the detector could not measure the order) or ``undetermined``
    (no front and no symmetry)."""

    order: int | str | None
    axis: np.ndarray | None
    source: str
    member: str = ""

    @property
    def modulus_deg(self) -> float | None:
        return 360.0 / self.order if isinstance(self.order, int) else None

    @property
    def note(self) -> str | None:
        """Why facing has no error for this member (None when it is measured)."""
        if self.order == "continuous":
            return DECLARED_SYMMETRIC_NOTE if self.source == "declared" else ROUND_FACING_NOTE
        if self.source == "legacy":
            return (f"{UNMEASURED_ORDER_NOTE}: the member is symmetric but forward_axes.json "
                    "has no symmetry order for it (written before orders were measured), so "
                    "facing is not measured; re-detect the forward axes (delete the group's "
                    "forward_axes.json, init_iter0.py recomputes it) or "
                    + DECLARE_FIX.format(name=self.member))
        if self.source == "unmeasured":
            return (f"{UNMEASURED_ORDER_NOTE}: the member is symmetric but its symmetry order "
                    "could not be measured (forward_axes.json symmetry.order null), so facing "
                    "is not measured; " + DECLARE_FIX.format(name=self.member))
        if self.source == "undetermined":
            return UNDETERMINED_FACING_NOTE
        return None


def front_is_lengthwise(layout: Mapping[str, Any] | None) -> bool:
    """Does the layout declare the anchor's front axis to be its lengthwise axis? A layout
    that packs the side edges' members against the anchor's back or front end (``align``
    back / front: nightstands at a bed's headboard) says the anchor runs head to foot along
    its front, whatever its footprint's box says (a king bed with a wide headboard can be
    wider than it is long)."""
    return bool(layout) and (layout or {}).get("align", "centre") != "centre"


def parallel_facing_target(long_dir: np.ndarray, anchor_front: np.ndarray | None,
                           forward: np.ndarray | None, lengthwise_front: bool = False
                           ) -> np.ndarray:
    """The target of ``parallel_to_anchor_long_axis``: resolved against the anchor's front
    when that front lies within 30 degrees of the long axis (members face the way a bed
    does), or of the other box axis when the layout makes the front lengthwise
    (``front_is_lengthwise``); else whichever of +-long axis is closer to the member's
    forward (+long axis for a symmetric member)."""
    if anchor_front is not None:
        axes = [long_dir]
        if lengthwise_front:
            axes.append(np.array([-long_dir[1], long_dir[0]]))
        for axis in axes:
            if abs(float(anchor_front @ axis)) >= PARALLEL_COS:
                # resolved against the anchor's front: nightstands face the way the bed does
                return axis if float(anchor_front @ axis) > 0.0 else -axis
    return long_dir if forward is None or float(forward @ long_dir) >= 0.0 else -long_dir


def front_status(entry: Mapping[str, Any]) -> str:
    status = entry.get("status")
    if status in ("front", "symmetric", "undetermined"):
        return str(status)
    if entry.get("axis_local") is not None:
        return "front"
    if entry.get("method") == "override":
        return "symmetric"
    if entry.get("method") == "symmetric" and float(entry.get("confidence") or 0.0) \
            >= SYMMETRIC_MIN_CONFIDENCE:
        return "symmetric"
    return "undetermined"


def facing_symmetry(name: str, entry: Any) -> FacingSymmetry:
    """The facing symmetry of member ``name`` from its forward_axes.json entry (the rule is in
    docs/ARCHITECTURE.md, "Facing"). A ``symmetry`` field that is not the documented object
    raises GeometryError naming the field."""
    axis = _parse_axis(name, entry)
    status = front_status(entry)
    if status == "front":
        return FacingSymmetry(1, axis, "front", name)
    if status == "undetermined":
        return FacingSymmetry(None, None, "undetermined", name)
    declared = entry.get("method") == "override"
    sym = entry.get("symmetry")
    where = f"members.{name}.symmetry"
    if sym is None:   # written before symmetry orders: an override "symmetric" means no facing
        return FacingSymmetry("continuous", None, "declared", name) if declared else \
            FacingSymmetry(None, None, "legacy", name)
    if not isinstance(sym, Mapping) or "order" not in sym:
        raise GeometryError(f"symmetry of '{name}' is not an object with an 'order': {sym!r}",
                            file="forward_axes.json", field=where)
    order = sym["order"]
    source = "declared" if declared else "measured"
    if order is None:
        return FacingSymmetry(None, None, "unmeasured", name)
    if order == "continuous":
        return FacingSymmetry("continuous", None, source, name)
    if isinstance(order, bool) or order not in (2, 4):
        raise GeometryError(f"symmetry order of symmetric '{name}' must be 2, 4, \"continuous\" "
                            f"or null, got {order!r}", file="forward_axes.json",
                            field=f"{where}.order")
    ref = sym.get("reference_axis_local")
    arr = np.asarray(ref, dtype=float) if isinstance(ref, (list, tuple)) else np.zeros(0)
    unit = _unit(arr) if arr.shape == (2,) and np.all(np.isfinite(arr)) else None
    if unit is None:
        raise GeometryError(f"symmetry reference axis of '{name}' (order {order}) is not a "
                            f"non-zero [x, y] pair: {ref!r}", file="forward_axes.json",
                            field=f"{where}.reference_axis_local")
    return FacingSymmetry(int(order), unit, source, name)


def signed_angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    """The signed angle (degrees, counter-clockwise) that turns ``a`` onto ``b``."""
    return math.degrees(math.atan2(float(a[0] * b[1] - a[1] * b[0]), float(np.dot(a, b))))


def modulo_turn_deg(turn_deg: float, modulus_deg: float) -> float:
    """The minimal turn equivalent to ``turn_deg`` modulo ``modulus_deg``: in
    [-modulus/2, modulus/2)."""
    half = modulus_deg / 2.0
    return (turn_deg + half) % modulus_deg - half


def modulo_facing_error_deg(direction: np.ndarray, target: np.ndarray, modulus_deg: float
                            ) -> float:
    """The smallest angle between ``target`` and ``direction`` turned by k * modulus, in
    [0, modulus/2] (a 4-fold member at 90 degrees to its target is aligned)."""
    r = signed_angle_deg(direction, target) % modulus_deg
    return min(r, modulus_deg - r)


def _parse_axis(name: str, entry: Any) -> np.ndarray | None:
    if not isinstance(entry, Mapping) or "axis_local" not in entry:
        raise GeometryError(f"no forward-axis entry for '{name}'", file="forward_axes.json",
                            field=f"members.{name}.axis_local")
    axis = entry["axis_local"]
    if axis is None:
        return None
    arr = np.asarray(axis, dtype=float) if isinstance(axis, (list, tuple)) else np.zeros(0)
    unit = _unit(arr) if arr.shape == (2,) and np.all(np.isfinite(arr)) else None
    if unit is None:
        raise GeometryError(f"forward axis of '{name}' is not a non-zero [x, y] pair: {axis!r}",
                            file="forward_axes.json", field=f"members.{name}.axis_local")
    return unit


# --------------------------------------------------------------------------- slots

def _ring_slots(ordered: list[dict[str, Any]]) -> None:
    """Ideal ring angles: evenly spaced, phase = circular mean of the members' offsets."""
    k = len(ordered)
    theta = np.radians([m["angle_deg"] for m in ordered])
    base = 2.0 * math.pi * np.arange(k) / k
    phase = math.atan2(float(np.sin(theta - base).sum()), float(np.cos(theta - base).sum()))
    for i, m in enumerate(ordered):
        target = _wrap_deg(math.degrees(phase + base[i]))
        m.update(slot=i, angle_target_deg=target,
                 angle_deviation_deg=_wrap_deg(m["angle_deg"] - target))


def _aligned_slots(ordered: list[dict[str, Any]], placed: list[_Placed], anchor: _Placed,
                   tangent: np.ndarray, front: np.ndarray, align: str) -> None:
    """Slots on a side edge packed against the anchor's back (or front) end: the first
    member's footprint flush with that end, each next one SLOT_GAP_M further along."""
    sign = 1.0 if float(tangent @ front) >= 0.0 else -1.0   # +1: t grows toward the front
    if align == "front":
        sign = -sign                                        # pack from the front end
    end = float((sign * (anchor.hull @ tangent)).min())
    order = sorted(range(len(ordered)), key=lambda i: sign * ordered[i]["t"])
    cursor = end
    for slot, i in enumerate(order):
        m, u = ordered[i], sign * (placed[i].hull @ tangent)
        lo, hi = float(u.min()), float(u.max())
        ideal = sign * (sign * m["t"] + (cursor - lo))
        m.update(slot=slot, slot_offset_m=m["t"], slot_target_m=ideal,
                 slot_deviation_m=m["t"] - ideal)
        cursor += (hi - lo) + SLOT_GAP_M


def _edge_slots(ordered: list[dict[str, Any]], edge_length: float) -> None:
    """Ideal slots on one edge: k equal cells over S = max(L, k * (w_max + SLOT_GAP_M))."""
    k = len(ordered)
    w_max = max(m["tangent_extent_m"] for m in ordered)
    span = max(edge_length, k * (w_max + SLOT_GAP_M))
    for i, m in enumerate(ordered):
        ideal = -span / 2.0 + span * (i + 0.5) / k
        m.update(slot=i, slot_offset_m=m["t"], slot_target_m=ideal,
                 slot_deviation_m=m["t"] - ideal)


# --------------------------------------------------------------------------- context

class GeometryContext:
    """Per-group cache: build hulls/pivots/BVHs once, then :meth:`compute` per iteration."""

    def __init__(self, meshes: Meshes, anchor_id: str, forward_axes: Mapping[str, Any],
                 context: Meshes | None = None) -> None:
        if anchor_id not in meshes:
            raise GeometryError(f"anchor '{anchor_id}' has no mesh")
        self.anchor_id = anchor_id
        self.member_ids = sorted(n for n in meshes if n != anchor_id)
        fa_members = forward_axes.get("members", {}) if isinstance(forward_axes, Mapping) else {}
        self._data: dict[str, _MeshData] = {}
        self._bvhs: dict[tuple[str, tuple[float, ...]], fcl.BVHModel] = {}
        prepared: dict[str, _MeshData] = {}  # by mesh digest: identical meshes prepared once
        self._context = ObstacleContext(context) if context else None
        # obstacles.nearest per (footprint, band): a member that did not move is not
        # measured against the context again (the same floats)
        self._symmetry: dict[str, FacingSymmetry] = {}
        # an undetermined front's alignment axis and modulus (``undetermined_alignment``)
        self._alignment: dict[str, tuple[np.ndarray, float]] = {}
        anchor_entry = forward_axes.get("anchor") if isinstance(forward_axes, Mapping) else None
        self._anchor_status = front_status(anchor_entry) if isinstance(anchor_entry, Mapping) \
            else "undetermined"
        self._anchor_axis = (_parse_axis(anchor_id, anchor_entry)
                             if self._anchor_status == "front" else None)
        from .forward_axis import undetermined_alignment  # it imports this module

        for name in [anchor_id, *self.member_ids]:
            verts, faces = meshes[name]
            axis = None
            if name != anchor_id:
                sym = self._symmetry[name] = facing_symmetry(name, fa_members.get(name))
                axis = sym.axis if sym.order == 1 else None
                entry = fa_members.get(name)
                aligned = undetermined_alignment(entry) if sym.source == "undetermined" \
                    and isinstance(entry, Mapping) else None
                if aligned is not None:
                    self._alignment[name] = (np.array(aligned[0], dtype=float), aligned[1])
            self._data[name] = self._prepare(name, verts, faces, axis, prepared)

    @staticmethod
    def _prepare(name: str, verts: np.ndarray, faces: np.ndarray, axis: np.ndarray | None,
                 prepared: dict[str, _MeshData]) -> _MeshData:
        v = np.asarray(verts, dtype=float)
        f = np.asarray(faces)
        if v.ndim != 2 or v.shape[1] != 3 or len(v) == 0:
            raise GeometryError(f"object '{name}' has no vertices")
        if not np.all(np.isfinite(v)):
            raise GeometryError(f"object '{name}' has non-finite vertices")
        if f.ndim != 2 or f.shape[1] != 3 or len(f) == 0:
            raise GeometryError(f"object '{name}' has no triangles")
        if f.min() < 0 or f.max() >= len(v):
            raise GeometryError(f"object '{name}' has face indices out of range")
        faces32 = np.ascontiguousarray(f, dtype=np.int32)
        key = mesh_digest(v, f)   # the same key as faces32's; f may be a shared read-only array

        def build() -> _MeshData:
            kv = keyed_vertices(v)   # what the key says, whichever variant came first
            hull = convex_hull_2d(kv[:, :2])
            if len(hull) < 3:
                raise GeometryError(f"object '{name}' has a degenerate footprint "
                                    "(all vertices collinear in the floor plane)")
            lo, hi = kv.min(axis=0), kv.max(axis=0)
            corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                                for z in (lo[2], hi[2])])
            return _MeshData(vertices=kv, faces=faces32, local_hull=hull, bbox_corners=corners,
                             pivot_local=frames.footprint_centre_local(kv), axis_local=None,
                             seat_local=frames.seat_centre_local(kv), digest=key)

        # Identical meshes (one asset's chairs; the same unit every iteration in a step host
        # or a scene run) are prepared once per process.
        same = prepared.get(key) or remembered("geometry.mesh", key, build)
        prepared[key] = same
        return _MeshData(vertices=same.vertices, faces=same.faces, local_hull=same.local_hull,
                         bbox_corners=same.bbox_corners, pivot_local=same.pivot_local,
                         axis_local=axis, seat_local=same.seat_local, digest=key)

    # ----------------------------------------------------------------- placement

    def _place(self, name: str, pose: np.ndarray) -> _Placed:
        data = self._data[name]
        lin = pose[:3, :3]
        tol = 1e-9 * max(float(np.abs(lin).max()), 1e-300)
        if max(abs(lin[2, 0]), abs(lin[2, 1]), abs(lin[0, 2]), abs(lin[1, 2])) <= tol:
            # Upright pose: the footprint is an affine image of the cached local hull.
            pts = data.local_hull @ lin[:2, :2].T + pose[:2, 3]
        else:
            pts = frames.transform_points(pose, data.vertices)[:, :2]
        hull = convex_hull_2d(pts)
        if len(hull) < 3:
            raise GeometryError(f"object '{name}' has a degenerate footprint at its pose")
        z = frames.transform_points(pose, data.bbox_corners)[:, 2]
        t, rot, scale = frames.decompose(pose)
        # fcl transforms are rigid, so the pose's scale is baked into the BVH; it only
        # changes when the scale does (deltas are translations and yaws). Keyed at 6
        # significant digits (0.4 um on a 0.4 m chair): the same scaled chair in another
        # group decomposes to a scale that differs in the 8th digit, and must share the BVH.
        key = tuple(float(f"{float(s):.6g}") for s in scale)
        return _Placed(name=name, hull=hull, z_range=(float(z.min()), float(z.max())),
                       rotation=rot, translation=t, scale_key=key)

    def _collision_object(self, placed: _Placed,
                          offset_xy: np.ndarray | None = None) -> fcl.CollisionObject:
        """The object's fcl object at its placed pose (plus ``offset_xy``); the BVH is built
        on first use, or taken from another object with the same mesh arrays and scale."""
        data = self._data[placed.name]
        if data.obj is None or data.bvh_scale != placed.scale_key:
            cache_key = (data.digest, placed.scale_key)
            bvh = self._bvhs.get(cache_key)
            if bvh is None:   # built once per mesh and scale in this process
                bvh = remembered("geometry.bvh", f"{data.digest}:{placed.scale_key!r}",
                                 lambda: _bvh(data.vertices * np.asarray(placed.scale_key),
                                              data.faces))
                self._bvhs[cache_key] = bvh
            data.bvh = bvh
            data.obj = fcl.CollisionObject(bvh, fcl.Transform())
            data.bvh_scale = placed.scale_key
        t = placed.translation.copy()
        if offset_xy is not None:
            t[:2] += offset_xy
        data.obj.setTransform(fcl.Transform(placed.rotation, t))
        return data.obj

    def _collide(self, a: _Placed, b: _Placed, offset_xy: np.ndarray | None = None) -> bool:
        """Do the meshes intersect with ``a`` moved by ``offset_xy``?"""
        obj_a = self._collision_object(a, offset_xy)
        obj_b = self._collision_object(b)
        request, result = fcl.CollisionRequest(), fcl.CollisionResult()
        return fcl.collide(obj_a, obj_b, request, result) > 0

    def _penetration_depth(self, a: _Placed, b: _Placed) -> float:
        """Horizontal distance ``a`` must move (along the floor-plane separating axis of the
        two footprint hulls) until the meshes no longer intersect; 0 if they do not.

        fcl's per-contact ``penetration_depth`` for triangle meshes is the local
        triangle-triangle depth (a 5 cm overlap of two boxes reports 30 cm), so only fcl's
        exact yes/no answer is used and the depth is found by bisection.
        """
        if a.z_range[0] > b.z_range[1] or b.z_range[0] > a.z_range[1]:
            return 0.0
        # Broad phase: footprints whose bounding boxes are apart cannot overlap. (Boxes
        # that only touch go on to the exact test, as before.)
        if np.any(a.hull_lo > b.hull_hi) or np.any(b.hull_lo > a.hull_hi):
            return 0.0
        signed, axis = convex_signed_distance(a.hull, b.hull)
        if axis is None or not self._collide(a, b):
            return 0.0
        lo, hi = 0.0, -signed * (1.0 + 1e-9) + 1e-6
        while hi - lo > PENETRATION_RESOLUTION_M:
            mid = 0.5 * (lo + hi)
            if self._collide(a, b, axis * mid):
                lo = mid
            else:
                hi = mid
        return hi

    # ----------------------------------------------------------------- anchor

    def _anchor_shape(self, hull: np.ndarray, target_spec: Mapping[str, Any]) -> _Anchor:
        lo, hi = hull.min(axis=0), hull.max(axis=0)
        half = (hi - lo) / 2.0
        rect = min_area_rects(hull)[0]
        aspect = max(rect.extent_u, rect.extent_v) / max(min(rect.extent_u, rect.extent_v),
                                                         1e-300)
        centroid = polygon_centroid(hull)
        cv = _radius_cv(hull, centroid)
        if target_spec.get("pattern") == "ring":
            reason = "pattern is ring"
        elif "round" in str(target_spec.get("anchor_role", "")).lower():
            reason = "anchor_role contains 'round'"
        elif aspect < ROUND_MAX_ASPECT and cv < ROUND_MAX_RADIUS_CV:
            reason = "near-circular footprint"
        else:
            reason = "rectangular footprint"
        shape = "rect" if reason == "rectangular footprint" else "round"
        centre = (lo + hi) / 2.0 if shape == "rect" else centroid
        return _Anchor(shape=shape, shape_reason=reason, centre=centre, half=half,
                       long_axis="x" if half[0] >= half[1] else "y", hull=hull,
                       aspect=aspect, radius_cv=cv)

    @staticmethod
    def _edge_info(anchor: _Anchor) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for e in EDGE_ORDER:
            n, tangent = np.array(_EDGE_NORMAL[e]), np.array(_EDGE_TANGENT[e])
            h_normal = anchor.half[0] if e[1] == "x" else anchor.half[1]
            length = 2.0 * (anchor.half[1] if e[1] == "x" else anchor.half[0])
            midpoint = anchor.centre + n * h_normal
            out[e] = {"role": "short" if e[1] == anchor.long_axis else "long",
                      "normal": n, "tangent": tangent, "length_m": length,
                      "midpoint": midpoint, "offset_m": float(n @ midpoint)}
        return out

    # ----------------------------------------------------------------- compute

    def compute(self, poses: Mapping[str, Any], target_spec: Mapping[str, Any],
                iter_index: int) -> dict[str, Any]:
        """The geometry.json document for one iteration's canonical poses."""
        for name in poses:
            if name not in self._data:
                raise GeometryError(f"pose given for '{name}', which has no mesh")
        placed: dict[str, _Placed] = {}
        pivots: dict[str, np.ndarray] = {}
        yaws: dict[str, float] = {}
        for name in [self.anchor_id, *self.member_ids]:
            if name not in poses:
                raise GeometryError(f"object '{name}' has no pose")
            try:
                pose = frames.as_matrix(poses[name])
            except ValueError as exc:
                raise GeometryError(f"pose of '{name}': {exc}") from exc
            placed[name] = self._place(name, pose)
            pivots[name] = frames.pivot_in_frame(pose, self._data[name].pivot_local)[:2]
            yaws[name] = frames.yaw_deg(pose)
        anchor = self._anchor_shape(placed[self.anchor_id].hull, target_spec)
        edges = self._edge_info(anchor)
        # Members of round anchors (pattern "ring" included) sit on one "ring" edge.
        ring_mode = anchor.shape == "round"
        target_clearance = float(target_spec.get("clearance_m", 0.0))
        facing = str(target_spec.get("facing", ""))
        front = self._front(placed[self.anchor_id], edges, ring_mode)
        layout = layout_of(target_spec)
        by_seat = bool(layout and layout["centre_on"] == "seat")
        seats = {n: frames.pivot_in_frame(frames.as_matrix(poses[n]), self._data[n].seat_local)
                 [:2] for n in [self.anchor_id, *self.member_ids]}

        members: dict[str, dict[str, Any]] = {}
        for name in self.member_ids:
            m = self._member(name, placed[name], pivots[name], yaws[name], anchor, edges,
                             ring_mode, facing, target_clearance, front,
                             front_is_lengthwise(layout),
                             str(target_spec.get("anchor_role", "")) in WATCHED_ROLES)
            self._relate(m, placed[name], placed[self.anchor_id], front, edges,
                         seats[name] - seats[self.anchor_id] if by_seat else None)
            members[name] = m
        pairs = self._penetrations(placed, members)
        obstacles = self._obstacles(placed, members)
        on_edge = self._assign_slots(members, edges, ring_mode, layout, front, placed,
                                     placed[self.anchor_id])
        spacing = self._spacing(members, on_edge, ring_mode)
        group = self._group(members, on_edge, spacing, edges, ring_mode, target_spec,
                            target_clearance, pairs, layout, front)
        group["obstacles"] = obstacles
        group["obstacle_penetrations"] = sum(1 for m in members.values()
                                             if m["obstacle_penetrations"])
        return {
            "iter": int(iter_index),
            "frame": "canonical",
            "units": "metres, degrees",
            "anchor": {**self._anchor_doc(anchor, edges),
                       "front": {"status": self._anchor_status,
                                 "direction": _vec(front[0]) if front else None,
                                 "edge": front[1] if front else None}},
            "layout": layout,
            "target": {k: target_spec[k] for k in (
                "anchor_role", "member_count", "pattern", "facing", "spacing", "clearance_m",
                "free_note") if k in target_spec},
            "members": {name: self._member_doc(m) for name, m in members.items()},
            "group": group,
        }

    def _front(self, anchor: _Placed, edges: dict[str, dict[str, Any]], ring_mode: bool
               ) -> tuple[np.ndarray, str | None] | None:
        """(the anchor's front as a canonical direction, the rect edge it points out of),
        or None when the anchor's front is not known (forward_axes.json::anchor)."""
        if self._anchor_axis is None:
            return None
        direction = _unit((anchor.rotation @ np.array([*self._anchor_axis, 0.0]))[:2])
        if direction is None:
            return None
        edge = None if ring_mode else max(EDGE_ORDER, key=lambda e: float(
            edges[e]["normal"] @ direction))
        return direction, edge

    @staticmethod
    def _relate(m: dict[str, Any], placed: _Placed, anchor: _Placed,
                front: tuple[np.ndarray, str | None] | None, edges: dict[str, dict[str, Any]],
                seat_offset: np.ndarray | None) -> None:
        """Anchor-relative measures: which side of the anchor's front the member is on, how
        far its back sits from the anchor's back end (0 = flush with a headboard line), and
        the slot coordinate by seat when the layout centres on seats."""
        side, back = None, None
        front_edge = None if front is None else front[1]
        if front is not None and front_edge is not None and m["edge"] in edges:
            direction = front[0]
            side = ("front" if m["edge"] == front_edge else
                    "back" if m["edge"] == opposite_edge(front_edge) else "side")
            if side == "side":   # along the edge, as the aligned slots measure it
                tangent = edges[m["edge"]]["tangent"]
                sign = 1.0 if float(tangent @ direction) >= 0.0 else -1.0
                back = float((sign * (placed.hull @ tangent)).min()
                             - (sign * (anchor.hull @ tangent)).min())
        m["anchor_side"], m["back_alignment_m"] = side, back
        if seat_offset is not None and m["t"] is not None and m["edge"] in edges:
            m["t"] = float(edges[m["edge"]]["tangent"] @ seat_offset)
            m["slot_reference"] = "seat"

    def _member(self, name: str, placed: _Placed, centre: np.ndarray, yaw: float,
                anchor: _Anchor, edges: dict[str, dict[str, Any]], ring_mode: bool, facing: str,
                target_clearance: float,
                front: tuple[np.ndarray, str | None] | None = None,
                lengthwise_front: bool = False, watched: bool = False) -> dict[str, Any]:
        rel = centre - anchor.centre
        angle = math.degrees(math.atan2(rel[1], rel[0]))
        if ring_mode:
            edge, role = "ring", "ring"
            inward = _unit(-rel)
        else:
            dist = {e: float(edges[e]["normal"] @ centre) - edges[e]["offset_m"]
                    for e in EDGE_ORDER}
            edge = max(EDGE_ORDER, key=lambda e: dist[e])
            role = edges[edge]["role"]
            inward = -edges[edge]["normal"]
        tangent = None if ring_mode else edges[edge]["tangent"]
        axis = self._data[name].axis_local
        sym = self._symmetry[name]
        forward = reference = None
        if axis is not None:
            forward = _unit((placed.rotation @ np.array([axis[0], axis[1], 0.0]))[:2])
        if sym.order in (2, 4) and sym.axis is not None:
            # the reference axis turns with the member's yaw exactly as a front does
            reference = _unit((placed.rotation @ np.array([sym.axis[0], sym.axis[1], 0.0]))
                              [:2])
        target, error, note = self._facing(facing, forward, inward, anchor, sym, reference,
                                           None if front is None else front[0],
                                           lengthwise_front)
        alignment = None
        if name in self._alignment and target is not None:
            # no front to measure, but its line: off it, it misses the target either way
            ref, modulus = self._alignment[name]
            turned = _unit((placed.rotation @ np.array([ref[0], ref[1], 0.0]))[:2])
            if turned is not None:
                alignment = (modulo_facing_error_deg(turned, target, modulus), modulus)
        to_centre = _unit(-rel) if watched else None
        if (to_centre is not None and not ring_mode and facing == "toward_anchor"
                and sym.order == 1 and forward is not None and inward is not None):
            target, error = watch_facing(forward, inward, to_centre)
        clearance, _ = convex_signed_distance(placed.hull, anchor.hull)
        proj_t = None if tangent is None else placed.hull @ tangent
        return {
            "footprint_centre": centre, "yaw_deg": yaw,
            "forward_canonical": forward, "facing_target": target, "facing_error_deg": error,
            "facing_note": note, "facing_symmetry_order": sym.order,
            "facing_modulus_deg": sym.modulus_deg, "facing_reference_canonical": reference,
            "facing_alignment_error_deg": None if alignment is None else alignment[0],
            "facing_alignment_modulus_deg": None if alignment is None else alignment[1],
            "clearance_m": clearance,
            "clearance_error_m": clearance - target_clearance, "penetrations": {},
            "edge": edge, "edge_role": role, "angle_deg": angle,
            "t": None if tangent is None else float(tangent @ (centre - anchor.centre)),
            "tangent_extent_m": None if proj_t is None else float(proj_t.max() - proj_t.min()),
            "slot": None, "slot_offset_m": None, "slot_target_m": None,
            "slot_deviation_m": None, "angle_target_deg": None, "angle_deviation_deg": None,
        }

    @staticmethod
    def _facing(facing: str, forward: np.ndarray | None, inward: np.ndarray | None,
                anchor: _Anchor, sym: FacingSymmetry, reference: np.ndarray | None,
                anchor_front: np.ndarray | None = None, lengthwise_front: bool = False
                ) -> tuple[np.ndarray | None, float | None, str | None]:
        """(target, error, note): a front's unsigned angle to the target in [0, 180]; a 2- or
        4-fold member's reference axis to the target modulo 180 / 90 degrees, in [0, 90] /
        [0, 45]; no error (a note saying why) when facing does not apply or is not measured."""
        if facing == "mixed":
            return None, None, "mixed: see free_note"
        if facing == "toward_anchor":
            target = inward
        elif facing == "away_from_anchor":
            target = None if inward is None else -inward
        elif facing == "parallel_to_anchor_long_axis":
            long_dir = np.array([1.0, 0.0] if anchor.long_axis == "x" else [0.0, 1.0])
            target = parallel_facing_target(long_dir, anchor_front, forward, lengthwise_front)
        else:
            return None, None, f"unknown facing '{facing}'"
        if sym.order not in (1, 2, 4):   # round, declared symmetric, or not measured
            return target, None, sym.note
        if target is None:
            return None, None, "member footprint centre coincides with the anchor centre"
        if sym.order == 1:
            if forward is None:
                return target, None, "forward axis is vertical at this pose"
            return target, _angle_between_deg(forward, target), None
        if reference is None:
            return target, None, "symmetry reference axis is vertical at this pose"
        modulus = sym.modulus_deg or 360.0
        return target, modulo_facing_error_deg(reference, target, modulus), None

    def _obstacles(self, placed: dict[str, _Placed], members: dict[str, dict[str, Any]]
                   ) -> list[str]:
        """Each member against the island's fixed context (``island_tools.measure.obstacles``):
        ``obstacle_clearance_m`` (signed floor-plane distance to the nearest obstacle's part
        in the band), ``nearest_obstacle``, and ``obstacle_penetrations`` where the
        footprints overlap by more than 5 mm AND fcl finds the meshes intersecting (a chair
        tucked under another group's table top overlaps it in plan, not in space)."""
        for m in members.values():
            m.update(obstacle_clearance_m=None, nearest_obstacle=None, obstacle_penetrations={})
        if self._context is None:
            return []
        floor = placed[self.anchor_id].z_range[0]
        top = max(p.z_range[1] for p in placed.values())
        band = self._context.band(floor, top)
        by_name = {ob.name: ob for ob in band}
        ids = tuple(id(ob) for ob in band)
        for name, m in members.items():
            # in the process, not the context: a run measures each iteration with a new
            # GeometryContext, and the band's obstacles are the same objects
            # (``obstacles._BANDS``), so a member that did not move costs nothing
            key = (np.ascontiguousarray(placed[name].hull).tobytes(), ids)
            hit = _NEAREST.get(key)
            if hit is None or len(hit[0]) != len(band) or any(
                    a is not b for a, b in zip(hit[0], band, strict=True)):
                if len(_NEAREST) >= NEAREST_MEMO:
                    _NEAREST.clear()
                hit = (list(band), obstacle_nearest(placed[name].hull, band,
                                                    PENETRATION_MIN_DEPTH_M))
                _NEAREST[key] = hit
            nearest, gap, deep = hit[1]
            if nearest is None:
                continue
            m["obstacle_clearance_m"], m["nearest_obstacle"] = gap, nearest
            obj = None   # the member's BVH, built only when a footprint overlap needs it
            lo, hi = placed[name].hull.min(axis=0), placed[name].hull.max(axis=0)
            for other, d in deep.items():
                near = _near_triangles(by_name[other], lo, hi)
                if near is None:
                    continue
                if obj is None:
                    obj = self._collision_object(placed[name])
                request, result = fcl.CollisionRequest(), fcl.CollisionResult()
                if fcl.collide(obj, near, request, result) > 0:
                    m["obstacle_penetrations"][other] = -d
        return [ob.name for ob in band]

    def _penetrations(self, placed: dict[str, _Placed],
                      members: dict[str, dict[str, Any]]) -> int:
        names = [self.anchor_id, *self.member_ids]
        pairs = 0
        for a in self.member_ids:
            for b in names[: names.index(a)]:
                depth = self._penetration_depth(placed[a], placed[b])
                if depth <= PENETRATION_MIN_DEPTH_M:
                    continue
                pairs += 1
                members[a]["penetrations"][b] = depth
                if b in members:
                    members[b]["penetrations"][a] = depth
        return pairs

    @staticmethod
    def _assign_slots(members: dict[str, dict[str, Any]], edges: dict[str, dict[str, Any]],
                      ring_mode: bool, layout: Mapping[str, Any] | None = None,
                      front: tuple[np.ndarray, str | None] | None = None,
                      placed: Mapping[str, _Placed] | None = None,
                      anchor: _Placed | None = None) -> dict[str, list[str]]:
        """Edge -> member names in slot order; fills each member's slot fields. A layout
        that aligns the side edges packs their members against the anchor's back (or
        front) end instead of spreading them (``layout.align``)."""
        on_edge: dict[str, list[str]] = {}
        for name, m in members.items():
            on_edge.setdefault(m["edge"], []).append(name)
        align = (layout or {}).get("align", "centre")
        for edge, names in on_edge.items():
            key = "angle_deg" if ring_mode else "t"
            names.sort(key=lambda n: (members[n][key], n))
            if ring_mode:
                _ring_slots([members[n] for n in names])
            elif (align != "centre" and front is not None and front[1] is not None
                  and edge not in (front[1], opposite_edge(front[1]))
                  and placed is not None and anchor is not None):
                _aligned_slots([members[n] for n in names], [placed[n] for n in names],
                               anchor, edges[edge]["tangent"], front[0], align)
            else:
                _edge_slots([members[n] for n in names], edges[edge]["length_m"])
        return on_edge

    @staticmethod
    def _spacing(members: dict[str, dict[str, Any]], on_edge: dict[str, list[str]],
                 ring_mode: bool) -> dict[str, Any]:
        if ring_mode:
            names = on_edge.get("ring", [])
            angles = sorted(members[n]["angle_deg"] for n in names)
            if len(angles) < 2:
                gaps = [360.0] if angles else []
                cv = 0.0 if angles else None
            else:
                gaps = list(np.diff(angles)) + [360.0 - (angles[-1] - angles[0])]
                cv = float(np.std(gaps) / np.mean(gaps))
            return {"mode": "ring", "per_edge_max_deviation_m": {}, "max_deviation_m": None,
                    "ring_gap_cv": None if cv is None else _num(cv),
                    "ring_gaps_deg": [_num(g) for g in gaps]}
        per_edge = {e: _num(max(abs(members[n]["slot_deviation_m"]) for n in on_edge[e]))
                    for e in EDGE_ORDER if e in on_edge}
        return {"mode": "edges", "per_edge_max_deviation_m": per_edge,
                "max_deviation_m": max(per_edge.values()) if per_edge else None,
                "ring_gap_cv": None, "ring_gaps_deg": None}

    @staticmethod
    def _layout_pattern(layout: Mapping[str, Any], on_edge: dict[str, list[str]],
                        edges: dict[str, dict[str, Any]], ring_mode: bool,
                        front: tuple[np.ndarray, str | None] | None) -> dict[str, Any]:
        """A free pattern given as a layout (``island_tools.measure.layout``): checkable by
        edges."""
        counts = {e: len(on_edge.get(e, [])) for e in EDGE_ORDER}
        if ring_mode:
            return {"expected": None, "observed": {"ring": len(on_edge.get("ring", []))},
                    "match": None, "note": "round anchor: a layout by edges is not checkable"}
        expected = resolve_layout(layout, edges, None if front is None else front[1])
        if expected is None:
            return {"expected": None, "observed": counts, "match": None, "needs": "anchor_front",
                    "note": "the layout is relative to the anchor's front, which is "
                            "undetermined (forward_axes.json::anchor)"}
        return {"expected": expected, "observed": counts, "match": counts == expected,
                "note": f"layout {dict(layout)}"}

    @staticmethod
    def _pattern(pattern: str, on_edge: dict[str, list[str]], members: dict[str, dict[str, Any]],
                 edges: dict[str, dict[str, Any]], ring_mode: bool) -> dict[str, Any]:
        k = len(members)
        counts = {e: len(v) for e, v in on_edge.items()}
        nonempty = sorted((e for e in counts if counts[e]), key=_EDGE_RANK.__getitem__)
        if pattern in ("cluster", "free"):
            return {"expected": None, "observed": {"nonempty_edges": nonempty}, "match": None,
                    "note": f"{pattern}: not checkable"}
        if pattern == "ring":
            return {"expected": {"ring": k}, "observed": {"ring": counts.get("ring", 0)},
                    "match": counts.get("ring", 0) == k,
                    "note": "evenness is spacing.ring_gap_cv"}
        if ring_mode:
            return {"expected": None, "observed": {"ring": counts.get("ring", 0)}, "match": None,
                    "note": f"round anchor: pattern '{pattern}' is not checkable by edges"}
        by_role: dict[str, list[int]] = {"long": [], "short": []}
        for e in EDGE_ORDER:
            by_role[edges[e]["role"]].append(counts.get(e, 0))
        roles = {r: sorted(v, reverse=True) for r, v in by_role.items()}
        if pattern == "row":
            observed: dict[str, Any] = {"nonempty_edges": len(nonempty),
                                        "on_one_edge": max(counts.values(), default=0)}
            expected: dict[str, Any] = {"nonempty_edges": 1, "on_one_edge": k}
            return {"expected": expected, "observed": observed, "match": observed == expected,
                    "note": None}
        if pattern in ("2+2+1", "2+2+1+1"):
            expected = {"long": [2, 2], "short": [1, 0] if pattern == "2+2+1" else [1, 1]}
            return {"expected": expected, "observed": roles, "match": roles == expected,
                    "note": None}
        if pattern == "L":
            match = len(nonempty) == 2 and nonempty[0][1] != nonempty[1][1]
            return {"expected": {"nonempty_edges": "two adjacent edges"},
                    "observed": {"nonempty_edges": nonempty}, "match": match, "note": None}
        # T: everything on one long edge, bunched around its midpoint.
        names = [n for e in nonempty for n in on_edge[e]]
        w_max = max((members[n]["tangent_extent_m"] for n in names), default=0.0)
        tol = w_max / 2.0 + T_CENTRE_TOL_M
        max_t = max((abs(members[n]["t"]) for n in names), default=0.0)
        match = (len(nonempty) == 1 and edges[nonempty[0]]["role"] == "long" and max_t <= tol)
        return {"expected": {"nonempty_edges": 1, "edge_role": "long",
                             "max_abs_offset_m": _num(tol)},
                "observed": {"nonempty_edges": nonempty, "max_abs_offset_m": _num(max_t)},
                "match": match, "note": None}

    def _group(self, members: dict[str, dict[str, Any]], on_edge: dict[str, list[str]],
               spacing: dict[str, Any], edges: dict[str, dict[str, Any]],
               ring_mode: bool, target_spec: Mapping[str, Any], target_clearance: float,
               pairs: int, layout: Mapping[str, Any] | None = None,
               front: tuple[np.ndarray, str | None] | None = None) -> dict[str, Any]:
        errors = [m["facing_error_deg"] for m in members.values()
                  if m["facing_error_deg"] is not None]
        clear_err = [abs(m["clearance_error_m"]) for m in members.values()]
        edge_names = ("ring",) if ring_mode else EDGE_ORDER
        target_count = target_spec.get("member_count")
        return {
            "member_count": {"observed": len(members), "target": target_count,
                             "match": target_count == len(members)},
            "edge_counts": {e: len(on_edge.get(e, [])) for e in edge_names},
            "pattern": (self._layout_pattern(layout, on_edge, edges, ring_mode, front)
                        if layout is not None and target_spec.get("pattern") in ("free",
                                                                                  "cluster")
                        else self._pattern(str(target_spec.get("pattern", "")), on_edge,
                                           members, edges, ring_mode)),
            "spacing": spacing,
            "facing_error_max_deg": _num(max(errors)) if errors else None,
            "facing_error_mean_deg": _num(sum(errors) / len(errors)) if errors else None,
            "clearance_error_max_m": _num(max(clear_err)) if clear_err else None,
            "clearance_violations": sum(
                1 for m in members.values()
                if m["clearance_m"] < target_clearance - CLEARANCE_VIOLATION_TOL_M),
            "penetration_pairs": pairs,
        }

    def _anchor_doc(self, anchor: _Anchor, edges: dict[str, dict[str, Any]]) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.anchor_id, "shape": anchor.shape, "shape_reason": anchor.shape_reason,
            "centre": _vec(anchor.centre), "half_extents_m": _vec(anchor.half),
            "long_axis": anchor.long_axis,
            "min_rect_aspect": _num(anchor.aspect), "radius_cv": _num(anchor.radius_cv),
        }
        if anchor.shape == "round":
            dist = np.linalg.norm(anchor.hull - anchor.centre, axis=1)
            normals = _outward_normals(anchor.hull)
            offsets = np.einsum("ij,ij->i", normals, anchor.hull)
            doc["radius_m"] = _num(dist.max())
            doc["inradius_m"] = _num(float((offsets - normals @ anchor.centre).min()))
            doc["edges"] = {}
        else:
            doc["edges"] = {e: {"role": info["role"], "normal": _vec(info["normal"]),
                                "tangent": _vec(info["tangent"]),
                                "length_m": _num(info["length_m"]),
                                "midpoint": _vec(info["midpoint"])} for e, info in edges.items()}
        return doc

    @staticmethod
    def _member_doc(m: dict[str, Any]) -> dict[str, Any]:
        def opt(x: float | None) -> float | None:
            return None if x is None else _num(x)

        return {
            "footprint_centre": _vec(m["footprint_centre"]),
            "yaw_deg": _num(m["yaw_deg"]),
            "forward_canonical": _vec(m["forward_canonical"]),
            "facing_target": _vec(m["facing_target"]),
            "facing_error_deg": opt(m["facing_error_deg"]),
            "facing_note": m["facing_note"],
            "facing_symmetry_order": m["facing_symmetry_order"],
            "facing_modulus_deg": opt(m["facing_modulus_deg"]),
            "facing_reference_canonical": _vec(m["facing_reference_canonical"]),
            "facing_alignment_error_deg": opt(m["facing_alignment_error_deg"]),
            "facing_alignment_modulus_deg": opt(m["facing_alignment_modulus_deg"]),
            "clearance_m": _num(m["clearance_m"]),
            "clearance_error_m": _num(m["clearance_error_m"]),
            "penetrations": {k: _num(v) for k, v in sorted(m["penetrations"].items())},
            "edge": m["edge"],
            "edge_role": m["edge_role"],
            "slot": m["slot"],
            "slot_offset_m": opt(m["slot_offset_m"]),
            "slot_target_m": opt(m["slot_target_m"]),
            "slot_deviation_m": opt(m["slot_deviation_m"]),
            "tangent_extent_m": opt(m["tangent_extent_m"]),
            "angle_deg": _num(m["angle_deg"]),
            "angle_target_deg": opt(m["angle_target_deg"]),
            "angle_deviation_deg": opt(m["angle_deviation_deg"]),
            "obstacle_clearance_m": opt(m.get("obstacle_clearance_m")),
            "nearest_obstacle": m.get("nearest_obstacle"),
            "obstacle_penetrations": {k: _num(v) for k, v in
                                      sorted((m.get("obstacle_penetrations") or {}).items())},
            "anchor_side": m.get("anchor_side"),
            "back_alignment_m": opt(m.get("back_alignment_m")),
            "slot_reference": m.get("slot_reference", "footprint"),
        }


_LAST_DOCS: dict[str, dict[str, Any]] = {}
LAST_DOCS_KEPT = 32


def compute_geometry(meshes: Meshes, poses: Mapping[str, Any], anchor_id: str,
                     target_spec: Mapping[str, Any], forward_axes: Mapping[str, Any],
                     iter_index: int, context: Meshes | None = None) -> dict[str, Any]:
    """One-shot :meth:`GeometryContext.compute` (builds the BVHs; prefer a context in loops).

    A quiet iteration measures the state of the one before it: the document is a pure
    function of the meshes (by ``mesh_digest``, as everything derived from them), poses,
    axes, spec and context, and only ``iter`` depends on the iteration, so the last
    ``LAST_DOCS_KEPT`` states' documents are kept and handed out as copies."""
    try:
        key = _state_digest(meshes, poses, anchor_id, target_spec, forward_axes, context)
    except (TypeError, ValueError):   # malformed input: the full path says what is wrong
        key = None
    kept = _LAST_DOCS.get(key) if key is not None else None
    if kept is None:
        kept = GeometryContext(meshes, anchor_id, forward_axes, context).compute(
            poses, target_spec, 0)
        if key is not None:
            while len(_LAST_DOCS) >= LAST_DOCS_KEPT:
                _LAST_DOCS.pop(next(iter(_LAST_DOCS)))
            _LAST_DOCS[key] = kept
    doc = copy.deepcopy(kept)
    doc["iter"] = int(iter_index)
    return doc


def _state_digest(meshes: Meshes, poses: Mapping[str, Any], anchor_id: str,
                  target_spec: Mapping[str, Any], forward_axes: Mapping[str, Any],
                  context: Meshes | None) -> str:
    digest = hashlib.sha1(json.dumps([anchor_id, target_spec, forward_axes], sort_keys=True,
                                     allow_nan=True).encode())
    for kind, group in (("mesh", meshes), ("context", context or {})):
        for name in sorted(group):
            verts, faces = group[name]
            digest.update(f"{kind}:{name}:{mesh_digest(verts, faces)}".encode())
    for name in sorted(poses):
        pose = np.ascontiguousarray(frames.as_matrix(poses[name]), dtype=float)
        digest.update(f"pose:{name}:".encode() + pose.tobytes())
    return digest.hexdigest()
