"""Stage 2, rebuild_islands: cut every flagged group out of the scene into its island.

Gate (``GroupPaths.rebuilt``): the island, metadata, target spec, masked.png, mesh cache,
forward axes and ``rounds/round_0/result.json`` are on disk. ``scene_rebuild`` jobs cut
all missing groups, each with its fixed context (``context.npz``: walls, other groups'
units and bystanders validation found near it, never moved, never merged back); each is
checked (poses read back from the saved island) and committed from a staging directory,
``rounds/round_0/`` keeping the pristine copies. With warm workers side by side
(``job_slots``), the groups are split into one ``scene_rebuild`` job per worker, run at
once; each job frames and colours its masked views from the whole scene, so the files are
the same however the groups are split.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import CONTEXT_CACHE, sha256_file
from ..measure import frames, meshcache
from ..measure.obstacles import load as load_context
from ..measure.obstacles import to_frame
from .context import StageContext
from .errors import IntegrityError
from .group_files import poses_doc, write_forward_axes
from .ledger import utc_now
from .relation_graph import GroupSpec


def rebuild_islands(ctx: StageContext) -> None:
    state, p = ctx.scene_state, ctx.paths
    flagged = state.doc["groups_needing_island"]
    todo = [g for g in flagged if not p.group(g).rebuilt()]
    if not todo:
        state.trace("rebuild_islands:skipped:complete" if flagged
                    else "rebuild_islands:skipped:no_flagged_group")
        return
    t0 = time.perf_counter()
    graph = ctx.graph
    assert graph is not None
    scene_doc = read_object(p.scene_objects, UsageError, "scene_objects.json",
                            "rerun validate")
    objects = scene_doc["objects"]
    unit_scale = float(scene_doc.get("unit_scale") or 1.0)
    owners = scene_doc.get("context_owners") or {}
    riders = scene_doc.get("riders") or {}
    jobs, planned = [], {}
    for gid in todo:
        g = graph.group(gid)
        gp = p.group(gid)
        stage = gp.root / ".rebuild.tmp"
        atomic.remove_tree(stage)
        atomic.make_dir(stage, parents=True)
        world = {n: frames.as_matrix(objects[n]["matrix_world"]) for n in g.objects}
        m_anchor, m_inv = frames.canonical_frame(world[g.anchor], unit_scale)
        planned[gid] = (m_anchor, m_inv, {n: m_inv @ world[n] for n in g.objects},
                        unit_scale)
        jobs.append({"id": gid, "anchor_id": g.anchor, "members": list(g.objects),
                     "m_inv": frames.to_list(m_inv), "out_blend": str(stage / "island.blend"),
                     "masked_png": str(stage / "masked.png"),
                     "export_meshes": str(stage / "meshes.npz"),
                     "context_objects": list(owners.get(gid, [])),
                     "riders": {r: c for r, c in riders.items() if c in g.objects}})
    ctx.say(f"rebuild_islands: {', '.join(todo)}")
    chunks = _chunks(jobs, ctx.group_workers(len(jobs)))
    built: dict[str, Any] = {}
    for result in ctx.run_jobs_side_by_side([
            {"op": "scene_rebuild", "blend": str(p.scene_blend), "groups": chunk,
             "masked": {"resolution": ctx.options.settings.resolution,
                        "context": graph.object_names}} for chunk in chunks]):
        built.update(result["groups"])
    for gid in todo:
        commit_island(ctx, graph.group(gid), planned[gid], built[gid])
        state.trace(f"rebuild_islands:{gid}")
    ctx.time("rebuild_islands", time.perf_counter() - t0)
    state.stage_finished("rebuild_islands", 0.0)


def _chunks(items: list[Any], n: int) -> list[list[Any]]:
    """``items`` in ``n`` contiguous runs of nearly equal length (order kept)."""
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]


def commit_island(ctx: StageContext, g: GroupSpec, planned: tuple, built: Mapping[str, Any]
                  ) -> None:
    m_anchor, m_inv, canonical, unit_scale = planned
    gp = ctx.paths.group(g.id)
    stage = gp.root / ".rebuild.tmp"
    read_back = {n: frames.as_matrix(built["poses"][n]) for n in g.objects}
    for n in g.objects:  # canonical poses are in metres
        ratio, detail = frames.pose_mismatch(canonical[n], read_back[n])
        if ratio > 1.0:
            raise IntegrityError(f"group '{g.id}': the pose of '{n}' read back from the "
                                 f"island differs from the planned canonical pose: "
                                 f"{detail}", file=str(stage / "island.blend"))
    metadata = {"anchor_id": g.anchor, "M_anchor_4x4": frames.to_list(m_anchor),
                "M_inv_4x4": frames.to_list(m_inv), "members": list(g.objects),
                "canonical_poses": {n: frames.to_list(read_back[n]) for n in g.objects},
                "unit_scale": unit_scale,
                "units": built.get("units") or {},
                "context_objects": list(built.get("context_objects") or []),
                "riders": dict(built.get("riders") or {}),
                "group_id": g.id, "source_scene": str(ctx.paths.scene_blend),
                "source_scene_sha256": ctx.input_sha_before}
    if g.relation_label:
        metadata["relation_label"] = g.relation_label
    if g.forward_axis:
        metadata["forward_axis_overrides"] = dict(g.forward_axis)
    atomic.write_json(stage / "metadata.json", metadata)
    world = load_context(ctx.paths.scene_context) or {}
    meshcache.save(stage / CONTEXT_CACHE, to_frame(world, metadata["context_objects"], m_inv))
    round0 = gp.round(0)
    if round0.exists():
        atomic.remove_tree(round0, ignore_errors=False)
    atomic.make_dir(round0, parents=True)
    atomic.link_or_copy(stage / "island.blend", round0 / "island.blend")
    atomic.copy_file(stage / "metadata.json", round0 / "metadata.json")
    atomic.copy_file(gp.target_spec, round0 / "target_spec.json")
    atomic.write_json(round0 / "poses.json", poses_doc(read_back))
    for name in ("island.blend", "metadata.json", "masked.png", "meshes.npz", CONTEXT_CACHE):
        atomic.replace(stage / name, gp.root / name)
    atomic.remove_tree(stage)
    write_forward_axes(gp)
    atomic.write_json(round0 / "result.json", {
        "round": 0, "kind": "rebuild", "decision": "baseline",
        "island_sha256": sha256_file(round0 / "island.blend"), "at_utc": utc_now(),
        "materials": built.get("materials"), "masked": built.get("masked")})

