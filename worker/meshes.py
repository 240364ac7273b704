"""Export furniture units' evaluated, triangulated meshes to the mesh cache
(``island_tools.measure.meshcache``).

Per unit root (``worker.units``): the unit's evaluated geometry (the root and its subtree,
instances, modifiers applied) triangulated, vertices in the ROOT's local coordinates (before
its ``matrix_world``), the root's custom property ``forward_axis`` when it carries one (a
string such as ``"-Y"`` or a 2-list such as ``[0.0, -1.0]``) in the cache's ``props``, and
what the unit is made of (``units``: parts with their triangle counts).
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import bpy

from island_tools.errors import GroupInputError, refusal_line
from island_tools.files.atomic import sha256_file
from island_tools.measure import meshcache

from .blend_io import get_objects, opened_file_unchanged
from .units import geometry_refusals, refusals, unit_geometry

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


def collect_units(names: Sequence[str]) -> tuple[dict, dict, dict, list[dict]]:
    """(meshes, props, units, refusals) of the units rooted at ``names``; with refusals the
    first three are empty (nothing is evaluated for a scene that cannot be refined)."""
    roots = get_objects(names)
    found = refusals([o.name for o in roots])
    geometry = unit_geometry([o.name for o in roots]) if not found else {}
    found = found or geometry_refusals(geometry)
    if found:
        return {}, {}, {}, found
    meshes = {n: (g.vertices, g.triangles) for n, g in geometry.items()}
    props = {o.name: p for o in roots if (p := object_props(o))}
    units = {n: {"root_type": bpy.data.objects[n].type, "parts": g.parts,
                 "triangles": int(len(g.triangles))} for n, g in geometry.items()}
    return meshes, props, units, []


def measured_units(names: Sequence[str]) -> tuple[dict, dict, dict, list[dict]]:
    """(meshes, props, units, refusals) of the units rooted at ``names`` with the refusals
    only reported: every unit that has triangles is evaluated and kept, refused or not (for
    ``island-refine propose``, which measures a scene to say what is in it; a unit without
    triangles is refused and left out)."""
    roots = get_objects(names)
    found = refusals([o.name for o in roots])
    geometry = unit_geometry([o.name for o in roots])
    found += geometry_refusals(geometry)
    kept = {n: g for n, g in geometry.items() if len(g.triangles)}
    meshes = {n: (g.vertices, g.triangles) for n, g in kept.items()}
    props = {o.name: p for o in roots if o.name in kept and (p := object_props(o))}
    units = {n: {"root_type": bpy.data.objects[n].type, "parts": g.parts,
                 "triangles": int(len(g.triangles))} for n, g in kept.items()}
    return meshes, props, units, found


def summary(out_path: str | os.PathLike[str], meshes: dict, props: dict, units: dict) -> dict:
    return {
        "path": str(out_path),
        "objects": {n: {"vertices": int(v.shape[0]), "triangles": int(f.shape[0]),
                        "parts": len(units[n]["parts"])}
                    for n, (v, f) in meshes.items()},
        "props": props,
    }


def export_meshes(names: Sequence[str], out_path: str | os.PathLike[str]) -> dict:
    """Write the mesh cache for the units rooted at ``names`` atomically. Returns counts;
    GroupInputError (one line naming object, cause and fix) if a unit is refused.

    The cache records what it was evaluated from (``meshcache.load_source``): the SHA-256
    of the open file, when it is the file ``blend_io.open_blend`` last read and unchanged on
    disk (every caller exports right after opening; root poses set since do not change the
    units' local geometry), and the Blender version, so a later step can tell whether
    exporting that file again would give the same cache."""
    source = None
    opened = opened_file_unchanged()
    if opened is not None:   # evaluated from the file as open_blend read it
        source = {"blend_sha256": sha256_file(opened), "blender_version": bpy.app.version_string}
    meshes, props, units, found = collect_units(names)
    if found:
        raise GroupInputError(refusal_line(found), file=bpy.data.filepath or None)
    meshcache.save(out_path, meshes, props, units, source=source)
    return summary(out_path, meshes, props, units)
