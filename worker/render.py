"""Render ``render_persp.png`` and ``render_bev.png`` for an island (bpy; Blender 3.4 .. 5.0).

Both views are rendered from a temporary scene holding one proxy mesh per furniture unit:
the unit's evaluated geometry (``worker.units``: root, children, instances, modifiers), the
very triangles geometry.json measures, placed at the root's current pose. The open file's
own objects, scene, cameras and render settings are never touched (the add-on renders from
an artist's open file through this same function); the temporary scene, proxies, camera,
floor, lamp, world and material are removed afterwards.

Views
-----
* **persp** - a 3/4 perspective view from the (+X, -Y) corner (azimuth -45 deg), looking
  down 35 deg at the centre of the members' combined bounding box, 40 deg field of view,
  distance chosen so the bounding sphere fits with a margin. A large light-grey floor plane
  sits just below the lowest object.
* **bev** - orthographic, straight down, camera up = canonical +Y, right = +X, centred on
  the anchor's footprint centre, at a FIXED scale: ``ortho_scale`` = the anchor footprint's
  larger side + 1.5 m margin on each side, rounded up to 0.5 m, enlarged in 1 m steps only
  if a member's bounding box would fall outside. Consecutive iterations of a group therefore
  share the same scale (``bev_metres_per_pixel`` = ortho_scale / resolution) unless a member
  wanders off. No floor (white background).

Facing: a plain top-down view shows chairs as identical squares, so the BEV draws a dark
arrow over every member whose local forward axis is known (``forward_axes`` argument, else
the object's ``forward_axis`` custom property), from its footprint centre towards its front.

Colours: members get distinct saturated colours from ``PALETTE`` in sorted-name order, the
anchor neutral grey (returned as ``colors``). Workbench uses object colours; Cycles renders
with a temporary view-layer material override that reads the same object colour.

Engines
-------
* ``workbench`` (default): STUDIO light, colour type OBJECT, view transform Standard,
  shadows in the persp view only (contact with the floor), no cavity (it doubles the time
  in software GL). ``samples`` maps to ``scene.display.render_aa``:
  0 -> 'OFF', 1..4 -> 'FXAA', >= 5 -> the largest of 5, 8, 11, 16, 32 that is <= samples.
  Default 5 (``DEFAULT_SAMPLES``): 0.25 s for the two 512 px views against 0.70 s at 16,
  visually the same (mean abs pixel difference < 0.2/255).
* ``cycles``: CPU, ``samples`` path samples (default 16), no denoising (Debian's Blender 3.4
  has no OpenImageDenoise), no adaptive sampling and a fixed seed (deterministic), opaque
  film, a sun lamp plus a light-grey world so the scene is lit.

``samples`` None (or absent from a job) = ``DEFAULT_SAMPLES[engine]``.

Output: PNG, RGB, 8 bit, no dithering; each file is rendered to a temporary name inside
``out_dir`` and renamed over the final name (atomic).
"""
from __future__ import annotations

import contextlib
import math
import os
import struct
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix, Vector

from island_tools.errors import GroupInputError, UsageError, WorkerError

from .blend_io import get_objects, probe_write, require_parent
from .units import proxy_mesh, render_arrays, unit_geometry

ENGINES = {"workbench": "BLENDER_WORKBENCH", "cycles": "CYCLES"}
PALETTE = [
    (0.90, 0.05, 0.05),  # red
    (0.05, 0.25, 0.95),  # blue
    (0.05, 0.70, 0.10),  # green
    (1.00, 0.45, 0.00),  # orange
    (0.55, 0.10, 0.85),  # purple
    (0.00, 0.75, 0.80),  # cyan
    (0.95, 0.10, 0.60),  # magenta
    (0.95, 0.85, 0.00),  # yellow
    (0.45, 0.22, 0.05),  # brown
    (0.00, 0.40, 0.30),  # teal
    (0.55, 0.85, 0.00),  # lime
    (0.10, 0.05, 0.45),  # navy
]
ANCHOR_COLOR = (0.5, 0.5, 0.5)
CONTEXT_COLOR = (0.80, 0.74, 0.62)   # walls, other groups, bystanders: fixed, a sand tone
CONTEXT_FLOOR_BAND_M = 0.02          # floors and rugs of the context are not drawn
FLOOR_COLOR = (0.9, 0.9, 0.9)
ARROW_COLOR = (0.01, 0.01, 0.01)
BACKGROUND_COLOR = (0.9, 0.9, 0.9)  # scene-linear; ~0.95 in the PNG
CYCLES_SUN_STRENGTH = 1.6
CYCLES_AMBIENT = 0.35
BEV_MARGIN_M = 1.5
BEV_ROUND_M = 0.5
BEV_GROW_M = 1.0
PERSP_AZIMUTH_DEG = -45.0
PERSP_ELEVATION_DEG = 35.0
PERSP_FOV_DEG = 40.0
PERSP_MARGIN = 1.10
WORKBENCH_AA_STEPS = (5, 8, 11, 16, 32)
# Per-engine default of ``samples``: the same dict as island_tools.config.DEFAULT_SAMPLES (the
# worker does not import the config module; tests/test_schemas.py checks the two agree).
DEFAULT_SAMPLES = {"workbench": 5, "cycles": 16}
_TMP = "island_refiner_tmp"


