"""Box meshes and the solver's loop as the adapter runs it, shared by the pure-tier tests."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from island_tools.measure import frames
from island_tools.policy import MIN_ITER

Mesh = tuple[np.ndarray, np.ndarray]


def box(lo: list[float], hi: list[float]) -> Mesh:
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                  for z in (lo[2], hi[2])], dtype=float)
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, f


def merge(*parts: Mesh) -> Mesh:
    offsets = np.cumsum([0] + [len(v) for v, _ in parts[:-1]])
    return (np.vstack([v for v, _ in parts]),
            np.vstack([f + o for (_, f), o in zip(parts, offsets)]))


def prism(radius: float, sides: int, height: float = 0.75) -> Mesh:
    """A closed regular prism standing on z = 0 (a round stool or table at many sides)."""
    a = 2.0 * math.pi * (np.arange(sides) + 0.5) / sides
    ring = np.column_stack([radius * np.cos(a), radius * np.sin(a)])
    v = np.vstack([np.column_stack([ring, np.zeros(sides)]),
                   np.column_stack([ring, np.full(sides, height)])])
    f = [[i, (i + 1) % sides, sides + i] for i in range(sides)]
    f += [[(i + 1) % sides, sides + (i + 1) % sides, sides + i] for i in range(sides)]
    f += [[0, i, i + 1] for i in range(1, sides - 1)]
    f += [[sides, sides + i + 1, sides + i] for i in range(1, sides - 1)]
    return v, np.array(f)


def solve(solver: Any, context: Any, meshes: dict[str, Mesh], poses: dict[str, np.ndarray],
          spec: dict[str, Any], max_iter: int = 20) -> dict[str, Any]:
    """Apply the solver's decisions to ``poses`` in place, iteration by iteration, until it
    converges (from MIN_ITER on) or ``max_iter``; the last geometry document."""
    geometry = context.compute(poses, spec, 0)
    for n in range(1, max_iter + 1):
        decision = solver.decide(poses, geometry, n)
        for name, delta in decision["members"].items():
            pivot = frames.footprint_centre_local(meshes[name][0])
            poses[name] = frames.apply_member_delta(poses[name], delta["delta_xyz"],
                                                    delta["delta_yaw_deg"], pivot)
        geometry = context.compute(poses, spec, n)
        if decision["converged"] and n >= MIN_ITER:
            break
    return geometry
