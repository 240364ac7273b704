"""``island-refine propose``: relation groups proposed from a plain scene's furniture.

A scene an artist made, downloaded or a generator wrote has no ``inputs/relation_graph.json``.
:func:`propose_units` reads the furniture units' evaluated geometry (one triangle array per
unit, in its root's frame, as ``worker.units`` evaluates it) and proposes the groups: each
with an anchor, members, the target-spec hints (``relation``) and a ``proposal`` block saying
how sure it is and why. Roles come from measured geometry, not names:

* **Shape** (per unit, in metres, in the frame of its footprint's minimum-area rectangle):
  the footprint (long x short side), the height above its own base, a top-down height map
  (``HEIGHT_MAP_RES`` cells a side) giving the *surface* (the height band that covers most
  of the footprint: a seat, a table top, a mattress) and the *tall part* above it (a back, a
  headboard) with where it stands, the share of the top with free space under it (knee
  room), and how much of its long side a front view fills (case furniture is closed).
  Each role (:data:`ROLE_RULES`) scores by soft ranges on these numbers; the best role must
  beat the runner-up by ``ROLE_MARGIN`` or the role is *not settled*. An object's name only
  adds ``NAME_HINT_WEIGHT`` to a role its words name: a tie-breaker, never decisive.
* **Fronts**: ``island_tools.forward_axis`` (``mirror_relief``) on the unit's mesh; when it
  is undetermined, the measured tall part (the side a backrest or headboard stands on is
  the back) or, for case furniture, a wall right behind one long side.
* **Placement**: a seat belongs to the table, desk or TV stand it faces
  (``FACING_MAX_DEG``) and stands near (``TABLE_REACH_M`` from the table's footprint;
  ``TV_MIN_M``-``TV_MAX_M`` before a TV stand's front); a nightstand to the bed whose head
  end it flanks (``BED_SIDE_GAP_M`` beside a long side, within ``BED_HEAD_REACH_M`` of the
  headboard end); a coffee table to the sofa it stands before. A unit that qualifies for
  two anchors is proposed with the better one but ``uncertain``, naming the other.

Doubt is never decided silently: a member that could belong to two anchors, a front or role
the geometry does not settle, or a pattern the members' edges match no pattern of (and the
count rule cannot name) makes the group ``uncertain`` with the reasons. Target specs come
from ``validate.resolve_target_spec`` (the pipeline's own inference and conventions) fed the
role and, for tables, the pattern the members' edges show.

The graph document adds, per group, ``proposal`` (status, confidence, reasons, evidence,
member_confidence, uncertain_members) and, on top, ``proposed`` (by, scene_sha256,
unassigned); ``relation_graph.parse_relation_graph`` validates both.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GeometryError
from ..forward_axis import _depth_buffers, detect_forward_axis
from ..geometry import (
    ROUND_MAX_ASPECT,
    ROUND_MAX_RADIUS_CV,
    convex_hull_2d,
    convex_signed_distance,
    min_area_rects,
    polygon_area,
    polygon_centroid,
)
from ..meshcache import keyed_vertices, mesh_digest, remembered
from .errors import RelationGraphError
from .relation_graph import GRAPH_VERSION, HINT_KEYS, GroupSpec

PROPOSED_BY = "island-refine propose"
HEIGHT_MAP_RES = 40
SURFACE_BAND_M = 0.03        # cells within this of a band's height belong to its surface
TALL_ABOVE_M = 0.18          # a back / headboard rises this far above the surface
UNDER_FREE_M = 0.35          # a top with this much free height under it has knee room
FLOOR_TOL_M = 0.25           # a unit whose base is higher above the floor stands on nothing
ROLE_MARGIN = 0.15           # the best role beats the runner-up by this, or it is not settled
ROLE_MIN = 0.5               # a role scoring less is not taken
NAME_HINT_WEIGHT = 0.1
FACING_MAX_DEG = 45.0        # a member faces an anchor within this
FACING_GOOD_DEG = 20.0       # ... fully confident within this
TABLE_REACH_M = 0.6          # a seat's footprint this close to a table's (gap)
STOOL_REACH_M = 0.35         # a seat without a front: only this close
TV_MIN_M, TV_MAX_M = 0.6, 4.5
TV_FACING_MAX_DEG = 30.0
BED_SIDE_GAP_M = 0.45
BED_HEAD_REACH_M = 0.9
SOFA_TABLE_GAP_M = (0.1, 1.0)
WALL_BEHIND_M = 0.25
CONFIDENT = 0.5              # member / group confidence below this is uncertain
DEFAULT_CLEARANCE_M = {"table": 0.10, "long_table": 0.10, "round_table": 0.10,
                       "desk": 0.10, "bed": 0.05, "sofa": 0.40}
TV_CLEARANCE_RANGE_M = (1.2, 3.0)

ANCHOR_ROLES = ("table", "desk", "bed", "tv_stand", "sofa")
SEAT_ROLES = ("chair", "armchair", "stool", "sofa")
BESIDE_BED_ROLES = ("nightstand", "side_table")
CONTEXT_ROLES = ("wall", "flat")
# Name words per role: a weak hint only (an importer's "Object_17" names nothing).
NAME_WORDS: dict[str, tuple[str, ...]] = {
    "table": ("table", "dining"), "desk": ("desk",), "bed": ("bed",),
    "tv_stand": ("tv", "television", "media"), "sofa": ("sofa", "couch"),
    "chair": ("chair",), "armchair": ("armchair",), "stool": ("stool",),
    "nightstand": ("nightstand", "bedside"), "side_table": ("side",),
    "coffee_table": ("coffee",), "storage": ("wardrobe", "shelf", "cabinet", "dresser"),
    "wall": ("wall",), "flat": ("floor", "rug", "carpet", "ceiling"),
}


@dataclass(frozen=True)
class UnitInput:
    """One furniture unit: ``world`` is its root's world matrix (scene units), ``vertices``
    the unit's evaluated vertices in the root's local frame, ``faces`` its triangles."""

    name: str
    world: np.ndarray
    vertices: np.ndarray
    faces: np.ndarray
    parent: str | None = None
    collections: tuple[str, ...] = ()
    type: str = "MESH"


# --------------------------------------------------------------------------- measurement
@dataclass
class _Shape:
    """A unit measured in metres, world frame (floor plane: its footprint rectangle)."""

    name: str
    base_z: float
    height: float
    hull: np.ndarray
    centre: np.ndarray           # footprint rectangle centre (world xy)
    e_long: np.ndarray           # unit vector of the rectangle's long side
    e_short: np.ndarray
    length: float
    width: float
    round: bool
    surface_m: float | None      # height of the surface band above the base
    surface_share: float         # its share of the footprint rectangle
    top_share: float             # share covered within SURFACE_BAND_M of the top
    tall_share: float
    tall_offset: np.ndarray      # tall part's centroid - footprint centre (world xy)
    knee_share: float            # share of the top with UNDER_FREE_M free under it
    side_fill: float             # share of the long-side front view covered
    back_on_long_side: bool      # the tall part stands along a long side (a sofa's back)
    rot2: np.ndarray             # local xy direction -> world xy direction
    origin: np.ndarray           # the root's world xy (metres): the canonical frame's origin
    local: tuple[np.ndarray, np.ndarray]
    features: dict[str, float] = field(default_factory=dict)


def _unit_rect(hull: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float, np.ndarray]:
    rect = min_area_rects(hull)[0]
    e_u = np.array([math.cos(rect.angle), math.sin(rect.angle)])
    e_v = np.array([-e_u[1], e_u[0]])
    pu, pv = hull @ e_u, hull @ e_v
    centre = e_u * (pu.max() + pu.min()) / 2.0 + e_v * (pv.max() + pv.min()) / 2.0
    if rect.extent_u >= rect.extent_v:
        return e_u, e_v, rect.extent_u, rect.extent_v, centre
    return e_v, -e_u, rect.extent_v, rect.extent_u, centre


def _is_round(hull: np.ndarray, length: float, width: float) -> bool:
    if width <= 0 or length / width >= ROUND_MAX_ASPECT or len(hull) < 8:
        return False
    centre = polygon_centroid(hull)
    d = np.roll(hull, -1, axis=0) - hull
    seg = np.linalg.norm(d, axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    s = (np.arange(256) + 0.5) / 256 * cum[-1]
    i = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(hull) - 1)
    pts = hull[i] + ((s - cum[i]) / np.maximum(seg[i], 1e-300))[:, None] * d[i]
    r = np.linalg.norm(pts - centre, axis=1)
    return bool(r.std() / r.mean() < ROUND_MAX_RADIUS_CV)


def measure_unit(unit: UnitInput, unit_scale: float = 1.0) -> _Shape:
    """The unit's shape numbers (see the module docstring). GeometryError for a unit
    without triangles or with non-finite vertices."""
    v = np.asarray(unit.vertices, dtype=float).reshape(-1, 3)
    f = np.asarray(unit.faces, dtype=np.int64).reshape(-1, 3)
    if len(f) == 0 or len(v) == 0:
        raise GeometryError(f"unit '{unit.name}' has no triangles")
    world = np.asarray(unit.world, dtype=float).reshape(4, 4)
    pts = (v @ world[:3, :3].T + world[:3, 3]) * float(unit_scale)
    if not np.all(np.isfinite(pts)):
        raise GeometryError(f"unit '{unit.name}' has non-finite vertices")
    used = np.unique(f)
    base_z, top_z = float(pts[used, 2].min()), float(pts[used, 2].max())
    height = top_z - base_z
    hull = convex_hull_2d(pts[used, :2])
    lin = world[:2, :2]
    scale = float(np.sqrt(abs(np.linalg.det(lin)))) or 1.0
    rot2 = lin / scale
    if len(hull) < 3 or polygon_area(hull) < 1e-6:
        centre = pts[used, :2].mean(axis=0)
        return _Shape(unit.name, base_z, height, hull, centre, np.array([1.0, 0.0]),
                      np.array([0.0, 1.0]), 0.0, 0.0, False, None, 0.0, 0.0, 0.0,
                      np.zeros(2), 0.0, 0.0, False, rot2, world[:2, 3] * unit_scale,
                      (v, f))
    e_long, e_short, length, width, centre = _unit_rect(hull)
    # the rectangle's frame: u along the long side, w along the short side, z up from base
    rel = pts[:, :2] - centre
    p = np.stack([rel @ e_long, rel @ e_short, pts[:, 2] - base_z], axis=1)
    half = (length / 2.0 + 1e-6, width / 2.0 + 1e-6)
    res = HEIGHT_MAP_RES
    near, far = _depth_buffers(p, f, 0, 1, 2, (-half[0], -half[1]), half, res)
    hit = np.isfinite(far)
    cells = float(res * res)
    top_share = float((far >= height - SURFACE_BAND_M).sum() / cells)
    surface_m, surface_share = _surface(far[hit], cells)
    tall_share, tall_offset = 0.0, np.zeros(2)
    if surface_m is not None:
        tall = hit & (far >= surface_m + TALL_ABOVE_M)
        tall_share = float(tall.sum() / cells)
        if tall.any():
            cu = (np.arange(res) + 0.5) / res * 2 * half[0] - half[0]
            cw = (np.arange(res) + 0.5) / res * 2 * half[1] - half[1]
            iu, iw = np.nonzero(tall)
            tall_offset = e_long * float(cu[iu].mean()) + e_short * float(cw[iw].mean())
    top = far >= height - SURFACE_BAND_M
    knee_share = float((top & (near >= UNDER_FREE_M)).sum() / max(top.sum(), 1))
    z_half = (height / 2.0 + 1e-6)
    q = p.copy()
    q[:, 2] -= height / 2.0
    _, side = _depth_buffers(q, f, 0, 2, 1, (-half[0], -z_half), (half[0], z_half), 32)
    side_fill = float(np.isfinite(side).mean())
    on_long = (abs(float(tall_offset @ e_short)) / width
               > abs(float(tall_offset @ e_long)) / length)
    shape = _Shape(unit.name, base_z, height, hull, centre, e_long, e_short, length, width,
                   _is_round(hull, length, width), surface_m, surface_share, top_share,
                   tall_share, tall_offset, knee_share, side_fill, on_long, rot2,
                   world[:2, 3] * float(unit_scale), (v, f))
    shape.features = {"length_m": length, "width_m": width, "height_m": height,
                      "surface_m": -1.0 if surface_m is None else surface_m,
                      "surface_share": surface_share, "top_share": top_share,
                      "tall_share": tall_share, "knee_share": knee_share,
                      "side_fill": side_fill}
    return shape


def _surface(tops: np.ndarray, cells: float) -> tuple[float | None, float]:
    """The height band (2 cm bins, a bin and its neighbours) that covers most of the
    footprint between 0.15 m and 1.0 m: a seat, a top, a mattress."""
    tops = tops[(tops >= 0.15) & (tops <= 1.0)]
    if not len(tops):
        return None, 0.0
    bins = np.floor(tops / 0.02).astype(np.int64)
    lo = int(bins.min())
    counts = np.bincount(bins - lo)
    window = np.convolve(counts, np.ones(3), mode="same")
    best = int(np.argmax(window))
    sel = np.abs(bins - lo - best) <= 1
    return float(np.median(tops[sel])), float(sel.sum() / cells)


# --------------------------------------------------------------------------- roles
def _soft(x: float, lo: float, hi: float, margin: float) -> float:
    """1 inside [lo, hi], falling linearly to 0 ``margin`` outside."""
    if lo <= x <= hi:
        return 1.0
    d = lo - x if x < lo else x - hi
    return max(0.0, 1.0 - d / margin)


def _rule(s: _Shape, role: str) -> float:
    L, W, H = s.length, s.width, s.height
    seat = s.surface_m if s.surface_m is not None else -1.0
    has_back = _soft(s.tall_share, 0.06, 1.0, 0.04)
    no_back = _soft(s.tall_share, 0.0, 0.03, 0.05)
    case = _soft(s.side_fill, 0.6, 1.0, 0.15)
    open_under = _soft(s.side_fill, 0.0, 0.5, 0.15)
    if role == "flat":
        return _soft(H, 0.0, 0.05, 0.03) * _soft(L, 0.8, 1e9, 0.4)
    if role == "wall":
        return (_soft(H, 1.6, 1e9, 0.3) * _soft(W, 0.0, 0.35, 0.1)
                * _soft(L / max(W, 1e-6), 4.0, 1e9, 1.5))
    if role == "table":
        return (_soft(H, 0.62, 0.86, 0.06) * _soft(s.top_share, 0.5, 1.0, 0.15)
                * _soft(s.knee_share, 0.45, 1.0, 0.2) * _soft(W, 0.55, 1.6, 0.15)
                * _soft(L, 0.55, 3.6, 0.2))
    if role == "desk":   # a table-height top with one front: it is told apart by its front
        return 0.0
    if role == "coffee_table":
        return (_soft(H, 0.28, 0.55, 0.06) * _soft(s.top_share, 0.45, 1.0, 0.15)
                * _soft(L, 0.6, 1.8, 0.2) * _soft(W, 0.4, 1.2, 0.1)
                * _soft(L / max(W, 1e-6), 1.0, 2.6, 0.5) * max(open_under, 0.6 * (1 - case)))
    if role == "tv_stand":
        return (_soft(H, 0.3, 0.85, 0.08) * _soft(L, 0.9, 3.0, 0.2) * _soft(W, 0.2, 0.65, 0.1)
                * _soft(L / max(W, 1e-6), 2.0, 12.0, 0.5) * _soft(s.top_share, 0.4, 1.0, 0.15)
                * max(case, 0.7 * _soft(s.knee_share, 0.0, 0.3, 0.2)))
    if role == "nightstand":
        return (_soft(H, 0.35, 0.85, 0.08) * _soft(L, 0.25, 0.75, 0.1)
                * _soft(s.top_share, 0.45, 1.0, 0.15) * case)
    if role == "side_table":
        return (_soft(H, 0.35, 0.8, 0.08) * _soft(L, 0.25, 0.75, 0.1)
                * _soft(s.top_share, 0.45, 1.0, 0.15) * open_under * 0.9)
    if role == "storage":
        return (_soft(H, 0.9, 2.6, 0.1) * _soft(s.top_share, 0.4, 1.0, 0.15) * case
                * _soft(W, 0.2, 1.0, 0.2))
    if role == "bed":   # a headboard at an end, if any; a sofa's back runs along a side
        return ((0.3 if s.back_on_long_side and s.tall_share > 0.06 else 1.0)
                * _soft(s.tall_share, 0.0, 0.2, 0.1)
                * _soft(L, 1.75, 2.5, 0.2) * _soft(W, 0.8, 2.3, 0.15) * _soft(seat, 0.25, 0.8, 0.1)
                * _soft(s.surface_share, 0.45, 1.0, 0.15) * _soft(H, 0.3, 1.7, 0.2))
    if role == "sofa":
        return ((1.0 if s.back_on_long_side else 0.3) * _soft(seat, 0.28, 0.6, 0.08)
                * _soft(s.surface_share, 0.15, 1.0, 0.1)
                * has_back * _soft(L, 1.25, 3.6, 0.2) * _soft(W, 0.55, 1.3, 0.15)
                * _soft(H, 0.55, 1.25, 0.15))
    if role == "armchair":
        return (_soft(seat, 0.28, 0.6, 0.08) * _soft(s.surface_share, 0.1, 1.0, 0.08)
                * has_back * _soft(L, 0.62, 1.25, 0.08) * _soft(W, 0.6, 1.2, 0.06)
                * _soft(H, 0.55, 1.3, 0.15))
    if role == "chair":
        return (_soft(seat, 0.36, 0.62, 0.06) * _soft(s.surface_share, 0.08, 1.0, 0.06)
                * has_back * _soft(L, 0.3, 0.72, 0.08) * _soft(W, 0.3, 0.7, 0.08)
                * _soft(H, 0.65, 1.4, 0.1))
    if role == "stool":
        return (_soft(H, 0.4, 0.9, 0.08) * _soft(L, 0.25, 0.6, 0.08) * no_back
                * _soft(s.top_share, 0.1, 1.0, 0.08) * open_under)
    raise KeyError(role)


ROLE_RULES = ("flat", "wall", "table", "coffee_table", "tv_stand", "nightstand", "side_table",
              "storage", "bed", "sofa", "armchair", "chair", "stool")
_WORD = re.compile(r"[a-z]+")


def name_hints(name: str) -> set[str]:
    """Roles a name's words mention (``Chair.003`` -> chair; ``Object_17`` -> none)."""
    words = set(_WORD.findall(name.lower()))
    spaced = name.lower()
    return {role for role, keys in NAME_WORDS.items()
            if any(k in words or (len(k) > 4 and k in spaced) for k in keys)}