def workbench_aa(samples: int) -> str:
    samples = int(samples)
    if samples <= 0:
        return "OFF"
    if samples < WORKBENCH_AA_STEPS[0]:
        return "FXAA"
    return str(max(s for s in WORKBENCH_AA_STEPS if s <= samples))


def member_colors(anchor_id: str, members: Sequence[str]) -> dict[str, tuple]:
    out = {anchor_id: ANCHOR_COLOR}
    others = sorted(m for m in members if m != anchor_id)
    for i, name in enumerate(others):
        out[name] = PALETTE[i % len(PALETTE)]
    return out


def _world_bbox(obj, depsgraph) -> tuple[Vector, Vector]:
    ev = obj.evaluated_get(depsgraph)
    mw = ev.matrix_world
    pts = [mw @ Vector(c) for c in ev.bound_box]
    lo = Vector((min(p.x for p in pts), min(p.y for p in pts), min(p.z for p in pts)))
    hi = Vector((max(p.x for p in pts), max(p.y for p in pts), max(p.z for p in pts)))
    return lo, hi


def bev_scale(anchor_box, member_boxes) -> tuple[float, tuple[float, float]]:
    """(ortho_scale, centre xy): see the module docstring."""
    lo, hi = anchor_box
    cx, cy = (lo.x + hi.x) / 2.0, (lo.y + hi.y) / 2.0
    side = max(hi.x - lo.x, hi.y - lo.y) + 2.0 * BEV_MARGIN_M
    scale = math.ceil(side / BEV_ROUND_M - 1e-9) * BEV_ROUND_M
    need = 0.0
    for mlo, mhi in member_boxes:
        need = max(need, abs(mlo.x - cx), abs(mhi.x - cx), abs(mlo.y - cy), abs(mhi.y - cy))
    need *= 2.0
    if need > scale:
        scale += math.ceil((need - scale) / BEV_GROW_M - 1e-9) * BEV_GROW_M
    return float(scale), (float(cx), float(cy))


def forward_vector(value) -> tuple[float, float] | None:
    """Local forward direction from "+X"/"-Y"/... or a 2-/3-list; None if unusable."""
    if isinstance(value, str):
        v = value.strip().upper()
        sign = -1.0 if v.startswith("-") else 1.0
        axis = v.lstrip("+-")
        if axis == "X":
            return (sign, 0.0)
        if axis == "Y":
            return (0.0, sign)
        return None
    try:
        x, y = float(value[0]), float(value[1])
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    n = math.hypot(x, y)
    if not math.isfinite(n) or n < 1e-9:
        return None
    return (x / n, y / n)


def _box(world_verts: np.ndarray) -> tuple[Vector, Vector]:
    return Vector(world_verts.min(axis=0).tolist()), Vector(world_verts.max(axis=0).tolist())


