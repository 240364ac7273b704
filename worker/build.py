"""Build an island .blend from mesh arrays (bpy; Blender 3.4 .. 5.0).

Starts from an empty factory scene, creates one mesh object per entry (triangles via
``Mesh.from_pydata``), one simple Principled material per object in the entry's colour
(also its viewport colour and ``Object.color``), custom properties from ``props``, optional
text blocks (tests use a registered text block to prove embedded scripts never run), and
saves uncompressed. Object names are kept exactly: a name Blender would change (too long
for this Blender: 63 bytes up to 4.x, 255 in 5.0; or a duplicate) raises GroupInputError.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import bpy
import numpy as np
from mathutils import Matrix

from island_tools.errors import GroupInputError

from .blend_io import blender_version, save_blend

DEFAULT_COLOR = (0.6, 0.6, 0.6, 1.0)


def material(name: str, color: Sequence[float]):
    """A simple Principled material of ``color`` (an existing one of that name is reused)."""
    mat = bpy.data.materials.get(name)
    if mat is not None:
        return mat
    mat = bpy.data.materials.new(name)
    mat.diffuse_color = tuple(color)
    if mat.node_tree is None:  # Blender < 5.0: node trees are opt-in
        mat.use_nodes = True
    bsdf = next((n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED"), None)
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = tuple(color)
    return mat


def _color(entry: Mapping) -> tuple[float, float, float, float]:
    c = entry.get("color")
    if c is None:
        return DEFAULT_COLOR
    c = [float(v) for v in c]
    if len(c) == 3:
        c.append(1.0)
    if len(c) != 4:
        raise GroupInputError(f"object '{entry.get('name')}': color must have 3 or 4 values",
                              field="color")
    return tuple(c)


def _add_object(entry: Mapping, collection):
    name = str(entry["name"])
    verts = np.asarray(entry["vertices"], dtype=np.float64).reshape(-1, 3)
    faces = np.asarray(entry["faces"], dtype=np.int64).reshape(-1, 3)
    if len(faces) and (faces.min() < 0 or faces.max() >= len(verts)):
        raise GroupInputError(f"object '{name}': face indices out of range", field="faces")
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts.tolist(), [], faces.tolist())
    mesh.validate(clean_customdata=False)
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    if obj.name != name:
        raise GroupInputError(
            f"object name '{name}' ({len(name.encode('utf-8'))} bytes) became '{obj.name}' "
            f"in Blender {blender_version()} (too long or duplicate)", field="name")
    collection.objects.link(obj)
    m = entry.get("matrix_world")
    if m is not None:
        obj.matrix_world = Matrix([[float(v) for v in row] for row in m])
    color = _color(entry)
    obj.color = color
    mesh.materials.append(material(name, color))
    for key, value in (entry.get("props") or {}).items():
        obj[str(key)] = value
    return obj


def build_island(out_blend: str | os.PathLike[str], objects: Iterable[Mapping],
                 text_blocks: Iterable[Mapping] = ()) -> dict:
    """Create the objects in an empty scene and save to ``out_blend``.

    ``objects``: ``{"name", "vertices" (n,3), "faces" (m,3), "matrix_world" 4x4,
    "color" [r,g,b,a] optional, "props" dict optional}``.
    ``text_blocks``: ``{"name", "body", "use_module": bool}``.
    """
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    collection = scene.collection
    names = []
    for entry in objects:
        names.append(_add_object(entry, collection).name)
    for tb in text_blocks:
        text = bpy.data.texts.new(str(tb["name"]))
        text.write(str(tb.get("body", "")))
        text.use_module = bool(tb.get("use_module", False))
    bpy.context.view_layer.update()
    save_blend(out_blend)
    return {"out_blend": str(out_blend), "blender_version": blender_version(),
            "objects": names}
