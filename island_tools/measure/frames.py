"""Canonical-frame math on 4x4 matrices (numpy + stdlib; importable by the worker).

Poses are object ``matrix_world`` values: rotation, translation and possibly scale. The
canonical frame of an island is the anchor's *rigid* frame (rotation + translation, no
scale) in real metres: ``M_inv = S(unit_scale) @ rigid(anchor world)^-1``, where
``unit_scale`` is the scene's metres per Blender unit (``unit_settings.scale_length``: 1 for a
scene in metres, 0.01 for one in centimetres). Canonical coordinates are therefore metres
whatever the scene's unit, and ``M_anchor = M_inv^-1`` takes them back to the scene.

Yaw pivot: ``delta_yaw_deg`` rotates a member about the canonical Z axis through its
footprint centre, the centre of the axis-aligned bounding box of its mesh vertices in the
object's local X/Y, carried to the canonical frame by the pose. A pure yaw therefore leaves
the footprint where it is, whatever the asset's origin (corner-origin assets included).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Matrix = np.ndarray


def as_matrix(m: Sequence[Sequence[float]] | np.ndarray) -> Matrix:
    arr = np.asarray(m, dtype=float)
    if arr.shape != (4, 4) or not np.all(np.isfinite(arr)):
        raise ValueError("expected a finite 4x4 matrix")
    return arr


def to_list(m: np.ndarray) -> list[list[float]]:
    return [[float(v) for v in row] for row in np.asarray(m, dtype=float)]


ZERO_SCALE_REL = 1e-9   # a frame's volume against its longest axis cubed: below, it is flat


def degenerate(m: Sequence[Sequence[float]] | np.ndarray) -> bool:
    """True for a matrix whose linear part collapses space (a zero scale on an axis, parallel
    axes, non-finite entries): it has no usable inverse, so nothing can be measured in its
    frame (issue 33: a zero-scale object was ``LinAlgError: Singular matrix``)."""
    linear = np.asarray(m, dtype=float)[:3, :3]
    if not np.all(np.isfinite(linear)):
        return True
    top = float(np.linalg.norm(linear, axis=0).max())
    return top <= 1e-12 or abs(float(np.linalg.det(linear))) <= ZERO_SCALE_REL * top ** 3


def decompose(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(translation, rotation 3x3, scale 3) for a matrix without shear."""
    m = np.asarray(m, dtype=float)
    linear = m[:3, :3]
    scale = np.linalg.norm(linear, axis=0)
    rot = linear / np.where(scale == 0, 1.0, scale)
    if np.linalg.det(rot) < 0:
        scale[0] = -scale[0]
        rot[:, 0] = -rot[:, 0]
    return m[:3, 3].copy(), rot, scale


def rigid(m: np.ndarray) -> Matrix:
    """The matrix without its scale (rotation + translation)."""
    t, rot, _ = decompose(m)
    out = np.eye(4)
    out[:3, :3] = rot
    out[:3, 3] = t
    return out


def rigid_inverse(m: np.ndarray) -> Matrix:
    r = rigid(m)
    out = np.eye(4)
    out[:3, :3] = r[:3, :3].T
    out[:3, 3] = -r[:3, :3].T @ r[:3, 3]
    return out


def canonical_frame(anchor_world: np.ndarray, unit_scale: float = 1.0
                    ) -> tuple[Matrix, Matrix]:
    """(M_anchor, M_inv) of an island: the anchor's rigid frame, scaled to metres."""
    if not (math.isfinite(unit_scale) and unit_scale > 0):
        raise ValueError(f"unit scale must be a finite number > 0, got {unit_scale!r}")
    to_metres = np.diag([unit_scale, unit_scale, unit_scale, 1.0])
    m_inv = to_metres @ rigid_inverse(anchor_world)
    m_anchor = rigid(anchor_world) @ np.diag([1 / unit_scale, 1 / unit_scale, 1 / unit_scale,
                                              1.0])
    return m_anchor, m_inv