@dataclass
class _Role:
    role: str | None
    score: float
    runner_up: tuple[str, float] | None
    settled: bool
    hinted: bool


def classify(s: _Shape, name: str = "") -> _Role:
    hints = name_hints(name)
    scores = {r: _rule(s, r) for r in ROLE_RULES}
    for r in hints & set(scores):
        if scores[r] > 0:
            scores[r] = min(1.0, scores[r] + NAME_HINT_WEIGHT)
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    (best, score), (second, s2) = ranked[0], ranked[1]
    if score < ROLE_MIN:
        return _Role(None, score, (best, score), True, False)
    # roles that lead to the same place in a group do not need telling apart
    interchangeable = {frozenset(("nightstand", "side_table")), frozenset(("chair", "armchair")),
                       frozenset(("armchair", "sofa"))}
    settled = score - s2 >= ROLE_MARGIN or frozenset((best, second)) in interchangeable
    return _Role(best, score, (second, s2), settled, best in hints)


def _role_evidence(s: _Shape, role: str) -> str:
    dims = f"{s.length:.2f}x{s.width:.2f} m footprint, {s.height:.2f} m tall"
    surf = "" if s.surface_m is None else f"surface {s.surface_m:.2f} m ({s.surface_share:.0%})"
    if role in ("table", "desk", "coffee_table"):
        return f"{role}: top {s.height:.2f} m, {s.length:.2f}x{s.width:.2f} m footprint, " \
               f"{s.knee_share:.0%} of the top with free room under it"
    if role in ("chair", "armchair", "sofa"):
        return f"{role}: seat {s.surface_m or 0:.2f} m, back to {s.height:.2f} m " \
               f"({s.tall_share:.0%} of the footprint), {s.length:.2f}x{s.width:.2f} m"
    if role == "bed":
        return f"bed: {s.length:.2f}x{s.width:.2f} m, {surf}, headboard to {s.height:.2f} m"
    if role in ("nightstand", "tv_stand", "storage"):
        return f"{role}: {dims}, front view {s.side_fill:.0%} closed"
    return f"{role}: {dims}" + (f", {surf}" if surf else "")