def _arrow_mesh(name: str, local_verts: np.ndarray, mw: np.ndarray,
                forward: tuple[float, float], z: float):
    """A flat triangle at height ``z`` over the unit's footprint centre, pointing forward."""
    lo, hi = local_verts[:, :2].min(axis=0), local_verts[:, :2].max(axis=0)
    centre = mw[:3, :3] @ np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 0.0]) + mw[:3, 3]
    d3 = mw[:3, :3] @ np.array([forward[0], forward[1], 0.0])
    d = Vector((float(d3[0]), float(d3[1]), 0.0))
    if d.length < 1e-9:
        return None
    d.normalize()
    size_world = [float(np.linalg.norm(mw[:3, i])) * float(hi[i] - lo[i]) for i in (0, 1)]
    length = max(0.1, min(size_world) * 0.8)
    perp = Vector((-d.y, d.x, 0.0))
    c = Vector((float(centre[0]), float(centre[1]), z))
    tip = c + d * (0.55 * length)
    left = c - d * (0.45 * length) + perp * (0.3 * length)
    right = c - d * (0.45 * length) - perp * (0.3 * length)
    notch = c - d * (0.2 * length)
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([tuple(tip), tuple(left), tuple(notch), tuple(right)], [],
                     [(0, 1, 2), (0, 2, 3)])
    return mesh


def _new_world(name: str, background: Sequence[float], ambient: float):
    """Camera rays see ``background``; everything else is lit by a dim grey ``ambient``."""
    world = bpy.data.worlds.new(name)
    world.color = tuple(background[:3])  # the Workbench background
    if world.node_tree is None:  # Blender < 5.0
        world.use_nodes = True
    nodes, links = world.node_tree.nodes, world.node_tree.links
    for n in [n for n in nodes if n.type != "OUTPUT_WORLD"]:
        nodes.remove(n)
    out = next((n for n in nodes if n.type == "OUTPUT_WORLD"), None)
    if out is None:
        out = nodes.new("ShaderNodeOutputWorld")
    seen = nodes.new("ShaderNodeBackground")
    seen.inputs["Color"].default_value = (*background[:3], 1.0)
    seen.inputs["Strength"].default_value = 1.0
    light = nodes.new("ShaderNodeBackground")
    light.inputs["Color"].default_value = (1.0, 1.0, 1.0, 1.0)
    light.inputs["Strength"].default_value = ambient
    path = nodes.new("ShaderNodeLightPath")
    mix = nodes.new("ShaderNodeMixShader")
    links.new(path.outputs["Is Camera Ray"], mix.inputs[0])  # "Fac" (3.x) / "Factor" (5.0)
    links.new(light.outputs["Background"], mix.inputs[1])
    links.new(seen.outputs["Background"], mix.inputs[2])
    links.new(mix.outputs["Shader"], out.inputs["Surface"])
    return world


def _object_color_material(name: str):
    mat = bpy.data.materials.new(name)
    if mat.node_tree is None:  # Blender < 5.0
        mat.use_nodes = True
    nodes, links = mat.node_tree.nodes, mat.node_tree.links
    bsdf = next(n for n in nodes if n.type == "BSDF_PRINCIPLED")
    info = nodes.new("ShaderNodeObjectInfo")
    links.new(info.outputs["Color"], bsdf.inputs["Base Color"])
    bsdf.inputs["Roughness"].default_value = 0.7
    return mat


def _configure_output(scene, resolution: int) -> None:
    r = scene.render
    r.resolution_x = r.resolution_y = int(resolution)
    r.resolution_percentage = 100
    r.pixel_aspect_x = r.pixel_aspect_y = 1.0
    r.use_file_extension = False
    r.use_compositing = False
    r.use_sequencer = False
    r.film_transparent = False
    r.dither_intensity = 0.0
    # No metadata in the PNG (date, render time, the staging file's path): the same state
    # with the same settings gives the same bytes, so an unchanged iteration can reuse them.
    r.use_stamp = False
    for name in dir(r):
        if name.startswith("use_stamp_") and name != "use_stamp_note":
            with contextlib.suppress(AttributeError, TypeError):
                setattr(r, name, False)
    img = r.image_settings
    if hasattr(img, "media_type"):  # Blender >= 5.0
        img.media_type = "IMAGE"
    img.file_format = "PNG"
    img.color_mode = "RGB"
    img.color_depth = "8"
    img.compression = 15
    vs = scene.view_settings
    vs.view_transform = "Standard"
    vs.look = "None"
    vs.exposure = 0.0
    vs.gamma = 1.0


def _configure_engine(scene, engine: str, samples: int, override_mat) -> dict:
    scene.render.engine = ENGINES[engine]
    if engine == "workbench":
        sh = scene.display.shading
        sh.light = "STUDIO"
        sh.color_type = "OBJECT"
        sh.show_shadows = True
        sh.shadow_intensity = 0.35
        sh.show_cavity = False  # ~2x the render time in software GL for little gain
        sh.show_specular_highlight = False
        aa = workbench_aa(samples)
        scene.display.render_aa = aa
        return {"render_aa": aa}
    c = scene.cycles
    c.device = "CPU"
    c.samples = max(1, int(samples))
    c.use_denoising = False
    c.use_adaptive_sampling = False
    c.seed = 0
    c.use_animated_seed = False
    scene.view_layers[0].material_override = override_mat
    return {}


