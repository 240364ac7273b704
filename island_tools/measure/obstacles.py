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

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
            v, f = self._meshes[name]
            if not len(f):
                continue
            z = v[f][:, :, 2]
            keep = (z.max(axis=1) > floor_z + FLOOR_BAND_M) & (z.min(axis=1) < top_z + ABOVE_M)
            if not keep.any():
                continue
            faces = f[keep]
            used, inverse = np.unique(faces, return_inverse=True)
            verts = v[used]
            faces = inverse.reshape(-1, 3)
            tris2 = verts[faces][:, :, :2]
            flat = tris2.reshape(-1, 2)
            out.append(Obstacle(name, tris2, verts, faces, flat.min(axis=0), flat.max(axis=0)))
        self._band = (key, out)
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


def signed_distances(hull: np.ndarray, tris2: np.ndarray) -> np.ndarray:
    """Per triangle: the gap between the convex polygon ``hull`` (n, 2) and the triangle's
    projection (or segment), or minus the penetration depth where they overlap."""
    if not len(tris2):
        return np.zeros(0)
    p_edges = np.roll(hull, -1, axis=0) - hull
    t_edges = np.roll(tris2, -1, axis=1) - tris2                      # (m, 3, 2)
    axes = np.concatenate([np.broadcast_to(_normals(p_edges)[None], (len(tris2), len(hull), 2)),
                           _normals(t_edges)], axis=1)                # (m, n+3, 2)
    valid = np.linalg.norm(axes, axis=-1) > 0.5
    proj_p = np.einsum("mad,nd->man", axes, hull)                     # (m, n+3, n)
    proj_t = np.einsum("mad,mkd->mak", axes, tris2)                   # (m, n+3, 3)
    # the push that separates the intervals along each axis (0 or less: apart); for a
    # triangle seen edge-on (a wall face: a segment) it is how far the polygon must move to
    # clear the segment, not the segment's zero width
    overlap = np.minimum(proj_p.max(axis=2) - proj_t.min(axis=2),
                         proj_t.max(axis=2) - proj_p.min(axis=2))      # (m, n+3)
    overlap = np.where(valid, overlap, np.inf)
    depth = overlap.min(axis=1)
    inside = depth > 0.0
    out = np.empty(len(tris2))
    out[inside] = -depth[inside]
    if (~inside).any():
        rest = tris2[~inside]
        ta, tb = rest.reshape(-1, 2), np.roll(rest, -1, axis=1).reshape(-1, 2)
        d1 = _point_segment(hull, ta, tb).reshape(len(hull), len(rest), 3).min(axis=(0, 2))
        d2 = _point_segment(rest.reshape(-1, 2), hull, np.roll(hull, -1, axis=0))
        d2 = d2.reshape(len(rest), 3, len(hull)).min(axis=(1, 2))
        out[~inside] = np.minimum(d1, d2)
    return out


def distances(hull: np.ndarray, obstacles: list[Obstacle]
              ) -> dict[str, float]:
    """Signed floor-plane distance from ``hull`` to each obstacle within BROAD_PHASE_M."""
    lo, hi = hull.min(axis=0), hull.max(axis=0)
    out = {}
    for ob in obstacles:
        gap = np.maximum(np.maximum(ob.lo - hi, lo - ob.hi), 0.0)
        if float(np.hypot(*gap)) > BROAD_PHASE_M:
            continue
        tlo, thi = ob.tris2.min(axis=1), ob.tris2.max(axis=1)
        near = np.all((tlo <= hi + BROAD_PHASE_M) & (thi >= lo - BROAD_PHASE_M), axis=1)
        if near.any():
            out[ob.name] = float(signed_distances(hull, ob.tris2[near]).min())
    return out
