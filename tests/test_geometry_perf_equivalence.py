"""geometry.json must not change when the geometry code is made faster.

``REFERENCE_SHA256`` is the digest of the documents the pre-optimisation implementation
(commit 56b7258, run on this file's ``scenarios()``) produced: seeded random islands of dense
meshes (20k triangles, built by subdividing the box furniture of tests/test_geometry.py, their
vertices at float32 as Blender holds them - the precision geometry derives from) with rect and
round anchors, scaled poses, members tucked under the anchor and members overlapping one
another, so every path (broad phase, fcl collide, bisection, lazy BVH build, scale changes)
is exercised. Any change in any number of any document changes the digest.

A warm context (BVHs built, transforms moved) must also give exactly what a fresh
``compute_geometry`` gives, in any order of calls.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import trimesh  # a dependency of the package: missing is a failure, not a skip

from island_tools.measure import frames
from island_tools.measure.geometry import GeometryContext, compute_geometry

REFERENCE_SHA256 = "fb8d5c39a0f7d450df30941d008d61012a9b91bdbf3b16fb720b878b4dad612f"
Mesh = tuple[np.ndarray, np.ndarray]


def _box(lo: list[float], hi: list[float]) -> Mesh:
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                  for z in (lo[2], hi[2])], dtype=float)
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, f


def _merge(*parts: Mesh) -> Mesh:
    offsets = np.cumsum([0] + [len(v) for v, _ in parts[:-1]])
    return (np.vstack([v for v, _ in parts]),
            np.vstack([f + o for (_, f), o in zip(parts, offsets)]))


def _chair() -> Mesh:
    h = 0.225
    legs = [_box([x, y, 0.0], [x + 0.03, y + 0.03, 0.4]) for x in (-h, h - 0.03)
            for y in (-h, h - 0.03)]
    return _merge(_box([-h, -h, 0.4], [h, h, 0.45]), _box([-h, h - 0.05, 0.45], [h, h, 0.9]),
                  *legs)


def _table(round_: bool) -> Mesh:
    if round_:
        sides = 24
        a = 2.0 * math.pi * (np.arange(sides) + 0.5) / sides
        ring = np.column_stack([0.7 * np.cos(a), 0.7 * np.sin(a)])
        v = np.vstack([np.column_stack([ring, np.full(sides, 0.7)]),
                       np.column_stack([ring, np.full(sides, 0.75)])])
        f = [[i, (i + 1) % sides, sides + i] for i in range(sides)]
        f += [[(i + 1) % sides, sides + (i + 1) % sides, sides + i] for i in range(sides)]
        f += [[0, i + 1, i] for i in range(1, sides - 1)]
        f += [[sides, sides + i, sides + i + 1] for i in range(1, sides - 1)]
        return _merge((v, np.array(f)), _box([-0.05, -0.05, 0.0], [0.05, 0.05, 0.7]))
    legs = [_box([x - 0.025, y - 0.025, 0.0], [x + 0.025, y + 0.025, 0.7])
            for x in (-0.95, 0.95) for y in (-0.45, 0.45)]
    return _merge(_box([-1.0, -0.5, 0.7], [1.0, 0.5, 0.75]), *legs)


def densify(mesh: Mesh, triangles: int) -> Mesh:
    """Subdivide until the mesh has exactly ``triangles`` (>= its own count) triangles."""
    v, f = np.asarray(mesh[0], float), np.asarray(mesh[1], np.int64)
    while len(f) * 4 <= triangles:
        v, f = trimesh.remesh.subdivide(v, f)
    extra = (triangles - len(f)) // 3
    if extra > 0:
        v, f = trimesh.remesh.subdivide(v, f, face_index=np.arange(extra))
    return v.astype(np.float32).astype(float), f   # as Blender holds vertices: float32


def _pose(x: float, y: float, yaw: float, scale: float = 1.0) -> np.ndarray:
    return frames.translation([x, y, 0.0]) @ frames.rot_z(yaw) @ np.diag([scale] * 3 + [1.0])


def scenarios() -> Iterator[tuple[str, dict, dict, dict, dict]]:
    """(label, meshes, poses, target_spec, forward_axes) for each case, deterministic."""
    chair = densify(_chair(), 20000)
    for round_ in (False, True):
        table = densify(_table(round_), 20000)
        rng = np.random.default_rng(11 if round_ else 5)
        for case in range(4):
            n = 12 if case < 2 else 7
            meshes = {"table": table, **{f"m{i:02d}": chair for i in range(n)}}
            scale = 1.0 if case % 2 == 0 else 1.3
            poses = {"table": _pose(0.0, 0.0, 0.0, scale)}
            for i in range(n):
                angle = 2.0 * math.pi * i / n + rng.normal(0.0, 0.15)
                radius = (rng.uniform(0.55, 1.3) if round_ else 1.0) * scale
                if round_:
                    x, y = radius * math.cos(angle), radius * math.sin(angle)
                else:  # a stretched ring around the rect table
                    x = 1.25 * scale * math.cos(angle) + rng.normal(0.0, 0.1)
                    y = 0.8 * scale * math.sin(angle) + rng.normal(0.0, 0.1)
                if i == 3:      # pushed into the anchor
                    x, y = 0.5 * x, 0.5 * y
                if i == 5:      # on top of its neighbour
                    prev = poses[f"m{i - 1:02d}"]
                    x, y = prev[0, 3] + 0.2, prev[1, 3] - 0.1
                yaw = math.degrees(angle) + 90.0 + rng.normal(0.0, 25.0)
                s = 1.0 if i % 4 else 1.1
                poses[f"m{i:02d}"] = _pose(x, y, yaw, s)
            pattern = "ring" if round_ else ("2+2+1+1" if case < 2 else "cluster")
            spec = {"anchor_role": "round_table" if round_ else "long_table",
                    "member_count": n, "pattern": pattern, "facing": "toward_anchor",
                    "spacing": "even_around_anchor" if round_ else "even_along_each_edge",
                    "clearance_m": 0.1}
            axes = {"members": {f"m{i:02d}": {"axis_local": [0.0, -1.0]} for i in range(n)}}
            yield f"{'round' if round_ else 'rect'}-{case}", meshes, poses, spec, axes


# Fields geometry.json gained after the reference was recorded (anchor-relative measures and
# the layout); the reference pins every other value.
ADDED_SINCE_REFERENCE = {"top": ("layout",), "anchor": ("front",),
                         "group": ("obstacles", "obstacle_penetrations"),
                         "member": ("anchor_side", "back_alignment_m", "slot_reference",
                                    "obstacle_clearance_m", "nearest_obstacle",
                                    "obstacle_penetrations", "facing_symmetry_order",
                                    "facing_modulus_deg", "facing_reference_canonical",
                                    "facing_alignment_error_deg",
                                    "facing_alignment_modulus_deg")}


def _reference_fields(doc: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in doc.items() if k not in ADDED_SINCE_REFERENCE["top"]}
    out["anchor"] = {k: v for k, v in doc["anchor"].items()
                     if k not in ADDED_SINCE_REFERENCE["anchor"]}
    out["group"] = {k: v for k, v in doc["group"].items()
                    if k not in ADDED_SINCE_REFERENCE["group"]}
    out["members"] = {n: {k: v for k, v in m.items() if k not in ADDED_SINCE_REFERENCE["member"]}
                      for n, m in doc["members"].items()}
    return out


def digest(docs: list[dict[str, Any]]) -> str:
    docs = [_reference_fields(d) for d in docs]
    text = json.dumps(docs, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_documents_equal_the_reference_implementation() -> None:
    docs = [compute_geometry(m, p, "table", s, a, 1) for _, m, p, s, a in scenarios()]
    assert any(d["group"]["penetration_pairs"] for d in docs)
    assert digest(docs) == REFERENCE_SHA256


def test_warm_context_equals_fresh_compute_in_any_order() -> None:
    cases = list(scenarios())
    label, meshes, poses, spec, axes = cases[0]
    ctx = GeometryContext(meshes, "table", axes)
    rng = np.random.default_rng(3)
    variants = [poses]
    for _ in range(4):  # small moves, a scale change, then back to the first poses
        moved = {k: (frames.translation([*rng.normal(0.0, 0.15, 2), 0.0]) @ v
                     if k != "table" else v) for k, v in poses.items()}
        variants.append(moved)
    variants.append({k: v @ np.diag([1.05, 1.05, 1.05, 1.0]) for k, v in poses.items()})
    variants.append(poses)
    for i, variant in enumerate(variants):
        fresh = compute_geometry(meshes, variant, "table", spec, axes, i)
        assert ctx.compute(variant, spec, i) == fresh, (label, i)