# --------------------------------------------------------------------------- fronts
@dataclass
class _Front:
    world: np.ndarray | None
    how: str
    confidence: float
    symmetric: bool = False


def _snap(direction: np.ndarray, s: _Shape) -> np.ndarray:
    """``direction`` snapped to the nearer footprint axis (a back stands on a side)."""
    axes = [s.e_long, -s.e_long, s.e_short, -s.e_short]
    return max(axes, key=lambda a: float(a @ direction))


def detect_front(s: _Shape, role: str | None, walls: Sequence[_Shape]) -> _Front:
    v, f = s.local
    try:
        found = remembered("forward_axis", mesh_digest(v, f),
                           lambda: detect_forward_axis(keyed_vertices(v), f))
    except GeometryError:
        found = None
    if found is not None and found.axis_local is not None:
        d = s.rot2 @ np.asarray(found.axis_local, dtype=float)
        d /= max(float(np.linalg.norm(d)), 1e-12)
        return _Front(d, f"detected ({found.method}, confidence {found.confidence:.2f})",
                      max(0.5, float(found.confidence)))
    if found is not None and found.status == "symmetric":
        return _Front(None, f"symmetric (order {found.symmetry.get('order')})", 1.0, True)
    why = "" if found is None else found.detail.get("reason", "")
    if role in ("chair", "armchair", "sofa", "bed") and s.tall_share > 0.04:
        off = s.tall_offset
        extent = s.length if abs(off @ s.e_long) / max(s.length, 1e-9) > abs(
            off @ s.e_short) / max(s.width, 1e-9) else s.width
        if float(np.linalg.norm(off)) > 0.12 * extent:
            part = "headboard" if role == "bed" else "back"
            return _Front(_snap(-off, s), f"from the {part}'s side (detector undetermined: "
                                          f"{why})", 0.6)
    if role in ("tv_stand", "sofa", "bed", "desk", "nightstand") and len(s.hull) >= 3:
        for back in (s.e_short, -s.e_short, s.e_long, -s.e_long):
            for w in walls:
                if len(w.hull) < 3 or abs(float(w.e_long @ back)) > 0.3:
                    continue
                gap, _ = convex_signed_distance(s.hull, w.hull)
                if gap <= WALL_BEHIND_M and float((w.centre - s.centre) @ back) > 0:
                    return _Front(-back, f"its back against wall '{w.name}' (detector "
                                         f"undetermined: {why})", 0.55)
    return _Front(None, f"undetermined ({why})" if why else "undetermined", 0.0)


