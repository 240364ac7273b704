"""Export evaluated, triangulated object meshes to the mesh cache (``island_tools.meshcache``).

Per object: the *evaluated* mesh (modifiers applied, via the depsgraph), triangulated with
``calc_loop_triangles``, vertices in object-LOCAL coordinates (before ``matrix_world``), and
the custom property ``forward_axis`` when the object carries one (a string such as ``"-Y"``
or a 2-list such as ``[0.0, -1.0]``), stored in the cache's ``props``.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import bpy
import numpy as np

from island_tools import meshcache
from island_tools.errors import GroupInputError

from .blend_io import get_objects

PROP_KEYS = ("forward_axis",)


def _prop_value(value):
    if isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "to_list"):
        return value.to_list()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    try:
        return [v for v in value]
    except TypeError:
        return str(value)


def object_props(obj) -> dict:
    out = {}
    for key in PROP_KEYS:
        if key in obj.keys():
            out[key] = _prop_value(obj[key])
    return out


def evaluated_arrays(obj, depsgraph) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (n,3) float64 local, triangles (m,3) int32) of the evaluated mesh."""
    obj_eval = obj.evaluated_get(depsgraph)
    mesh = obj_eval.to_mesh()
    try:
        mesh.calc_loop_triangles()
        verts = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        mesh.vertices.foreach_get("co", verts)
        tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
        mesh.loop_triangles.foreach_get("vertices", tris)
    finally:
        obj_eval.to_mesh_clear()
    return verts.reshape(-1, 3).astype(np.float64), tris.reshape(-1, 3)


def collect_meshes(names: Sequence[str]) -> tuple[dict, dict]:
    objs = get_objects(names)
    bad = [o.name for o in objs if o.type != "MESH"]
    if bad:
        raise GroupInputError(
            "not mesh objects: " + ", ".join(f"'{o.name}' ({o.type})" for o in objs
                                             if o.name in bad),
            file=bpy.data.filepath or None)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    meshes: dict = {}
    props: dict = {}
    for obj in objs:
        meshes[obj.name] = evaluated_arrays(obj, depsgraph)
        p = object_props(obj)
        if p:
            props[obj.name] = p
    return meshes, props


def export_meshes(names: Sequence[str], out_path: str | os.PathLike[str]) -> dict:
    """Write the mesh cache for ``names`` atomically. Returns per-object counts."""
    meshes, props = collect_meshes(names)
    meshcache.save(out_path, meshes, props)
    return {
        "path": str(out_path),
        "objects": {n: {"vertices": int(v.shape[0]), "triangles": int(f.shape[0])}
                    for n, (v, f) in meshes.items()},
        "props": props,
    }
