"""A small deterministic agent that reads ``geometry.json`` and proposes member deltas.

It is what the demo and the loop tests drive ``iter_step`` with: every member is turned to
its facing target (its own yaw, never one delta for all), pushed along its edge normal (or
radially, for round anchors) to the target clearance, and slid along the edge (or around the
ring) to its even slot. Moves respect the contract's magnitude policy for iteration N:
pattern phase (1-3) +-1.0 m, member phase (4-10) the 3 worst members at +-0.3 m, micro phase
(11+) the single worst member at +-0.05 m; yaw is uncapped. It does not reassign members to
other edges; that is the solver's job.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .iteration import utc_now

FACING_TOL_DEG = 0.5
POSITION_TOL_M = 0.005


def phase_caps(n: int) -> tuple[str, float, int]:
    """(phase, max |delta_xyz| component in metres, max members per iteration)."""
    if n <= 3:
        return "pattern", 1.0, 10**6
    if n <= 10:
        return "member", 0.3, 3
    return "micro", 0.05, 1


def _signed_angle_deg(a: list[float], b: list[float]) -> float:
    return math.degrees(math.atan2(a[0] * b[1] - a[1] * b[0], a[0] * b[0] + a[1] * b[1]))


def _member_move(geometry: dict[str, Any], m: dict[str, Any]) -> np.ndarray:
    anchor = geometry["anchor"]
    centre = np.asarray(m["footprint_centre"], dtype=float)
    move = np.zeros(2)
    if m["edge"] == "ring":
        radial = centre - np.asarray(anchor["centre"], dtype=float)
        radius = float(np.linalg.norm(radial))
        if radius > 1e-9:
            radial /= radius
            move += radial * -m["clearance_error_m"]
            if m.get("angle_deviation_deg") is not None and m.get("angle_target_deg") is not None:
                d_theta = math.radians(_wrap(m["angle_target_deg"] - m["angle_deg"]))
                move += np.array([-radial[1], radial[0]]) * radius * d_theta
        return move
    edge = anchor["edges"][m["edge"]]
    move += np.asarray(edge["normal"], dtype=float) * -m["clearance_error_m"]
    if m.get("slot_target_m") is not None and m.get("slot_offset_m") is not None:
        move += np.asarray(edge["tangent"], dtype=float) * (m["slot_target_m"] - m["slot_offset_m"])
    return move


def _wrap(deg: float) -> float:
    return (deg + 180.0) % 360.0 - 180.0


def propose(geometry: dict[str, Any], n: int) -> dict[str, Any]:
    """A decision ``{"members", "converged", "reason_summary"}`` for iteration ``n``."""
    phase, cap, max_members = phase_caps(n)
    candidates = []
    for name, m in sorted(geometry["members"].items()):
        yaw = 0.0
        if m.get("facing_target") and m.get("forward_canonical"):
            yaw = _signed_angle_deg(m["forward_canonical"], m["facing_target"])
        move = _member_move(geometry, m)
        badness = abs(yaw) / 45.0 + float(np.linalg.norm(move)) / 0.05
        if abs(yaw) <= FACING_TOL_DEG and float(np.abs(move).max()) <= POSITION_TOL_M:
            continue
        move = np.clip(move, -cap, cap)
        candidates.append((badness, name, [float(move[0]), float(move[1]), 0.0], yaw))
    candidates.sort(key=lambda c: -c[0])
    chosen = candidates[:max_members]
    members = {name: {"delta_xyz": [round(v, 6) for v in xyz],
                      "delta_yaw_deg": round(yaw if abs(yaw) > FACING_TOL_DEG else 0.0, 6)}
               for _, name, xyz, yaw in chosen}
    if not members and n == 1:
        # Contract: iter_1 must not be empty; two verification moves of 1 cm that cancel later.
        names = sorted(geometry["members"])[:2]
        members = {name: {"delta_xyz": [0.01 * (-1) ** i, 0.0, 0.0], "delta_yaw_deg": 0.0}
                   for i, name in enumerate(names)}
    summary = (f"{phase} phase: {len(members)} member(s) turned to their facing targets and "
               "moved toward target clearance and even slots") if members else "no error left"
    return {"members": members, "converged": not members and n >= 5, "reason_summary": summary}


def transforms_doc(decision: dict[str, Any], n: int, image_sha256: str,
                   model: str = "greedy_agent", generated_by: str = "island_tools.greedy_agent"
                   ) -> dict[str, Any]:
    return {"iter": n, "members": decision["members"], "converged": decision["converged"],
            "final": False, "reason_summary": decision["reason_summary"],
            "_island_meta": {"model": model, "image_sha256": image_sha256,
                             "generated_by": generated_by, "mode": "island_iter", "iter": n,
                             "timestamp_utc": utc_now()}}