# --------------------------------------------------------------------------- membership
def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    c = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


def _toward(anchor: _Shape, member: _Shape) -> np.ndarray:
    """The direction a member must face to face ``anchor``: toward the centre of a round
    anchor, else against the normal of the rectangle side the member is outside of."""
    rel = member.centre - anchor.centre
    if anchor.round:
        return -rel / max(float(np.linalg.norm(rel)), 1e-12)
    du = abs(float(rel @ anchor.e_long)) - anchor.length / 2.0
    dv = abs(float(rel @ anchor.e_short)) - anchor.width / 2.0
    if du > dv:
        return -anchor.e_long * math.copysign(1.0, float(rel @ anchor.e_long))
    return -anchor.e_short * math.copysign(1.0, float(rel @ anchor.e_short))


@dataclass
class _Candidate:
    anchor: str
    confidence: float
    evidence: str
    gap_m: float


def _ramp(x: float, good: float, limit: float) -> float:
    """1 up to ``good``, 0 at ``limit``."""
    if x <= good:
        return 1.0
    return max(0.0, 1.0 - (x - good) / max(limit - good, 1e-9))


def _seat_at_table(a: _Shape, m: _Shape, mf: _Front, mrole: str) -> _Candidate | None:
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if mf.world is None:
        if mrole == "stool" and gap <= STOOL_REACH_M:
            conf = 0.6 * _ramp(gap, 0.15, STOOL_REACH_M + 0.05)
            return _Candidate(a.name, conf, f"stool without a front, {max(gap, 0):.2f} m from "
                                            f"the {a.name} top's edge", gap)
        return None
    if gap > TABLE_REACH_M:
        return None
    angle = _angle_deg(mf.world, _toward(a, m))
    if angle > FACING_MAX_DEG:
        return None
    conf = (_ramp(angle, FACING_GOOD_DEG, FACING_MAX_DEG + 10)
            * _ramp(gap, 0.35, TABLE_REACH_M + 0.15) * min(1.0, mf.confidence + 0.3))
    where = "pushed under it" if gap < 0 else f"{gap:.2f} m from its edge"
    return _Candidate(a.name, conf, f"faces it ({angle:.0f} deg), {where}; front {mf.how}", gap)


