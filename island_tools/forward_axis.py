"""Forward axis of a furniture mesh from its geometry, and the group's ``forward_axes.json``.

Detection (method ``"footprint_rect_depth"``), all in the object's local frame (for a unit:
its root's frame, the unit's evaluated geometry) and invariant to yaw, translation and
uniform scale because every quantity is measured relative to a footprint rectangle and
normalised by its extents:

1. Candidate frames: the minimum-area bounding rectangle(s) of the XY convex hull (rotating
   calipers; at most ``MAX_TIED_RECTS`` of the ties a round footprint has) and the one of
   the part above ``UPPER_FRACTION`` of the height (an office chair's seat and backrest over
   its five-star base, whose own rectangle is 20 degrees off). Their side normals are the
   only candidates, so box-like furniture gets an exact axis.
2. Depth cue ``D`` per side: a RES x RES grid of horizontal rays spanning the side's width
   and the object's full height is cast inward (an orthographic depth buffer, vectorised
   ray/triangle tests); a ray's depth is the distance to its first hit over the rectangle's
   depth along the ray, 1 for a miss; ``D`` is the mean. Fronts are open (seat space before a
   backrest, open shelves, a kneehole), or recessed behind knobs and handles.
3. Tall-side cue ``T``: a top-down height buffer; cells whose top lies in the upper quarter
   of the height are "tall"; with ``c`` their centroid relative to the footprint's area
   centroid, in rectangle coordinates scaled to [-1, 1], ``T = -c . n``: positive on the
   side opposite a backrest or headboard, ~0 for tables, cabinets and round stools.
4. Flush-back cue ``B``: the fraction of a side's rays that stop within ``FLUSH_DEPTH`` of
   the bounding plane. Case furniture stands with a flat back against the wall while its
   front is relieved (doors and drawers behind knobs, a top's overhang), so a side gains
   ``BACK_WEIGHT * (B_opposite - B_own)``: this is what finds the front of a cabinet,
   nightstand or dresser whose drawer fronts are flush.
5. ``score = D + T + BACK_WEIGHT * back``; the frame whose best side wins by the largest
   ``margin`` over the runner-up is kept. Status: ``front`` when the margin is at least
   ``FRONT_MARGIN``; ``symmetric`` when it is at most ``SYMMETRIC_MARGIN`` (no side is
   distinguishable: tables, stools, a desk that is a top on four legs); ``undetermined``
   between (``axis_local`` None, the best guess in ``detail``): verify then raises an
   unknown instead of measuring facing against a guess.

Confidence: for a front ``(margin - SYMMETRIC_MARGIN) / (CONFIDENT_MARGIN -
SYMMETRIC_MARGIN)`` capped at 1, for symmetric ``1 - margin / SYMMETRIC_MARGIN``, for
undetermined how far the margin got towards a front. Measured on the corpus of
``assets/`` (73 assets in 19 categories, 12 poses each; ``scripts/bench.py --section
fronts``): every front found within 1.9 degrees (beds; office chairs 0.9, boxy pieces 0),
the lowest confidence of a correct front 0.55 (a nightstand), no wrong front and no front
asset called symmetric; symmetric assets decide by margins below 0.025, fronts by margins
above 0.29.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .errors import GeometryError
from .geometry import Rect, convex_hull_2d, min_area_rects, polygon_area, polygon_centroid
from .meshcache import keyed_vertices, mesh_digest, remembered

METHOD = "footprint_rect_depth"
RES = 48
TALL_FRACTION = 0.75
UPPER_FRACTION = 0.4
MAX_TIED_RECTS = 8
FLUSH_DEPTH = 0.01       # a ray that stops within 1 % of the depth hits the bounding plane
BACK_WEIGHT = 0.25
FRONT_MARGIN = 0.12      # the best side must win by this much to be the front
SYMMETRIC_MARGIN = 0.03  # ... and by no more than this for the object to be symmetric
# A margin this large (or more) is reported as confidence 1.
CONFIDENT_MARGIN = 0.5
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
    """``axis_local``: unit vector in the object's local XY, or None for symmetric objects."""

    axis_local: Axis2 | None
    method: str
    confidence: float
    detail: dict[str, Any] = field(default_factory=dict)
    status: str = "symmetric"   # "front" | "symmetric" | "undetermined"


