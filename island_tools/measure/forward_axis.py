"""Forward axis of a furniture mesh from its geometry, and the group's ``forward_axes.json``.

Detection (method ``"mirror_relief"``), all in the object's local frame (for a unit: its
root's frame, the unit's evaluated geometry), invariant to yaw, translation and uniform
scale because every quantity is measured relative to a candidate frame's bounding box and
normalised by its extents. It rests on principles that hold for furniture in general, not
on margins fitted to one creator's models:

1. **Candidate frames**: the minimum-area rectangles of the footprint (rotating calipers,
   at most ``MAX_TIED_RECTS`` ties for a round plan), the one of the part above
   ``UPPER_FRACTION`` of the height (seat and backrest over a five-star base) and the two
   best mirror planes of a search over the top-down height map of the part above
   ``BASE_FRACTION`` of the height (coarse, then fine; each plane's offset measured from
   the median, so neither a star base nor a lever on one side sets it).
2. **Views**: per frame, orthographic depth views from the four sides and from above
   (``SIDE_RES`` x ``SIDE_RES`` rays each; vectorised ray/triangle tests).
3. **Mirror symmetry** (why it transfers: furniture is made for a body that is
   left-right symmetric, so a piece with a front is almost always mirror-symmetric about
   the vertical plane that contains the front, while the reflection that swaps front and
   back is broken by the very things that make a front). Two measures per frame axis:
   *strict*, the share of cells differing by more than ``REL_TOL`` of the extent between
   the views the reflection about the box's centre plane maps onto each other (a knob, a
   seam, a lip, a plinth on one side breaks it); *soft*, above ``BASE_FRACTION`` of the
   height (a star base's arms do not count), about a measured plane offset, with small
   deviations counting a little (``SOFT_SCALE``). The frame with the best soft mirror
   plane is kept (none: the upper part's rectangle, since a base is set at any angle).
   An axis whose strict reflection is a symmetry (share <= ``SYMMETRIC_SHARE``) cannot be
   the front axis: its two sides are the same. Both symmetric: the piece has no front and
   its rotational order is measured (``continuous`` for a round plan whose views agree or
   that is round seen from above; 4 when a quarter turn maps a square plan onto itself;
   None when a quarter turn almost does, 2 or 4 being unsettled; else 2). A round plan
   whose top view a 3-, 5-, 6- or 8-fold turn maps onto itself (a three-legged base), or
   that is round from above with sides the cues cannot tell apart, is round too. A piece whose
   four sides are each one plain face is ``undetermined``, not symmetric: a cabinet whose
   doors the mesh does not model looks the same.
4. **Which side** (cues that transfer because they follow from use, not from style):
   depth ``D`` (fronts are open: seat space before a backrest, a kneehole, shelves, faces
   recessed behind knobs or under a top's overhang), tall side ``T`` (backrests and
   headboards are behind), flush back ``B`` (case furniture stands with a plain back
   against the wall), relief ``R`` (drawer seams, knobs, handles, a lip: the share of a
   side's silhouette off its dominant plane; a back is one plane). ``score = D + T +
   BACK_WEIGHT * back + RELIEF_WEIGHT * (R - R_opposite)``; of the admissible axes, the one
   whose two sides the scores separate most.
5. **Honest status**: ``front`` only when the winner beats the opposite side by
   ``FRONT_MARGIN`` (``NO_MIRROR_FACTOR`` times more without a mirror plane, where the
   other axis must also lose by ``FRONT_MARGIN``, and the frame nearest to a mirror plane
   must put the front within ``AGREE_DEG`` of the body rectangle's: a round seat under a
   wrapping backrest has a rectangle at any angle), no strong cue argues against it
   (``DISAGREE``, at least ``DISAGREE_RATIO`` of the strongest cue for it), and, when both
   axes are admissible, it is not a short end of an elongated piece without a tall back
   at the other end (beds and loungers are used from an end; desks, sideboards and TV
   benches with a one-sided pedestal are not). Otherwise ``undetermined`` (``axis_local``
   None, the best guess and the reason in ``detail``): verify raises an unknown instead of
   measuring facing against a guess. Flat, degenerate and face-less meshes are
   ``undetermined``: nothing about them was measured.

Every result carries ``symmetry``: ``{"order": 1 | 2 | 4 | "continuous" | None,
"confidence", "reference_axis_local"}``: order 1 with the front for a front; for a
symmetric piece the axis that must point along the facing target modulo 360/order (order
2: the short axis, so a bench's long side faces the table; order 4: a box axis; none for
continuous); None when nothing was measured. Confidence of a front: how far the margin
got from half the needed margin towards ``CONFIDENT_MARGIN``, scaled down when the piece
has no mirror plane or the front/back reflection is only weakly broken.

The constants were set on the ``tuned`` part of the front corpus only
(``fixtures/fronts_split.json``); ``scripts/bench.py --section fronts`` reports the
``untouched`` part separately.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..errors import GeometryError
from .geometry import Rect, convex_hull_2d, min_area_rects, polygon_area, polygon_centroid
from .meshcache import keyed_vertices, mesh_digest, remembered

METHOD = "mirror_relief"
SIDE_RES = 96            # rays per side of each view (seams a few mm wide are seen)
SEARCH_RES = 64          # top-down map of the coarse mirror-plane search
SEARCH_STEP_DEG = 2.0
SEARCH_FINE_DEG = 0.25
SEARCH_OFFSETS = 4       # plane offsets tried each side of the median, half a cell apart
TALL_FRACTION = 0.75
UPPER_FRACTION = 0.4
BASE_FRACTION = 0.2      # the mirror plane is sought above this share of the height
MAX_TIED_RECTS = 8
REL_TOL = 0.003          # two depths differ when more than 0.3 % of the extent apart
SYMMETRIC_SHARE = 0.01   # at most this share of cells differs: the reflection is a symmetry
BROKEN_SHARE = 0.03      # at least this share differs: the reflection is clearly broken
SOFT_SCALE = 0.05        # a difference this large (of the largest extent) counts fully
SOFT_MIRROR = 0.04       # a soft asymmetry this small: a mirror plane
SOFT_BROKEN = 0.12       # ... that the other axis clearly lacks
ELONGATED = 1.3
SQUARE_TOL = 0.02
ROUND_RADIUS_CV = 0.02
ROUND_PLAN_CV = 0.05     # a plan this round is checked for 3-, 5-, 6- and 8-fold turns
ROTATION_SHARE = 0.03
DEDUP_RAD = math.radians(0.05)   # candidate frames closer than this are one
PRINCIPAL_GAP = 0.02     # principal axes of a nearly isotropic plan are not candidates
FLUSH_DEPTH = 0.01       # a ray that stops within 1 % of the depth hits the bounding plane
BACK_WEIGHT = 0.25
RELIEF_WEIGHT = 0.5
FRONT_MARGIN = 0.12      # the front must beat the opposite side by this much
NO_MIRROR_FACTOR = 1.5   # ... and by this factor more on a piece without a mirror plane
DISAGREE = 0.12          # a cue this strong against the winner makes the front undetermined
DISAGREE_RATIO = 0.5     # ... when it is at least half as strong as the best cue for it
CONFIDENT_MARGIN = 0.5   # a margin this large (or more) is reported as confidence 1
NO_MIRROR_CONFIDENCE = 0.7
WEAK_BREAK_CONFIDENCE = 0.7
AGREE_DEG = 5.0          # without a mirror plane, two frames' fronts this far apart: undetermined
# Bounds the (triangle, cell) pairs rasterised at once: memory stays ~100 MB on any mesh.
_PAIRS_PER_CHUNK = 1 << 20

Axis2 = tuple[float, float]
Override = Axis2 | Literal["symmetric"]

_OVERRIDE_WORDS: dict[str, Override] = {
    "+x": (1.0, 0.0), "-x": (-1.0, 0.0), "+y": (0.0, 1.0), "-y": (0.0, -1.0),
    "symmetric": "symmetric", "none": "symmetric",
}


@dataclass(frozen=True)
class ForwardAxis:
    """``axis_local``: unit vector in the object's local XY, or None (no front found)."""

    axis_local: Axis2 | None
    method: str
    confidence: float
    detail: dict[str, Any] = field(default_factory=dict)
    status: str = "undetermined"   # "front" | "symmetric" | "undetermined"
    symmetry: dict[str, Any] = field(default_factory=dict)