def _seat_at_tv(a: _Shape, af: _Front, m: _Shape, mf: _Front) -> _Candidate | None:
    if mf.world is None:
        return None
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if not TV_MIN_M <= gap <= TV_MAX_M:
        return None
    to_tv = a.centre - m.centre
    angle = _angle_deg(mf.world, to_tv)
    if angle > TV_FACING_MAX_DEG:
        return None
    front_ok = 1.0
    if af.world is not None:
        if float(af.world @ (m.centre - a.centre)) <= 0:
            return None   # behind the stand
    else:
        front_ok = 0.6
    conf = (_ramp(angle, 12.0, TV_FACING_MAX_DEG + 8) * front_ok
            * min(1.0, mf.confidence + 0.3))
    return _Candidate(a.name, conf, f"faces it ({angle:.0f} deg) from {gap:.2f} m; front "
                                    f"{mf.how}", gap)


def _beside_bed(a: _Shape, af: _Front, m: _Shape) -> _Candidate | None:
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if gap > BED_SIDE_GAP_M or gap < -0.05:
        return None
    rel = m.centre - a.centre
    lateral = abs(float(rel @ a.e_short)) - a.width / 2.0
    if lateral < -0.05:
        return None   # at an end, not beside a long side
    along = float(rel @ a.e_long)
    if af.world is not None:
        head_dir = -a.e_long * math.copysign(1.0, float(af.world @ a.e_long))
        from_head = a.length / 2.0 - along * float(head_dir @ a.e_long)
        conf_head = 1.0
    else:   # the head end unknown: either end, and less sure
        from_head = a.length / 2.0 - abs(along)
        conf_head = 0.55
    if from_head > BED_HEAD_REACH_M:
        return None
    conf = conf_head * _ramp(gap, 0.2, BED_SIDE_GAP_M + 0.1) * _ramp(from_head, 0.5,
                                                                      BED_HEAD_REACH_M + 0.2)
    return _Candidate(a.name, conf, f"beside its long side ({max(gap, 0):.2f} m), "
                                    f"{max(from_head, 0):.2f} m from its head end", gap)


