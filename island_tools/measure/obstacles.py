"""Fixed context around an island: walls, other groups' units and bystanders as obstacles.

``<group>/context.npz`` (written by the scene pipeline's rebuild, ``worker.scene``) holds,
per context object, its evaluated triangles in the island's CANONICAL frame (context never
moves). Only the part a member could run into counts: triangles that rise above the floor
band (``FLOOR_BAND_M`` over the anchor's lowest point: floors and rugs are not obstacles) and
start below the group's top plus ``ABOVE_M`` (ceilings and high lamps are not either).

In the floor plane an obstacle is the set of its triangles' projections (a wall's vertical
faces project to segments, so a room shell that is one mesh is still its walls, not its
convex hull). For a member's footprint (a convex polygon) this module gives the signed
distance to every obstacle, vectorised over the triangles with the separating-axis theorem:
the gap when disjoint, minus the penetration depth (the smallest overlap over the axes, the
translation that would separate them) when they overlap. numpy only. Limitation: a
footprint entirely inside a closed obstacle thicker than itself, between its faces, with no
cap in the band, is not seen (no face crosses it); walls are thinner than furniture.
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from . import meshcache

Meshes = dict[str, tuple[np.ndarray, np.ndarray]]

FLOOR_BAND_M = 0.02
ABOVE_M = 0.5
BROAD_PHASE_M = 3.0


@dataclass(frozen=True)
class Obstacle:
    name: str
    tris2: np.ndarray     # (m, 3, 2) projections of the triangles in the band
    vertices: np.ndarray  # (k, 3) and faces (m, 3): the same triangles, for a 3-D test
    faces: np.ndarray
    lo: np.ndarray        # 2-D bounding box of the band part
    hi: np.ndarray

    @cached_property
    def index(self) -> TriangleIndex:
        """The triangles' bounds and spatial clusters, built on first use."""
        return TriangleIndex(self.tris2)

    @cached_property
    def hull(self) -> np.ndarray:
        """The convex hull of the band part in the floor plane, built on first use (kept with
        the obstacle: every decision of a run asks for the same one)."""
        from .geometry import convex_hull_2d  # geometry imports this module

        return convex_hull_2d(self.vertices[:, :2])   # the triangles' corners, each once


