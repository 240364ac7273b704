"""Stage 5, merge_back: every completed group's roots written back into the scene, and the
riders of a moved root (``scene_objects.json::riders``: a frame on a nightstand) with it,
keeping their pose relative to it.

Gate: ``json/merge_back.json`` names the islands merged (by hash) and the output's hash. The
merged scene is staged beside ``blend/stage3-scene.blend`` and moved over it only after its
read-back check (``check_merged``) passes.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import sha256_file
from ..measure import frames
from ..schemas import load_metadata
from .context import StageContext
from .errors import IntegrityError
from .ledger import utc_now

UNTOUCHED_TOL = 1e-9         # objects outside the groups: bit-for-bit the same floats


def _max_abs(a: Any, b: Any) -> float:
    return float(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).max())


def merge_back(ctx: StageContext, group_ids: list[str] | None = None) -> dict[str, Any]:
    """Write blend/stage3-scene.blend: the input scene with every refined member of the
    given groups (default: the completed ones) at ``M_anchor @ canonical``."""
    state, p = ctx.scene_state, ctx.paths
    groups = list(state.doc["islands_completed"] if group_ids is None else group_ids)
    fingerprint = {gid: sha256_file(p.group(gid).island) for gid in groups}
    if group_ids is None and p.merge_report.is_file() and p.output_blend.is_file():
        old = read_object(p.merge_report, UsageError, "merge_back.json", "")
        if (old.get("islands") == fingerprint
            and old.get("output_sha256") == sha256_file(p.output_blend)):
            state.trace("merge_back:skipped:complete")
            return old
    t0 = time.perf_counter()
    targets: dict[str, list[list[float]]] = {}
    owner: dict[str, str] = {}
    for gid in groups:
        gp = p.group(gid)
        metadata = load_metadata(gp.metadata)
        read = ctx.run_job({"op": "read_poses", "blend": str(gp.island),
                            "members": list(metadata.members)})
        for name in metadata.refined_members:
            canonical = frames.as_matrix(read["poses"][name])
            targets[name] = frames.to_list(
                frames.world_from_canonical(metadata.m_anchor, canonical))
            owner[name] = gid
    for name, (pose, root) in rider_targets(ctx, targets).items():
        targets[name] = pose
        owner[name] = owner[root]
    ctx.say(f"merge_back: {len(targets)} member(s) of {len(groups)} group(s) -> "
            f"{p.output_blend.relative_to(p.root)}")
    # Written beside the output and moved over it only after the read-back checks: a
    # failed merge leaves the earlier merged scene (or none) where it was.
    staged = p.output_blend.with_name(f".{p.output_blend.stem}.{os.getpid()}.tmp.blend")
    try:
        result = ctx.run_job({"op": "scene_merge", "blend": str(p.scene_blend),
                              "out_blend": str(staged), "poses": targets})
        worst, followers = check_merged(ctx, result, targets, staged)
        atomic.replace(staged, p.output_blend)
    finally:
        atomic.remove_file(staged, missing_ok=True)
    before, after = result["before"], result["after"]
    graph_names = set(ctx.graph.object_names) if ctx.graph else set()
    report = {"run_id": ctx.run_id, "groups": groups, "islands": fingerprint,
              "assigned": owner, "max_abs_error": worst,
              "untouched_objects": len(before) - len(targets) - len(followers),
              "followers": followers,
              "input_sha256": sha256_file(p.scene_blend),
              "output_sha256": sha256_file(p.output_blend),
              "after_poses": {n: after[n] for n in sorted(graph_names) if n in after},
              "unit_scale": result.get("unit_scale"),
              "blender_version": result.get("blender_version"), "at_utc": utc_now()}
    atomic.write_json(p.merge_report, report)
    ctx.time("merge_back", time.perf_counter() - t0)
    state.stage_finished("merge_back", 0.0)
    state.trace("merge_back")
    return report


def rider_targets(ctx: StageContext, targets: Mapping[str, Any]
                  ) -> dict[str, tuple[list[list[float]], str]]:
    """{rider: (world pose, its root)} of the riders of the moved roots: ``new_root @
    old_root^-1 @ rider`` (the input scene's matrices, scene units), so each keeps its pose
    on its unit."""
    doc = read_object(ctx.paths.scene_objects, UsageError, "scene_objects.json",
                      "rerun validate")
    riders, objects = dict(doc.get("riders") or {}), doc.get("objects") or {}
    out = {}
    for rider, root in sorted(riders.items()):
        if root not in targets or rider in targets or rider not in objects:
            continue
        old_root = frames.as_matrix(objects[root]["matrix_world"])
        old = frames.as_matrix(objects[rider]["matrix_world"])
        new_root = np.asarray(targets[root], dtype=float)
        out[rider] = (frames.to_list(new_root @ np.linalg.inv(old_root) @ old), root)
    return out


def check_merged(ctx: StageContext, result: Mapping[str, Any], targets: Mapping[str, Any],
                 staged: Path) -> tuple[float, list[str]]:
    """The merged file as read back: every moved root where it was written (tolerance
    scaled to the scene, ``frames.pose_mismatch``), every descendant of a moved root with
    its local transform unchanged, every other object with its world matrix unchanged.
    Raises IntegrityError naming the object; returns the worst location error in metres
    and the descendants that followed their roots."""
    p = ctx.paths
    kept = ("the earlier blend/stage3-scene.blend is kept" if p.output_blend.is_file()
            else "no blend/stage3-scene.blend was written")
    before, after, parents = result["before"], result["after"], result["parents"]
    unit_scale = float(result.get("unit_scale") or 1.0)
    worst = 0.0
    for name, pose in targets.items():
        ratio, detail = frames.pose_mismatch(np.asarray(pose), np.asarray(after[name]),
                                             unit_scale)
        worst = max(worst, _max_abs(np.asarray(pose)[:3, 3],
                                    np.asarray(after[name])[:3, 3]) * unit_scale)
        if ratio > 1.0:
            raise IntegrityError(f"the merged scene read back puts '{name}' elsewhere than "
                                 f"written: {detail}; {kept}", file=str(staged))

    def moved_ancestor(name: str) -> bool:
        while name in parents:
            name = parents[name]
            if name in targets:
                return True
        return False

    if set(after) != set(before):
        raise IntegrityError(f"the merged scene has other objects than the input: "
                             f"{sorted(set(after) ^ set(before))[:8]}; {kept}",
                             file=str(staged))
    followers = sorted(n for n in before if n not in targets and moved_ancestor(n))
    moved_local = [n for n in followers if _max_abs(result["after_basis"][n],
                                                    result["before_basis"][n])
                   > UNTOUCHED_TOL]
    changed = sorted(n for n in before if n not in targets and n not in followers
                     and _max_abs(after[n], before[n]) > UNTOUCHED_TOL)
    if moved_local or changed:
        what = (f"parts of moved units changed their local transform: {moved_local[:8]}"
                if moved_local else f"objects outside the groups moved: {changed[:8]}")
        raise IntegrityError(f"{what}; {kept}", file=str(staged))
    return worst, followers

