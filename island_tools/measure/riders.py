"""Riders: objects resting on a furniture unit (a photo frame on a nightstand, a lamp on a
desk, a TV on a TV stand, books on a table) are part of that unit.

One rule, used by ``island-refine propose`` (``scene.scene_units.attach_riders``: the rider's
triangles join its unit's, the rider is listed as a ``prop`` that "rides on" it) and by the
scene pipeline for any graph (``worker.scene``: at validate the worker finds the riders of
the graph's units; a rider moves with its unit through rebuild and merge and is never an
obstacle of its unit's group).

An object R rides on a unit C when

* R does not stand on the floor: its lowest point is more than ``OFF_FLOOR_M`` above the
  floor (the lowest base of the objects given, unless the caller knows it);
* R's footprint (its plan's convex hull) lies inside C's, grown by ``FOOTPRINT_TOL_M``;
* C has a surface right under R: rays cast down from R's lowest points (at most
  ``MAX_RAYS``) hit a triangle of C within ``RIDE_GAP_M`` of R's lowest point, and that
  surface is at least ``CARRIER_MIN_TOP_M`` above C's own base (a floor slab, a rug or a
  thick carpet carries nothing: a furniture top is higher) and C's plan is at most
  ``CARRIER_MAX_AREA_M2`` (no piece of furniture is larger; a house shell with its floor
  carries nothing).

Of several such units the one with the highest surface under R carries it (a book on a
mattress on a bed frame rides on the mattress); a rider of a rider rides on what carries
that (a lamp on a book on a desk rides on the desk). numpy only: the worker imports it.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

RIDE_GAP_M = 0.03
FOOTPRINT_TOL_M = 0.02
OFF_FLOOR_M = 0.05
CARRIER_MIN_TOP_M = 0.15
CARRIER_MAX_AREA_M2 = 12.0
MAX_RAYS = 64
LOWEST_BAND_M = 0.01         # R's lowest points: within this of its lowest z

Body = tuple[np.ndarray, np.ndarray]   # world vertices (n, 3) in metres, triangles (m, 3)


def _hull(points: np.ndarray) -> np.ndarray:
    """Convex hull of 2-D points, counter-clockwise (monotone chain)."""
    pts = np.unique(np.round(np.asarray(points, dtype=float), 9), axis=0)
    if len(pts) < 3:
        return pts
    lower: list[np.ndarray] = []
    upper: list[np.ndarray] = []

    def cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
        return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))

    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in pts[::-1]:
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def _area(hull: np.ndarray) -> float:
    x, y = hull[:, 0], hull[:, 1]
    return 0.5 * abs(float(x @ np.roll(y, -1) - y @ np.roll(x, -1)))


def _inside(points: np.ndarray, hull: np.ndarray, tol: float) -> bool:
    """Every point within ``tol`` of the convex polygon ``hull`` (or inside it)."""
    if len(hull) < 3:
        return False
    a = hull
    b = np.roll(hull, -1, axis=0)
    edge = b - a
    length = np.maximum(np.linalg.norm(edge, axis=1), 1e-12)
    # outward distance of each point past each edge (counter-clockwise hull: right is out)
    rel = points[:, None, :] - a[None, :, :]
    out = -(edge[None, :, 0] * rel[..., 1] - edge[None, :, 1] * rel[..., 0]) / length[None]
    return bool((out.max(axis=1) <= tol).all())


def _surface_under(xy: np.ndarray, below: float, tris: np.ndarray) -> np.ndarray:
    """Per point (k, 2): the highest z of ``tris`` (m, 3, 3) straight under it at or below
    ``below`` (-inf where there is none)."""
    out = np.full(len(xy), -np.inf)
    if not len(tris):
        return out
    lo, hi = tris[:, :, :2].min(axis=1), tris[:, :, :2].max(axis=1)
    for i, p in enumerate(xy):
        near = np.nonzero(np.all((lo <= p) & (hi >= p), axis=1)
                          & (tris[:, :, 2].min(axis=1) <= below))[0]
        if not len(near):
            continue
        t = tris[near]
        a, b, c = t[:, 0], t[:, 1], t[:, 2]
        den = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
        ok = np.abs(den) > 1e-14
        if not ok.any():
            continue
        a, b, c, den = a[ok], b[ok], c[ok], den[ok]
        d0, d1 = p[0] - a[:, 0], p[1] - a[:, 1]
        l1 = (d0 * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * d1) / den
        l2 = ((b[:, 0] - a[:, 0]) * d1 - d0 * (b[:, 1] - a[:, 1])) / den
        hit = (l1 >= -1e-9) & (l2 >= -1e-9) & (l1 + l2 <= 1 + 1e-9)
        z = a[:, 2] + l1 * (b[:, 2] - a[:, 2]) + l2 * (c[:, 2] - a[:, 2])
        z = z[hit & (z <= below)]
        if len(z):
            out[i] = float(z.max())
    return out


def _lowest_points(v: np.ndarray) -> np.ndarray:
    z0 = float(v[:, 2].min())
    low = v[v[:, 2] <= z0 + LOWEST_BAND_M][:, :2]
    pts = np.unique(np.round(low, 6), axis=0)
    if len(pts) > MAX_RAYS:
        pts = pts[np.linspace(0, len(pts) - 1, MAX_RAYS).astype(np.int64)]
    # the footprint's centroid too: a lamp's round foot rests on its whole disc
    return np.vstack([pts, low.mean(axis=0, keepdims=True)])


def find_riders(bodies: Mapping[str, Body], fixed: Collection[str] = (),
                floor_z: float | None = None) -> dict[str, str]:
    """``{rider: the unit it finally rests on}`` among ``bodies`` (world metres). Names in
    ``fixed`` (a relation graph's units) never ride; ``floor_z`` defaults to the lowest
    base of the bodies. Deterministic: ties go to the name first in order."""
    live = {n: (np.asarray(v, dtype=float).reshape(-1, 3), np.asarray(f, dtype=np.int64)
                .reshape(-1, 3)) for n, (v, f) in bodies.items() if len(f) and len(v)}
    if len(live) < 2:
        return {}
    base = {n: float(v[np.unique(f), 2].min()) for n, (v, f) in live.items()}
    top = {n: float(v[np.unique(f), 2].max()) for n, (v, f) in live.items()}
    floor = min(base.values()) if floor_z is None else float(floor_z)
    hulls = {n: _hull(v[np.unique(f), :2]) for n, (v, f) in live.items()}
    able = {n for n, h in hulls.items() if len(h) >= 3 and _area(h) <= CARRIER_MAX_AREA_M2}
    boxes = {n: (v[:, :2].min(axis=0), v[:, :2].max(axis=0)) for n, (v, _) in live.items()}
    carrier: dict[str, tuple[float, str]] = {}
    for r in sorted(live):
        if r in fixed or base[r] - floor <= OFF_FLOOR_M:
            continue
        rv, _ = live[r]
        rlo, rhi = boxes[r]
        rays: np.ndarray | None = None
        for c in sorted(live):
            if c == r or c not in able:
                continue
            clo, chi = boxes[c]
            if (np.any(rlo < clo - FOOTPRINT_TOL_M) or np.any(rhi > chi + FOOTPRINT_TOL_M)
                    or base[c] > base[r] - OFF_FLOOR_M + RIDE_GAP_M
                    or top[c] < base[r] - RIDE_GAP_M):
                continue
            if not _inside(hulls[r], hulls[c], FOOTPRINT_TOL_M):
                continue
            if rays is None:
                rays = _lowest_points(rv)
            cv, cf = live[c]
            under = _surface_under(rays, base[r] + RIDE_GAP_M, cv[cf])
            touching = under[under >= base[r] - RIDE_GAP_M]
            if not len(touching) or float(touching.max()) - base[c] < CARRIER_MIN_TOP_M:
                continue
            z = float(touching.max())
            if r not in carrier or z > carrier[r][0]:
                carrier[r] = (z, c)
    out = {}
    for r in carrier:
        seen, c = {r}, carrier[r][1]
        while c in carrier and c not in seen:   # a rider of a rider: what carries it
            seen.add(c)
            c = carrier[c][1]
        if c not in seen:
            out[r] = c
    return out