def _depth_buffers(p: np.ndarray, faces: np.ndarray, ax_u: int, ax_w: int, ax_d: int,
                   lo: tuple[float, float], hi: tuple[float, float], res: int = SIDE_RES
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Min and max of coordinate ``ax_d`` where rays along ``ax_d`` through the res x res cell
    centres of [lo, hi] (in coordinates ``ax_u``, ``ax_w``) hit the mesh (+-inf on a miss)."""
    tri = p[faces]
    u, w, d = tri[:, :, ax_u], tri[:, :, ax_w], tri[:, :, ax_d]
    su, sw = (hi[0] - lo[0]) / res, (hi[1] - lo[1]) / res
    i0 = np.clip(np.ceil((u.min(axis=1) - lo[0]) / su - 0.5), 0, res).astype(np.int64)
    i1 = np.clip(np.floor((u.max(axis=1) - lo[0]) / su - 0.5), -1, res - 1).astype(np.int64)
    j0 = np.clip(np.ceil((w.min(axis=1) - lo[1]) / sw - 0.5), 0, res).astype(np.int64)
    j1 = np.clip(np.floor((w.max(axis=1) - lo[1]) / sw - 0.5), -1, res - 1).astype(np.int64)
    ni, nj = np.maximum(i1 - i0 + 1, 0), np.maximum(j1 - j0 + 1, 0)
    den = (u[:, 1] - u[:, 0]) * (w[:, 2] - w[:, 0]) - (u[:, 2] - u[:, 0]) * (w[:, 1] - w[:, 0])
    # Triangles seen edge-on are never the first hit of a ray their neighbours don't cover.
    live = np.nonzero((ni * nj > 0) & (np.abs(den) > 1e-12 * su * sw))[0]
    near, far = np.full(res * res, np.inf), np.full(res * res, -np.inf)
    counts = (ni * nj)[live]
    bounds = np.searchsorted(np.cumsum(counts), np.arange(1, counts.sum() // _PAIRS_PER_CHUNK + 1)
                             * _PAIRS_PER_CHUNK)
    for chunk in np.split(live, bounds):
        if len(chunk) == 0:
            continue
        n = ni[chunk] * nj[chunk]
        t = np.repeat(chunk, n)
        k = np.arange(len(t)) - np.repeat(np.cumsum(n) - n, n)
        ci, cj = i0[t] + k // nj[t], j0[t] + k % nj[t]
        pu, pw = lo[0] + (ci + 0.5) * su, lo[1] + (cj + 0.5) * sw
        ut, wt, dt, dn = u[t], w[t], d[t], den[t]
        # Barycentric coordinates of the ray's (u, w) in the projected triangle.
        du, dw = pu - ut[:, 0], pw - wt[:, 0]
        l1 = (du * (wt[:, 2] - wt[:, 0]) - (ut[:, 2] - ut[:, 0]) * dw) / dn
        l2 = ((ut[:, 1] - ut[:, 0]) * dw - du * (wt[:, 1] - wt[:, 0])) / dn
        inside = (l1 >= -1e-9) & (l2 >= -1e-9) & (l1 + l2 <= 1.0 + 1e-9)
        depth = dt[:, 0] + l1 * (dt[:, 1] - dt[:, 0]) + l2 * (dt[:, 2] - dt[:, 0])
        cell = (ci * res + cj)[inside]
        np.minimum.at(near, cell, depth[inside])
        np.maximum.at(far, cell, depth[inside])
    return near.reshape(res, res), far.reshape(res, res)




@dataclass(frozen=True)
class _Views:
    """Orthographic depth views of a mesh in one candidate frame (metres, NaN = miss)."""

    lo: np.ndarray
    hi: np.ndarray
    sides: list[np.ndarray]     # depth from +u, -u (grid v, z), +v, -v (grid u, z)
    top: np.ndarray             # height of the first hit from above (grid u, v)


def _views(p: np.ndarray, faces: np.ndarray) -> _Views:
    lo, hi = p.min(axis=0), p.max(axis=0)
    near_u, far_u = _depth_buffers(p, faces, 1, 2, 0, (lo[1], lo[2]), (hi[1], hi[2]))
    near_v, far_v = _depth_buffers(p, faces, 0, 2, 1, (lo[0], lo[2]), (hi[0], hi[2]))
    _, top = _depth_buffers(p, faces, 0, 1, 2, (lo[0], lo[1]), (hi[0], hi[1]))

    def hits(x: np.ndarray, rel: np.ndarray) -> np.ndarray:
        return np.where(np.isfinite(x), rel, np.nan)

    sides = [hits(far_u, hi[0] - far_u), hits(near_u, near_u - lo[0]),
             hits(far_v, hi[1] - far_v), hits(near_v, near_v - lo[1])]
    return _Views(lo, hi, sides, hits(top, top - lo[2]))


def _differ(a: np.ndarray, b: np.ndarray, tol: float) -> float:
    """Share of the cells hit in either view where the two views differ: one hits and the
    other misses, or both hit more than ``tol`` apart."""
    ha, hb = np.isfinite(a), np.isfinite(b)
    either = ha | hb
    if not either.any():
        return 0.0
    both = ha & hb
    gap = np.zeros(a.shape, dtype=bool)
    gap[both] = np.abs(a[both] - b[both]) > tol
    return float(((ha != hb) | gap).sum() / either.sum())


def _flip_soft(view: np.ndarray, axis: int, lo: float, cell: float, centre: float,
               scale: float) -> float:
    """``_soft`` difference between ``view`` and its reflection along grid ``axis`` about
    the coordinate ``centre`` (a hit whose mirror image falls off the grid is a miss)."""
    n = view.shape[axis]
    idx = np.arange(n)
    mirror = np.floor((2.0 * centre - (lo + (idx + 0.5) * cell) - lo) / max(cell, 1e-12))
    mirror = mirror.astype(np.int64)
    ok = (mirror >= 0) & (mirror < n)
    other = np.full(view.shape, np.nan)
    if axis == 0:
        other[ok] = view[mirror[ok]]
    else:
        other[:, ok] = view[:, mirror[ok]]
    return _soft(view, other, scale)


def _above(views: _Views, frac: float) -> _Views:
    """The views with every hit below ``frac`` of the height taken out."""
    if frac <= 0.0:
        return views
    cut = frac * float(views.hi[2] - views.lo[2])
    res = views.top.shape[0]
    z = (np.arange(res) + 0.5) / res * float(views.hi[2] - views.lo[2])
    sides = [np.where((z >= cut)[None, :], d, np.nan) for d in views.sides]
    return _Views(views.lo, views.hi, sides, np.where(views.top >= cut, views.top, np.nan))


def _soft(a: np.ndarray, b: np.ndarray, scale: float) -> float:
    """Mean difference of two views, each cell's capped at 1 (``scale`` apart or a hit
    against a miss), over the cells hit in either: small deviations count a little."""
    ha, hb = np.isfinite(a), np.isfinite(b)
    either = ha | hb
    if not either.any():
        return 0.0
    both = ha & hb
    gap = np.ones(a.shape)
    gap[both] = np.minimum(np.abs(a[both] - b[both]) / max(scale, 1e-12), 1.0)
    return float(gap[either].mean())


def _strict_asymmetry(views: _Views) -> tuple[float, float]:
    """Exact mirror symmetry about the bounding box's centre planes: the share of cells
    that differ by more than ``REL_TOL`` of the extent between the views each reflection
    maps onto each other or onto themselves; 0 = the reflection is a symmetry of the whole
    piece (a knob, a seam, a lip or a plinth on one side breaks it)."""
    tol = REL_TOL * (views.hi - views.lo)
    pu, mu, pv, mv = views.sides
    a_u = max(_differ(pu, mu, tol[0]), _differ(pv, pv[::-1], tol[1]),
              _differ(mv, mv[::-1], tol[1]), _differ(views.top, views.top[::-1], tol[2]))
    a_v = max(_differ(pv, mv, tol[1]), _differ(pu, pu[::-1], tol[0]),
              _differ(mu, mu[::-1], tol[0]), _differ(views.top, views.top[:, ::-1], tol[2]))
    return a_u, a_v


def _mirror_asymmetry(views: _Views) -> tuple[float, float, dict[str, list[float]]]:
    """How far the piece is from a mirror plane normal to each frame axis, softly (small
    deviations count a little: a real chair's arms are rarely placed to the millimetre):
    ``(m_u, m_v)``, the mean over the views the reflection u -> 2c - u maps onto each other
    or onto themselves of the capped difference (``SOFT_SCALE`` of the extent). The plane's
    offset ``c`` is measured (the median midpoint of the rays that cross the piece along
    the axis), not the bounding box's centre: a star base's arms or a knob set the box."""
    lo, hi = views.lo, views.hi
    ext = hi - lo
    scale = SOFT_SCALE * float(ext.max())
    pu, mu, pv, mv = views.sides
    res = pu.shape[0]
    out, parts = [], {}
    for axis, (plus, minus, other_p, other_m) in enumerate(((pu, mu, pv, mv),
                                                             (pv, mv, pu, mu))):
        far, near = hi[axis] - plus, lo[axis] + minus
        both = np.isfinite(far) & np.isfinite(near)
        if not both.any():
            out.append(1.0)
            parts["uv"[axis]] = [1.0]
            continue
        mid = (far + near) / 2.0
        centre = float(np.median(mid[both]))
        pair = float(np.minimum(np.abs(mid[both] - centre) / max(scale, 1e-12), 1.0).mean())
        cell = ext[axis] / res
        flips = [_flip_soft(other_p, 0, lo[axis], cell, centre, scale),
                 _flip_soft(other_m, 0, lo[axis], cell, centre, scale),
                 _flip_soft(views.top, axis, lo[axis], cell, centre, scale)]
        parts["uv"[axis]] = [pair, *flips]
        out.append(float(np.mean([pair, *flips])))
    return out[0], out[1], parts


def _side_cues(views: _Views, p: np.ndarray, e_u: np.ndarray, e_v: np.ndarray
               ) -> list[dict[str, Any]]:
    """Per side (+u, -u, +v, -v): local outward normal, the cues and the score."""
    lo, hi = views.lo, views.hi
    ext = hi - lo
    top = views.top
    tall = np.isfinite(top) & (np.nan_to_num(top, nan=-1.0) >= TALL_FRACTION * ext[2])
    res = top.shape[0]
    grid = (np.arange(res) + 0.5) / res * 2.0 - 1.0
    gu, gv = np.meshgrid(grid, grid, indexing="ij")
    # the tall part's centroid relative to the footprint's own area centroid (not the
    # rectangle's centre: a five-star base's rectangle is off the pedestal's axis)
    hull = convex_hull_2d(p[:, :2])
    centre = polygon_centroid(hull) if len(hull) >= 3 else (lo[:2] + hi[:2]) / 2.0
    ref = (centre - lo[:2]) / np.maximum(ext[:2], 1e-12) * 2.0 - 1.0
    cu = float(gu[tall].mean() - ref[0]) if tall.any() else 0.0
    cv = float(gv[tall].mean() - ref[1]) if tall.any() else 0.0
    normals = [e_u, -e_u, e_v, -e_v]
    tall_cues = [-cu, cu, -cv, cv]
    out = []
    flush, depth, relief = [], [], []
    for k, d in enumerate(views.sides):
        axis_ext = ext[0] if k < 2 else ext[1]
        hit = np.isfinite(d)
        rel = np.where(hit, d / max(axis_ext, 1e-12), 1.0)
        depth.append(float(rel.mean()))
        flush.append(float((hit & (rel <= FLUSH_DEPTH)).mean()))
        if hit.any():
            # relief: the share of the side's silhouette off its dominant plane (drawer
            # seams, knobs, a lip, a kneehole); a plain back is one plane
            plane = float(np.median(d[hit]))
            relief.append(float((np.abs(d[hit] - plane) > REL_TOL * axis_ext).mean()))
        else:
            relief.append(0.0)
    for k, n in enumerate(normals):
        back = flush[k ^ 1] - flush[k]
        score = (depth[k] + tall_cues[k] + BACK_WEIGHT * back
                 + RELIEF_WEIGHT * (relief[k] - relief[k ^ 1]))
        out.append({"normal_local": [float(n[0]) + 0.0, float(n[1]) + 0.0],
                    "depth": depth[k], "tall": tall_cues[k], "flush": flush[k],
                    "back": back, "relief": relief[k], "score": score})
    return out


def _mirror_search_angles(v: np.ndarray, faces: np.ndarray) -> list[float]:
    """Angles (mod 90 deg) of the vertical planes about which the top-down height map of
    the part above ``BASE_FRACTION`` of the height is most nearly mirror-symmetric: a
    swivel chair's seat and backrest are symmetric about the sagittal plane whatever the
    star base below them does, so the base's cells neither vote for an angle nor set the
    plane's offset. A coarse search (``SEARCH_STEP_DEG``), then a fine one
    (``SEARCH_FINE_DEG``) around its two best angles."""
    top, lo, cell, xy, h = _top_points(v, faces)
    keep = h >= float(v[:, 2].min()) + BASE_FRACTION * float(np.ptp(v[:, 2]))
    if keep.sum() < 8:
        return []
    xy, h = xy[keep], h[keep]
    tol = 4.0 * REL_TOL * float(np.ptp(v[:, 2]))

    step = float(cell.mean()) / 2.0

    def share(deg: float) -> float:
        # the plane's offset is measured, not the extent's middle: a lever or a knob on
        # one side moves the extent, hardly the median, and the best nearby offset wins
        a = math.radians(deg)
        n = np.array([math.cos(a), math.sin(a)])
        proj = xy @ n
        mid = float(np.median(proj))
        return min(_mapped_share(top, lo, cell, xy, h,
                                 xy - 2.0 * (proj - (mid + k * step))[:, None] * n, tol)
                   for k in range(-SEARCH_OFFSETS, SEARCH_OFFSETS + 1))

    coarse = sorted((share(float(d)), float(d)) for d in np.arange(0.0, 180.0,
                                                                    SEARCH_STEP_DEG))
    out: list[tuple[float, float]] = []
    for _, deg in coarse[:2]:
        out += [(share(d), d) for d in np.arange(deg - SEARCH_STEP_DEG,
                                                 deg + SEARCH_STEP_DEG + 1e-9,
                                                 SEARCH_FINE_DEG)]
    out.sort()
    best: list[float] = []
    for _, deg in out:
        a = math.radians(deg % 90.0)
        if all(abs((a - b + math.pi / 4.0) % (math.pi / 2.0) - math.pi / 4.0)
               > math.radians(SEARCH_FINE_DEG / 2.0) for b in best):
            best.append(a)
        if len(best) == 2:
            break
    return best


def _principal_angles(v: np.ndarray, faces: np.ndarray) -> list[float]:
    """Angles (mod 90 deg) of the principal axes of the surface's plan distribution
    (area-weighted, exact per triangle, so independent of tessellation), for the whole
    mesh and for its part above ``UPPER_FRACTION`` of the height: a mirror plane of a
    set is always one of its principal planes."""
    tri = v[faces]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    z = tri[:, :, 2].mean(axis=1)
    out = []
    for keep in (np.ones(len(tri), dtype=bool),
                 z >= v[:, 2].min() + UPPER_FRACTION * float(np.ptp(v[:, 2]))):
        a, t = area[keep], tri[keep][:, :, :2]
        total = float(a.sum())
        if total <= 0.0:
            continue
        s = t.sum(axis=1)
        mean = (a[:, None] * s).sum(axis=0) / (3.0 * total)
        second = (np.einsum("n,nki,nkj->ij", a, t, t)
                  + np.einsum("n,ni,nj->ij", a, s, s)) / (12.0 * total)
        cov = second - np.outer(mean, mean)
        w, vec = np.linalg.eigh(cov)
        if w[1] - w[0] > PRINCIPAL_GAP * max(w[1], 1e-30):
            out.append(math.atan2(vec[1, 1], vec[0, 1]) % (math.pi / 2.0))
    return out


def _top_points(v: np.ndarray, faces: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The coarse top-down height map as points: map, lo, cell size, (x, y) of hit cells
    and their heights."""
    lo, hi = v.min(axis=0), v.max(axis=0)
    _, top = _depth_buffers(v, faces, 0, 1, 2, (lo[0], lo[1]), (hi[0], hi[1]), SEARCH_RES)
    cell = (hi[:2] - lo[:2]) / SEARCH_RES
    ii, jj = np.nonzero(np.isfinite(top))
    xy = np.column_stack([lo[0] + (ii + 0.5) * cell[0], lo[1] + (jj + 0.5) * cell[1]])
    return top, lo, cell, xy, top[ii, jj]


def _mapped_share(top: np.ndarray, lo: np.ndarray, cell: np.ndarray, xy: np.ndarray,
                  h: np.ndarray, mapped: np.ndarray, tol: float) -> float:
    """Share of the hit cells whose image under a plan isometry lands on a miss or on a
    height more than ``tol`` away."""
    idx = np.floor((mapped - lo[:2]) / np.maximum(cell, 1e-12)).astype(np.int64)
    inside = np.all((idx >= 0) & (idx < SEARCH_RES), axis=1)
    other = np.full(len(h), np.inf)
    other[inside] = top[idx[inside, 0], idx[inside, 1]]
    return float((np.abs(np.nan_to_num(other, nan=np.inf, posinf=np.inf) - h) > tol).mean())


def _width_cv(hull: np.ndarray) -> float:
    """Coefficient of variation of the plan's width over all directions: 0 for a disc,
    0.12 for a square (whose corners are all equally far from its centre)."""
    ang = np.radians(np.arange(0.0, 180.0, 1.0))
    widths = np.ptp(hull @ np.stack([np.cos(ang), np.sin(ang)]), axis=0)
    return float(widths.std() / max(widths.mean(), 1e-12))


def _round_top(v: np.ndarray, faces: np.ndarray, hull: np.ndarray) -> bool:
    """Is the piece round seen from above: a round plan whose top view's heights do not
    vary around any circle about its centre (the rim's raster cells left out)?"""
    if _width_cv(hull) > ROUND_RADIUS_CV:
        return False
    _, _, cell, xy, h = _top_points(v, faces)
    if len(h) < 8:
        return False
    centre = polygon_centroid(hull)
    r = np.linalg.norm(xy - centre, axis=1)
    rim = float(np.ptp(hull @ np.array([1.0, 0.0]))) / 2.0 - 1.5 * float(cell.max())
    keep = r <= rim
    if keep.sum() < 8:
        return False
    rings = np.floor(r[keep] / max(float(cell.max()), 1e-12)).astype(np.int64)
    tol = 4.0 * REL_TOL * float(np.ptp(v[:, 2]))
    hk = h[keep]
    # a circular step in height falls inside one raster ring: a cell deviates only when it
    # lies outside the span of its own and the two neighbouring rings' medians
    medians = {int(k): float(np.median(hk[rings == k])) for k in np.unique(rings)}
    lo = np.array([min(medians.get(int(k) + d, medians[int(k)]) for d in (-1, 0, 1))
                   for k in rings])
    hi = np.array([max(medians.get(int(k) + d, medians[int(k)]) for d in (-1, 0, 1))
                   for k in rings])
    off = int(((hk < lo - tol) | (hk > hi + tol)).sum())
    return off <= ROTATION_SHARE * int(keep.sum())


def _rotational_symmetry(v: np.ndarray, faces: np.ndarray, hull: np.ndarray) -> int | None:
    """The order k >= 3 of a rotational symmetry of a round-planned piece's top view (a
    three-legged round table has one mirror plane per leg and no front), else None."""
    if _width_cv(hull) > ROUND_PLAN_CV:
        return None
    centre = polygon_centroid(hull)
    top, lo, cell, xy, h = _top_points(v, faces)
    if len(h) < 8:
        return None
    tol = 4.0 * REL_TOL * float(np.ptp(v[:, 2]))
    for k in (3, 4, 5, 6, 8):
        a = 2.0 * math.pi / k
        r = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
        mapped = (xy - centre) @ r.T + centre
        if _mapped_share(top, lo, cell, xy, h, mapped, tol) <= ROTATION_SHARE:
            return k
    return None


def _candidate_rects(v: np.ndarray, faces: np.ndarray, hull: np.ndarray
                     ) -> tuple[list[Rect], int]:
    """Frames whose axes are the candidate front axes: the minimum-area rectangles of the
    whole footprint (tied ones capped at MAX_TIED_RECTS, spread over the ties), the one of
    the footprint of the part above ``UPPER_FRACTION`` of the height (a seat and backrest
    over a five-star base, a mattress over a splayed frame) and the principal axes of the
    surface (whole and upper part); deduplicated modulo 90 degrees, in that order. Also
    the index of the frame that stands for the upper part's rectangle."""
    rects = min_area_rects(hull)
    if len(rects) > MAX_TIED_RECTS:
        step = len(rects) / MAX_TIED_RECTS
        rects = [rects[int(i * step)] for i in range(MAX_TIED_RECTS)]
    z = v[:, 2]
    upper = v[z >= z.min() + UPPER_FRACTION * float(np.ptp(z)), :2]
    upper_rect = rects[0]
    if len(upper) >= 3:
        upper_hull = convex_hull_2d(upper)
        if len(upper_hull) >= 3 and polygon_area(upper_hull) > 0.0:
            upper_rect = min_area_rects(upper_hull)[0]
            rects.append(upper_rect)
    rects += [Rect(a, 0.0, 0.0) for a in _principal_angles(v, faces)]
    out: list[Rect] = []

    def same(a: Rect, b: Rect) -> bool:
        return abs((a.angle - b.angle + math.pi / 4.0) % (math.pi / 2.0)
                   - math.pi / 4.0) <= DEDUP_RAD

    for rect in rects:
        if not any(same(rect, r) for r in out):
            out.append(rect)
    return out, next(i for i, r in enumerate(out) if same(r, upper_rect))


@dataclass
class _Frame:
    rect: Rect
    views: _Views
    a_u: float
    a_v: float
    parts: dict[str, list[float]]
    sides: list[dict[str, Any]]
    e_u: np.ndarray
    e_v: np.ndarray
    upper_u: float
    upper_v: float

    @property
    def best_mirror(self) -> float:
        return min(self.upper_u, self.upper_v)


def _frame(v: np.ndarray, faces: np.ndarray, rect: Rect) -> _Frame:
    c, s = math.cos(rect.angle), math.sin(rect.angle)
    e_u, e_v = np.array([c, s]), np.array([-s, c])
    p = np.column_stack([v[:, :2] @ e_u, v[:, :2] @ e_v, v[:, 2]])
    views = _views(p, faces)
    a_u, a_v = _strict_asymmetry(views)
    # the body-facing part (seat, back, carcass) above a base: a star base's arms or a
    # plinth's legs break a chair's mirror symmetry without saying where its front is
    up_u, up_v, parts = _mirror_asymmetry(_above(views, BASE_FRACTION))
    ext = views.hi - views.lo
    return _Frame(Rect(rect.angle, float(ext[0]), float(ext[1])), views, a_u, a_v, parts,
                  _side_cues(views, p, e_u, e_v), e_u, e_v, up_u, up_v)


def _rotational_order(frame: _Frame, hull: np.ndarray, round_top: bool
                      ) -> tuple[int | str | None, float]:
    """Order of the rotational symmetry of a piece mirror-symmetric about both planes of
    ``frame``: "continuous" for a round plan whose side views agree or whose top view is
    round (``round_top``), 4 for a square one that a quarter turn maps onto itself, None
    when a quarter turn almost does (2 or 4 is not settled), else 2; with a confidence."""
    views = frame.views
    ext = views.hi - views.lo
    tol = REL_TOL * ext
    pu, _, pv, _ = views.sides
    square = abs(ext[0] - ext[1]) <= SQUARE_TOL * max(ext[0], ext[1])
    quarter = max(_differ(pu, pv, max(tol[0], tol[1])),
                  _differ(views.top, views.top.T, tol[2])) if square else 1.0
    if square and _width_cv(hull) <= ROUND_RADIUS_CV and (quarter <= SYMMETRIC_SHARE
                                                           or round_top):
        # a round plan seen round from above (a 50-sided top is not mapped onto itself by
        # a quarter turn of the raster, but no alignment of it can matter)
        return "continuous", 1.0 - min(quarter, SYMMETRIC_SHARE) / SYMMETRIC_SHARE * 0.5
    if square and quarter <= SYMMETRIC_SHARE:
        return 4, 1.0 - quarter / SYMMETRIC_SHARE * 0.5
    if square and quarter < BROKEN_SHARE:
        # a square plan that a quarter turn almost maps onto itself: 2 or 4 is not settled
        return None, 0.0
    return 2, 1.0 - max(frame.a_u, frame.a_v) / SYMMETRIC_SHARE * 0.5


def _symmetry(order: int | str | None, confidence: float, reference: np.ndarray | None
              ) -> dict[str, Any]:
    return {"order": order, "confidence": round(float(confidence), 6),
            "reference_axis_local": None if reference is None
            else [float(reference[0]) + 0.0, float(reference[1]) + 0.0]}


def _undetermined(reason: str) -> ForwardAxis:
    return ForwardAxis(None, METHOD, 0.0, {"reason": reason,
                                            "symmetry": _symmetry(None, 0.0, None)},
                       "undetermined", _symmetry(None, 0.0, None))


def _round6(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 6) + 0.0
    if isinstance(x, list):
        return [_round6(c) for c in x]
    if isinstance(x, dict):
        return {k: _round6(c) for k, c in x.items()}
    return x


def _axis_margin(frame: _Frame, axis: int) -> tuple[float, dict[str, Any], dict[str, float]]:
    """Signed preference of the + side over the - side of one frame axis (0 = u, 1 = v):
    the score difference, the winning side and each cue's share of the difference."""
    plus, minus = frame.sides[2 * axis], frame.sides[2 * axis + 1]
    margin = plus["score"] - minus["score"]
    cues = {"depth": plus["depth"] - minus["depth"], "tall": plus["tall"] - minus["tall"],
            "back": BACK_WEIGHT * (plus["back"] - minus["back"]),
            "relief": RELIEF_WEIGHT * 2.0 * (plus["relief"] - minus["relief"])}
    if margin < 0:
        cues = {k: -x for k, x in cues.items()}
    return abs(margin), plus if margin >= 0 else minus, cues


def _axis_guess(frame: _Frame) -> tuple[float, float]:
    """The side the cues prefer in ``frame``, over its axes whose reflection is not a
    symmetry of the whole piece (both when both are)."""
    axes = [a for a, x in ((0, frame.a_u), (1, frame.a_v)) if x > SYMMETRIC_SHARE] or [0, 1]
    axis = max(axes, key=lambda a: _axis_margin(frame, a)[0])
    nx, ny = _axis_margin(frame, axis)[1]["normal_local"]
    return float(nx), float(ny)


def detect_forward_axis(vertices: np.ndarray, faces: np.ndarray) -> ForwardAxis:
    """Forward (front) direction of a mesh in its local XY; see the module docstring.

    Raises GeometryError for a mesh without vertices, with non-finite vertices or with face
    indices out of range. Flat, linear or face-less meshes are ``undetermined`` with a
    reason: nothing about them was measured.
    """
    v = np.asarray(vertices, dtype=float).reshape(-1, 3)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if len(v) == 0:
        raise GeometryError("mesh has no vertices")
    if not np.all(np.isfinite(v)):
        raise GeometryError("mesh has non-finite vertices")
    if len(f) and (f.min() < 0 or f.max() >= len(v)):
        raise GeometryError("mesh has face indices out of range")
    size = float(np.ptp(v, axis=0).max())
    hull = convex_hull_2d(v[:, :2])
    if len(f) == 0:
        return _undetermined("mesh has no faces")
    if size == 0.0 or len(hull) < 3 or polygon_area(hull) <= 1e-9 * size * size:
        return _undetermined("footprint is degenerate")
    if float(np.ptp(v[:, 2])) <= 1e-6 * size:
        return _undetermined("mesh is flat")

    rects, upper_i = _candidate_rects(v, f, hull)
    frames = [_frame(v, f, rect) for rect in rects]
    if min(x.best_mirror for x in frames) > SOFT_MIRROR:
        seen = [x.rect.angle for x in frames]
        for a in _mirror_search_angles(v, f):
            if all(abs((a - b + math.pi / 4.0) % (math.pi / 2.0) - math.pi / 4.0)
                   > DEDUP_RAD for b in seen):
                frames.append(_frame(v, f, Rect(a, 0.0, 0.0)))
    rotation = _rotational_symmetry(v, f, hull)
    # the frame of the best mirror plane: the front lies in a piece's mirror plane; a
    # piece without one is judged in its footprint's own rectangle (the first frame)
    best_i = min(range(len(frames)), key=lambda i: (frames[i].best_mirror, i))
    nearest_i = best_i
    if frames[best_i].best_mirror > SOFT_MIRROR:
        # no mirror plane anywhere: the rectangle of the body above the base (a base's
        # star or splay is set at any angle to the seat it carries)
        best_i = upper_i
    fr = frames[best_i]
    detail: dict[str, Any] = {
        "rect_angle_deg": round(math.degrees(fr.rect.angle), 6),
        "rect_extent": [round(fr.rect.extent_u, 9), round(fr.rect.extent_v, 9)],
        "candidate_frames": [{"angle_deg": round(math.degrees(x.rect.angle), 3),
                              "mirror_u": round(x.a_u, 6), "mirror_v": round(x.a_v, 6),
                              "above_base": [round(x.upper_u, 6), round(x.upper_v, 6)]}
                             for x in frames],
        "mirror_asymmetry": {"u": round(fr.a_u, 6), "v": round(fr.a_v, 6),
                             "above_base_u": round(fr.upper_u, 6),
                             "above_base_v": round(fr.upper_v, 6),
                             "views": _round6(fr.parts)},
        "thresholds": {"symmetric_share": SYMMETRIC_SHARE, "broken_share": BROKEN_SHARE,
                       "front_margin": FRONT_MARGIN},
        "sides": [_round6(s) for s in fr.sides],
    }
    sym_u, sym_v = fr.a_u <= SYMMETRIC_SHARE, fr.a_v <= SYMMETRIC_SHARE
    if all(x["flush"] >= 1.0 - SYMMETRIC_SHARE and x["relief"] <= SYMMETRIC_SHARE
           for x in fr.sides):
        # four plain faces: nothing tells the sides apart, and nothing says the piece has
        # no front (a cabinet whose doors the mesh does not model looks the same)
        detail.update(margin=0.0, symmetry=_symmetry(None, 0.0, None),
                      reason="featureless: every side is one plain face")
        return ForwardAxis(None, "undetermined", 0.0, detail, "undetermined",
                           _symmetry(None, 0.0, None))
    quiet = max(_axis_margin(fr, a)[0] for a in (0, 1)) < FRONT_MARGIN / 2.0
    round_top = _round_top(v, f, hull)
    if round_top and rotation is None and quiet:
        rotation = 0        # round from above, no raster turn found (a 59-sided seat)
    if rotation is not None and rotation != 4 and not (sym_u and sym_v):
        # a round plan: its turns (a three-legged base's) do not ask for an alignment
        symmetry = _symmetry("continuous", 0.8, None)
        symmetry["plan_turn_order"] = rotation or None
        turn = (f"a turn of {360 / rotation:.0f} deg maps onto itself (rotational order "
                f"{rotation})" if rotation else "is round around its centre")
        detail.update(symmetry=symmetry, margin=0.0,
                      reason=f"round plan whose top view {turn} and whose sides look alike: "
                             "round")
        return ForwardAxis(None, "symmetric", 0.8, detail, "symmetric", symmetry)
    if sym_u and sym_v:
        order, conf = _rotational_order(fr, hull, round_top)
        short_axis = fr.e_u if fr.rect.extent_u <= fr.rect.extent_v else fr.e_v
        ref = {2: short_axis, 4: fr.e_u}.get(order) if isinstance(order, int) else None
        symmetry = _symmetry(order, conf, ref)
        detail.update(symmetry=symmetry, margin=0.0,
                      reason=f"mirror-symmetric about both vertical centre planes "
                             f"(asymmetry {fr.a_u:.4f}, {fr.a_v:.4f}); rotational order "
                             f"{order}")
        return ForwardAxis(None, "symmetric", round(conf, 6), detail, "symmetric", symmetry)

    # the admissible front axes: an axis whose reflection is a symmetry of the whole
    # piece cannot be the front (its two sides are the same); of the others, the one the
    # cues separate most. When both are admissible, a front on a short end of an
    # elongated piece is believed only with a tall back at the other end (a bed's
    # headboard, a lounger's back): desks, sideboards and TV benches are used from a long
    # side, and a one-sided pedestal makes their ends differ more than their front and back
    axes = [a for a, sym in ((0, sym_u), (1, sym_v)) if not sym]
    soft = (fr.upper_u, fr.upper_v)
    scored = {a: _axis_margin(fr, a) for a in axes}
    axis = max(axes, key=lambda a: scored[a][0])
    margin, side, cues = scored[axis]
    mirror_plane = soft[1 - axis] <= SOFT_MIRROR or len(axes) == 1
    broken = (fr.a_u, fr.a_v)[axis]
    reasons = []
    ext_axis, ext_other = ((fr.rect.extent_u, fr.rect.extent_v) if axis == 0
                           else (fr.rect.extent_v, fr.rect.extent_u))
    if len(axes) == 2 and ext_axis >= ELONGATED * ext_other and cues["tall"] < DISAGREE:
        reasons.append("the best side is a short end of an elongated piece with no tall "
                       "back at the other end")
    rival = [scored[a][0] for a in axes if a != axis]
    if not mirror_plane and rival and margin - rival[0] < FRONT_MARGIN:
        reasons.append(f"no mirror plane, and both axes are about as likely "
                       f"({margin:.3f} against {rival[0]:.3f})")
    # a strong cue against the winner that is comparable to the strongest one for it
    best_for = max(cues.values())
    strong_against = [k for k, x in cues.items()
                      if x <= -DISAGREE and -x >= DISAGREE_RATIO * best_for]
    strong_for = [k for k, x in cues.items() if x >= DISAGREE]
    needed = FRONT_MARGIN if mirror_plane else FRONT_MARGIN * NO_MIRROR_FACTOR
    if strong_against and strong_for:
        reasons.append(f"cues disagree ({', '.join(strong_for)} for, "
                       f"{', '.join(strong_against)} against)")
    if margin < needed:
        reasons.append(f"the sides differ too little (margin {margin:.3f} < {needed:.3f})")
    nx, ny = side["normal_local"]
    if not mirror_plane and nearest_i != best_i:
        # no mirror plane: the body's rectangle is a frame only if the frame nearest to a
        # mirror plane puts the front on the same side (a round seat under a wrapping
        # backrest has a rectangle at any angle, and a lever breaks the sagittal plane)
        other = _axis_guess(frames[nearest_i])
        apart = math.degrees(math.acos(max(-1.0, min(1.0, nx * other[0] + ny * other[1]))))
        detail["nearest_mirror_frame"] = {
            "angle_deg": round(math.degrees(frames[nearest_i].rect.angle), 3),
            "asymmetry": round(frames[nearest_i].best_mirror, 6),
            "front_local": [round(other[0], 6) + 0.0, round(other[1], 6) + 0.0],
            "apart_deg": round(apart, 3)}
        if apart > AGREE_DEG:
            reasons.append(f"no mirror plane, and the body's rectangle and the frame nearest "
                           f"to a mirror plane put the front {apart:.0f} deg apart")
    confidence = min(1.0, (margin - needed / 2.0) / (CONFIDENT_MARGIN - needed / 2.0))
    if not mirror_plane:
        confidence *= NO_MIRROR_CONFIDENCE
    if broken < BROKEN_SHARE:
        confidence *= WEAK_BREAK_CONFIDENCE
    detail.update(margin=round(margin, 6), front_axis=("u", "v")[axis],
                  mirror_plane=mirror_plane, cue_margins=_round6(cues))
    if reasons:
        detail.update(best_guess_local=[nx, ny], reason="; ".join(reasons),
                      symmetry=_symmetry(None, 0.0, None))
        return ForwardAxis(None, "undetermined", round(max(confidence, 0.0), 6), detail,
                           "undetermined", _symmetry(None, 0.0, None))
    symmetry = _symmetry(1, 1.0, np.array([nx, ny]))
    detail["symmetry"] = symmetry
    return ForwardAxis((nx, ny), METHOD, round(max(confidence, 0.0), 6), detail, "front",
                       symmetry)


def front_line_local(found: ForwardAxis) -> Axis2 | None:
    """The line an ``undetermined`` front lies on, one way or the other: when the piece is
    mirror-symmetric about exactly one vertical centre plane of its frame, its front lies in
    that plane (furniture is made for a left-right symmetric body), so it points along the
    frame's other axis; which way is what the cues did not settle. None otherwise (a front
    found, a symmetric piece, both or neither centre plane a mirror)."""
    return _front_line(found.status, found.detail)


def _front_line(status: Any, detail: Any) -> Axis2 | None:
    if status != "undetermined" or not isinstance(detail, Mapping):
        return None
    mirror, angle = detail.get("mirror_asymmetry"), detail.get("rect_angle_deg")
    if not isinstance(mirror, Mapping) or angle is None:
        return None
    sym_u, sym_v = mirror["u"] <= SYMMETRIC_SHARE, mirror["v"] <= SYMMETRIC_SHARE
    if sym_u == sym_v:
        return None
    a = math.radians(float(angle))
    # u's reflection a symmetry: the front cannot be along u (its two sides are the same)
    line = (-math.sin(a), math.cos(a)) if sym_u else (math.cos(a), math.sin(a))
    return (round(line[0], 9) + 0.0, round(line[1], 9) + 0.0)


def undetermined_alignment(entry: Mapping[str, Any]) -> tuple[Axis2, float] | None:
    """(front line, 180) that an ``undetermined`` front is still aligned by, from its
    forward_axes.json entry: with exactly one mirror plane above its base, its front lies on
    that plane's line (``front_line_local``), one way or the other. A piece turned off that
    line misses its target whichever way its front points; one on it may face it or not
    (which way, the cues did not settle). None without such a line: a front found, a
    symmetric piece, two mirror planes or none - a footprint's rectangle alone says nothing
    of a front (a swivel chair's five-spoke base stands at any angle to its seat)."""
    line = _front_line(entry.get("status"), entry.get("detail"))
    return None if line is None else (line, 180.0)


def parse_override(value: Any) -> Override:
    """An explicit forward axis: "+X"/"-X"/"+Y"/"-Y" (any case), an [x, y] pair (normalised),
    or "symmetric"/"none". Anything else raises ValueError saying what is accepted."""
    accepted = "expected '+X', '-X', '+Y', '-Y', 'symmetric', 'none' or a non-zero [x, y] pair"
    if isinstance(value, str):
        key = value.strip().lower()
        if key in _OVERRIDE_WORDS:
            return _OVERRIDE_WORDS[key]
        raise ValueError(f"invalid forward-axis override {value!r}: {accepted}")
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in value)):
        x, y = float(value[0]), float(value[1])
        norm = math.hypot(x, y)
        if math.isfinite(norm) and norm > 0.0:
            return (x / norm, y / norm)
    raise ValueError(f"invalid forward-axis override {value!r}: {accepted}")


