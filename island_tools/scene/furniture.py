"""A furniture unit's shape, measured, and the role it plays (``island-refine propose``).

:func:`measure_unit` measures a unit in metres in the frame of its footprint's
minimum-area rectangle: the footprint (long x short side), the height above its own base,
a top-down height map (``HEIGHT_MAP_RES`` cells a side, ``forward_axis``'s depth rays)
giving the *surface* (the height band that covers most of the footprint: a seat, a table
top, a mattress) and the *tall part* above it (a back, a headboard) with where it stands,
the share of the top with free space under it (knee room), how much of the long-side
front view is closed (case furniture) and how far the seat runs along the back (room for
one: an armchair; for several: a sofa). :func:`classify` scores every role of
``ROLE_RULES`` by soft ranges on these numbers; the best must beat the runner-up by
``ROLE_MARGIN`` (unless both lead to the same place in a group) or the role is not settled.
A name's words add ``NAME_HINT_WEIGHT`` to a role they name: a tie-breaker only.

``CONTEXT_ROLES`` are what a room is made of and what stands about in it, never furniture of
a group: the room shell whatever its form (``wall``: a wall box, an L-shaped wall piece, or
ONE mesh for a whole house - a huge footprint whose top view is mostly empty with thin tall
strips; ``door``; ``window``: thin, off the floor; ``ceiling``: a flat thing high up;
``flat``: a floor, a rug) and ``prop``: things smaller than any member role (a book, a
vase, a table lamp, a photo frame), a screen (a TV: a thin panel), a slender tall thing
without a seat (a floor lamp, a plant). A unit that carries riders (``UnitInput.riders``,
``scene_units``) is measured with them unless they change its role (a TV on a TV stand):
then without the props among them.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import GeometryError
from ..measure.forward_axis import _depth_buffers
from ..measure.frames import degenerate
from ..measure.geometry import (
    ROUND_MAX_ASPECT,
    ROUND_MAX_RADIUS_CV,
    convex_hull_2d,
    min_area_rects,
    polygon_area,
    polygon_centroid,
)

HEIGHT_MAP_RES = 40
SURFACE_BAND_M = 0.03        # cells within this of a band's height belong to its surface
TALL_ABOVE_M = 0.18          # a back / headboard rises this far above the surface
UNDER_FREE_M = 0.35          # a top with this much free height under it has knee room
ROLE_MARGIN = 0.15           # the best role beats the runner-up by this, or it is not settled
ROLE_MIN = 0.5               # a role scoring less is not taken
NAME_HINT_WEIGHT = 0.1
# Name words per role: a weak hint only (an importer's "Object_17" names nothing).
NAME_WORDS: dict[str, tuple[str, ...]] = {
    "table": ("table", "dining"), "desk": ("desk",), "bed": ("bed",),
    "tv_stand": ("tv", "television", "media"), "sofa": ("sofa", "couch"),
    "chair": ("chair",), "armchair": ("armchair",), "stool": ("stool",), "bench": ("bench",),
    "nightstand": ("nightstand", "bedside"), "side_table": ("side",),
    "coffee_table": ("coffee",), "storage": ("wardrobe", "shelf", "cabinet", "dresser"),
    "wall": ("wall",), "flat": ("floor", "rug", "carpet"), "ceiling": ("ceiling",),
    "door": ("door",), "window": ("window",), "prop": ("lamp", "vase", "book", "frame"),
}
# What a room is made of and what stands about in it: context, never a member or an anchor,
# never a doubt (``island-refine propose``); walls, doors and windows are walls for fronts.
CONTEXT_ROLES = ("wall", "flat", "door", "window", "ceiling", "prop")
WALL_LIKE_ROLES = ("wall", "door", "window")
SHELL_MIN_HEIGHT_M = 1.6     # a wall, a shell, a door rises at least this high
SHELL_MAX_FILL = 0.35        # ... a shell's top view is mostly empty (its walls are strips)
HIGH_UP_M = 1.8              # a flat thing whose base is this far above the floor: a ceiling
OFF_FLOOR_M = 0.3            # a window's base is at least this far above the floor
PROP_MAX_SIDE_M = 0.26       # smaller than any member role's footprint (a stool's 0.28+)
PROP_MAX_HEIGHT_M = 0.22     # lower than any member role (a coffee table's 0.28+)
HIGH_SEAT_MAX_M = 0.86       # a drafting or bar chair's seat (a back, an open base)
# A seat's run along its back (``Shape.seat_run_m``): room for one (an armchair: the tuned
# armchairs run 0.74-0.85 m, chairs 0.32-0.55 m) or for two and more (every tuned sofa runs
# 1.00 m or more); between the two the geometry does not settle it: both roles score the
# same ``SEAT_RUN_BETWEEN`` there.
ONE_SEAT_MAX_M = 0.85
SEATS_MIN_M = 0.95
SEAT_RUN_MARGIN_M = 0.15
SEAT_RUN_BETWEEN = 0.75
TABLE_MAX_LENGTH_M = 6.0     # a conference table (a bar counter is closed: no knee room)


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
    # objects resting on the unit (``scene_units.attach_riders``): their triangles follow
    # the unit's first ``own_faces`` (its own and the riders that are part of the piece)
    riders: tuple[str, ...] = ()
    own_faces: int | None = None


# --------------------------------------------------------------------------- measurement
@dataclass
class Shape:
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
    body_share: float            # share whose top is 0.25-0.95 m up (a bed's quilted top)
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
    fill_share: float = 0.0      # share of the footprint rectangle anything covers from above
    riders_measured: bool = True  # the riders' triangles are in this measure
    seat_run_m: float = 0.0      # the surface band's run along the back (room for how many)


RECT_TIE_REL = 1e-4           # minimum-area rectangles this close in area tie (a hexagon's)


def _unit_rect(hull: np.ndarray, local_x: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, float, float, np.ndarray]:
    """The footprint's minimum-area rectangle: (long side, short side, length, width,
    centre). Where several tie (a hexagonal or round base), the one nearest the unit's own
    x axis (``local_x``, world xy), so the measure turns with the unit and its role does
    not depend on its yaw."""
    rects = min_area_rects(hull, rel_tol=RECT_TIE_REL)
    rect = rects[0]
    if local_x is not None and len(rects) > 1:
        ax = math.atan2(float(local_x[1]), float(local_x[0]))
        rect = min(rects, key=lambda r: (abs((r.angle - ax + math.pi / 4.0) % (math.pi / 2.0)
                                             - math.pi / 4.0), r.extent_u * r.extent_v))
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


ZERO_SCALE_REASON = "zero scale: not furniture"
ZERO_SCALE_WHY = "its world matrix is degenerate; give it a scale or delete it"


def measure_unit(unit: UnitInput, unit_scale: float = 1.0) -> Shape:
    """The unit's shape numbers (see the module docstring). GeometryError for a unit
    without triangles or with non-finite vertices. A unit with riders is measured with
    them, unless that changes the role its own triangles have: then without them."""
    f = np.asarray(unit.faces, dtype=np.int64).reshape(-1, 3)
    own = unit.own_faces
    whole = _measure(unit, f, unit_scale)
    if not unit.riders or own is None or not 0 < own < len(f):
        return whole
    alone = _measure(unit, f[:own], unit_scale)
    r_alone, r_whole = classify(alone, unit.name).role, classify(whole, unit.name).role
    if r_alone is not None and r_alone not in CONTEXT_ROLES and r_alone != r_whole:
        alone.riders_measured = False
        return alone
    return whole


def _measure(unit: UnitInput, f: np.ndarray, unit_scale: float) -> Shape:
    v = np.asarray(unit.vertices, dtype=float).reshape(-1, 3)
    if len(f) == 0 or len(v) == 0:
        raise GeometryError(f"unit '{unit.name}' has no triangles")
    world = np.asarray(unit.world, dtype=float).reshape(4, 4)
    if degenerate(world):   # no shape to read (issue 33)
        raise GeometryError(f"{ZERO_SCALE_REASON} ({ZERO_SCALE_WHY})")
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
        return Shape(unit.name, base_z, height, hull, centre, np.array([1.0, 0.0]),
                      np.array([0.0, 1.0]), 0.0, 0.0, False, None, 0.0, 0.0, 0.0, 0.0,
                      np.zeros(2), 0.0, 0.0, False, rot2, world[:2, 3] * unit_scale,
                      (v, f))
    e_long, e_short, length, width, centre = _unit_rect(hull, rot2[:, 0])
    # the rectangle's frame: u along the long side, w along the short side, z up from base
    rel = pts[:, :2] - centre
    p = np.stack([rel @ e_long, rel @ e_short, pts[:, 2] - base_z], axis=1)
    half = (length / 2.0 + 1e-6, width / 2.0 + 1e-6)
    res = HEIGHT_MAP_RES
    near, far = _depth_buffers(p, f, 0, 1, 2, (-half[0], -half[1]), half, res)
    hit = np.isfinite(far)
    cells = float(res * res)
    top_share = float((far >= height - SURFACE_BAND_M).sum() / cells)
    surface_m, surface_share = _surface(far)
    body_share = float(((far >= 0.25) & (far <= 0.95)).sum() / cells)
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
    shape = Shape(unit.name, base_z, height, hull, centre, e_long, e_short, length, width,
                   _is_round(hull, length, width), surface_m, surface_share, body_share,
                   top_share,
                   tall_share, tall_offset, knee_share, side_fill, on_long, rot2,
                   world[:2, 3] * float(unit_scale), (v, f))
    shape.fill_share = float(hit.sum() / cells)
    if surface_m is not None:
        shape.seat_run_m = _seat_run(far, surface_m, on_long, length, width)
    shape.features = {"length_m": length, "width_m": width, "height_m": height,
                      "fill_share": shape.fill_share,
                      "surface_m": -1.0 if surface_m is None else surface_m,
                      "surface_share": surface_share, "body_share": body_share,
                      "top_share": top_share,
                      "tall_share": tall_share, "knee_share": knee_share,
                      "side_fill": side_fill, "seat_run_m": shape.seat_run_m}
    return shape


def _seat_run(far: np.ndarray, surface_m: float, on_long: bool, length: float,
              width: float) -> float:
    """The surface band's run along the back: the lines across the back that hold a
    quarter of the fullest line's surface cells (seams between cushions and sloped arms do
    not break it)."""
    hit = np.isfinite(far)
    seat = hit & (np.abs(np.where(hit, far, -1.0) - surface_m) <= SURFACE_BAND_M)
    # far[iu, iw]: iu along the long side; the run is along the back's side
    per_line = seat.sum(axis=1) if on_long else seat.sum(axis=0)
    if per_line.max() <= 0:
        return 0.0
    return float((per_line >= 0.25 * per_line.max()).sum()) * (
        length if on_long else width) / far.shape[0]


def _surface(far: np.ndarray) -> tuple[float | None, float]:
    """The height band (2 cm bins, a bin and its neighbours) between 0.15 m and 1.0 m that
    covers most of the footprint and of its middle (the central half of each side): a seat,
    a top, a mattress. The middle counts as much as the whole: wide flat arms can cover more
    of a footprint than the seat between them, but never its middle."""
    hit = np.isfinite(far)
    ok = hit & (np.where(hit, far, -1.0) >= 0.15) & (np.where(hit, far, 2.0) <= 1.0)
    if not ok.any():
        return None, 0.0
    res = far.shape[0]
    lo_c, hi_c = res // 4, res - res // 4
    middle = np.zeros_like(ok)
    middle[lo_c:hi_c, lo_c:hi_c] = True
    tops = far[ok]
    bins = np.floor(tops / 0.02).astype(np.int64)
    lo = int(bins.min())
    counts = np.bincount(bins - lo)
    mid = np.bincount(bins[middle[ok]] - lo, minlength=len(counts))
    window = np.convolve(counts, np.ones(3), mode="same")
    mid_window = np.convolve(mid, np.ones(3), mode="same")
    best = int(np.argmax(window / far.size + mid_window / float(middle.sum())))
    sel = np.abs(bins - lo - best) <= 1
    return float(np.median(tops[sel])), float(sel.sum() / far.size)


# --------------------------------------------------------------------------- roles
def _soft(x: float, lo: float, hi: float, margin: float) -> float:
    """1 inside [lo, hi], falling linearly to 0 ``margin`` outside."""
    if lo <= x <= hi:
        return 1.0
    d = lo - x if x < lo else x - hi
    return max(0.0, 1.0 - d / margin)


def _seats_fit(run: float, several: bool) -> float:
    """How well a seat's run along its back fits a seat for several (a sofa) or for one
    (an armchair); between ``ONE_SEAT_MAX_M`` and ``SEATS_MIN_M`` both fit the same."""
    if ONE_SEAT_MAX_M < run < SEATS_MIN_M:
        return SEAT_RUN_BETWEEN
    if several:
        return 1.0 if run >= SEATS_MIN_M else SEAT_RUN_BETWEEN * max(
            0.0, 1.0 - (ONE_SEAT_MAX_M - run) / SEAT_RUN_MARGIN_M)
    return 1.0 if run <= ONE_SEAT_MAX_M else SEAT_RUN_BETWEEN * max(
        0.0, 1.0 - (run - SEATS_MIN_M) / SEAT_RUN_MARGIN_M)


def _rule(s: Shape, role: str, floor_z: float = 0.0) -> float:
    L, W, H = s.length, s.width, s.height
    up = s.base_z - floor_z
    seat = s.surface_m if s.surface_m is not None else -1.0
    has_back = _soft(s.tall_share, 0.02, 1.0, 0.015)
    no_back = _soft(s.tall_share, 0.0, 0.015, 0.02)
    case = _soft(s.side_fill, 0.6, 1.0, 0.15)
    open_under = _soft(s.side_fill, 0.0, 0.5, 0.15)
    if role == "flat":
        return (_soft(H, 0.0, 0.05, 0.03) * _soft(L, 0.8, 1e9, 0.4)
                * _soft(up, -1e9, 1.0, 0.3))
    if role == "ceiling":   # a flat thing high up
        return (_soft(H, 0.0, 0.3, 0.1) * _soft(L, 0.8, 1e9, 0.4)
                * _soft(up, HIGH_UP_M, 1e9, 0.3))
    if role == "wall":   # a wall box (long and thin), a shell (mostly empty from above)
        tall = _soft(H, SHELL_MIN_HEIGHT_M, 1e9, 0.3)
        thin = (_soft(W, 0.0, 0.35, 0.1) * _soft(L / max(W, 1e-6), 4.0, 1e9, 1.5)
                * _soft(L, 1.5, 1e9, 0.4))
        shell = _soft(L, 2.0, 1e9, 0.5) * _soft(s.fill_share, 0.0, SHELL_MAX_FILL, 0.1)
        huge = _soft(L, 5.0, 1e9, 0.5) * _soft(W, 1.0, 1e9, 0.3)   # no furniture is
        return tall * max(thin, shell, huge)
    if role == "door":   # a leaf in its frame on the floor, possibly in a wall's hole
        return (_soft(H, 1.8, 2.6, 0.15) * _soft(L, 0.6, 1.4, 0.15) * _soft(W, 0.0, 0.35, 0.1)
                * _soft(up, -1e9, 0.1, 0.1))
    if role == "window":   # thin, off the floor
        return (_soft(W, 0.0, 0.35, 0.1) * _soft(L / max(W, 1e-6), 2.0, 1e9, 0.5)
                * _soft(H, 0.3, 2.4, 0.1) * _soft(L, 0.3, 4.0, 0.2)
                * _soft(up, OFF_FLOOR_M, 2.0, 0.1))
    if role == "prop":
        small = _soft(L, 0.0, PROP_MAX_SIDE_M, 0.04) * _soft(H, 0.0, 1.0, 0.2)
        low = (_soft(H, 0.0, PROP_MAX_HEIGHT_M, 0.04) * _soft(H, 0.05, 1e9, 0.02)
               * _soft(L, 0.0, 1.0, 0.2))
        # a screen: a thin closed panel (a TV on its foot), no top to put anything on
        screen = (_soft(W, 0.0, 0.3, 0.05) * _soft(L / max(W, 1e-6), 2.5, 1e9, 0.5)
                  * _soft(H, 0.3, 1.4, 0.1) * _soft(L, 0.4, 2.5, 0.2)
                  * _soft(s.top_share, 0.0, 0.3, 0.1) * _soft(s.side_fill, 0.6, 1.0, 0.1))
        # a slender tall thing with no seat or top band (a floor lamp, a plant, a stand)
        slender = (_soft(H, 1.0, 2.2, 0.1) * _soft(L, 0.0, 0.45, 0.08)
                   * _soft(s.surface_share, 0.0, 0.05, 0.05) * _soft(s.top_share, 0.0, 0.3, 0.1)
                   * _soft(s.side_fill, 0.0, 0.5, 0.1))
        return max(small, low, screen, slender)
    if role == "table":   # dining height up to a bar / high table's
        return (_soft(H, 0.62, 1.1, 0.06) * _soft(s.top_share, 0.5, 1.0, 0.15)
                * _soft(s.knee_share, 0.15, 1.0, 0.15)
                * _soft(W, 0.48 if s.round else 0.55, 1.6, 0.15)
                * _soft(L, 0.55, TABLE_MAX_LENGTH_M, 0.2) * _soft(s.side_fill, 0.0, 0.6, 0.1))
    if role == "desk":   # a table-height top over pedestals or a modesty panel
        return (0.0 if s.round else 1.0) * (
            _soft(H, 0.65, 0.86, 0.05) * _soft(s.top_share, 0.5, 1.0, 0.15)
            * _soft(s.knee_share, 0.1, 1.0, 0.1) * _soft(W, 0.4, 0.95, 0.1)
            * _soft(L, 0.8, 2.2, 0.15) * _soft(s.side_fill, 0.55, 1.0, 0.1))
    if role == "coffee_table":   # an open top, low (a round one from 0.48 m across)
        return (_soft(H, 0.28, 0.55, 0.06) * _soft(s.top_share, 0.45, 1.0, 0.15)
                * _soft(L, 0.48 if s.round else 0.6, 1.8, 0.2) * _soft(W, 0.4, 1.2, 0.1)
                * _soft(L / max(W, 1e-6), 1.0, 2.6, 0.5) * max(open_under, 0.6 * (1 - case)))
    if role == "tv_stand":   # long and closed (a case); an open low top is a coffee table
        return (_soft(H, 0.3, 0.66, 0.05) * _soft(L, 0.9, 3.0, 0.2) * _soft(W, 0.2, 0.65, 0.1)
                * _soft(L / max(W, 1e-6), 2.0, 12.0, 0.5) * _soft(s.top_share, 0.4, 1.0, 0.15)
                * max(case, 0.7 * _soft(s.knee_share, 0.0, 0.3, 0.2)
                      * _soft(s.side_fill, 0.3, 1.0, 0.1)))
    if role == "nightstand":
        return (_soft(H, 0.35, 0.85, 0.08) * _soft(L, 0.25, 0.75, 0.1)
                * _soft(s.top_share, 0.45, 1.0, 0.15) * case)
    if role == "side_table":
        return (_soft(H, 0.35, 0.68, 0.05)
                * _soft(L, 0.42, 0.47 if s.round else 0.65, 0.06)
                * _soft(s.top_share, 0.45, 1.0, 0.15) * open_under)
    if role == "storage":
        return (_soft(H, 0.9, 2.6, 0.1) * _soft(s.top_share, 0.4, 1.0, 0.15) * case
                * _soft(W, 0.2, 1.0, 0.2))
    elongated = L >= 1.3 * W
    if role == "bed":   # a headboard at an end, if any: little stands above the mattress
        return ((0.3 if elongated and s.back_on_long_side else 1.0)
                * _soft(s.tall_share, 0.0, 0.12, 0.06)
                * max(_soft(s.knee_share, 0.0, 0.3, 0.2), _soft(s.top_share, 0.0, 0.3, 0.1))
                * _soft(L, 1.75, 2.5, 0.2) * _soft(W, 0.8, 2.3, 0.15)
                * _soft(seat, 0.25, 0.82, 0.06)
                * max(_soft(s.surface_share, 0.5, 1.0, 0.12), _soft(s.body_share, 0.75, 1.0, 0.1))
                * _soft(H, 0.3, 1.7, 0.2))
    if role == "sofa":   # a back along the long side (a chaise's may stand at its end; an
        # L-shaped sectional's two backs stand along two sides: a deep, wide footprint), a
        # seat with room for two or more
        return ((0.6 if elongated and not s.back_on_long_side else 1.0)
                * _soft(seat, 0.28, 0.6, 0.08) * _soft(s.surface_share, 0.15, 0.75, 0.1)
                * _soft(s.tall_share, 0.14, 1.0, 0.06)   # a back and arms, not a headboard
                * _soft(L, 1.25, 4.2, 0.2) * _soft(W, 0.55, 3.2, 0.15)
                * _soft(H, 0.55, 1.25, 0.15)
                * _seats_fit(s.seat_run_m, several=True))
    if role == "armchair":   # a seat with room for one
        return (_soft(seat, 0.28, 0.6, 0.08) * _soft(s.surface_share, 0.1, 1.0, 0.08)
                * has_back * _soft(L, 0.62, 1.6, 0.08) * _soft(W, 0.6, 1.35, 0.06)
                * _soft(H, 0.55, 1.3, 0.15)
                * _seats_fit(s.seat_run_m, several=False))
    if role == "chair":   # a seat at dining height, or a high one (a drafting or bar
        # chair's, 0.62-0.86 m) on an open base: a small case with a raised back is no seat
        seat_fit = max(_soft(seat, 0.36, 0.62, 0.06),
                       _soft(seat, 0.62, HIGH_SEAT_MAX_M, 0.04) * open_under)
        return (seat_fit * _soft(s.surface_share, 0.08, 1.0, 0.06)
                * has_back * _soft(L, 0.3, 0.72, 0.08) * _soft(W, 0.3, 0.7, 0.08)
                * _soft(H, 0.65, 1.4, 0.1))
    if role == "stool":   # a 0.48 m top or larger is a small table's; a closed round one
        # (a drum stool) is as much a small round nightstand: the two tie, not settled
        return (_soft(H, 0.4, 0.9, 0.08) * _soft(L, 0.28, 0.46, 0.04) * no_back
                * _soft(s.top_share, 0.1, 1.0, 0.08)
                * max(open_under, case if s.round else 0.0))
    if role == "bench":   # a backless seat for several: long, narrow, at seat height (a
        # narrow low top is a bench as much as a coffee table: the two tie)
        return (_soft(H, 0.38, 0.52, 0.04) * _soft(W, 0.25, 0.45, 0.05)
                * _soft(L, 0.8, 2.4, 0.2) * _soft(L / max(W, 1e-6), 2.2, 1e9, 0.3) * no_back
                * _soft(s.top_share, 0.5, 1.0, 0.15) * open_under)
    raise KeyError(role)


ROLE_RULES = ("flat", "ceiling", "wall", "door", "window", "prop", "table", "desk",
              "coffee_table", "tv_stand", "nightstand", "side_table", "storage", "bed", "sofa",
              "armchair", "chair", "stool", "bench")
_WORD = re.compile(r"[a-z]+")


def name_hints(name: str) -> set[str]:
    """Roles a name's words mention (``Chair.003`` -> chair; ``Object_17`` -> none)."""
    words = set(_WORD.findall(name.lower()))
    spaced = name.lower()
    return {role for role, keys in NAME_WORDS.items()
            if any(k in words or (len(k) > 4 and k in spaced) for k in keys)}