def _before_sofa(a: _Shape, af: _Front, m: _Shape) -> _Candidate | None:
    if af.world is None:
        return None
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if not SOFA_TABLE_GAP_M[0] <= gap <= SOFA_TABLE_GAP_M[1]:
        return None
    rel = m.centre - a.centre
    if float(rel @ af.world) <= 0 or abs(float(rel @ a.e_long)) > a.length / 2.0:
        return None
    conf = _ramp(gap, 0.6, SOFA_TABLE_GAP_M[1] + 0.2)
    return _Candidate(a.name, conf, f"before its front, {gap:.2f} m away", gap)


# --------------------------------------------------------------------------- proposing
@dataclass
class _Piece:
    shape: _Shape
    role: _Role
    front: _Front


def _anchor_role(p: _Piece) -> str | None:
    r = p.role.role
    if r == "table":
        return "desk" if p.front.world is not None else "table"
    return r if r in ANCHOR_ROLES else None


def _candidates(m: _Piece, anchors: Mapping[str, _Piece]) -> list[_Candidate]:
    mrole = m.role.role
    out: list[_Candidate] = []
    for name, a in anchors.items():
        if name == m.shape.name:
            continue
        arole = _anchor_role(a)
        found = None
        if arole in ("table", "desk") and mrole in ("chair", "armchair", "stool"):
            found = _seat_at_table(a.shape, m.shape, m.front, mrole)
            if found is not None and arole == "desk" and a.front.world is not None:
                if float(a.front.world @ (m.shape.centre - a.shape.centre)) <= 0:
                    found = None   # behind the desk
        elif arole == "tv_stand" and mrole in ("sofa", "armchair", "chair"):
            found = _seat_at_tv(a.shape, a.front, m.shape, m.front)
        elif arole == "bed" and mrole in BESIDE_BED_ROLES:
            found = _beside_bed(a.shape, a.front, m.shape)
        elif arole == "sofa" and mrole == "coffee_table":
            found = _before_sofa(a.shape, a.front, m.shape)
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda c: (-c.confidence, c.anchor))


def _edge_counts(a: _Shape, members: Sequence[_Shape]) -> dict[str, list[int]]:
    """Members per rectangle edge of the anchor, by role: long [a, b], short [c, d]."""
    counts = {"+l": 0, "-l": 0, "+s": 0, "-s": 0}
    for m in members:
        rel = m.centre - a.centre
        du = abs(float(rel @ a.e_long)) - a.length / 2.0
        dv = abs(float(rel @ a.e_short)) - a.width / 2.0
        if du > dv:
            counts["+s" if rel @ a.e_long > 0 else "-s"] += 1
        else:
            counts["+l" if rel @ a.e_short > 0 else "-l"] += 1
    return {"long": sorted([counts["+l"], counts["-l"]], reverse=True),
            "short": sorted([counts["+s"], counts["-s"]], reverse=True)}


def canonical_edges(a: _Shape, members: Sequence[_Shape]) -> dict[str, int]:
    """Members per edge of the anchor's footprint box in its canonical frame (the anchor's
    own axes, as ``geometry`` sorts members onto ``+x``/``-x``/``+y``/``-y``)."""
    q = (a.hull - a.origin) @ a.rot2
    lo, hi = q.min(axis=0), q.max(axis=0)
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    out: dict[str, int] = {}
    for m in members:
        d = (m.centre - a.origin) @ a.rot2 - mid
        if abs(d[0]) - half[0] > abs(d[1]) - half[1]:
            edge = "+x" if d[0] > 0 else "-x"
        else:
            edge = "+y" if d[1] > 0 else "-y"
        out[edge] = out.get(edge, 0) + 1
    return dict(sorted(out.items()))


def _table_hints(a: _Shape, members: Sequence[_Shape]) -> tuple[dict[str, Any], str | None,
                                                                 str]:
    """(relation hints, why the pattern is unclear or None, evidence) for a table group."""
    k = len(members)
    if a.round:
        return {"anchor_role": "round_table", "pattern": "ring"}, None, \
            "round top: members in a ring"
    role = "long_table" if a.length / max(a.width, 1e-9) >= 1.5 else "table"
    edges = _edge_counts(a, members)
    shown = f"long edges {edges['long']}, short edges {edges['short']}"
    nonempty = sum(1 for v in (*edges["long"], *edges["short"]) if v)
    if nonempty == 1:
        return {"anchor_role": role, "pattern": "row"}, None, f"all {k} on one edge ({shown})"
    if edges == {"long": [2, 2], "short": [1, 0]}:
        return {"anchor_role": role, "pattern": "2+2+1"}, None, shown
    if edges == {"long": [2, 2], "short": [1, 1]}:
        return {"anchor_role": role, "pattern": "2+2+1+1"}, None, shown
    seen = canonical_edges(a, members)
    if len(seen) == 2 and {e[1] for e in seen} == {"x", "y"}:
        return {"anchor_role": role, "pattern": "L"}, None, f"two adjacent edges ({shown})"
    if edges["long"][0] == edges["long"][1] and edges["short"][0] == edges["short"][1]:
        layout = {"long": edges["long"][0], "short": edges["short"][0]}
        layout = {key: n for key, n in layout.items() if n}
        return ({"anchor_role": role, "pattern": "free", "layout": layout,
                 "free_note": f"proposed from the members' edges: {shown}"}, None, shown)
    return ({"anchor_role": role, "pattern": "free", "layout": seen,
             "free_note": f"proposed as seen: {shown}"},
            f"pattern unclear: the {k} members sit on {shown}, which matches no pattern; "
            f"proposed as seen ({seen})", shown)