def _entry(name: str, mesh: tuple[np.ndarray, np.ndarray],
           overrides: Mapping[str, Any]) -> dict[str, Any]:
    if name in overrides:
        try:
            parsed = parse_override(overrides[name])
        except ValueError as exc:
            raise ValueError(f"object '{name}': {exc}") from exc
        axis = None if parsed == "symmetric" else [parsed[0], parsed[1]]
        # a declared "symmetric" says facing does not apply (as for a round piece); the
        # symmetry entry says it was declared, not measured
        symmetry = ({"order": "continuous", "confidence": 1.0, "reference_axis_local": None,
                     "declared": True} if axis is None else
                    {"order": 1, "confidence": 1.0, "reference_axis_local": axis,
                     "declared": True})
        return {"axis_local": axis, "method": "override", "confidence": 1.0,
                "status": "symmetric" if axis is None else "front",
                "symmetry": symmetry, "detail": {"override": overrides[name]}}
    try:   # one detection per distinct mesh in this process (an asset's six chairs)
        found = remembered("forward_axis", mesh_digest(*mesh),
                           lambda: detect_forward_axis(keyed_vertices(mesh[0]), mesh[1]))
    except GeometryError as exc:
        raise GeometryError(f"object '{name}': {exc.reason}") from exc
    return {"axis_local": None if found.axis_local is None else list(found.axis_local),
            "method": found.method, "confidence": round(found.confidence, 6),
            "status": found.status, "symmetry": dict(found.symmetry), "detail": found.detail}


def forward_axes_document(meshes: Mapping[str, tuple[np.ndarray, np.ndarray]], anchor_id: str,
                          overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Content of ``<group>/forward_axes.json``: one entry per member, the anchor apart.

    An override (e.g. the object's ``forward_axis`` custom property) always wins over
    detection. A bad override, or one naming an object outside the group, raises ValueError
    naming the object (bad group input, not ignored); mesh problems raise GeometryError.
    """
    if anchor_id not in meshes:
        raise GeometryError(f"anchor '{anchor_id}' has no mesh")
    unknown = sorted(set(overrides) - set(meshes))
    if unknown:
        raise ValueError(f"forward-axis override for unknown object(s): {', '.join(unknown)}")
    members = {name: _entry(name, meshes[name], overrides)
               for name in sorted(meshes) if name != anchor_id}
    return {"version": 1, "frame": "object_local",
            "anchor": {"id": anchor_id, **_entry(anchor_id, meshes[anchor_id], overrides)},
            "members": members}
