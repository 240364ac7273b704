"""Scene-level worker jobs (bpy; Blender 3.4 .. 5.0): read a scene, rebuild islands, render
``masked.png``, merge refined poses back, build a scene (fixtures).

Every input .blend is opened with scripts disabled (``blend_io.open_blend``) and the input
scene is never saved over: islands and the merged scene are written with ``save_as`` to other
paths, then re-opened so what is returned was read back from disk.

Jobs (dispatched by ``worker.jobs.run_job``; plain JSON in and out, meshes through npz):

``scene_read``
    ``{"blend", "names": [unit roots the relation graph names], "export_meshes": npz | null}``
    -> ``{"objects": {name: {"type", "parent", "matrix_world", "matrix_basis", "collections",
    "instance_collection", "in_view_layer", "library", "props"}}`` for EVERY object in the
    file, ``"missing": [named but absent]``, ``"refusals": [{"member", "object", "cause",
    "fix"}]`` (``worker.units``: why a unit cannot be refined; then nothing is exported),
    ``"units": {root: {"objects", "parts", "triangles", "root_type"}}``, ``"meshes"`` (counts
    of the exported unit meshes), ``"unit_scale"`` (the scene's metres per Blender unit),
    versions, autoexec_fail}``. With ``"context": {"groups", "reach_m", "above_m", "export"}``
    also ``"context_owners"`` per group and ``"riders"`` ({object: the unit root it rests
    on}, ``island_tools.measure.riders``; never context of its own unit's group).

    With ``"measure_only": true`` every named unit with triangles is evaluated and exported
    and the refusals are only reported (``meshes.measured_units``: ``island-refine
    propose`` measures what a scene holds, refused units included, to say why it leaves them
    out).

``scene_rebuild``
    ``{"blend", "groups": [{"id", "anchor_id", "members" (anchor included), "m_inv" 4x4,
    "out_blend", "masked_png" | null, "export_meshes": npz | null, "context_objects": [names],
    "riders": {rider: unit root}}], "masked": {"resolution", "context": [names]}}``.
    Per group (``members`` are unit roots): open the scene, record the roots' world matrices,
    clear the roots' parents, set each root's ``matrix_world = m_inv @ world`` (the rest of
    each unit follows its root), delete every object outside the units and what they
    instance, set the island's unit scale to 1 (``m_inv`` carries the scene's), save_as
    ``out_blend``, re-open it and read the roots' poses back, optionally export the island's
    mesh cache (``meshes.npz``, read from the saved island). ``masked.png``: the scene from
    above, the group highlighted.
    -> ``{"groups": {id: {"out_blend", "poses", "objects", "masked"}}, ...}``.

``scene_merge``
    ``{"blend": input scene, "out_blend", "poses": {unit root: world 4x4}}``: assigns the
    world matrices (parents before children, so a parented root lands where asked), save_as
    ``out_blend`` (the caller passes a temporary path and moves it into place only after its
    read-back check), re-open it. -> ``{"before"/"after": {all objects: matrix_world as opened
    / read back from out_blend}, "before_basis"/"after_basis": {all objects: matrix_basis},
    "parents": {name: parent}, "unit_scale"}``.

``scene_build``
    ``{"out_blend", "meshes_npz", "collections": [names], "asset_collections": [names not
    linked to the scene], "objects": [{"name", "type" (MESH | CAMERA | LIGHT | EMPTY), "mesh"
    (npz name, shared between objects), "material", "color", "matrix_world", "props",
    "collection", "parent", "instance_collection" (an EMPTY instancing that collection)}]}``:
    a scene from scratch.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix, Vector

from island_tools.errors import GroupInputError, UsageError
from island_tools.measure import meshcache
from island_tools.measure.frames import degenerate

from . import render as _render
from .blend_io import (
    blender_version,
    matrix_to_list,
    open_blend,
    read_poses,
    save_blend,
    scene_unit_scale,
)
from .build import material
from .meshes import collect_units, export_meshes, measured_units, object_props
from .meshes import summary as mesh_summary
from .units import (
    RENDER_MAX_TRIANGLES,
    ancestors,
    context_owners,
    instanced_collections,
    mesh_data_kept,
    owner_boxes,
    proxy_mesh,
    render_arrays,
    rider_candidates,
    unit_geometry,
    unit_objects,
    unit_riders,
)

OPS = ("scene_read", "scene_rebuild", "scene_merge", "scene_build")
MASKED_MARGIN_M = 1.0
MASKED_TRIANGLES_PER_PX2 = 2.0
MASKED_MIN_TRIANGLES = 200
MASKED_PASTE_PX = 3          # how far a unit's colour reaches through anti-aliasing
MASKED_CONTEXT_PX = 3        # more around a re-rendered window: its edge pixels' samples
MASKED_WHOLE_FRACTION = 0.25  # a window larger than this renders the whole view
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
def scene_objects() -> dict[str, dict[str, Any]]:
    """``scene_read``'s ``objects``: every object of the open file (type, parent, world and
    basis matrices, collections, instanced collection, in the view layer, library, props);
    the add-on reads the open file with it too."""
    poses = _all_poses()
    layer = bpy.context.view_layer
    in_layer = {o.name for o in layer.objects} if layer is not None else set()
    objects = {}
    for obj in bpy.data.objects:
        objects[obj.name] = {
            "type": obj.type,
            "parent": obj.parent.name if obj.parent is not None else None,
            "matrix_world": poses[obj.name],
            "matrix_basis": matrix_to_list(obj.matrix_basis),
            "collections": sorted(c.name for c in obj.users_collection),
            "instance_collection": (obj.instance_collection.name
                                    if obj.instance_type == "COLLECTION"
                                    and obj.instance_collection is not None else None),
            "in_view_layer": obj.name in in_layer,
            "library": obj.library.filepath if obj.library is not None else None,
            "props": object_props(obj),
        }
    return objects


def scene_read(job: Mapping) -> dict:
    t0 = time.perf_counter()
    blend = _path(job, "blend")
    names = _str_list(job, "names")
    export = job.get("export_meshes")
    info = open_blend(blend)
    layer = bpy.context.view_layer
    objects = scene_objects()
    missing = [n for n in names if n not in objects]
    roots = [n for n in dict.fromkeys(names) if n in objects]
    meshes, found, units = None, [], {}
    measure_only = bool(job.get("measure_only"))
    if roots:
        arrays, props, units, found = (measured_units if measure_only else collect_units)(roots)
        if export and (measure_only or not found):
            meshcache.save(export, arrays, props, units)
            meshes = mesh_summary(export, arrays, props, units)
    members = unit_objects(roots)
    for root, objs in members.items():
        units.setdefault(root, {})["objects"] = [o.name for o in objs]
    context = job.get("context") or {}
    owners, riders = None, None
    if context.get("export") and not found and not measure_only:
        to_units = 1.0 / scene_unit_scale()   # the job's distances are in metres
        owners, riders = read_context(context.get("groups") or {}, roots,
                                      float(context.get("reach_m") or 0.0) * to_units,
                                      float(context.get("above_m") or 0.0) * to_units,
                                      str(context["export"]))
    return {"op": "scene_read", "blend": blend, "objects": objects, "missing": missing,
            "meshes": meshes, "units": units, "refusals": found, "context_owners": owners,
            "riders": riders,
            "unit_scale": scene_unit_scale(), "scene": bpy.context.scene.name,
            "view_layer": layer.name if layer is not None else None, **_version_info(info),
            "timings_s": {"total": round(time.perf_counter() - t0, 4)}}


# --------------------------------------------------------------------------- masked.png
def _mask_scene(resolution: int):
    scene = bpy.data.scenes.new(_TMP)
    _render._configure_output(scene, resolution)
    # the group views' anti-aliasing (5 samples): 8 doubles the cost of a whole-scene view
    _render._configure_engine(scene, "workbench", _render.DEFAULT_SAMPLES["workbench"], None)
    scene.display.shading.show_shadows = False  # top-down: shadows read as extra furniture
    world = _render._new_world(_TMP, _render.BACKGROUND_COLOR, _render.CYCLES_AMBIENT)
    scene.world = world
    cam_data = bpy.data.cameras.new(_TMP + "_cam")
    cam = bpy.data.objects.new(_TMP + "_cam", cam_data)
    scene.collection.objects.link(cam)
    scene.camera = cam
    return scene, world, cam, cam_data


def _frame_top_down(cam, cam_data, objs, scene) -> dict:
    layer = scene.view_layers[0]
    layer.update()
    depsgraph = layer.depsgraph
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


def _masked_budgets(geometry: Mapping[str, Any], resolution: int) -> dict[str, int]:
    """Triangles each unit's proxy gets in the masked view: ``MASKED_TRIANGLES_PER_PX2``
    per square pixel of the unit's plan extent at the view's scale (bounded by the render
    proxies' own ``RENDER_MAX_TRIANGLES``). The masked view frames the whole scene, so a
    chair there spans a dozen pixels: drawn at the group views' budget, 16 groups of
    200k-triangle chairs cost seconds per render for detail no pixel shows."""
    world = owner_boxes(list(geometry))   # evaluated bounds, no pass over the vertices
    boxes = {root: world[root] for root, g in geometry.items()
             if len(g.vertices) and root in world}
    if not boxes:
        return {}
    lo = np.min([b[0] for b in boxes.values()], axis=0)
    hi = np.max([b[1] for b in boxes.values()], axis=0)
    metres_per_px = (float((hi - lo)[:2].max()) + 2.0 * MASKED_MARGIN_M) / resolution
    out = {root: RENDER_MAX_TRIANGLES for root in geometry}
    for root, (b_lo, b_hi) in boxes.items():
        px = float((b_hi - b_lo)[:2].max()) / metres_per_px
        out[root] = int(min(RENDER_MAX_TRIANGLES,
                            max(MASKED_MIN_TRIANGLES, MASKED_TRIANGLES_PER_PX2 * px * px)))
    return out


def render_masked(groups: Sequence[Mapping], context: Sequence[str], resolution: int,
                  whole: bool = False) -> dict:
    """One top-down PNG per group with a ``masked_png``: the group in orange, its anchor red,
    the other groups' units (``context``: their roots) blue-grey, everything else light grey;
    framed on the ``context`` units. Units are drawn from their evaluated geometry (proxies),
    so a collection-instance or hierarchy member is coloured whole.

    The view is rendered once with every unit blue-grey; a group's picture is that view with
    the window around the group's units (``MASKED_PASTE_PX`` beyond their bounding box, the
    anti-aliasing's reach) re-rendered in the group's colours through a camera framing just
    that window, ``MASKED_CONTEXT_PX`` wider so the window's edge pixels get every sample
    they would get in the whole view, on the same pixel grid. Outside the window nothing
    differs; inside, a rasterization on another viewport may round a few edge pixels
    differently (a handful of 262,144 at 512 px, measured by the tests against
    ``whole=True``: every group rendered whole, as before). A job with one group, and a
    window larger than ``MASKED_WHOLE_FRACTION`` of the view, render the group whole (one
    render either way)."""
    todo = [g for g in groups if g.get("masked_png")]
    if not todo:
        return {}
    whole = whole or len(todo) == 1
    roots = [n for n in dict.fromkeys(context) if bpy.data.objects.get(n) is not None]
    unit_parts = {o.name for objs in unit_objects(roots).values() for o in objs}
    geometry = unit_geometry(roots)
    layer = bpy.context.view_layer
    others = [o for o in layer.objects if o.name not in unit_parts and o.visible_get()
              and o.type in ("MESH", "EMPTY", "CURVE", "SURFACE", "META", "FONT")]
    scene, world, cam, cam_data = _mask_scene(resolution)
    proxies: dict[str, Any] = {}
    plan_xy: dict[str, np.ndarray] = {}   # drawn vertices in the world's plan, per unit
    out = {}
    scratch = Path(tempfile.mkdtemp(prefix="ir-masked-"))
    try:
        for o in others:
            scene.collection.objects.link(o)
            o.color = (*MASK_OTHER, 1.0)
        budgets = _masked_budgets(geometry, resolution)
        for root, g in geometry.items():
            if not len(g.triangles):
                continue
            verts, tris = render_arrays(g.vertices, g.triangles, budgets[root])
            proxy = bpy.data.objects.new(f"{_TMP}_{root}", proxy_mesh(f"{_TMP}_{root}",
                                                                      verts, tris))
            proxy.matrix_world = bpy.data.objects[root].matrix_world
            scene.collection.objects.link(proxy)
            proxies[root] = proxy
            mw = np.array(proxy.matrix_world, dtype=float)
            plan_xy[root] = (np.asarray(verts, dtype=float) @ mw[:3, :3].T + mw[:3, 3])[:, :2]
        framing = list(proxies.values()) or others
        camera = _frame_top_down(cam, cam_data, framing, scene)

        def paint(g: Mapping | None) -> None:
            members = set(g["members"]) if g else set()
            for root, proxy in proxies.items():
                color = (MASK_GROUPED if g is None else MASK_ANCHOR if root == g["anchor_id"]
                         else MASK_MEMBER if root in members else MASK_GROUPED)
                proxy.color = (*color, 1.0)

        base = None
        for g in todo:
            t0 = time.perf_counter()
            path = Path(os.path.abspath(g["masked_png"]))
            window = None if whole else _masked_window(
                [plan_xy[r] for r in g["members"] if r in plan_xy], camera, resolution)
            if window is None:
                paint(g)
                _render._render_to(scene, path)
            else:
                if base is None:
                    paint(None)
                    _render._render_to(scene, scratch / "base.png")
                    base = _render.read_png_rgb(scratch / "base.png")
                paint(g)
                picture = base.copy()
                _paste_window(scene, cam, cam_data, camera, window, resolution,
                              scratch / "window.png", picture)
                _render.write_png_rgb(path, picture)
            out[g["id"]] = {"path": str(path), "seconds": round(time.perf_counter() - t0, 4),
                            "drawn": "whole" if window is None else "window", **camera}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        bpy.data.scenes.remove(scene)
        for proxy in proxies.values():
            mesh = proxy.data
            bpy.data.objects.remove(proxy)
            bpy.data.meshes.remove(mesh)
        bpy.data.objects.remove(cam)
        bpy.data.cameras.remove(cam_data)
        bpy.data.worlds.remove(world)
    return out


def _masked_window(plans: Sequence[np.ndarray], camera: Mapping[str, Any], resolution: int
                   ) -> tuple[int, int, int, int] | None:
    """The pixel window (x0, x1, y0, y1; top row 0, ends exclusive) a group's colours can
    reach: its units' drawn vertices, ``MASKED_PASTE_PX`` wider; None to render it whole (no
    units drawn, or a window over ``MASKED_WHOLE_FRACTION`` of the view)."""
    if not plans:
        return None
    xy = np.vstack(plans)
    mpp = float(camera["ortho_scale_m"]) / resolution
    cx, cy = camera["center_xy"]
    half = resolution / 2.0
    x0 = math.floor((float(xy[:, 0].min()) - cx) / mpp + half) - MASKED_PASTE_PX
    x1 = math.ceil((float(xy[:, 0].max()) - cx) / mpp + half) + MASKED_PASTE_PX
    y0 = math.floor(half - (float(xy[:, 1].max()) - cy) / mpp) - MASKED_PASTE_PX
    y1 = math.ceil(half - (float(xy[:, 1].min()) - cy) / mpp) + MASKED_PASTE_PX
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(resolution, x1), min(resolution, y1)
    if x1 <= x0 or y1 <= y0 or (x1 - x0) * (y1 - y0) > MASKED_WHOLE_FRACTION * resolution ** 2:
        return None
    return x0, x1, y0, y1


def _paste_window(scene, cam, cam_data, camera: Mapping[str, Any],
                  window: tuple[int, int, int, int], resolution: int, scratch: Path,
                  picture: np.ndarray) -> None:
    """Render ``window`` (``MASKED_CONTEXT_PX`` wider, on the whole view's pixel grid)
    through a camera framing it and paste it into ``picture``; the camera is put back."""
    x0, x1, y0, y1 = window
    m = MASKED_CONTEXT_PX
    bx0, by0 = max(0, x0 - m), max(0, y0 - m)
    bx1, by1 = min(resolution, x1 + m), min(resolution, y1 + m)
    w, h = bx1 - bx0, by1 - by0
    mpp = float(camera["ortho_scale_m"]) / resolution
    cx, cy = camera["center_xy"]
    r = scene.render
    location, scale = cam.location.copy(), cam_data.ortho_scale
    try:
        r.resolution_x, r.resolution_y = w, h
        cam_data.ortho_scale = max(w, h) * mpp   # the larger side spans the scale
        cam.location = (cx + ((bx0 + bx1) / 2.0 - resolution / 2.0) * mpp,
                        cy - ((by0 + by1) / 2.0 - resolution / 2.0) * mpp, location.z)
        _render._render_to(scene, scratch)
    finally:
        r.resolution_x = r.resolution_y = resolution
        cam.location, cam_data.ortho_scale = location, scale
    crop = _render.read_png_rgb(scratch)
    picture[y0:y1, x0:x1] = crop[y0 - by0:y1 - by0, x0 - bx0:x1 - bx0]


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


def _exclude_instance_sources(collections, unit_parts: set[str]) -> None:
    """Instanced collections linked into the scene tree would show their objects a second
    time at their own place: exclude them from the view layer (instances still evaluate)."""
    wanted = {c.name_full for c in collections
              if not any(o.name in unit_parts for o in c.all_objects)}
    todo = [bpy.context.view_layer.layer_collection]
    while todo:
        lc = todo.pop()
        if lc.collection.name_full in wanted:
            lc.exclude = True
        todo.extend(lc.children)


def _cut_island(blend: str, group: Mapping, all_roots: Sequence[str]) -> dict:
    """Open the scene, keep the group's units (and its fixed context) in the canonical frame,
    save, read back.

    Unit roots lose their parents (the island is flat at the root level) and get
    ``matrix_world = m_inv @ world``; every other object of a unit keeps its parent and local
    transform, so it follows its root exactly; collections the units instance stay instanced.
    Context objects (walls, other groups' units, bystanders near the group:
    ``context_objects``, chosen at validation by ``scene_read``) come along the same way,
    their constraints and animation cleared so they stay where they are; they are never
    moved, and what measures them is the geometry validation took in the scene
    (``context.npz``), not the island's copy.
    Riders of the group's units (``riders``: {rider: unit root}, found at validation by
    ``scene_read``) come along placed the same way and are parented to their unit's root
    (keeping their pose): in the island they are part of that unit and move with it.
    The island's scene is in metres (``unit_scale`` 1): ``m_inv`` carries the scene's unit
    scale."""
    open_blend(blend)
    objs = bpy.data.objects
    roots = list(group["members"])
    missing = [n for n in roots if objs.get(n) is None]
    if missing:
        raise GroupInputError(f"group '{group['id']}': object(s) {missing} not in the scene",
                              file=blend)
    _refresh()
    shown = [n for n in group.get("context_objects") or []
             if objs.get(n) is not None and objs[n].library is None]
    present = [n for n in all_roots if objs.get(n) is not None]
    riders = {r: c for r, c in sorted((group.get("riders") or {}).items())
              if objs.get(r) is not None and objs[r].library is None and c in roots
              and r not in roots and r not in shown}
    all_units = unit_objects([*present, *roots, *shown, *riders])
    units = {r: [o.name for o in all_units[r]] for r in roots}
    for r, c in riders.items():
        units[c] += [o.name for o in all_units[r]]
    unit_parts = {n for members in units.values() for n in members}
    placed = [*roots, *shown, *riders]
    placed_parts = {o.name for r in placed for o in all_units[r]}
    keep = set(placed_parts)
    collections = instanced_collections([objs[n] for n in keep])
    for coll in collections:
        for o in coll.all_objects:
            keep.update([o.name, *(a.name for a in ancestors(o))])
    world = {n: objs[n].matrix_world.copy() for n in placed}
    m_inv = group["m_inv"]
    for n in shown:
        objs[n].constraints.clear()
        objs[n].animation_data_clear()
    for n in placed:
        objs[n].parent = None
    for n in placed:
        objs[n].matrix_world = m_inv @ world[n]
    if riders:
        _refresh()
        for r, c in riders.items():   # parented keeping its pose: it follows its unit
            objs[r].parent = objs[c]
            objs[r].matrix_parent_inverse = objs[c].matrix_world.inverted()
            objs[r].constraints.clear()
            objs[r].animation_data_clear()
    for o in [o for o in objs if o.name not in keep]:
        objs.remove(o, do_unlink=True)
    _exclude_instance_sources(collections, placed_parts)
    bpy.context.scene.unit_settings.scale_length = 1.0
    _refresh()
    out = os.path.abspath(group["out_blend"])
    save_blend(out)
    open_blend(out)
    names = sorted(o.name for o in bpy.data.objects)
    if names != sorted(keep):
        raise GroupInputError(f"group '{group['id']}': the saved island holds {names}, "
                              f"expected {sorted(keep)}", file=out)
    meshes = None
    if group.get("export_meshes"):
        meshes = export_meshes(roots, os.path.abspath(group["export_meshes"]))
    return {"out_blend": out, "poses": read_poses(roots), "objects": names,
            "units": units, "context_objects": shown, "riders": riders,
            "materials": {o.name: [s.material.name for s in o.material_slots if s.material]
                          for o in bpy.data.objects if o.name in unit_parts
                          and hasattr(o, "material_slots")},
            "meshes": meshes}


def read_context(groups: Mapping[str, Sequence[str]], all_roots: Sequence[str], reach: float,
                 above: float, out_npz: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(per group, the owners of the open scene near it (``units.context_owners``: walls,
    other groups' units, bystanders), the riders of the units ``{rider: unit root}``
    (``units.unit_riders``)); the owners' evaluated triangles in WORLD coordinates go into
    ``out_npz`` (mesh-cache format), taken once in the scene as it is. A rider is never
    context of its own unit's group: it moves with its unit."""
    present = [n for n in dict.fromkeys(all_roots) if bpy.data.objects.get(n) is not None]
    boxes = owner_boxes(present)
    scale = scene_unit_scale()
    candidates = rider_candidates(present, scale)
    owners = {gid: context_owners(roots, boxes, reach, above) for gid, roots in groups.items()}
    union = sorted({n for names in owners.values() for n in names})
    wanted = sorted({*union, *candidates} - set(present))
    geometry = unit_geometry([*present, *wanted]) if union or candidates else {}
    riders = unit_riders(present, candidates, geometry, scale) if candidates else {}
    carried = {o.name: riders[r] for r, objs in unit_objects(list(riders)).items()
               for o in objs}   # a rider's parts are owners of their own in ``boxes``
    for gid, roots in groups.items():
        mine = set(roots)
        owners[gid] = [n for n in owners[gid] if carried.get(n) not in mine]
    world = {}
    for name in union:
        g = geometry.get(name)
        if g is None or not len(g.triangles):
            continue
        m = np.array(bpy.data.objects[name].matrix_world, dtype=float)
        world[name] = (g.vertices @ m[:3, :3].T + m[:3, 3], g.triangles)
    meshcache.save(out_npz, world, {}, {n: {"frame": "world", "role": "context",
                                           "triangles": int(len(t))}
                                       for n, (_, t) in world.items()})
    return ({gid: [n for n in names if n in world] for gid, names in owners.items()},
            dict(sorted(riders.items())))


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
    all_roots = list(masked_cfg.get("context") or [])
    masked = render_masked(groups, all_roots, int(masked_cfg.get("resolution", 256)))
    out = {}
    for g in groups:
        out[g["id"]] = {**_cut_island(blend, g, all_roots), "masked": masked.get(g["id"])}
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
    before_basis = {o.name: matrix_to_list(o.matrix_basis) for o in bpy.data.objects}
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
    after_basis = {o.name: matrix_to_list(o.matrix_basis) for o in bpy.data.objects}
    return {"op": "scene_merge", "blend": blend, "out_blend": out, "before": before,
            "after": after, "before_basis": before_basis, "after_basis": after_basis,
            "parents": parents, "unit_scale": scene_unit_scale(), **_version_info(info),
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
    for cname in job.get("asset_collections") or []:   # instanced only, not in the scene
        collections[str(cname)] = bpy.data.collections.new(str(cname))
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
        if entry.get("instance_collection"):
            obj.instance_type = "COLLECTION"
            obj.instance_collection = collections[str(entry["instance_collection"])]
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
            # Under a zero-scale parent there is none: the child collapses with it (a
            # hierarchy scaled to nothing, as such a file has it).
            if not degenerate(np.array(par.matrix_world, dtype=float)):
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
        with mesh_data_kept():   # the scene and the islands cut from it share mesh data
            return scene_rebuild(job)
    if op == "scene_merge":
        return scene_merge(job)
    if op == "scene_build":
        return scene_build(job)
    raise UsageError(f"unknown scene op {op!r} (known: {', '.join(OPS)})", field="op")
