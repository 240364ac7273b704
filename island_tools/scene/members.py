"""Fronts and memberships of furniture units (``island-refine propose``).

A unit's front is ``island_tools.measure.forward_axis``'s (``mirror_relief``); when that is
undetermined, the side opposite its measured tall part (a backrest, a headboard) or, for
case furniture, the side away from a wall right behind it. A seat belongs to the table, desk
or TV stand it faces (``FACING_MAX_DEG``) and stands near (``TABLE_REACH_M`` from a table's
footprint; ``TV_MIN_M``-``TV_MAX_M`` before a TV stand's front); a nightstand to the bed
whose head end it flanks (``BED_SIDE_GAP_M`` beside a side, within ``BED_HEAD_REACH_M`` of
the head end); a coffee table to the sofa it stands before. Each test returns a
:class:`Candidate` with a confidence and the evidence in words, or None.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import GeometryError
from ..measure.forward_axis import detect_forward_axis
from ..measure.geometry import convex_signed_distance
from ..measure.meshcache import keyed_vertices, mesh_digest, remembered
from .furniture import Shape

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


# --------------------------------------------------------------------------- fronts
@dataclass
class Front:
    world: np.ndarray | None
    how: str
    confidence: float
    symmetric: bool = False


def snap(direction: np.ndarray, s: Shape) -> np.ndarray:
    """``direction`` snapped to the nearer footprint axis (a back stands on a side)."""
    axes = [s.e_long, -s.e_long, s.e_short, -s.e_short]
    return max(axes, key=lambda a: float(a @ direction))


def detect_front(s: Shape, role: str | None, walls: Sequence[Shape]) -> Front:
    v, f = s.local
    try:
        found = remembered("forward_axis", mesh_digest(v, f),
                           lambda: detect_forward_axis(keyed_vertices(v), f))
    except GeometryError:
        found = None
    if found is not None and found.axis_local is not None:
        d = s.rot2 @ np.asarray(found.axis_local, dtype=float)
        d /= max(float(np.linalg.norm(d)), 1e-12)
        return Front(d, f"detected ({found.method}, confidence {found.confidence:.2f})",
                      max(0.5, float(found.confidence)))
    if found is not None and found.status == "symmetric":
        return Front(None, f"symmetric (order {found.symmetry.get('order')})", 1.0, True)
    why = "" if found is None else found.detail.get("reason", "")
    if role in ("chair", "armchair", "sofa", "bed") and s.tall_share > 0.04:
        off = s.tall_offset
        extent = s.length if abs(off @ s.e_long) / max(s.length, 1e-9) > abs(
            off @ s.e_short) / max(s.width, 1e-9) else s.width
        if float(np.linalg.norm(off)) > 0.12 * extent:
            part = "headboard" if role == "bed" else "back"
            return Front(snap(-off, s), f"from the {part}'s side (detector undetermined: "
                                          f"{why})", 0.6)
    if role in ("tv_stand", "sofa", "bed", "desk", "nightstand") and len(s.hull) >= 3:
        for back in (s.e_short, -s.e_short, s.e_long, -s.e_long):
            for w in walls:
                if len(w.hull) < 3 or abs(float(w.e_long @ back)) > 0.3:
                    continue
                gap, _ = convex_signed_distance(s.hull, w.hull)
                if gap <= WALL_BEHIND_M and float((w.centre - s.centre) @ back) > 0:
                    return Front(-back, f"its back against wall '{w.name}' (detector "
                                         f"undetermined: {why})", 0.55)
    return Front(None, f"undetermined ({why})" if why else "undetermined", 0.0)


# --------------------------------------------------------------------------- membership
def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    c = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


def _toward(anchor: Shape, member: Shape) -> np.ndarray:
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
class Candidate:
    anchor: str
    confidence: float
    evidence: str
    gap_m: float


def _ramp(x: float, good: float, limit: float) -> float:
    """1 up to ``good``, 0 at ``limit``."""
    if x <= good:
        return 1.0
    return max(0.0, 1.0 - (x - good) / max(limit - good, 1e-9))


def seat_at_table(a: Shape, m: Shape, mf: Front, mrole: str) -> Candidate | None:
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if mf.world is None:
        if mrole == "stool" and gap <= STOOL_REACH_M:
            conf = 0.6 * _ramp(gap, 0.15, STOOL_REACH_M + 0.05)
            return Candidate(a.name, conf, f"stool without a front, {max(gap, 0):.2f} m from "
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
    return Candidate(a.name, conf, f"faces it ({angle:.0f} deg), {where}; front {mf.how}", gap)


def seat_at_tv(a: Shape, af: Front, m: Shape, mf: Front) -> Candidate | None:
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
    return Candidate(a.name, conf, f"faces it ({angle:.0f} deg) from {gap:.2f} m; front "
                                    f"{mf.how}", gap)


def beside_bed(a: Shape, af: Front, m: Shape) -> Candidate | None:
    """Beside a side of the bed (the sides run along its front direction; without a front,
    along its long axis) near the head end (the end away from its front)."""
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if gap > BED_SIDE_GAP_M or gap < -0.05:
        return None
    axis = snap(af.world, a) if af.world is not None else a.e_long
    across = np.array([-axis[1], axis[0]])
    depth = a.length if abs(float(axis @ a.e_long)) > 0.7 else a.width
    span = a.width if depth == a.length else a.length
    rel = m.centre - a.centre
    if abs(float(rel @ across)) - span / 2.0 < -0.05:
        return None   # at an end, not beside a side
    along = float(rel @ axis)
    if af.world is not None:   # the head end is behind the front
        from_head = depth / 2.0 + along
        conf_head = 1.0
    else:   # the head end unknown: either end, and less sure
        from_head = depth / 2.0 - abs(along)
        conf_head = 0.55
    if from_head > BED_HEAD_REACH_M:
        return None
    conf = conf_head * _ramp(gap, 0.2, BED_SIDE_GAP_M + 0.1) * _ramp(from_head, 0.5,
                                                                      BED_HEAD_REACH_M + 0.2)
    return Candidate(a.name, conf, f"beside its side ({max(gap, 0):.2f} m), "
                                    f"{max(from_head, 0):.2f} m from its head end", gap)


def before_sofa(a: Shape, af: Front, m: Shape) -> Candidate | None:
    if af.world is None:
        return None
    gap, _ = convex_signed_distance(m.hull, a.hull)
    if not SOFA_TABLE_GAP_M[0] <= gap <= SOFA_TABLE_GAP_M[1]:
        return None
    rel = m.centre - a.centre
    if float(rel @ af.world) <= 0 or abs(float(rel @ a.e_long)) > a.length / 2.0:
        return None
    conf = _ramp(gap, 0.6, SOFA_TABLE_GAP_M[1] + 0.2)
    return Candidate(a.name, conf, f"before its front, {gap:.2f} m away", gap)