def _depth_buffers(p: np.ndarray, faces: np.ndarray, ax_u: int, ax_w: int, ax_d: int,
                   lo: tuple[float, float], hi: tuple[float, float]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Min and max of coordinate ``ax_d`` where rays along ``ax_d`` through the RES x RES cell
    centres of [lo, hi] (in coordinates ``ax_u``, ``ax_w``) hit the mesh (+-inf on a miss)."""
    tri = p[faces]
    u, w, d = tri[:, :, ax_u], tri[:, :, ax_w], tri[:, :, ax_d]
    su, sw = (hi[0] - lo[0]) / RES, (hi[1] - lo[1]) / RES
    i0 = np.clip(np.ceil((u.min(axis=1) - lo[0]) / su - 0.5), 0, RES).astype(np.int64)
    i1 = np.clip(np.floor((u.max(axis=1) - lo[0]) / su - 0.5), -1, RES - 1).astype(np.int64)
    j0 = np.clip(np.ceil((w.min(axis=1) - lo[1]) / sw - 0.5), 0, RES).astype(np.int64)
    j1 = np.clip(np.floor((w.max(axis=1) - lo[1]) / sw - 0.5), -1, RES - 1).astype(np.int64)
    ni, nj = np.maximum(i1 - i0 + 1, 0), np.maximum(j1 - j0 + 1, 0)
    den = (u[:, 1] - u[:, 0]) * (w[:, 2] - w[:, 0]) - (u[:, 2] - u[:, 0]) * (w[:, 1] - w[:, 0])
    # Triangles seen edge-on are never the first hit of a ray their neighbours don't cover.
    live = np.nonzero((ni * nj > 0) & (np.abs(den) > 1e-12 * su * sw))[0]
    near, far = np.full(RES * RES, np.inf), np.full(RES * RES, -np.inf)
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
        cell = (ci * RES + cj)[inside]
        np.minimum.at(near, cell, depth[inside])
        np.maximum.at(far, cell, depth[inside])
    return near.reshape(RES, RES), far.reshape(RES, RES)


def _side_scores(vertices: np.ndarray, faces: np.ndarray, rect: Rect) -> list[dict[str, Any]]:
    """Per side of ``rect``: local outward normal, the cues and the score; best first."""
    c, s = math.cos(rect.angle), math.sin(rect.angle)
    e_u, e_v = np.array([c, s]), np.array([-s, c])
    p = np.column_stack([vertices[:, :2] @ e_u, vertices[:, :2] @ e_v, vertices[:, 2]])
    lo, hi = p.min(axis=0), p.max(axis=0)
    ext = hi - lo

    def depth_map(hits: np.ndarray, from_low: bool, axis: int) -> np.ndarray:
        rel = (hits - lo[axis]) if from_low else (hi[axis] - hits)
        return np.where(np.isfinite(hits), rel / ext[axis], 1.0)

    near_u, far_u = _depth_buffers(p, faces, 1, 2, 0, (lo[1], lo[2]), (hi[1], hi[2]))
    near_v, far_v = _depth_buffers(p, faces, 0, 2, 1, (lo[0], lo[2]), (hi[0], hi[2]))
    _, top = _depth_buffers(p, faces, 0, 1, 2, (lo[0], lo[1]), (hi[0], hi[1]))
    tall = np.isfinite(top) & (top >= lo[2] + TALL_FRACTION * ext[2])
    grid = (np.arange(RES) + 0.5) / RES * 2.0 - 1.0
    gu, gv = np.meshgrid(grid, grid, indexing="ij")
    # the tall part's centroid relative to the footprint's own area centroid (not the
    # rectangle's centre: a five-star base's rectangle is off the pedestal's axis)
    hull = convex_hull_2d(p[:, :2])
    centre = polygon_centroid(hull) if len(hull) >= 3 else (lo[:2] + hi[:2]) / 2.0
    ref = (centre - lo[:2]) / np.maximum(ext[:2], 1e-12) * 2.0 - 1.0
    cu = float(gu[tall].mean() - ref[0]) if tall.any() else 0.0
    cv = float(gv[tall].mean() - ref[1]) if tall.any() else 0.0
    maps = [(e_u, depth_map(far_u, False, 0), -cu), (-e_u, depth_map(near_u, True, 0), cu),
            (e_v, depth_map(far_v, False, 1), -cv), (-e_v, depth_map(near_v, True, 1), cv)]
    flush = [float((d <= FLUSH_DEPTH).mean()) for _, d, _ in maps]
    out = []
    for k, (n, d, tall_cue) in enumerate(maps):
        depth = float(d.mean())
        # sides come in opposite pairs (0, 1) and (2, 3): the side facing away from a flush
        # back gains, the flush side itself loses
        back = flush[k ^ 1] - flush[k]
        out.append({"normal_local": [float(n[0]) + 0.0, float(n[1]) + 0.0], "depth": depth,
                    "tall": tall_cue, "flush": flush[k], "back": back,
                    "score": depth + tall_cue + BACK_WEIGHT * back})
    return sorted(out, key=lambda side: -side["score"])


def _candidate_rects(v: np.ndarray, hull: np.ndarray) -> list[Rect]:
    """Frames whose side normals are the candidate fronts: the minimum-area rectangles of the
    whole footprint (tied ones capped at MAX_TIED_RECTS, spread over the ties) and of the
    footprint of the part above ``UPPER_FRACTION`` of the height (a seat and backrest over a
    five-star base, a mattress over a splayed frame), deduplicated modulo 90 degrees."""
    rects = min_area_rects(hull)
    if len(rects) > MAX_TIED_RECTS:
        step = len(rects) / MAX_TIED_RECTS
        rects = [rects[int(i * step)] for i in range(MAX_TIED_RECTS)]
    z = v[:, 2]
    upper = v[z >= z.min() + UPPER_FRACTION * float(np.ptp(z)), :2]
    if len(upper) >= 3:
        upper_hull = convex_hull_2d(upper)
        if len(upper_hull) >= 3 and polygon_area(upper_hull) > 0.0:
            rects += min_area_rects(upper_hull)[:1]
    out: list[Rect] = []
    for rect in rects:
        if all(abs((rect.angle - r.angle + math.pi / 4.0) % (math.pi / 2.0) - math.pi / 4.0)
               > math.radians(0.5) for r in out):
            out.append(rect)
    return out


def _symmetric(reason: str) -> ForwardAxis:
    return ForwardAxis(None, "symmetric", 1.0, {"reason": reason}, "symmetric")


def detect_forward_axis(vertices: np.ndarray, faces: np.ndarray) -> ForwardAxis:
    """Forward (front) direction of a mesh in its local XY; see the module docstring.

    Raises GeometryError for a mesh without vertices, with non-finite vertices or with face
    indices out of range. Flat, linear or face-less meshes are reported symmetric with a reason.
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
        return _symmetric("mesh has no faces")
    if size == 0.0 or len(hull) < 3 or polygon_area(hull) <= 1e-9 * size * size:
        return _symmetric("footprint is degenerate")
    if float(np.ptp(v[:, 2])) <= 1e-6 * size:
        return _symmetric("mesh is flat")

    best: tuple[float, Rect, list[dict[str, Any]]] | None = None
    rects = _candidate_rects(v, hull)
    for rect in rects:
        sides = _side_scores(v, f, rect)
        margin = sides[0]["score"] - sides[1]["score"]
        if best is None or margin > best[0]:
            best = (margin, rect, sides)
    assert best is not None
    margin, rect, sides = best
    detail: dict[str, Any] = {
        "rect_angle_deg": round(math.degrees(rect.angle), 6),
        "rect_extent": [round(rect.extent_u, 9), round(rect.extent_v, 9)],
        "candidate_rects": len(rects),
        "margin": round(margin, 6),
        "front_margin": FRONT_MARGIN,
        "symmetric_margin": SYMMETRIC_MARGIN,
        "sides": [{k: (round(x, 6) if isinstance(x, float) else [round(c, 6) for c in x])
                   for k, x in side.items()} for side in sides],
    }
    if margin >= FRONT_MARGIN:
        nx, ny = sides[0]["normal_local"]
        confidence = min(1.0, (margin - SYMMETRIC_MARGIN) / (CONFIDENT_MARGIN
                                                             - SYMMETRIC_MARGIN))
        return ForwardAxis((nx, ny), METHOD, confidence, detail, "front")
    if margin <= SYMMETRIC_MARGIN:
        return ForwardAxis(None, "symmetric", 1.0 - margin / SYMMETRIC_MARGIN, detail,
                           "symmetric")
    nx, ny = sides[0]["normal_local"]
    detail["best_guess_local"] = [nx, ny]
    confidence = (margin - SYMMETRIC_MARGIN) / (CONFIDENT_MARGIN - SYMMETRIC_MARGIN)
    return ForwardAxis(None, "undetermined", round(confidence, 6), detail, "undetermined")


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
        return {"axis_local": axis, "method": "override", "confidence": 1.0,
                "status": "symmetric" if axis is None else "front",
                "detail": {"override": overrides[name]}}
    try:   # one detection per distinct mesh in this process (an asset's six chairs)
        found = remembered("forward_axis", mesh_digest(*mesh),
                           lambda: detect_forward_axis(keyed_vertices(mesh[0]), mesh[1]))
    except GeometryError as exc:
        raise GeometryError(f"object '{name}': {exc.reason}") from exc
    return {"axis_local": None if found.axis_local is None else list(found.axis_local),
            "method": found.method, "confidence": round(found.confidence, 6),
            "status": found.status, "detail": found.detail}


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
