"""The test's own judgement of a scene, from the judge's dump only (numpy + shapely).

Footprint of a unit = convex hull of its evaluated world vertices projected to the floor (XY).
A member is judged correct when

* facing: its true front (truth object's world rotation applied to the manifest's front,
  projected to the floor) is within ``FACING_TOL_DEG`` of the direction from its footprint
  centre (hull centroid) to the nearest point of the anchor's footprint;
* clearance: its footprint is at least ``MIN_CLEARANCE_M`` (metres, converted with the
  scene's unit scale) from the anchor's footprint, and at most ``MAX_CLEARANCE_M``;
* overlap: its footprint does not overlap another member's (area above ``OVERLAP_M2``).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from shapely.geometry import MultiPoint, Point, Polygon
from shapely.ops import nearest_points

FACING_TOL_DEG = 15.0
MIN_CLEARANCE_M = 0.03
MAX_CLEARANCE_M = 0.50      # further than this a chair is not at its table any more
OVERLAP_M2 = 1e-4


@dataclass
class Phase:
    """One judged .blend (input scene = "before", merged scene = "after")."""

    doc: dict
    arrays: dict[str, np.ndarray]

    @classmethod
    def load(cls, vdir: Path, phase: str) -> Phase:
        doc = json.loads((vdir / f"judge_{phase}.json").read_text())
        with np.load(vdir / f"judge_{phase}.npz") as z:
            arrays = {k: z[k] for k in z.files}
        return cls(doc, arrays)

    @property
    def unit_scale(self) -> float:
        return float(self.doc["unit_scale"])

    def verts(self, root: str) -> np.ndarray:
        return self.arrays[f"{root}|verts"]

    def footprint(self, root: str) -> Polygon:
        hull = MultiPoint([tuple(p) for p in self.verts(root)[:, :2]]).convex_hull
        assert isinstance(hull, Polygon), f"{root}: degenerate footprint {hull.geom_type}"
        return hull

    def world(self, name: str) -> np.ndarray:
        return np.asarray(self.doc["objects"][name]["matrix_world"], dtype=float)

    def basis(self, name: str) -> np.ndarray:
        return np.asarray(self.doc["objects"][name]["matrix_basis"], dtype=float)


@dataclass
class MemberJudgement:
    name: str
    facing_error_deg: float | None
    clearance_m: float
    clearance_units: float
    overlaps: dict[str, float] = field(default_factory=dict)

    @property
    def facing_ok(self) -> bool:
        return self.facing_error_deg is not None and self.facing_error_deg <= FACING_TOL_DEG

    @property
    def clearance_ok(self) -> bool:
        return self.clearance_m >= MIN_CLEARANCE_M

    @property
    def near_ok(self) -> bool:
        return self.clearance_m <= MAX_CLEARANCE_M

    @property
    def ok(self) -> bool:
        return self.facing_ok and self.clearance_ok and self.near_ok and not self.overlaps

    def describe(self) -> str:
        facing = ("n/a (centre inside the anchor or no front)" if self.facing_error_deg is None
                  else f"{self.facing_error_deg:.1f} deg")
        overl = ", ".join(f"{k} {v:.4f} m2" for k, v in self.overlaps.items()) or "none"
        return (f"{self.name}: facing error {facing}, clearance {self.clearance_m:.3f} m, "
                f"overlaps {overl}")


def true_front(phase: Phase, truth: dict, member: str) -> np.ndarray | None:
    mat = phase.doc["truth_world"].get(member)
    if mat is None:
        return None
    front = np.asarray(mat, dtype=float)[:3, :3] @ np.asarray(truth["members"][member]
                                                              ["front_local"], dtype=float)
    xy = front[:2]
    norm = float(np.linalg.norm(xy))
    return xy / norm if norm > 1e-9 else None


def angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = float(np.clip(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0))
    return math.degrees(math.acos(cos))


def judge_group(phase: Phase, truth: dict, gid: str) -> dict[str, MemberJudgement]:
    group = truth["groups"][gid]
    anchor = phase.footprint(group["anchor"])
    feet = {m: phase.footprint(m) for m in group["members"]}
    per_m2 = phase.unit_scale ** 2
    out: dict[str, MemberJudgement] = {}
    for m, foot in feet.items():
        centre = foot.centroid
        target = nearest_points(anchor, Point(centre.x, centre.y))[0]
        direction = np.array([target.x - centre.x, target.y - centre.y])
        front = true_front(phase, truth, m)
        error = (None if front is None or np.linalg.norm(direction) < 1e-9
                 else angle_deg(front, direction))
        dist = float(foot.distance(anchor))
        overlaps = {}
        for other, ofoot in feet.items():
            if other != m:
                area = float(foot.intersection(ofoot).area) * per_m2
                if area > OVERLAP_M2:
                    overlaps[other] = area
        out[m] = MemberJudgement(m, error, dist * phase.unit_scale, dist, overlaps)
    return out


def rel_close(a: np.ndarray, b: np.ndarray, rel: float = 1e-5) -> bool:
    scale = max(1.0, float(np.abs(b).max()))
    return float(np.abs(a - b).max()) <= rel * scale
