"""Scene-level worker jobs (bpy; Blender 3.4 .. 5.0): read a scene, rebuild islands, render
``masked.png``, merge refined poses back, build a scene (fixtures).

Every input .blend is opened with scripts disabled (``blend_io.open_blend``) and the input
scene is never saved over: islands and the merged scene are written with ``save_as`` to other
paths, then re-opened so what is returned was read back from disk.

Jobs (dispatched by ``worker.jobs.run_job``; plain JSON in and out, meshes through npz):

``scene_read``
    ``{"blend", "names": [objects the relation graph names], "export_meshes": npz | null}``
    -> ``{"objects": {name: {"type", "parent", "matrix_world", "collections", "props"}}``
    for EVERY object in the file, ``"missing": [named but absent]``, ``"meshes"`` (counts of
    the exported evaluated local meshes of the named mesh objects), versions, autoexec_fail}``.

``scene_rebuild``
    ``{"blend", "groups": [{"id", "anchor_id", "members" (anchor included), "m_inv" 4x4,
    "out_blend", "masked_png" | null, "export_meshes": npz | null}], "masked": {"resolution",
    "context": [names]}}``.
    Per group: open the scene, record world matrices, clear the group objects' parents,
    set each ``matrix_world = m_inv @ world``, delete every other object (meshes and materials
    of the group stay; unused data is not written), save_as ``out_blend``, re-open it and
    read the poses back, optionally export the island's mesh cache (``meshes.npz``, read from
    the saved island). ``masked.png``: the scene from above, the group highlighted.
    -> ``{"groups": {id: {"out_blend", "poses", "objects", "masked"}}, ...}``.

``scene_merge``
    ``{"blend": input scene, "out_blend", "poses": {name: world 4x4}}``: assigns the world
    matrices (parents before children, so a parented object lands where asked), save_as
    ``out_blend``, re-open it. -> ``{"before": {all objects: 4x4 as opened},
    "after": {all objects: 4x4 read back from out_blend}, "parents": {name: parent}}``.

``scene_build``
    ``{"out_blend", "meshes_npz", "collections": [names], "objects": [{"name", "type"
    (MESH | CAMERA | LIGHT | EMPTY), "mesh" (npz name, shared between objects), "material",
    "color", "matrix_world", "props", "collection", "parent"}]}``: a scene from scratch.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix, Vector

from island_tools import meshcache
from island_tools.errors import GroupInputError, UsageError

from . import render as _render
from .blend_io import blender_version, matrix_to_list, open_blend, read_poses, save_blend
from .build import material
from .meshes import export_meshes, object_props

OPS = ("scene_read", "scene_rebuild", "scene_merge", "scene_build")
MASKED_MARGIN_M = 1.0
MASK_ANCHOR = (0.80, 0.15, 0.05)
MASK_MEMBER = (1.00, 0.55, 0.00)
MASK_GROUPED = (0.35, 0.45, 0.65)   # objects of the other relation groups
MASK_OTHER = (0.88, 0.88, 0.88)     # objects in no group (floor, props)
_TMP = "island_refiner_mask"


def _matrix(value: Any, what: str) -> Matrix:
    try:
        rows = [[float(v) for v in row] for row in value]
    except (TypeError, ValueError):
        rows = []
    if len(rows) != 4 or any(len(r) != 4 for r in rows) or not all(
            math.isfinite(v) for r in rows for v in r):
        raise UsageError(f"worker job: {what} is not a finite 4x4 matrix", field=what)
    return Matrix(rows)


def _str_list(job: Mapping, key: str) -> list[str]:
    value = job.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"worker job '{job.get('op')}': '{key}' must be a list of names",
                         field=key)
    return list(value)


def _path(job: Mapping, key: str) -> str:
    value = job.get(key)
    if not isinstance(value, str) or not value:
        raise UsageError(f"worker job '{job.get('op')}': '{key}' must be a path", field=key)
    return os.path.abspath(value)


def _refresh() -> None:
    layer = bpy.context.view_layer
    if layer is None and bpy.context.scene is not None:
        layer = bpy.context.scene.view_layers[0]
    if layer is not None:
        layer.update()


def _all_poses() -> dict[str, list[list[float]]]:
    return read_poses([o.name for o in bpy.data.objects])


def _version_info(info: Mapping) -> dict:
    return {k: info[k] for k in ("blender_version", "file_version", "autoexec_fail")}


# --------------------------------------------------------------------------- scene_read
def scene_read(job: Mapping) -> dict:
    t0 = time.perf_counter()
    blend = _path(job, "blend")
    names = _str_list(job, "names")
    export = job.get("export_meshes")
    info = open_blend(blend)
    poses = _all_poses()
    objects = {}
    for obj in bpy.data.objects:
        objects[obj.name] = {
            "type": obj.type,
            "parent": obj.parent.name if obj.parent is not None else None,
            "matrix_world": poses[obj.name],
            "collections": sorted(c.name for c in obj.users_collection),
            "props": object_props(obj),
        }
    missing = [n for n in names if n not in objects]
    mesh_names = [n for n in dict.fromkeys(names)
                  if n in objects and objects[n]["type"] == "MESH"]
    meshes = None
    if export and mesh_names:
        meshes = export_meshes(mesh_names, export)
    return {"op": "scene_read", "blend": blend, "objects": objects, "missing": missing,
            "meshes": meshes, **_version_info(info),
            "timings_s": {"total": round(time.perf_counter() - t0, 4)}}


# --------------------------------------------------------------------------- masked.png
def _mask_scene(resolution: int):
    scene = bpy.data.scenes.new(_TMP)
    _render._configure_output(scene, resolution)
    _render._configure_engine(scene, "workbench", 8, None)
    scene.display.shading.show_shadows = False  # top-down: shadows read as extra furniture
    world = _render._new_world(_TMP, _render.BACKGROUND_COLOR, _render.CYCLES_AMBIENT)
    scene.world = world
    cam_data = bpy.data.cameras.new(_TMP + "_cam")
    cam = bpy.data.objects.new(_TMP + "_cam", cam_data)
    scene.collection.objects.link(cam)
    scene.camera = cam
    return scene, world, cam, cam_data


def _frame_top_down(cam, cam_data, objs) -> dict:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    boxes = [_render._world_bbox(o, depsgraph) for o in objs]
    lo = Vector((min(b[0].x for b in boxes), min(b[0].y for b in boxes),
                 min(b[0].z for b in boxes)))
    hi = Vector((max(b[1].x for b in boxes), max(b[1].y for b in boxes),
                 max(b[1].z for b in boxes)))
    scale = max(hi.x - lo.x, hi.y - lo.y) + 2.0 * MASKED_MARGIN_M
    cam_data.type = "ORTHO"
    cam_data.ortho_scale = scale
    cam_data.clip_start = 0.01
    cam_data.clip_end = (hi.z - lo.z) + 20.0
    cam.location = ((lo.x + hi.x) / 2.0, (lo.y + hi.y) / 2.0, hi.z + 10.0)
    cam.rotation_mode = "QUATERNION"
    cam.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    return {"ortho_scale_m": float(scale),
            "center_xy": [float((lo.x + hi.x) / 2.0), float((lo.y + hi.y) / 2.0)]}


def render_masked(groups: Sequence[Mapping], context: Sequence[str], resolution: int) -> dict:
    """One top-down PNG per group with a ``masked_png``: the group in orange, its anchor red,
    the other groups' objects (``context``) blue-grey, everything else light grey; framed on
    the ``context`` objects."""
    todo = [g for g in groups if g.get("masked_png")]
    if not todo:
        return {}
    meshes = [o for o in bpy.data.objects if o.type == "MESH"]
    grouped = set(context)
    framing = [o for o in meshes if o.name in grouped] or meshes
    scene, world, cam, cam_data = _mask_scene(resolution)
    out = {}
    try:
        for o in meshes:
            scene.collection.objects.link(o)
        camera = _frame_top_down(cam, cam_data, framing)
        for g in todo:
            members = set(g["members"])
            for o in meshes:
                color = (MASK_ANCHOR if o.name == g["anchor_id"] else
                         MASK_MEMBER if o.name in members else
                         MASK_GROUPED if o.name in grouped else MASK_OTHER)
                o.color = (*color, 1.0)
            path = os.path.abspath(g["masked_png"])
            seconds = _render._render_to(scene, Path(path))
            out[g["id"]] = {"path": path, "seconds": round(seconds, 4), **camera}
    finally:
        bpy.data.scenes.remove(scene)
        bpy.data.objects.remove(cam)
        bpy.data.cameras.remove(cam_data)
        bpy.data.worlds.remove(world)
    return out


# --------------------------------------------------------------------------- scene_rebuild
def _group_entry(entry: Any) -> dict:
    if not isinstance(entry, dict):
        raise UsageError("worker job 'scene_rebuild': every group must be an object",
                         field="groups")
    for key in ("id", "anchor_id", "out_blend"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise UsageError(f"worker job 'scene_rebuild': group lacks '{key}'", field=key)
    members = _str_list(entry, "members")
    if entry["anchor_id"] not in members:
        raise UsageError(f"worker job 'scene_rebuild': group '{entry['id']}': anchor is not "
                         "in members", field="members")
    return {**entry, "members": members, "m_inv": _matrix(entry.get("m_inv"), "m_inv")}


def _cut_island(blend: str, group: Mapping) -> dict:
    """Open the scene, keep only the group in its canonical frame, save, read back."""
    open_blend(blend)
    objs = bpy.data.objects
    missing = [n for n in group["members"] if objs.get(n) is None]
    if missing:
        raise GroupInputError(f"group '{group['id']}': object(s) {missing} not in the scene",
                              file=blend)
    _refresh()
    keep = [objs[n] for n in group["members"]]
    world = {o.name: o.matrix_world.copy() for o in keep}
    m_inv = group["m_inv"]
    # Parents first cleared, then world matrices assigned: the island is flat, each object's
    # matrix_world is exactly m_inv @ its scene world matrix.
    for o in keep:
        o.parent = None
    for o in keep:
        o.matrix_world = m_inv @ world[o.name]
    keep_names = set(group["members"])
    for o in [o for o in objs if o.name not in keep_names]:
        objs.remove(o, do_unlink=True)
    _refresh()
    out = os.path.abspath(group["out_blend"])
    save_blend(out)
    open_blend(out)
    names = sorted(o.name for o in bpy.data.objects)
    if names != sorted(keep_names):
        raise GroupInputError(f"group '{group['id']}': the saved island holds {names}",
                              file=out)
    meshes = None
    if group.get("export_meshes"):
        meshes = export_meshes(group["members"], os.path.abspath(group["export_meshes"]))
    return {"out_blend": out, "poses": read_poses(group["members"]), "objects": names,
            "materials": {o.name: [s.material.name for s in o.material_slots if s.material]
                          for o in bpy.data.objects}, "meshes": meshes}


def scene_rebuild(job: Mapping) -> dict:
    t0 = time.perf_counter()
    blend = _path(job, "blend")
    raw = job.get("groups")
    if not isinstance(raw, list) or not raw:
        raise UsageError("worker job 'scene_rebuild': 'groups' must be a non-empty list",
                         field="groups")
    groups = [_group_entry(g) for g in raw]
    masked_cfg = job.get("masked") or {}
    info = open_blend(blend)
    masked = render_masked(groups, list(masked_cfg.get("context") or []),
                           int(masked_cfg.get("resolution", 256)))
    out = {}
    for g in groups:
        out[g["id"]] = {**_cut_island(blend, g), "masked": masked.get(g["id"])}
    return {"op": "scene_rebuild", "blend": blend, "groups": out, **_version_info(info),
            "timings_s": {"total": round(time.perf_counter() - t0, 4)}}


# --------------------------------------------------------------------------- scene_merge
def _depth(obj) -> int:
    d = 0
    while obj.parent is not None:
        obj = obj.parent
        d += 1
    return d


def scene_merge(job: Mapping) -> dict:
    t0 = time.perf_counter()
    blend = _path(job, "blend")
    out = _path(job, "out_blend")
    if os.path.realpath(out) == os.path.realpath(blend):
        raise UsageError("worker job 'scene_merge': out_blend must differ from the input",
                         field="out_blend")
    raw = job.get("poses")
    if not isinstance(raw, dict):
        raise UsageError("worker job 'scene_merge': 'poses' must be name -> 4x4",
                         field="poses")
    poses = {name: _matrix(m, f"poses.{name}") for name, m in raw.items()}
    info = open_blend(blend)
    before = _all_poses()
    missing = sorted(set(poses) - set(before))
    if missing:
        raise GroupInputError(f"objects to merge are not in the scene: {missing}", file=blend)
    objs = bpy.data.objects
    parents = {o.name: o.parent.name for o in objs if o.parent is not None}
    by_depth: dict[int, list] = {}
    for name in poses:
        by_depth.setdefault(_depth(objs[name]), []).append(objs[name])
    for depth in sorted(by_depth):
        # A child's matrix_world is solved against its parent's current world matrix, so
        # every shallower level must be assigned and evaluated first.
        for obj in by_depth[depth]:
            obj.matrix_world = poses[obj.name]
        _refresh()
    save_blend(out)
    open_blend(out)
    after = _all_poses()
    return {"op": "scene_merge", "blend": blend, "out_blend": out, "before": before,
            "after": after, "parents": parents, **_version_info(info),
            "timings_s": {"total": round(time.perf_counter() - t0, 4)}}


# --------------------------------------------------------------------------- scene_build
def _color(value: Any) -> tuple[float, float, float, float]:
    c = [float(v) for v in (value or (0.6, 0.6, 0.6))]
    return tuple((c + [1.0])[:4]) if len(c) in (3, 4) else (0.6, 0.6, 0.6, 1.0)


def _new_data(entry: Mapping, meshes: Mapping, mesh_blocks: dict):
    kind = str(entry.get("type", "MESH")).upper()
    name = entry["name"]
    if kind == "MESH":
        key = entry.get("mesh")
        if key not in meshes:
            raise GroupInputError(f"no mesh arrays '{key}' for object '{name}'")
        if key not in mesh_blocks:
            verts, faces = meshes[key]
            mesh = bpy.data.meshes.new(key)
            mesh.from_pydata(np.asarray(verts).tolist(), [], np.asarray(faces).tolist())
            mesh.validate(clean_customdata=False)
            mesh.update()
            mesh.materials.append(material(str(entry.get("material") or key),
                                            _color(entry.get("color"))))
            mesh_blocks[key] = mesh
        return mesh_blocks[key]
    if kind == "CAMERA":
        return bpy.data.cameras.new(name)
    if kind == "LIGHT":
        light = bpy.data.lights.new(name, "SUN")
        light.energy = 2.0
        return light
    if kind == "EMPTY":
        return None
    raise UsageError(f"worker job 'scene_build': unknown object type {kind!r}", field="type")


def scene_build(job: Mapping) -> dict:
    t0 = time.perf_counter()
    out = _path(job, "out_blend")
    npz = _path(job, "meshes_npz")
    entries = job.get("objects")
    if not isinstance(entries, list) or not entries:
        raise UsageError("worker job 'scene_build': 'objects' must be a non-empty list",
                         field="objects")
    try:
        meshes, _ = meshcache.load(npz)
    except (FileNotFoundError, ValueError) as exc:
        raise GroupInputError(f"mesh arrays unreadable: {exc}", file=npz) from None
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    collections = {}
    for cname in job.get("collections") or []:
        coll = bpy.data.collections.new(str(cname))
        scene.collection.children.link(coll)
        collections[str(cname)] = coll
    mesh_blocks: dict = {}
    created = {}
    for entry in entries:
        name = str(entry["name"])
        obj = bpy.data.objects.new(name, _new_data(entry, meshes, mesh_blocks))
        if obj.name != name:
            raise GroupInputError(f"object name '{name}' became '{obj.name}' in Blender "
                                  f"{blender_version()} (too long or duplicate)", field="name")
        collections.get(entry.get("collection"), scene.collection).objects.link(obj)
        obj.matrix_world = _matrix(entry.get("matrix_world"), f"{name}.matrix_world")
        obj.color = _color(entry.get("color"))
        for key, value in (entry.get("props") or {}).items():
            obj[str(key)] = value
        if obj.type == "CAMERA":
            scene.camera = obj
        created[name] = obj
    _refresh()
    for entry in entries:
        parent = entry.get("parent")
        if parent:
            child, par = created[str(entry["name"])], created[str(parent)]
            child.parent = par
            # Keep the world transform: the parent inverse cancels the parent's matrix.
            child.matrix_parent_inverse = par.matrix_world.inverted()
    _refresh()
    save_blend(out)
    return {"op": "scene_build", "out_blend": out, "blender_version": blender_version(),
            "objects": sorted(created), "poses": {n: matrix_to_list(o.matrix_world)
                                                  for n, o in created.items()},
            "timings_s": {"total": round(time.perf_counter() - t0, 4)}}


def run_scene_job(job: Mapping) -> dict:
    op = job.get("op")
    if op == "scene_read":
        return scene_read(job)
    if op == "scene_rebuild":
        return scene_rebuild(job)
    if op == "scene_merge":
        return scene_merge(job)
    if op == "scene_build":
        return scene_build(job)
    raise UsageError(f"unknown scene op {op!r} (known: {', '.join(OPS)})", field="op")
