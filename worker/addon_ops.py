"""Worker functions the Blender add-on runs on the artist's OPEN file (bpy; Blender 3.4 .. 5.0).

Unlike ``worker.jobs`` (which opens and saves .blend files and therefore runs in a separate
Blender process), nothing here replaces the open file: these functions read objects from
it, write an island from them, append an iteration into it, or move its objects.

``write_island``
    The island of one group from furniture units of the open file (``worker.units``: each
    named object with its subtree and what it instances): the anchor's rigid frame in metres
    (``frames.canonical_frame`` with the scene's unit scale) becomes the canonical frame,
    ``island.blend`` holds only the group's units (with their meshes and materials; children
    stay parented, instances stay instances) with the roots at their canonical poses and no
    parent, ``metadata.json`` the contract's fields. A unit the pipeline would refuse
    (animated, constrained, ...) is refused here with the same one line. The objects of the
    open file end where they started (roots get their parent, parent inverse and local
    channels back exactly); derived per-group caches (``meshes.npz``, ``forward_axes.json``)
    of an earlier island are removed, since they would describe other meshes.
``load_iteration``
    Appends the units of an ``iter_N/island.blend`` into a scene of their own, replacing
    what an earlier load put there. Appended roots keep their island name in the custom
    property ``island_member`` (Blender renames an object whose name is taken, e.g. by the
    original in the artist's scene), their local forward axis in ``island_forward_local`` and
    their unit's local footprint centre in ``island_footprint_local`` for the viewport
    arrows.
``set_world_poses``
    Merge back: assigns world matrices to the objects with the members' exact names.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix

from island_tools.errors import GroupInputError, WorkerError, refusal_line
from island_tools.files import atomic
from island_tools.measure import frames

from .blend_io import (
    blender_version,
    check_version,
    get_objects,
    matrix_to_list,
    scene_unit_scale,
    set_poses,
)
from .units import geometry_refusals, refusals, unit_geometry, unit_objects

TEMP_SCENE = "Island"
GROUP_CACHES = ("meshes.npz", "forward_axes.json")
PROP_MEMBER = "island_member"
PROP_GROUP = "island_group"
PROP_ITER = "island_iter"
PROP_FORWARD = "island_forward_local"
PROP_FOOTPRINT = "island_footprint_local"
# matrix_world is float32 in Blender: what was assigned reads back to ~1e-7 relative.
PLACE_TOL = 1e-5


def _depth(obj) -> int:
    depth = 0
    while obj.parent is not None:
        obj = obj.parent
        depth += 1
    return depth


def group_objects(anchor: str, members: Sequence[str]) -> list:
    """The anchor first, then the members: unit roots of the open file that can be refined
    (the scene pipeline's refusals, one line naming object, cause and fix)."""
    names = list(dict.fromkeys([anchor, *members]))
    if len(names) < 2:
        raise GroupInputError(f"group with anchor '{anchor}' has no members",
                              fix="select the members, then the anchor last (active)")
    objs = get_objects(names, what="group object")
    found = refusals(names)
    found = found or geometry_refusals(unit_geometry(names))
    if found:
        raise GroupInputError(refusal_line(found), file=bpy.data.filepath or None)
    return objs


def canonical_frame(objs: Sequence) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(M_anchor, M_inv, {name: canonical pose}) with ``objs[0]`` the anchor (metres)."""
    layer = bpy.context.view_layer
    if layer is not None:
        layer.update()
    worlds = {o.name: np.array(o.matrix_world, dtype=float) for o in objs}
    m_anchor, m_inv = frames.canonical_frame(worlds[objs[0].name], scene_unit_scale())
    return m_anchor, m_inv, {name: m_inv @ w for name, w in worlds.items()}


def _local_transform(obj) -> tuple:
    return (obj.location.copy(), obj.rotation_euler.copy(), obj.rotation_quaternion.copy(),
            tuple(obj.rotation_axis_angle), obj.scale.copy(), obj.parent,
            obj.matrix_parent_inverse.copy())


def _restore_local_transform(obj, saved: tuple) -> None:
    """Bit-exact: the stored channels, not a matrix decomposed again (float32 round-off)."""
    obj.parent = saved[5]
    obj.matrix_parent_inverse = saved[6]
    obj.location, obj.rotation_euler, obj.rotation_quaternion = saved[0], saved[1], saved[2]
    obj.rotation_axis_angle, obj.scale = saved[3], saved[4]


def _write_library(path: Path, roots: Sequence, poses: Mapping[str, np.ndarray]) -> None:
    """Write the units of ``roots`` (roots at ``poses``, unparented) into ``path`` as the only
    objects of one scene in metres; collections they instance come along as data."""
    scene = bpy.data.scenes.new(TEMP_SCENE)
    scene.unit_settings.scale_length = 1.0
    saved = {o.name: _local_transform(o) for o in roots}
    parts = [o for objs in unit_objects([r.name for r in roots]).values() for o in objs]
    try:
        for obj in parts:
            scene.collection.objects.link(obj)
        for obj in roots:
            obj.parent = None
            obj.matrix_world = Matrix([list(r) for r in poses[obj.name]])
        scene.view_layers[0].update()
        for obj in roots:
            err = float(np.abs(np.array(obj.matrix_world) - poses[obj.name]).max())
            if err > PLACE_TOL:
                raise WorkerError(f"'{obj.name}' could not be placed in the canonical frame "
                                  f"({err:.1e} off; a constraint or driver moves it?)",
                                  fix="remove its constraints/drivers, or unparent it")
        bpy.data.libraries.write(str(path), {scene}, path_remap="ABSOLUTE", compress=False)
    finally:
        for obj in roots:
            _restore_local_transform(obj, saved[obj.name])
        bpy.data.scenes.remove(scene)
        if bpy.context.view_layer is not None:
            bpy.context.view_layer.update()


def write_island(group_dir: str | os.PathLike[str], anchor: str, members: Sequence[str]) -> dict:
    """``island.blend`` + ``metadata.json`` of one group from objects of the open file."""
    root = Path(group_dir)
    objs = group_objects(anchor, members)
    m_anchor, m_inv, canonical = canonical_frame(objs)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".island.{os.getpid()}.tmp.blend"
    try:
        _write_library(tmp, objs, canonical)
        if not tmp.is_file() or tmp.stat().st_size == 0:
            raise WorkerError("Blender wrote no island file", file=str(tmp))
        for name in GROUP_CACHES:
            (root / name).unlink(missing_ok=True)
        os.replace(tmp, root / "island.blend")
    finally:
        tmp.unlink(missing_ok=True)
    names = [o.name for o in objs]
    metadata = {"anchor_id": names[0], "M_anchor_4x4": frames.to_list(m_anchor),
                "M_inv_4x4": frames.to_list(m_inv), "members": names,
                "canonical_poses": {n: frames.to_list(canonical[n]) for n in names},
                "unit_scale": scene_unit_scale(),
                "units": {r: [o.name for o in objs]
                          for r, objs in unit_objects(names).items()},
                "source": {"blend": bpy.data.filepath or None,
                           "blender_version": blender_version()}}
    atomic.write_json(root / "metadata.json", metadata)
    return {"group_dir": str(root), "island": str(root / "island.blend"), "members": names,
            "anchor_id": names[0]}


def _remove_loaded(collection, group_key: str) -> None:
    for obj in [o for o in collection.objects if o.get(PROP_GROUP) == group_key]:
        data = obj.data
        bpy.data.objects.remove(obj)
        if data is not None and data.users == 0:
            materials = [m for m in getattr(data, "materials", []) if m is not None]
            bpy.data.meshes.remove(data)
            for mat in materials:
                if mat.users == 0:
                    bpy.data.materials.remove(mat)


def load_iteration(blend: str | os.PathLike[str], members: Sequence[str], scene_name: str,
                   group_key: str, n: int,
                   forward_local: Mapping[str, Sequence[float] | None] | None = None,
                   footprint_local: Mapping[str, Sequence[float]] | None = None) -> dict:
    """Append the units of ``members`` (roots and their subtrees) of ``blend`` into the scene
    ``scene_name`` (created when missing).

    Returns ``{"scene", "objects": {member: object name in this file}}``.
    """
    path = Path(blend).resolve()
    check_version(path)
    with bpy.data.libraries.load(str(path), link=False) as (src, dst):
        missing = [m for m in members if m not in src.objects]
        if missing:
            raise GroupInputError(f"member(s) missing: {', '.join(sorted(missing))}",
                                  file=str(path), fix="rerun the iteration")
        names = list(members) + [o for o in src.objects if o not in set(members)]
        dst.objects = list(names)  # Blender replaces the list's items by the appended IDs
    appended = dict(zip(names, dst.objects))
    scene = bpy.data.scenes.get(scene_name) or bpy.data.scenes.new(scene_name)
    _remove_loaded(scene.collection, group_key)
    out = {}
    for name in members:
        obj = appended[name]
        if obj is None:
            raise WorkerError(f"Blender {blender_version()} could not append '{name}'",
                              file=str(path))
        obj[PROP_MEMBER] = name
        axis = (forward_local or {}).get(name)
        if axis is not None:
            obj[PROP_FORWARD] = [float(axis[0]), float(axis[1])]
        centre = (footprint_local or {}).get(name)
        if centre is not None:
            obj[PROP_FOOTPRINT] = [float(centre[0]), float(centre[1])]
        out[name] = obj.name
    roots = {o.name for o in appended.values() if o is not None and PROP_MEMBER in o}
    for objs in unit_objects(sorted(roots)).values():
        for obj in objs:
            scene.collection.objects.link(obj)
            obj[PROP_GROUP] = group_key
            obj[PROP_ITER] = int(n)
    # objects only instanced by the units (collection sources) stay out of the scene: the
    # instances show them, and they would otherwise appear a second time at their own place
    scene.view_layers[0].update()
    return {"scene": scene.name, "objects": out}


def loaded_poses(scene, group_key: str) -> dict[str, list[list[float]]]:
    """{island member: matrix_world} of the objects ``load_iteration`` put into ``scene``."""
    scene.view_layers[0].update()
    return {o[PROP_MEMBER]: matrix_to_list(o.matrix_world) for o in scene.collection.objects
            if o.get(PROP_GROUP) == group_key and PROP_MEMBER in o}


def set_world_poses(poses: Mapping[str, Sequence[Sequence[float]]]) -> list[str]:
    """Merge back: ``matrix_world`` of each object named in ``poses``. Returns the names."""
    set_poses(poses)
    return sorted(poses)