def _tv_clearance(a: _Shape, members: Sequence[_Shape]) -> float:
    gaps = [convex_signed_distance(m.hull, a.hull)[0] for m in members]
    lo, hi = TV_CLEARANCE_RANGE_M
    return round(min(hi, max(lo, float(np.median(gaps)))) / 0.05) * 0.05


def _group_hints(role: str, a: _Shape, members: Sequence[_Shape]
                 ) -> tuple[dict[str, Any], str | None, str]:
    if role == "table":
        hints, unclear, note = _table_hints(a, members)
        hints["clearance_m"] = DEFAULT_CLEARANCE_M["table"]
        return hints, unclear, note
    if role == "tv_stand":
        return ({"anchor_role": "tv_stand", "clearance_m": _tv_clearance(a, members)}, None,
                "convention: seats before the TV stand's front")
    if role == "bed" and len(members) != 2:
        seen = canonical_edges(a, members)
        return ({"anchor_role": "bed", "clearance_m": DEFAULT_CLEARANCE_M["bed"],
                 "pattern": "free", "facing": "parallel_to_anchor_long_axis",
                 "layout": {**seen, "align": "back"},
                 "free_note": f"{len(members)} beside the bed at the headboard, as seen"},
                None, f"{len(members)} beside the head end ({seen})")
    return ({"anchor_role": role, "clearance_m": DEFAULT_CLEARANCE_M.get(role, 0.10)}, None,
            f"convention of a {role}")


def _spec_check(gid: str, anchor: str, members: Sequence[str], hints: dict[str, Any],
                a: _Shape) -> dict[str, Any]:
    """The hints as the pipeline will read them: ``validate.resolve_target_spec`` (the
    pipeline's inference and conventions) must turn them into a valid target spec."""
    from .validate import resolve_target_spec

    spec = GroupSpec(gid, anchor, tuple(members), dict(hints))
    shape = "round" if a.round else "rect"
    ratio = a.length / max(a.width, 1e-9)
    resolved, _ = resolve_target_spec(spec, shape, ratio, "relation_graph.json")
    return resolved.to_dict()


def _round(x: float) -> float:
    return round(float(x), 3) + 0.0


def propose_units(units: Mapping[str, UnitInput], unit_scale: float = 1.0,
                  context: Mapping[str, UnitInput] | None = None) -> dict[str, Any]:
    """The proposed relation graph (version 1, ``groups`` with ``proposal``, and
    ``proposed``) for ``units`` (name -> :class:`UnitInput`, scene units; ``unit_scale`` =
    metres per scene unit). ``context``: units that are surroundings only (walls, the room
    shell): never proposed, used to tell which side of a cabinet stands against a wall.
    Pure: no Blender, no files. ``proposed.scene_sha256`` is None (the caller that read a
    file fills it in)."""
    pieces: dict[str, _Piece] = {}
    unassigned: list[dict[str, Any]] = []
    walls: list[_Shape] = []
    for u in (context or {}).values():
        try:
            walls.append(measure_unit(u, unit_scale))
        except GeometryError:
            continue
    shapes: dict[str, _Shape] = {}
    for name in sorted(units):
        try:
            shapes[name] = measure_unit(units[name], unit_scale)
        except GeometryError as exc:
            unassigned.append({"name": name, "role": None, "reason": exc.reason})
    floor_z = min((s.base_z for s in shapes.values() if s.height > 0.05), default=0.0)
    for name, s in shapes.items():
        role = classify(s, name)
        if role.role in CONTEXT_ROLES:
            walls.append(s)
            unassigned.append({"name": name, "role": role.role,
                               "reason": f"room shell ({_role_evidence(s, role.role)}): "
                                         "context, not furniture"})
            continue
        if s.base_z - floor_z > FLOOR_TOL_M:
            unassigned.append({"name": name, "role": role.role,
                               "reason": f"its base is {s.base_z - floor_z:.2f} m above the "
                                         "floor: it stands on nothing a group is made of"})
            continue
        if role.role is None:
            best = role.runner_up
            unassigned.append({"name": name, "role": None,
                               "reason": f"no furniture role fits its geometry "
                                         f"({s.length:.2f}x{s.width:.2f} m, {s.height:.2f} m "
                                         f"tall; closest: {best[0]} {best[1]:.2f})"
                               if best else "no furniture role fits its geometry"})
            continue
        pieces[name] = _Piece(s, role, _Front(None, "", 0.0))
    for p in pieces.values():
        p.front = detect_front(p.shape, p.role.role, walls)
    anchors = {n: p for n, p in pieces.items() if _anchor_role(p) is not None}
    # a sofa facing a TV stand is that stand's member, so it anchors no group of its own
    tv_stands = {n: q for n, q in anchors.items() if _anchor_role(q) == "tv_stand"}
    seated = {n for n, p in anchors.items() if _candidates(p, tv_stands)}
    live = {n: q for n, q in anchors.items() if n not in seated}
    taken: dict[str, tuple[_Candidate, list[_Candidate]]] = {}
    for name, p in pieces.items():
        if name in live:
            continue
        cands = _candidates(p, live)
        if cands:
            taken[name] = (cands[0], cands[1:])
    groups_by_anchor: dict[str, list[str]] = {}
    for name, (chosen, _) in taken.items():
        groups_by_anchor.setdefault(chosen.anchor, []).append(name)
    groups: list[dict[str, Any]] = []
    counters: dict[str, int] = {}
    in_group: set[str] = set()
    for anchor in sorted(groups_by_anchor, key=lambda n: (anchors[n].shape.centre[0],
                                                          anchors[n].shape.centre[1], n)):
        members = sorted(groups_by_anchor[anchor])
        groups.append(_group(anchor, members, pieces, taken, counters))
        in_group.update([anchor, *members])
    for name, p in pieces.items():
        if name in in_group:
            continue
        unassigned.append({"name": name, "role": p.role.role, "reason": _why_alone(p, anchors)})
    return {"version": GRAPH_VERSION,
            "description": f"proposed by {PROPOSED_BY} from the furniture's geometry",
            "groups": groups,
            "proposed": {"by": PROPOSED_BY, "scene_sha256": None,
                         "unassigned": sorted(unassigned, key=lambda u: u["name"])}}