def _render_to(scene, final: Path) -> float:
    tmp = final.parent / f".{final.stem}.{os.getpid()}.tmp.png"
    require_parent(final)
    scene.render.filepath = str(tmp)
    t0 = time.perf_counter()
    try:
        try:
            bpy.ops.render.render(write_still=True, scene=scene.name)
        except RuntimeError as exc:
            probe_write(final.parent)
            raise WorkerError(f"render failed: {' '.join(str(exc).split())}",
                              file=str(final)) from None
        if not tmp.is_file() or tmp.stat().st_size == 0:
            probe_write(final.parent)   # Blender logs a failed image write and goes on
            raise WorkerError("render produced no image", file=str(final))
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return time.perf_counter() - t0


def read_png_rgb(path: Path) -> np.ndarray:
    """An 8-bit PNG this module wrote, as (height, width, 3) uint8, top row first (Blender's
    image pixels are floats of the 8-bit values, bottom row first)."""
    img = bpy.data.images.load(str(path), check_existing=False)
    try:
        w, h = img.size
        flat = np.empty(w * h * img.channels, dtype=np.float32)
        img.pixels.foreach_get(flat)
        rgb = flat.reshape(h, w, img.channels)[::-1, :, :3]
    finally:
        bpy.data.images.remove(img)
    return np.rint(rgb * 255.0).astype(np.uint8)