class Context:
    """The obstacles of one island, cut to the band of a given floor and top."""

    def __init__(self, meshes: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> None:
        self._meshes = {n: (np.asarray(v, dtype=float), np.asarray(f, dtype=np.int64))
                        for n, (v, f) in meshes.items()}
        self._band: tuple[tuple[float, float], list[Obstacle]] | None = None

    @property
    def names(self) -> list[str]:
        return sorted(self._meshes)

    def band(self, floor_z: float, top_z: float) -> list[Obstacle]:
        key = (round(floor_z, 6), round(top_z, 6))
        if self._band is not None and self._band[0] == key:
            return self._band[1]
        out = []
        for name in self.names:
            ob = _band_obstacle(name, *self._meshes[name], key)
            if ob is not None:
                out.append(ob)
        self._band = (key, out)
        return out


# The band part of a context object, with its triangle index once built, is kept per
# (name, mesh, band) in this process: a run measures the same context at every iteration
# with a new GeometryContext (``iteration._geometry``), and cutting a 90k-triangle unit to
# the band and indexing it cost more than measuring against it. The last BANDS_KEPT.
_BANDS: dict[tuple[str, str, tuple[float, float]], Obstacle | None] = {}
BANDS_KEPT = 64


def _band_obstacle(name: str, v: np.ndarray, f: np.ndarray, key: tuple[float, float]
                   ) -> Obstacle | None:
    """The triangles of one context object in the band ``key`` (floor, top), or None when
    none are; remembered (``_BANDS``)."""
    slot = (name, meshcache.mesh_digest(v, f), key) if len(f) else None
    if slot is not None and slot in _BANDS:
        return _BANDS[slot]
    out = None
    if len(f):
        floor_z, top_z = key
        z = v[f][:, :, 2]
        keep = (z.max(axis=1) > floor_z + FLOOR_BAND_M) & (z.min(axis=1) < top_z + ABOVE_M)
        if keep.any():
            faces = f[keep]
            used, inverse = np.unique(faces, return_inverse=True)
            verts = v[used]
            faces = inverse.reshape(-1, 3)
            tris2 = verts[faces][:, :, :2]
            flat = tris2.reshape(-1, 2)
            out = Obstacle(name, tris2, verts, faces, flat.min(axis=0), flat.max(axis=0))
    if slot is not None:
        while len(_BANDS) >= BANDS_KEPT:
            _BANDS.pop(next(iter(_BANDS)))
        _BANDS[slot] = out
    return out


def load(path: str | os.PathLike[str]) -> Meshes | None:
    """A context cache (``context.npz``, ``scene_context.npz``), or None if there is none.
    Raises ValueError for a malformed file."""
    if not Path(path).is_file():
        return None
    meshes, _ = meshcache.load_shared(path)
    return meshes


def to_frame(world: Mapping[str, tuple[np.ndarray, np.ndarray]], names: Iterable[str],
             m_inv: np.ndarray) -> Meshes:
    """The named objects' world triangles carried into a canonical frame."""
    m = np.asarray(m_inv, dtype=float)
    return {n: (np.asarray(world[n][0]) @ m[:3, :3].T + m[:3, 3], world[n][1])
            for n in names if n in world}


def _normals(edges: np.ndarray) -> np.ndarray:
    """Unit normals of edge vectors (..., 2); zero where an edge has no length."""
    n = np.stack([edges[..., 1], -edges[..., 0]], axis=-1)
    length = np.linalg.norm(n, axis=-1, keepdims=True)
    return np.where(length > 1e-12, n / np.maximum(length, 1e-300), 0.0)


def _point_segment(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distances (P, S) from points (P, 2) to segments a-b (S, 2)."""
    ab = b - a
    denom = np.maximum((ab * ab).sum(axis=-1), 1e-300)
    ap = points[:, None, :] - a[None, :, :]
    t = np.clip((ap * ab[None]).sum(axis=-1) / denom[None], 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    return np.linalg.norm(points[:, None, :] - closest, axis=-1)


def signed_distances(hull: np.ndarray, tris2: np.ndarray, facing: bool = False
                     ) -> np.ndarray:
    """Per triangle: the gap between the convex polygon ``hull`` (n, 2) and the triangle's
    projection (or segment), or minus the penetration depth where they overlap.

    ``facing``: the gaps from the hull's chain that faces the triangles' bounding box only
    (its edges whose outward side meets the box, and their vertices), the same floats: the
    nearest point of a convex polygon to a point outside it lies on an edge that point is
    on the outward side of, so the pair that gives a gap is always in that chain, and
    every value is the same computation on the same pair."""
    if not len(tris2):
        return np.zeros(0)
    p_axes = _normals(np.roll(hull, -1, axis=0) - hull)                # (n, 2)
    t_axes = _normals(np.roll(tris2, -1, axis=1) - tris2)             # (m, 3, 2)
    # The polygon's own extent along its own normals is the same for every triangle: it
    # is projected once (n x n), not once per triangle (m x n x n).
    own = np.einsum("ad,nd->an", p_axes, hull)                        # (n, n)
    proj_t = np.einsum("ad,mkd->mak", p_axes, tris2)                  # (m, n, 3)
    proj_p = np.einsum("mad,nd->man", t_axes, hull)                   # (m, 3, n)
    proj_tt = np.einsum("mad,mkd->mak", t_axes, tris2)                # (m, 3, 3)
    # the push that separates the intervals along each axis (0 or less: apart); for a
    # triangle seen edge-on (a wall face: a segment) it is how far the polygon must move to
    # clear the segment, not the segment's zero width
    over_p = np.minimum(own.max(axis=1)[None, :] - proj_t.min(axis=2),
                        proj_t.max(axis=2) - own.min(axis=1)[None, :])   # (m, n)
    over_t = np.minimum(proj_p.max(axis=2) - proj_tt.min(axis=2),
                        proj_tt.max(axis=2) - proj_p.min(axis=2))        # (m, 3)
    over_p = np.where((np.linalg.norm(p_axes, axis=-1) > 0.5)[None, :], over_p, np.inf)
    over_t = np.where(np.linalg.norm(t_axes, axis=-1) > 0.5, over_t, np.inf)
    depth = np.minimum(over_p.min(axis=1), over_t.min(axis=1))
    inside = depth > 0.0
    out = np.empty(len(tris2))
    out[inside] = -depth[inside]
    if (~inside).any():
        rest = tris2[~inside]
        ends = np.roll(hull, -1, axis=0)
        starts, vertices = hull, hull
        if facing:
            flat = rest.reshape(-1, 2)
            corners = np.array([flat.min(axis=0), flat.max(axis=0)])
            corners = np.array([[x, y] for x in corners[:, 0] for y in corners[:, 1]])
            offsets = (p_axes * hull).sum(axis=1)
            seen = (corners @ p_axes.T).max(axis=0) - offsets >= -_FACING_SLACK_M
            seen |= np.linalg.norm(p_axes, axis=-1) <= 0.5   # no direction: keep
            if 0 < seen.sum() < len(hull):
                starts, ends = hull[seen], ends[seen]
                vertices = hull[seen | np.roll(seen, 1)]   # both ends of each facing edge
        ta, tb = rest.reshape(-1, 2), np.roll(rest, -1, axis=1).reshape(-1, 2)
        d1 = _point_segment(vertices, ta, tb).reshape(len(vertices), len(rest), 3).min(
            axis=(0, 2))
        d2 = _point_segment(rest.reshape(-1, 2), starts, ends)
        d2 = d2.reshape(len(rest), 3, len(starts)).min(axis=(1, 2))
        out[~inside] = np.minimum(d1, d2)
    return out


_FACING_SLACK_M = 1e-6   # an edge this nearly facing the box is kept (rounding)


def distances(hull: np.ndarray, obstacles: list[Obstacle]
              ) -> dict[str, float]:
    """Signed floor-plane distance from ``hull`` to each obstacle within BROAD_PHASE_M: the
    smallest of ``signed_distances`` over the obstacle's triangles near the hull's box,
    found through the obstacle's ``index`` (``nearest_signed_distance``), the same float."""
    lo, hi = hull.min(axis=0), hull.max(axis=0)
    out = {}
    for ob in obstacles:
        gap = np.maximum(np.maximum(ob.lo - hi, lo - ob.hi), 0.0)
        if float(np.hypot(*gap)) > BROAD_PHASE_M:
            continue
        index = ob.index
        near = np.all((index.lo <= hi + BROAD_PHASE_M) & (index.hi >= lo - BROAD_PHASE_M),
                      axis=1)
        if near.any():
            out[ob.name] = nearest_signed_distance(hull, ob.tris2, index,
                                                   None if near.all() else near)
    return out


def nearest(hull: np.ndarray, obstacles: list[Obstacle], deeper_than: float
            ) -> tuple[str | None, float | None, dict[str, float]]:
    """(the nearest obstacle and its signed distance, {obstacle: signed distance} for those
    the hull overlaps by more than ``deeper_than``, in the obstacles' order): what
    ``distances`` gives for them (the first of equals nearest), the same floats, without
    measuring exactly the obstacles that are neither nearest nor that deep (obstacles
    are visited nearest box first, each cut off at the best so far). (None, None, {}) when
    no obstacle is within BROAD_PHASE_M."""
    lo, hi = hull.min(axis=0), hull.max(axis=0)
    candidates = []
    for rank, ob in enumerate(obstacles):
        gap = np.maximum(np.maximum(ob.lo - hi, lo - ob.hi), 0.0)
        if float(np.hypot(*gap)) > BROAD_PHASE_M:
            continue
        over = np.minimum(hi - ob.lo, ob.hi - lo)
        box = -float(over.min()) if np.all(over > 0.0) else float(np.hypot(*gap))
        candidates.append((box, rank, ob))
    best: tuple[float, int] | None = None
    found: dict[int, tuple[str, float]] = {}
    deep: dict[int, tuple[str, float]] = {}
    for _, rank, ob in sorted(candidates, key=lambda c: (c[0], c[1])):
        index = ob.index
        near = np.all((index.lo <= hi + BROAD_PHASE_M) & (index.hi >= lo - BROAD_PHASE_M),
                      axis=1)
        if not near.any():
            continue
        # exact below the cutoff: enough to tell a new nearest (or an equal one earlier
        # in the obstacles' order) or a deep overlap
        cut = math.inf if best is None else max(float(np.nextafter(best[0], math.inf)),
                                                 -deeper_than)
        d = nearest_signed_distance(hull, ob.tris2, index, None if near.all() else near,
                                    cutoff=cut)
        if best is None or (d, rank) < best:
            best = (d, rank)
            found[rank] = (ob.name, d)
        if d < -deeper_than:
            deep[rank] = (ob.name, d)
    if best is None:
        return None, None, {}
    return (found[best[1]][0], best[0],
            {name: d for _, (name, d) in sorted(deep.items())})


# A cluster or triangle whose lower bound exceeds the best exact value found by more than
# this cannot hold the minimum (the bounds hold in real arithmetic; this absorbs rounding).
_BOUND_SLACK_M = 1e-9
LEAF_TRIANGLES = 32


def _bounds(hull: np.ndarray, lo: np.ndarray, hi: np.ndarray, centre: np.ndarray,
            radius: np.ndarray) -> np.ndarray:
    """Lower bounds of the signed distance from the convex polygon ``hull`` to sets each
    inside the box [lo, hi] and the disc (centre, radius) (k, 2 / k), exact in real
    arithmetic; the larger of:

    * the boxes: their gap to the hull's box when apart, else minus the smaller overlap
      along x and y (the penetration depth is the smallest overlap over all directions, so
      no larger than the overlap along one);
    * the discs: a set inside one is no deeper in the polygon than the disc (the signed
      distance is monotone in inclusion), whose signed distance is its centre's minus the
      radius; the centre's is bounded below by its largest signed distance to the
      polygon's edge lines (exact inside a convex polygon, no more than the distance out)."""
    plo, phi = hull.min(axis=0), hull.max(axis=0)
    over = np.minimum(phi[None, :] - lo, hi - plo[None, :])          # (k, 2)
    apart = np.maximum(-over, 0.0)
    boxes = np.where(np.all(over > 0.0, axis=1), -over.min(axis=1),
                     np.hypot(apart[:, 0], apart[:, 1]))
    normals = _normals(np.roll(hull, -1, axis=0) - hull)
    keep = np.linalg.norm(normals, axis=1) > 0.5
    if keep.sum() < 3:
        return boxes
    normals = normals[keep]
    offsets = (normals * hull[keep]).sum(axis=1)
    side = (centre @ normals.T - offsets[None, :]).max(axis=1)
    return np.maximum(boxes, side - radius)


def _z_order(points: np.ndarray) -> np.ndarray:
    """Morton codes of 2-D points (16 bits per axis over their bounding box)."""
    lo = points.min(axis=0)
    span = max(float(np.ptp(points, axis=0).max()), 1e-300)
    q = ((points - lo) / span * 65535.0).astype(np.uint64)

    def spread(v: np.ndarray) -> np.ndarray:
        for shift, mask in ((8, 0x00FF00FF), (4, 0x0F0F0F0F), (2, 0x33333333),
                            (1, 0x55555555)):
            v = (v | (v << np.uint64(shift))) & np.uint64(mask)
        return v

    return spread(q[:, 0]) | (spread(q[:, 1]) << np.uint64(1))


class TriangleIndex:
    """Per-triangle boxes and enclosing discs of an obstacle's projected triangles, and the
    triangles grouped into spatial clusters of ``LEAF_TRIANGLES`` (consecutive in the
    Z-order of their centroids), each with its own box and disc."""

    def __init__(self, tris2: np.ndarray) -> None:
        self.lo, self.hi = tris2.min(axis=1), tris2.max(axis=1)
        self.centre = tris2.mean(axis=1)
        self.radius = np.linalg.norm(tris2 - self.centre[:, None, :], axis=2).max(axis=1)
        self.order = np.argsort(_z_order(self.centre), kind="stable")
        self.starts = np.append(np.arange(0, len(tris2), LEAF_TRIANGLES), len(tris2))
        firsts = self.starts[:-1]
        self.leaf_lo = np.minimum.reduceat(self.lo[self.order], firsts, axis=0)
        self.leaf_hi = np.maximum.reduceat(self.hi[self.order], firsts, axis=0)
        self.leaf_centre = (self.leaf_lo + self.leaf_hi) / 2.0
        leaf_of = np.repeat(np.arange(len(firsts)), np.diff(self.starts))
        reach = np.linalg.norm(tris2[self.order] - self.leaf_centre[leaf_of][:, None, :],
                               axis=2)
        self.leaf_radius = np.maximum.reduceat(reach.max(axis=1), firsts)

    def leaf(self, i: int) -> np.ndarray:
        return self.order[self.starts[i]:self.starts[i + 1]]


def nearest_signed_distance(hull: np.ndarray, tris2: np.ndarray,
                            index: TriangleIndex | None = None,
                            mask: np.ndarray | None = None,
                            cutoff: float = math.inf) -> float:
    """``min(float(signed_distances(hull, tris2[mask]).min()), cutoff)``, the same float,
    computed only for the triangles that can still beat the best value found (or the
    cutoff): clusters nearest first by their lower bound (``_bounds``), in growing
    batches, and within them the triangles whose own bound can; the rest are left out. A
    6k-triangle chair beside a member then costs its clusters' bounds and a few dozen exact
    tests, not 6k x the member's hull vertex count squared."""
    index = index or TriangleIndex(tris2)
    leaf_bound = _bounds(hull, index.leaf_lo, index.leaf_hi, index.leaf_centre,
                         index.leaf_radius)
    leaves = np.argsort(leaf_bound, kind="stable")
    best = cutoff
    i, take = 0, 1
    while i < len(leaves) and leaf_bound[leaves[i]] <= best + _BOUND_SLACK_M:
        batch = [j for j in leaves[i:i + take] if leaf_bound[j] <= best + _BOUND_SLACK_M]
        tri = np.concatenate([index.leaf(j) for j in batch])
        if mask is not None:
            tri = tri[mask[tri]]
        if len(tri) and math.isfinite(best):
            own = _bounds(hull, index.lo[tri], index.hi[tri], index.centre[tri],
                          index.radius[tri])
            tri = tri[own <= best + _BOUND_SLACK_M]
        if len(tri):
            best = min(best, float(signed_distances(hull, tris2[tri], facing=True).min()))
        i += take
        take *= 2
    return best


def penetrations(hull: np.ndarray, obstacles: list[Obstacle]) -> dict[str, float]:
    """How deep ``hull`` sits in each obstacle it overlaps (> 0; the others are left out):
    ``-distances(hull, obstacles)[name]`` where that is negative, the same floats, at the
    cost of only the triangles that can overlap the hull (a clear footprint costs the
    clusters' bounds)."""
    lo, hi = hull.min(axis=0), hull.max(axis=0)
    out = {}
    for ob in obstacles:
        if np.any(ob.lo > hi) or np.any(lo > ob.hi):
            continue   # boxes apart: no overlap
        d = nearest_signed_distance(hull, ob.tris2, ob.index, cutoff=0.0)
        if d < 0.0:
            out[ob.name] = -d
    return out