def _why_alone(p: _Piece, anchors: Mapping[str, _Piece]) -> str:
    role = p.role.role
    if role in ANCHOR_ROLES or (role == "table"):
        return f"{_role_evidence(p.shape, role or '')}; nothing stands by it as a member would"
    if role in ("chair", "armchair", "stool"):
        return f"{role}: faces no table, desk or TV stand within reach"
    if role in BESIDE_BED_ROLES:
        return f"{role}: beside no bed's head end"
    if role == "coffee_table":
        return "coffee table: before no sofa's front (or its sofa belongs to another group)"
    return f"{_role_evidence(p.shape, role or '')}: not a role of any group"


def _group(anchor: str, members: list[str], pieces: Mapping[str, _Piece],
           taken: Mapping[str, tuple[_Candidate, list[_Candidate]]],
           counters: dict[str, int]) -> dict[str, Any]:
    a = pieces[anchor]
    role = _anchor_role(a) or "table"
    counters[role] = counters.get(role, 0) + 1
    gid = f"{role}_{counters[role]}"
    reasons: list[str] = []
    member_conf: dict[str, float] = {}
    member_evidence: dict[str, str] = {}
    uncertain: dict[str, str] = {}
    for m in members:
        best, others = taken[m]
        p = pieces[m]
        conf = best.confidence * (1.0 if p.role.settled else 0.6)
        member_evidence[m] = f"{_role_evidence(p.shape, p.role.role or '')}; {best.evidence}"
        if others:
            o = others[0]
            uncertain[m] = f"also {max(o.gap_m, 0):.2f} m from '{o.anchor}': {o.evidence}"
            conf = min(conf, 0.45)
        elif not p.role.settled and p.role.runner_up:
            uncertain[m] = (f"role not settled: {p.role.role} {p.role.score:.2f} against "
                            f"{p.role.runner_up[0]} {p.role.runner_up[1]:.2f}")
            conf = min(conf, 0.45)
        elif conf < CONFIDENT:
            uncertain[m] = f"weak evidence ({conf:.2f}): {best.evidence}"
        member_conf[m] = _round(conf)
    hints, unclear, pattern_note = _group_hints(role, a.shape,
                                                [pieces[m].shape for m in members])
    anchor_conf = a.role.score * (1.0 if a.role.settled else 0.6)
    anchor_evidence = _role_evidence(a.shape, role)
    if role == "desk":
        anchor_evidence += f"; one front ({a.front.how}): a desk"
    elif role in ("tv_stand", "bed", "sofa") and a.front.world is None:
        reasons.append(f"the {role}'s front is undetermined ({a.front.how}): its convention "
                       "cannot be placed")
        anchor_conf = min(anchor_conf, 0.45)
    elif role in ("tv_stand", "bed", "sofa"):
        anchor_evidence += f"; front {a.front.how}"
    if a.role.hinted:
        anchor_evidence += " (its name agrees)"
    if not a.role.settled and a.role.runner_up:
        reasons.append(f"anchor role not settled: {a.role.role} {a.role.score:.2f} against "
                       f"{a.role.runner_up[0]} {a.role.runner_up[1]:.2f}")
    if unclear:
        reasons.append(unclear)
    for m, why in uncertain.items():
        reasons.append(f"member '{m}': {why}")
    try:
        spec = _spec_check(gid, anchor, members, hints, a.shape)
    except RelationGraphError as exc:
        reasons.append(f"no valid target spec from the hints: {exc.reason}")
        hints = {k: v for k, v in hints.items() if k in ("anchor_role", "clearance_m")}
        spec = None
    confidence = min([anchor_conf, *member_conf.values()])
    if reasons:
        confidence = min(confidence, 0.45)
    status = "confident" if not reasons and confidence >= CONFIDENT else "uncertain"
    if status == "uncertain" and not reasons:
        reasons.append(f"low confidence ({confidence:.2f})")
    evidence = {"anchor": anchor_evidence, "members": member_evidence,
                "pattern": pattern_note}
    if spec is not None:
        evidence["target_spec"] = (f"{spec['anchor_role']}, pattern {spec['pattern']}, "
                                   f"facing {spec['facing']}, clearance "
                                   f"{spec['clearance_m']:.2f} m"
                                   + (f", layout {spec['layout']}" if spec.get("layout")
                                      else ""))
    return {"id": gid, "anchor": anchor, "members": members,
            "relation": {k: hints[k] for k in HINT_KEYS if k in hints},
            "proposal": {"status": status, "confidence": _round(confidence),
                         "reasons": reasons, "evidence": evidence,
                         "member_confidence": member_conf,
                         "uncertain_members": uncertain}}