def write_png_rgb(final: Path, rgb: np.ndarray) -> None:
    """(height, width, 3) uint8, top row first, as an 8-bit RGB PNG without metadata
    (zlib, filter 0), atomically: a temporary name beside ``final``, then renamed."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    raw = np.zeros((h, 1 + 3 * w), dtype=np.uint8)   # filter byte 0 ("none") per row
    raw[:, 1:] = rgb.reshape(h, 3 * w)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + chunk(b"IEND", b""))
    tmp = final.parent / f".{final.stem}.{os.getpid()}.tmp.png"
    require_parent(final)
    try:   # an OSError (a full disk) becomes a FilesystemError naming the path
        with open(tmp, "wb") as fh:
            fh.write(png)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


def render_views(out_dir: str | os.PathLike[str], anchor_id: str, members: Sequence[str],
                 engine: str = "workbench", resolution: int = 512, samples: int | None = None,
                 forward_axes: Mapping[str, object] | None = None,
                 unit_meshes: Mapping[str, tuple] | None = None,
                 context_meshes: Mapping[str, tuple] | None = None) -> dict:
    """Render both views into ``out_dir``; see the module docstring. Returns paths + camera data.

    ``members`` are unit roots. ``forward_axes``: optional ``{member: local forward}`` ("-Y",
    [0, -1], ...); each listed member (anchor excluded) gets a dark arrow over it in the BEV,
    pointing to its front. ``samples`` None: the engine's default (``DEFAULT_SAMPLES``).
    ``unit_meshes``: ``{root: (vertices, triangles)}`` in the root's local frame (the group's
    mesh cache); units missing from it are evaluated from the open file.
    ``context_meshes``: the island's fixed context (walls, other groups, bystanders) in the
    frame of the open file, drawn in ``CONTEXT_COLOR`` (not what frames the views).
    """
    t_start = time.perf_counter()
    engine = str(engine).lower()
    if engine not in ENGINES:
        raise UsageError(f"unknown render engine '{engine}' (use workbench or cycles)",
                         field="engine")
    samples = DEFAULT_SAMPLES[engine] if samples is None else int(samples)
    resolution = int(resolution)
    if not 8 <= resolution <= 8192:
        raise UsageError(f"render resolution {resolution} out of range 8..8192",
                         field="resolution")
    members = list(dict.fromkeys(members))
    if anchor_id not in members:
        members.append(anchor_id)
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise WorkerError("render output directory does not exist", file=str(out_dir))
    objs = get_objects(members)
    geometry = {n: (np.asarray(v, dtype=float), np.asarray(t)) for n, (v, t) in
                (unit_meshes or {}).items() if n in members}
    live = [n for n in members if n not in geometry]
    if live:   # not in a mesh cache: evaluated here, drawn as render_arrays draws a cache
        geometry.update({n: render_arrays(g.vertices, g.triangles)
                         for n, g in unit_geometry(live).items()})
    empty = [n for n in members if not len(geometry[n][1])]
    if empty:
        raise GroupInputError("units without geometry: " + ", ".join(repr(n) for n in empty))

    if forward_axes is None:  # fall back to the objects' own forward_axis property
        forward_axes = {o.name: o["forward_axis"] for o in objs if "forward_axis" in o.keys()}
    fwd_map = {}
    for name, value in forward_axes.items():
        if name == anchor_id or name not in members:
            continue
        if hasattr(value, "to_list"):
            value = value.to_list()
        fwd = forward_vector(value)
        if fwd is None:
            raise UsageError(f"forward axis {value!r} of '{name}' is not +X/-X/+Y/-Y or a "
                             "2-vector", field="forward_axes")
        fwd_map[name] = fwd

    if bpy.context.view_layer is not None:
        bpy.context.view_layer.update()
    matrices = {o.name: np.array(o.matrix_world, dtype=float) for o in objs}
    world_verts = {n: geometry[n][0] @ m[:3, :3].T + m[:3, 3] for n, m in matrices.items()}
    boxes = {n: _box(v) for n, v in world_verts.items()}
    lo = Vector((min(b[0].x for b in boxes.values()), min(b[0].y for b in boxes.values()),
                 min(b[0].z for b in boxes.values())))
    hi = Vector((max(b[1].x for b in boxes.values()), max(b[1].y for b in boxes.values()),
                 max(b[1].z for b in boxes.values())))
    colors = member_colors(anchor_id, members)

    created: list = []  # (collection, datablock) to remove, in order
    scene = bpy.data.scenes.new(_TMP)
    try:
        # Each unit is drawn from the geometry that is measured: one proxy mesh per unit at
        # its root's pose, in the member's colour (a collection instance or a hierarchy is
        # coloured whole, and nothing of the open file is changed).
        for name in members:
            pmesh = proxy_mesh(f"{_TMP}_unit_{name}", *geometry[name])
            proxy = bpy.data.objects.new(pmesh.name, pmesh)
            proxy.matrix_world = Matrix(matrices[name].tolist())
            proxy.color = (*colors[name], 1.0)
            scene.collection.objects.link(proxy)
            created += [(bpy.data.objects, proxy), (bpy.data.meshes, pmesh)]
        floor_z = float(world_verts[anchor_id][:, 2].min())
        for name, (verts, tris) in sorted((context_meshes or {}).items()):
            verts, tris = np.asarray(verts, dtype=float), np.asarray(tris)
            keep = verts[tris][:, :, 2].max(axis=1) > floor_z + CONTEXT_FLOOR_BAND_M
            if not keep.any():
                continue
            cmesh = proxy_mesh(f"{_TMP}_context_{name}", verts, tris[keep])
            cobj = bpy.data.objects.new(cmesh.name, cmesh)
            cobj.color = (*CONTEXT_COLOR, 1.0)
            scene.collection.objects.link(cobj)
            created += [(bpy.data.objects, cobj), (bpy.data.meshes, cmesh)]
        _configure_output(scene, resolution)
        world = _new_world(_TMP, BACKGROUND_COLOR, CYCLES_AMBIENT)
        created.append((bpy.data.worlds, world))
        scene.world = world
        override = None
        if engine == "cycles":
            override = _object_color_material(_TMP)
            created.append((bpy.data.materials, override))
            sun_data = bpy.data.lights.new(_TMP + "_sun", "SUN")
            sun_data.energy = CYCLES_SUN_STRENGTH
            sun_data.angle = math.radians(10.0)
            sun = bpy.data.objects.new(_TMP + "_sun", sun_data)
            sun.rotation_euler = (math.radians(35.0), 0.0, math.radians(30.0))
            scene.collection.objects.link(sun)
            created += [(bpy.data.objects, sun), (bpy.data.lights, sun_data)]
        extra = _configure_engine(scene, engine, samples, override)

        # Floor (persp only).
        radius = max((hi - lo).length / 2.0, 0.25)
        size = max(20.0, 8.0 * radius)
        centre = (lo + hi) / 2.0
        fz = lo.z - 0.002
        fmesh = bpy.data.meshes.new(_TMP + "_floor")
        fmesh.from_pydata([(centre.x - size, centre.y - size, fz),
                           (centre.x + size, centre.y - size, fz),
                           (centre.x + size, centre.y + size, fz),
                           (centre.x - size, centre.y + size, fz)], [], [(0, 1, 2, 3)])
        floor = bpy.data.objects.new(_TMP + "_floor", fmesh)
        floor.color = (*FLOOR_COLOR, 1.0)
        scene.collection.objects.link(floor)
        created += [(bpy.data.objects, floor), (bpy.data.meshes, fmesh)]

        cam_data = bpy.data.cameras.new(_TMP + "_cam")
        cam = bpy.data.objects.new(_TMP + "_cam", cam_data)
        scene.collection.objects.link(cam)
        created += [(bpy.data.objects, cam), (bpy.data.cameras, cam_data)]
        scene.camera = cam
        cam_data.sensor_fit = "AUTO"

        # -- persp ----------------------------------------------------------------------
        fov = math.radians(PERSP_FOV_DEG)
        dist = radius / math.sin(fov / 2.0) * PERSP_MARGIN
        az, el = math.radians(PERSP_AZIMUTH_DEG), math.radians(PERSP_ELEVATION_DEG)
        direction = Vector((math.cos(el) * math.cos(az), math.cos(el) * math.sin(az),
                            math.sin(el)))
        cam_loc = centre + direction * dist
        cam_data.type = "PERSP"
        cam_data.lens_unit = "FOV"
        cam_data.angle = fov
        cam_data.clip_start = max(0.01, dist - 2.0 * radius) * 0.1
        cam_data.clip_end = dist + 2.0 * size
        cam.location = cam_loc
        cam.rotation_mode = "QUATERNION"
        cam.rotation_quaternion = (centre - cam_loc).to_track_quat("-Z", "Y")
        floor.hide_render = False
        persp_path = out_dir / "render_persp.png"
        t_persp = _render_to(scene, persp_path)

        # -- bev --------------------------------------------------------------------------
        scale, (cx, cy) = bev_scale(boxes[anchor_id],
                                    [b for n, b in boxes.items() if n != anchor_id])
        cam_data.type = "ORTHO"
        cam_data.ortho_scale = scale
        cam_data.clip_start = 0.01
        cam_data.clip_end = (hi.z - lo.z) + 20.0
        cam.location = (cx, cy, hi.z + 10.0)
        cam.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        floor.hide_render = True
        if engine == "workbench":
            scene.display.shading.show_shadows = False  # nothing to fall on without a floor
        arrows = []
        for name, fwd in sorted(fwd_map.items()):
            amesh = _arrow_mesh(f"{_TMP}_arrow_{name}", geometry[name][0], matrices[name],
                                fwd, hi.z + 0.01)
            if amesh is None:
                continue
            aobj = bpy.data.objects.new(amesh.name, amesh)
            aobj.color = (*ARROW_COLOR, 1.0)
            scene.collection.objects.link(aobj)
            created += [(bpy.data.objects, aobj), (bpy.data.meshes, amesh)]
            arrows.append(name)
        bev_path = out_dir / "render_bev.png"
        t_bev = _render_to(scene, bev_path)
    finally:
        bpy.data.scenes.remove(scene)
        for coll, block in created:
            try:
                coll.remove(block)
            except (ReferenceError, RuntimeError):
                pass

    result = {
        "persp": str(persp_path),
        "bev": str(bev_path),
        "engine": engine,
        "samples": int(samples),
        "resolution": resolution,
        "bev_ortho_scale_m": scale,
        "bev_metres_per_pixel": scale / resolution,
        "bev_center_xy": [cx, cy],
        "persp_camera": {
            "location": [float(v) for v in cam_loc],
            "target": [float(v) for v in centre],
            "azimuth_deg": PERSP_AZIMUTH_DEG,
            "elevation_deg": PERSP_ELEVATION_DEG,
            "fov_deg": PERSP_FOV_DEG,
            "distance_m": float(dist),
        },
        "colors": {n: [float(c) for c in rgb] for n, rgb in sorted(colors.items())},
        "bev_arrows": arrows,
        "view_seconds": {"persp": round(t_persp, 4), "bev": round(t_bev, 4)},
        "seconds": round(time.perf_counter() - t_start, 4),
    }
    result.update(extra)
    return result