# A pose written into a .blend and read back differs by float32 storage: ~1e-7 relative to
# the pose's own magnitude. Tolerances therefore scale with the pose: the translation within
# READBACK_ABS_M real metres or READBACK_REL of its distance from the origin, whichever is
# larger; the rotation/scale part within READBACK_LINEAR_REL of the pose's largest axis scale.
READBACK_ABS_M = 1e-5
READBACK_REL = 1e-6
READBACK_LINEAR_REL = 1e-5


def pose_mismatch(a: np.ndarray, b: np.ndarray, unit_scale: float = 1.0) -> tuple[float, str]:
    """(ratio, detail): ratio <= 1 when ``b`` is ``a`` up to float32 storage (see above).

    A scene in centimetres 40 m across, or one 10 km from its origin, is judged by what a
    float32 can hold there, not by a fixed 1e-5; ``detail`` says what differs, in metres."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    dt = float(np.abs(a[:3, 3] - b[:3, 3]).max())
    tol_t = max(READBACK_ABS_M / unit_scale, READBACK_REL * float(np.abs(a[:3, 3]).max()))
    dl = float(np.abs(a[:3, :3] - b[:3, :3]).max())
    tol_l = READBACK_LINEAR_REL * max(float(np.linalg.norm(a[:3, :3], axis=0).max()), 1e-12)
    ratio = max(dt / tol_t, dl / tol_l)
    detail = (f"location {dt * unit_scale:.2e} m (tolerance {tol_t * unit_scale:.1e} m), "
              f"rotation/scale {dl:.2e} (tolerance {tol_l:.1e})")
    return ratio, detail


# The one movement tolerance (issue 25): a fixed distance in real metres and a fixed angle,
# never relative to the distance from the anchor (numpy's ``rtol`` grows with it: 50 m out it
# hid a 1 mm move). Shared by what the contract calls a trivial transform
# (``schemas.MemberDelta.trivial``: nothing is applied, the quiet step reuses iter_(N-1)),
# and by the read-back sanity check (``iteration.sanity_check``, exit 4). A float32 pose
# 50 m from the anchor is stored to ~3e-6 m, well inside MOVE_TOL_M.
MOVE_TOL_M = 1e-4
MOVE_TOL_DEG = 0.01
MOVE_TOL_TEXT = f"{MOVE_TOL_M * 1000:g} mm / {MOVE_TOL_DEG:g} deg"


def wrap_deg(deg: float) -> float:
    """An angle in (-180, 180]: a whole turn (360, 720, -360 ...) is 0."""
    out = math.fmod(float(deg), 360.0)
    if out > 180.0:
        out -= 360.0
    elif out <= -180.0:
        out += 360.0
    return out


def delta_is_trivial(delta_xyz: Sequence[float], delta_yaw_deg: float) -> bool:
    """True when a member delta moves nothing beyond the tolerance: ``|delta_xyz|`` (the
    Euclidean length, metres) within MOVE_TOL_M and the yaw, whole turns removed, within
    MOVE_TOL_DEG."""
    length = math.sqrt(sum(float(v) * float(v) for v in delta_xyz))
    return length <= MOVE_TOL_M and abs(wrap_deg(delta_yaw_deg)) <= MOVE_TOL_DEG


def pose_change(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """(metres, degrees, scale) from pose ``a`` to pose ``b`` (canonical frame, metres): the
    distance between their origins, the angle of the rotation taking one orientation to the
    other (any axis; a whole turn is none), and the largest relative change of an axis
    scale."""
    ta, ra, sa = decompose(a)
    tb, rb, sb = decompose(b)
    metres = float(np.linalg.norm(ta - tb))
    # ||Ra - Rb||_F = 2 sqrt(2) sin(angle / 2): well conditioned for small angles (acos of
    # the trace is not).
    half = float(np.linalg.norm(ra - rb)) / (2.0 * math.sqrt(2.0))
    degrees = math.degrees(2.0 * math.asin(min(half, 1.0)))
    scale = float(np.max(np.abs(sa - sb)) / max(float(np.max(np.abs(sa))), 1e-12))
    return metres, degrees, scale


def pose_moved(a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``b`` differs from ``a`` by more than the movement tolerance: its origin by
    more than MOVE_TOL_M, its orientation by more than MOVE_TOL_DEG, or an axis scale by
    more than the same angle's arc (MOVE_TOL_DEG in radians, relative)."""
    metres, degrees, scale = pose_change(a, b)
    return (metres > MOVE_TOL_M or degrees > MOVE_TOL_DEG
            or scale > math.radians(MOVE_TOL_DEG))


