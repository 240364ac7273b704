"""A small deterministic agent that reads ``geometry.json`` and proposes member deltas.

The loop tests (and ``tests/scene_greedy_agent.py``, the scene tests' external agent) drive
``iter_step`` with it; the demo does not (``scripts/demo.py`` runs ``agent.py run --policy
solver``). Every member is turned to its facing target (its own yaw, never one delta for
all), pushed along its edge normal (or radially, for round anchors) to the target clearance,
and slid along the edge (or around the ring) to its even slot. Moves keep iteration N's
per-axis cap and member limit (``island_tools.policy.phase_for``; yaw is uncapped), the worst
members first; it neither pads a phase to its minimum member count nor reassigns members to
other edges: that is the solver's job.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from island_tools.policy import MIN_ITER, phase_for

FACING_TOL_DEG = 0.5
POSITION_TOL_M = 0.005


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
    phase = phase_for(n, len(geometry["members"]))
    cap = phase.cap_m
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
    chosen = candidates[:phase.max_members]   # None: the pattern phase moves every one
    members = {name: {"delta_xyz": [round(v, 6) for v in xyz],
                      "delta_yaw_deg": round(yaw if abs(yaw) > FACING_TOL_DEG else 0.0, 6)}
               for _, name, xyz, yaw in chosen}
    if not members and n == 1:
        # Contract: iter_1 must not be empty; two verification moves of 1 cm that cancel later.
        names = sorted(geometry["members"])[:2]
        members = {name: {"delta_xyz": [0.01 * (-1) ** i, 0.0, 0.0], "delta_yaw_deg": 0.0}
                   for i, name in enumerate(names)}
    summary = (f"{phase.name} phase: {len(members)} member(s) turned to their facing targets "
               "and moved toward target clearance and even slots") if members else "no error left"
    return {"members": members, "converged": not members and n >= MIN_ITER,
            "reason_summary": summary}
