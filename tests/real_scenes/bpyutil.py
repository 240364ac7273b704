"""bpy helpers shared by ``build.py`` and ``judge.py`` (the test's own code, never the
project's): unit membership by parenting, evaluated world triangles attributed to unit roots.

Run inside the project's venv Python (bpy 5.0 module); never imported by pytest itself.
"""
from __future__ import annotations

import bpy
import numpy as np


def np_mat(m) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in m], dtype=float)


def unit_objects(roots: list[str]) -> dict[str, list[str]]:
    """{root: [root, descendants at any depth]} (a descendant that is itself a root stays out)."""
    children: dict[str, list[str]] = {}
    for obj in bpy.data.objects:
        if obj.parent is not None:
            children.setdefault(obj.parent.name, []).append(obj.name)
    out: dict[str, list[str]] = {}
    for root in roots:
        found, todo = [root], list(children.get(root, []))
        while todo:
            name = todo.pop()
            if name in roots:
                continue
            found.append(name)
            todo.extend(children.get(name, []))
        out[root] = found
    return out


def reveal(names: list[str]) -> list[tuple[str, bool, bool]]:
    """Show viewport-hidden objects for an evaluation; returns what to restore."""
    layer = bpy.context.view_layer
    in_layer = {o.name for o in layer.objects}
    saved = []
    for name in names:
        obj = bpy.data.objects[name]
        hidden = bool(obj.hide_get()) if name in in_layer else False
        if hidden or obj.hide_viewport:
            saved.append((name, hidden, bool(obj.hide_viewport)))
            obj.hide_viewport = False
            if hidden:
                obj.hide_set(False)
    layer.update()
    return saved


def restore(saved: list[tuple[str, bool, bool]]) -> None:
    for name, hidden, hide_viewport in saved:
        obj = bpy.data.objects[name]
        obj.hide_viewport = hide_viewport
        if hidden:
            obj.hide_set(True)
    bpy.context.view_layer.update()


def _mesh_arrays(obj_eval) -> tuple[np.ndarray, np.ndarray]:
    mesh = obj_eval.to_mesh()
    try:
        mesh.calc_loop_triangles()
        verts = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
        mesh.vertices.foreach_get("co", verts)
        tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int64)
        mesh.loop_triangles.foreach_get("vertices", tris)
    finally:
        obj_eval.to_mesh_clear()
    return verts.reshape(-1, 3), tris.reshape(-1, 3)


def world_triangles(roots: list[str]) -> dict[str, dict]:
    """Evaluated world-space triangles of every unit, from ``object_instances``.

    A real object counts for the root whose unit holds it (parent chain); an instance counts
    for the unit of its top-level instancer (``inst.parent``). Also returns, per root, the
    world matrices of every instanced source object (for instance-frame truth objects).
    """
    units = unit_objects(roots)
    owner = {n: r for r, names in units.items() for n in names}
    saved = reveal([n for names in units.values() for n in names])
    out: dict[str, dict] = {r: {"verts": [], "tris": [], "instances": {}, "parts": []}
                            for r in roots}
    try:
        depsgraph = bpy.context.evaluated_depsgraph_get()
        for inst in depsgraph.object_instances:
            ob = inst.object
            top = inst.parent.original.name if inst.is_instance else ob.original.name
            root = owner.get(top)
            if root is None:
                continue
            if inst.is_instance:
                out[root]["instances"].setdefault(ob.original.name, []).append(
                    np_mat(inst.matrix_world).tolist())
            if ob.type not in ("MESH", "CURVE", "SURFACE", "META", "FONT"):
                continue
            verts, tris = _mesh_arrays(ob)
            if not len(tris):
                continue
            m = np_mat(inst.matrix_world)
            entry = out[root]
            base = sum(len(v) for v in entry["verts"])
            entry["verts"].append(verts @ m[:3, :3].T + m[:3, 3])
            entry["tris"].append(tris + base)
            entry["parts"].append(ob.original.name)
    finally:
        restore(saved)
    for entry in out.values():
        entry["verts"] = (np.concatenate(entry["verts"]) if entry["verts"]
                          else np.zeros((0, 3)))
        entry["tris"] = (np.concatenate(entry["tris"]) if entry["tris"]
                         else np.zeros((0, 3), dtype=np.int64))
    return out