def describe_change(a: np.ndarray, b: np.ndarray) -> str:
    metres, degrees, _ = pose_change(a, b)
    return f"{metres * 1000:.3g} mm, {degrees:.3g} deg"


def rot_z(deg: float) -> Matrix:
    a = math.radians(deg)
    c, s = math.cos(a), math.sin(a)
    out = np.eye(4)
    out[0, 0], out[0, 1], out[1, 0], out[1, 1] = c, -s, s, c
    return out


def translation(xyz: Sequence[float] | np.ndarray) -> Matrix:
    out = np.eye(4)
    out[:3, 3] = np.asarray(xyz, dtype=float)
    return out


def yaw_deg(m: np.ndarray) -> float:
    """Heading of the object's local +X axis about Z, degrees in (-180, 180]."""
    _, rot, _ = decompose(m)
    return math.degrees(math.atan2(rot[1, 0], rot[0, 0]))


def transform_points(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    pts = np.asarray(pts, dtype=float)
    return pts @ m[:3, :3].T + m[:3, 3]


def footprint_centre_local(vertices: np.ndarray) -> np.ndarray:
    """Local-frame pivot: centre of the vertices' X/Y bounding box, at z=0."""
    v = np.asarray(vertices, dtype=float)
    if v.ndim != 2 or len(v) == 0:
        from ..errors import GeometryError

        raise GeometryError("mesh has no vertices: its footprint centre is undefined",
                            fix="give the object real geometry or remove it from the group")
    lo, hi = v[:, :2].min(axis=0), v[:, :2].max(axis=0)
    return np.array([(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0, 0.0])


TALL_FRACTION = 0.75


def seat_centre_local(vertices: np.ndarray) -> np.ndarray:
    """Local-frame centre of the tall part (vertices in the top quarter of the height: a
    backrest, a headboard, a cabinet's top), at z=0. Furniture is centred by it where a
    convention says so: an L-shaped sofa by its seats, not by its chaise's bounding box."""
    v = np.asarray(vertices, dtype=float)
    z = v[:, 2]
    top = v[z >= z.min() + TALL_FRACTION * float(np.ptp(z))]
    lo, hi = top[:, :2].min(axis=0), top[:, :2].max(axis=0)
    return np.array([(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0, 0.0])


def pivot_in_frame(pose: np.ndarray, pivot_local: np.ndarray) -> np.ndarray:
    return transform_points(pose, np.asarray(pivot_local, dtype=float)[None, :])[0]


def apply_member_delta(pose: np.ndarray, delta_xyz: Sequence[float], delta_yaw_deg: float,
                       pivot_local: np.ndarray) -> Matrix:
    """New canonical pose: yaw about canonical Z through the footprint centre, then translate."""
    pose = as_matrix(pose)
    pivot = pivot_in_frame(pose, pivot_local)
    pivot[2] = 0.0
    yawed = translation(pivot) @ rot_z(delta_yaw_deg) @ translation(-pivot) @ pose
    return translation(delta_xyz) @ yawed


def canonical_from_world(m_inv: np.ndarray, world: np.ndarray) -> Matrix:
    return as_matrix(m_inv) @ as_matrix(world)


def world_from_canonical(m_anchor_rigid: np.ndarray, canonical: np.ndarray) -> Matrix:
    return as_matrix(m_anchor_rigid) @ as_matrix(canonical)