@dataclass
class Role:
    role: str | None
    score: float
    runner_up: tuple[str, float] | None
    settled: bool
    hinted: bool


def classify(s: Shape, name: str = "", floor_z: float = 0.0) -> Role:
    """The role ``s`` plays (``floor_z``: the room's floor, world metres: a window stands
    off it, a ceiling high above it)."""
    hints = name_hints(name)
    scores = {r: _rule(s, r, floor_z) for r in ROLE_RULES}
    for r in hints & set(scores):
        if scores[r] > 0:
            scores[r] = min(1.0, scores[r] + NAME_HINT_WEIGHT)
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    (best, score), (second, s2) = ranked[0], ranked[1]
    if score < ROLE_MIN:
        return Role(None, score, (best, score), True, False)
    # roles that lead to the same place in a group do not need telling apart
    interchangeable = {frozenset(("nightstand", "side_table")), frozenset(("chair", "armchair")),
                       frozenset(("table", "desk"))}
    interchangeable |= {frozenset((a, b)) for a in CONTEXT_ROLES for b in CONTEXT_ROLES
                        if a != b}   # context either way
    settled = score - s2 >= ROLE_MARGIN or frozenset((best, second)) in interchangeable
    return Role(best, score, (second, s2), settled, best in hints)


def role_evidence(s: Shape, role: str) -> str:
    dims = f"{s.length:.2f}x{s.width:.2f} m footprint, {s.height:.2f} m tall"
    surf = "" if s.surface_m is None else f"surface {s.surface_m:.2f} m ({s.surface_share:.0%})"
    if role in ("table", "desk", "coffee_table"):
        return f"{role}: top {s.height:.2f} m, {s.length:.2f}x{s.width:.2f} m footprint, " \
               f"{s.knee_share:.0%} of the top with free room under it"
    if role in ("chair", "armchair", "sofa"):
        run = f", the seat runs {s.seat_run_m:.2f} m along it" if role != "chair" else ""
        return f"{role}: seat {s.surface_m or 0:.2f} m, back to {s.height:.2f} m " \
               f"({s.tall_share:.0%} of the footprint){run}, {s.length:.2f}x{s.width:.2f} m"
    if role == "bed":
        return f"bed: {s.length:.2f}x{s.width:.2f} m, {surf}, headboard to {s.height:.2f} m"
    if role in ("nightstand", "tv_stand", "storage"):
        return f"{role}: {dims}, front view {s.side_fill:.0%} closed"
    if role == "wall" and s.fill_share <= SHELL_MAX_FILL and s.width > 0.35:
        return f"wall: {dims}, {s.fill_share:.0%} of it covered from above (a shell)"
    return f"{role}: {dims}" + (f", {surf}" if surf else "")
