"""The single job dispatcher shared by the in-process path and the subprocess path.

``run_job(job) -> dict``; ``job["op"]`` selects:

``step``
    ``{"op": "step", "blend": <island.blend copy inside a staging dir>,
    "members": [all object names, anchor included], "anchor_id": str,
    "poses": {name: 4x4} | null,
    "render": {"engine", "resolution", "samples", "forward_axes"?: {name: "-Y" | [x, y]},
               "meshes_npz"?: the group's mesh cache (units drawn from it),
               "context_npz"?: its fixed context, canonical frame (drawn, never moved)}
              | null,
    "export_meshes": <npz path> | null}``

    ``members`` are furniture unit roots (``worker.units``). Opens ``blend`` (scripts
    disabled), checks every member exists; with ``poses`` assigns
    them, saves ``blend`` IN PLACE and re-opens the saved file so everything after reflects
    what is on disk; reads the members' poses back; optionally exports the mesh cache and
    renders ``render_persp.png`` + ``render_bev.png`` into ``dirname(blend)``; a render
    ``samples`` that is absent or null means the engine's default (``render.DEFAULT_SAMPLES``).
    Returns ``{"op", "blend", "poses": {name: 4x4}, "blender_version", "file_version",
    "autoexec_fail", "saved": bool, "meshes": {...} | null, "render": {...} | null,
    "timings_s": {"open", "apply_save", "reopen", "export", "render", "total"}}``.

``build_island``
    ``{"op": "build_island", "out_blend", "objects_npz": <mesh cache path>,
    "objects": [{"name", "matrix_world", "color"?, "props"?}], "text_blocks": [...]}``;
    vertices/faces come from the npz (``island_tools.measure.meshcache`` format) so big arrays never
    go through JSON. Returns ``{"op", "out_blend", "blender_version", "objects",
    "timings_s": {"total"}}``.

``read_poses``
    ``{"op": "read_poses", "blend", "members"}`` -> ``{"op", "blend", "poses",
    "blender_version", "file_version", "autoexec_fail", "timings_s": {"open", "total"}}``.

``scene_read``, ``scene_rebuild``, ``scene_merge``, ``scene_build``
    Scene-level jobs of the scene pipeline, implemented and documented in ``worker.scene``.

Every value returned is plain JSON (dicts, lists, str, float, int, bool, None), identical
in both paths. An unknown op or a malformed job raises UsageError.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from island_tools.errors import GroupInputError, UsageError

from . import blend_io

SCENE_OPS = ("scene_read", "scene_rebuild", "scene_merge", "scene_build")
OPS = ("step", "build_island", "read_poses", *SCENE_OPS)


def _require(job: Mapping, key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in job:
        raise UsageError(f"worker job '{job.get('op')}' lacks '{key}'", field=key)
    value = job[key]
    if not isinstance(value, kind):
        raise UsageError(f"worker job '{job.get('op')}': '{key}' has the wrong type "
                         f"({type(value).__name__})", field=key)
    return value


def _members(job: Mapping) -> list[str]:
    members = _require(job, "members", list)
    if not members or not all(isinstance(m, str) for m in members):
        raise UsageError("worker job: 'members' must be a non-empty list of names",
                         field="members")
    return list(dict.fromkeys(members))


_RENDER_MESHES: dict[tuple, dict] = {}   # (path, size, mtime, cap) -> drawn arrays per unit
_RENDER_MESHES_KEPT = 16
# The fixed context (walls, other groups' units) is drawn grey around the group, never what
# is judged: a coarser proxy than a member's (Workbench's shadows cost per drawn triangle:
# three 2500-triangle chairs beside a group made each render of it 1.35x slower)
CONTEXT_MAX_TRIANGLES = 600


def _unit_meshes(path: Any, max_triangles: int | None = None) -> dict | None:
    """The group's mesh cache as the render proxies draw it (``units.render_arrays``: a
    high-poly unit vertex-clustered to ``max_triangles``, default
    ``RENDER_MAX_TRIANGLES``). The units' local geometry does not change between
    iterations, only their roots move, so a warm worker keeps the arrays per cache file
    (path, size, mtime) for the next job."""
    if not path:
        return None
    from island_tools.measure import meshcache

    from .units import RENDER_MAX_TRIANGLES, render_arrays

    cap = RENDER_MAX_TRIANGLES if max_triangles is None else int(max_triangles)
    try:
        st = os.stat(str(path))
        key = (str(path), st.st_size, st.st_mtime_ns, cap)
        if key in _RENDER_MESHES:
            return _RENDER_MESHES[key]
        meshes, _ = meshcache.load(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise GroupInputError(f"mesh cache unreadable: {exc}", file=str(path),
                              fix="delete it and rerun init_iter0.py") from None
    drawn = {name: render_arrays(v, f, cap) for name, (v, f) in meshes.items()}
    while len(_RENDER_MESHES) >= _RENDER_MESHES_KEPT:
        _RENDER_MESHES.pop(next(iter(_RENDER_MESHES)))
    _RENDER_MESHES[key] = drawn
    return drawn


def _step(job: Mapping) -> dict:
    t_all = time.perf_counter()
    blend = os.path.abspath(_require(job, "blend", str))
    members = _members(job)
    anchor_id = _require(job, "anchor_id", str)
    if anchor_id not in members:
        raise UsageError(f"worker job: anchor '{anchor_id}' is not in members",
                         field="anchor_id")
    poses = job.get("poses")
    render = job.get("render")
    export_path = job.get("export_meshes")
    if poses is not None and not isinstance(poses, dict):
        raise UsageError("worker job: 'poses' must be an object or null", field="poses")
    if render is not None and not isinstance(render, dict):
        raise UsageError("worker job: 'render' must be an object or null", field="render")
    if poses:
        unknown = sorted(set(poses) - set(members))
        if unknown:
            raise UsageError(f"worker job: poses for non-members {unknown}", field="poses")
    timings = {"open": 0.0, "apply_save": 0.0, "reopen": 0.0, "export": 0.0, "render": 0.0}

    t = time.perf_counter()
    info = blend_io.open_blend(blend)
    blend_io.get_objects(members, what="member")
    timings["open"] = time.perf_counter() - t

    saved = False
    if poses:
        t = time.perf_counter()
        blend_io.set_poses(poses)
        blend_io.save_blend(blend)
        saved = True
        timings["apply_save"] = time.perf_counter() - t
        t = time.perf_counter()
        info = blend_io.open_blend(blend)
        timings["reopen"] = time.perf_counter() - t

    read_back = blend_io.read_poses(members)

    meshes = None
    if export_path:
        from .meshes import export_meshes
        t = time.perf_counter()
        meshes = export_meshes(members, export_path)
        timings["export"] = time.perf_counter() - t

    render_info = None
    if render:
        from .render import render_views
        t = time.perf_counter()
        render_info = render_views(os.path.dirname(blend), anchor_id, members,
                                   engine=render.get("engine", "workbench"),
                                   resolution=int(render.get("resolution", 512)),
                                   samples=render.get("samples"),  # None: engine default
                                   forward_axes=render.get("forward_axes"),
                                   unit_meshes=_unit_meshes(render.get("meshes_npz")),
                                   context_meshes=_unit_meshes(
                                       render.get("context_npz"), CONTEXT_MAX_TRIANGLES))
        timings["render"] = time.perf_counter() - t

    timings["total"] = time.perf_counter() - t_all
    return {
        "op": "step",
        "blend": blend,
        "poses": read_back,
        "blender_version": info["blender_version"],
        "file_version": info["file_version"],
        "autoexec_fail": info["autoexec_fail"],
        "saved": saved,
        "meshes": meshes,
        "render": render_info,
        "timings_s": {k: round(v, 4) for k, v in timings.items()},
    }


def _build_island(job: Mapping) -> dict:
    from island_tools.measure import meshcache

    from .build import build_island

    t_all = time.perf_counter()
    out_blend = os.path.abspath(_require(job, "out_blend", str))
    npz = _require(job, "objects_npz", str)
    entries = _require(job, "objects", list)
    text_blocks = job.get("text_blocks") or []
    try:
        meshes, _props = meshcache.load(npz)
    except FileNotFoundError:
        raise GroupInputError("mesh arrays file not found", file=npz) from None
    except ValueError as exc:
        raise GroupInputError(str(exc), file=npz) from None
    objects = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise UsageError("worker job: every object needs a 'name'", field="objects")
        name = entry["name"]
        if name not in meshes:
            raise GroupInputError(f"no mesh arrays for object '{name}'", file=npz)
        verts, faces = meshes[name]
        objects.append({**entry, "vertices": verts, "faces": faces})
    result = build_island(out_blend, objects, text_blocks)
    return {"op": "build_island", "out_blend": result["out_blend"],
            "blender_version": result["blender_version"], "objects": result["objects"],
            "timings_s": {"total": round(time.perf_counter() - t_all, 4)}}


def _read_poses(job: Mapping) -> dict:
    t_all = time.perf_counter()
    blend = os.path.abspath(_require(job, "blend", str))
    members = _members(job)
    t = time.perf_counter()
    info = blend_io.open_blend(blend)
    t_open = time.perf_counter() - t
    poses = blend_io.read_poses(members)
    return {"op": "read_poses", "blend": blend, "poses": poses,
            "blender_version": info["blender_version"], "file_version": info["file_version"],
            "autoexec_fail": info["autoexec_fail"],
            "timings_s": {"open": round(t_open, 4),
                          "total": round(time.perf_counter() - t_all, 4)}}


def run_job(job: Mapping) -> dict:
    """Dispatch one job (see the module docstring)."""
    if not isinstance(job, Mapping):
        raise UsageError("worker job must be a JSON object")
    op = job.get("op")
    if op == "step":
        return _step(job)
    if op == "build_island":
        return _build_island(job)
    if op == "read_poses":
        return _read_poses(job)
    if op in SCENE_OPS:
        from .scene import run_scene_job
        return run_scene_job(job)
    raise UsageError(f"unknown worker op {op!r} (known: {', '.join(OPS)})", field="op")
