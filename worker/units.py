"""Furniture units (bpy; Blender 3.4 .. 5.x): a listed object plus its whole subtree.

Scenes hold furniture the way importers and asset libraries lay it out: a glTF/FBX root with
child meshes (a bed with its mattress and pillows, an office chair whose seat is a child of
its five-star base), an Empty root, a collection instance (nested ones included), modifiers.
A relation group names *unit roots*; everything that measures or shows a member works on
its unit.

Unit of a root R
    R and every descendant of R at any depth, except descendants that are themselves unit
    roots (a coffee table parented to its sofa is its own unit), plus whatever those objects
    instance (collection instances at any nesting depth, geometry-nodes instances).

Geometry of a unit (``unit_geometry``)
    The evaluated depsgraph's object instances (modifiers, shape keys, geometry nodes and
    instancing evaluated), each attributed to the unit of the object that is (or instances)
    it; vertices carried into R's local frame (``R.matrix_world^-1 @ instance world``) and
    concatenated, triangles from ``calc_loop_triangles``. Objects whose ``hide_render`` is
    set are left out (helpers, collision proxies: they are not part of what renders);
    objects hidden only in the viewport (eye or monitor icon) are revealed for the
    evaluation and measured like visible ones, and the file keeps its hide flags. Identical
    instanced sources (six chairs instancing one collection) are evaluated once per call,
    and so are mesh objects without modifiers that share one mesh datablock (linked
    duplicates, Alt+D: their evaluated mesh is that datablock's, shape keys included).

Refusals (``refusals``), checked before anything is written, each naming the object, the
cause and the fix: not in the view layer (an excluded collection), hidden by a collection,
linked from a library, keyframed/driven transforms or rigid-body physics on the root or an
ancestor, a constraint on the root or an ancestor, a constraint or modifier of a part that
depends on an object outside the unit, a parent with non-uniform scale or shear (the root's
world matrix after a yaw could not be stored), a parent of bone/vertex type, a tilted or
degenerate root, a unit with no geometry.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import bpy
import numpy as np

from island_tools.measure.frames import degenerate

TRANSFORM_PATHS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle",
                   "scale", "delta_location", "delta_rotation_euler",
                   "delta_rotation_quaternion", "delta_scale", "matrix_world", "matrix_basis",
                   "matrix_local", "matrix_parent_inverse", "parent")
NO_GEOMETRY_TYPES = {"EMPTY", "CAMERA", "LIGHT", "LIGHT_PROBE", "LIGHTPROBE", "SPEAKER",
                     "ARMATURE", "LATTICE"}
ZERO_SCALE = "has zero scale (a degenerate world matrix): not furniture"
UPRIGHT_TOL = 1e-4          # |sin| of the angle between a root's local Z and world up
SIMILARITY_TOL = 1e-5       # relative spread of a parent frame's singular values


@dataclass
class UnitGeometry:
    """One unit's evaluated triangles in its root's local frame."""

    vertices: np.ndarray            # (n, 3) float64
    triangles: np.ndarray           # (m, 3) int32
    parts: list[dict] = field(default_factory=list)  # {"object", "instance_of", "triangles"}


def _children_map() -> dict[str, list]:
    out: dict[str, list] = {}
    for obj in bpy.data.objects:
        if obj.parent is not None:
            out.setdefault(obj.parent.name, []).append(obj)
    return out


def unit_objects(roots: Sequence[str]) -> dict[str, list]:
    """{root: [root object, descendants...]} (descendants that are roots stay their own)."""
    objs = bpy.data.objects
    root_set = set(roots)
    children = _children_map()
    out: dict[str, list] = {}
    for name in dict.fromkeys(roots):
        root = objs.get(name)
        if root is None:
            continue
        found, todo = [root], list(children.get(name, []))
        while todo:
            obj = todo.pop()
            if obj.name in root_set:
                continue
            found.append(obj)
            todo.extend(children.get(obj.name, []))
        out[name] = found
    return out


def instanced_collections(objs: Iterable) -> list:
    """Collections instanced by ``objs``, nested instances and child collections included."""
    seen: dict[str, object] = {}
    todo = [o.instance_collection for o in objs
            if o.instance_type == "COLLECTION" and o.instance_collection is not None]
    while todo:
        coll = todo.pop()
        if coll.name_full in seen:
            continue
        seen[coll.name_full] = coll
        todo.extend(coll.children)
        todo.extend(o.instance_collection for o in coll.objects
                    if o.instance_type == "COLLECTION" and o.instance_collection is not None)
    return list(seen.values())


def ancestors(obj) -> list:
    out = []
    while obj.parent is not None:
        obj = obj.parent
        out.append(obj)
    return out


def _np(m) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in m], dtype=float)


# --------------------------------------------------------------------------- refusals
def _action_paths(action) -> list[str]:
    """Animated data paths of an action: legacy fcurves (< 4.4) or layered channel bags."""
    paths: list[str] = []
    with contextlib.suppress(AttributeError, TypeError):
        paths += [fc.data_path for fc in action.fcurves]
    for layer in getattr(action, "layers", ()):
        for strip in getattr(layer, "strips", ()):
            for bag in getattr(strip, "channelbags", ()):
                paths += [fc.data_path for fc in bag.fcurves]
    return paths


def _transform_animation(obj) -> str | None:
    anim = obj.animation_data
    if anim is None:
        return None
    actions = [anim.action] if anim.action is not None else []
    for track in anim.nla_tracks:
        if not track.mute:
            actions += [s.action for s in track.strips if s.action is not None and not s.mute]
    for action in actions:
        paths = [p for p in _action_paths(action) if p.split("[")[0] in TRANSFORM_PATHS]
        if paths:
            return f"keyframed transform ({paths[0]}, action '{action.name}')"
    for drv in anim.drivers:
        if drv.data_path.split("[")[0] in TRANSFORM_PATHS and not drv.mute:
            return f"driven transform ({drv.data_path})"
    return None


def _active_constraints(obj) -> list:
    return [c for c in obj.constraints if not c.mute and c.influence > 0.0]


def _targets(con) -> list:
    out = []
    target = getattr(con, "target", None)
    if target is not None:
        out.append(target)
    for t in getattr(con, "targets", ()):  # armature constraint
        if getattr(t, "target", None) is not None:
            out.append(t.target)
    return out


def _modifier_objects(mod) -> list:
    out = []
    for prop in mod.bl_rna.properties:
        if prop.type == "POINTER" and getattr(prop, "fixed_type", None) is not None \
                and prop.fixed_type.identifier == "Object":
            value = getattr(mod, prop.identifier, None)
            if value is not None:
                out.append(value)
    return out


def _parent_frame_problem(root) -> str | None:
    parent = root.parent
    if parent is None:
        return None
    if root.parent_type != "OBJECT":
        return f"is parented to a {root.parent_type.lower()} of '{parent.name}'"
    frame = _np(parent.matrix_world) @ _np(root.matrix_parent_inverse)
    sv = np.linalg.svd(frame[:3, :3], compute_uv=False)
    if sv.min() <= 0 or not np.all(np.isfinite(sv)):
        return f"has a degenerate parent frame (parent '{parent.name}' has zero scale)"
    if (sv.max() - sv.min()) / sv.max() > SIMILARITY_TOL:
        scale = [round(float(s), 4) for s in np.linalg.norm(_np(parent.matrix_world)[:3, :3],
                                                             axis=0)]
        return (f"has a parent frame with non-uniform scale or shear (parent '{parent.name}', "
                f"scale {scale}): a yawed pose could not be stored in its local transform")
    return None


def _tilt_problem(root) -> str | None:
    linear = _np(root.matrix_world)[:3, :3]
    norms = np.linalg.norm(linear, axis=0)
    z_axis = linear[:, 2] / norms[2]
    xy_z = np.abs(linear[2, :2] / norms[:2])
    tilt = max(math.hypot(z_axis[0], z_axis[1]), float(xy_z.max()))
    if tilt > UPRIGHT_TOL:
        deg = math.degrees(math.asin(min(1.0, tilt)))
        return f"is tilted {deg:.2f} deg from upright (its local Z is not the world's up)"
    return None


def refusals(roots: Sequence[str], view_layer=None) -> list[dict]:
    """Why each unit cannot be refined as it is: ``[{"member", "object", "cause", "fix"}]``."""
    layer = view_layer or bpy.context.view_layer
    layer.update()  # objects linked since the last update are not in layer.objects before
    in_layer = {o.name for o in layer.objects}
    out: list[dict] = []

    def refuse(member: str, obj, cause: str, fix: str) -> None:
        out.append({"member": member, "object": obj.name, "cause": cause, "fix": fix})

    units = unit_objects(roots)
    for member, objs in units.items():
        root = objs[0]
        names = {o.name for o in objs}
        if root.library is not None:
            refuse(member, root, f"is linked from library '{root.library.filepath}' and "
                                 "cannot be moved", "make it local (Object > Relations > "
                                                    "Make Local) or use a library override")
        for obj in objs:
            if obj.name not in in_layer:
                refuse(member, obj, f"is not in view layer '{layer.name}' (its collection "
                                    "is excluded), so it cannot be evaluated",
                       "tick the collection's checkbox in the outliner")
        for obj in [root, *ancestors(root)]:
            who = "" if obj is root else f"(a parent of '{member}') "
            anim = _transform_animation(obj)
            if anim:
                refuse(member, obj, f"{who}has a {anim}; a refined pose would be overwritten "
                                    "on the next frame change",
                       "remove the animation or bake it and clear the keys (Object > "
                       "Animation > Clear Keyframes)")
            if getattr(obj, "rigid_body", None) is not None:
                refuse(member, obj, f"{who}has rigid-body physics, which moves it",
                       "apply the simulation (Object > Rigid Body > Apply Transformation) "
                       "and remove the rigid body")
            cons = _active_constraints(obj)
            if cons:
                refuse(member, obj, f"{who}has constraint '{cons[0].name}' ({cons[0].type}) "
                                    "that moves it",
                       "apply the visual transform and remove the constraint "
                       "(Object > Constraint > Clear Object Constraints)")
        for obj in objs[1:]:
            for con in _active_constraints(obj):
                outside = [t.name for t in _targets(con) if t.name not in names]
                if outside:
                    refuse(member, obj, f"part '{obj.name}' has constraint '{con.name}' "
                                        f"targeting '{outside[0]}' outside the unit",
                           "remove the constraint or parent the target into the unit")
        for obj in objs:
            for mod in getattr(obj, "modifiers", ()):
                if not mod.show_viewport and not mod.show_render:
                    continue
                outside = [t.name for t in _modifier_objects(mod) if t.name not in names]
                if outside:
                    refuse(member, obj, f"modifier '{mod.name}' of '{obj.name}' depends on "
                                        f"'{outside[0]}' outside the unit, so moving the unit "
                                        "would change its shape",
                           "apply the modifier, or parent that object into the unit")
        problem = _parent_frame_problem(root)
        if problem:
            refuse(member, root, problem, "apply the parent's scale/rotation (Ctrl-A), or "
                                          "unparent keeping the transform (Alt-P)")
        elif degenerate(_np(root.matrix_world)):
            refuse(member, root, ZERO_SCALE, "give it a non-zero scale (Object > Transform > "
                                             "Scale), or delete it")
            continue
        problem = None if problem else _tilt_problem(root)
        if problem:
            refuse(member, root, problem, "level it: apply its rotation (Ctrl-A > Rotation) "
                                          "so its local Z points up, or clear the tilt")
    return out


# --------------------------------------------------------------------------- geometry
@contextlib.contextmanager
def revealed(objs: Iterable) -> Iterator[None]:
    """Objects hidden in the viewport (their own eye or monitor icon, or a view-layer
    collection's eye) shown for an evaluation; every flag restored afterwards."""
    layer = bpy.context.view_layer
    in_layer = {o.name for o in layer.objects}
    saved = []
    for obj in objs:
        hidden = bool(obj.hide_get()) if obj.name in in_layer else False
        if obj.hide_viewport or hidden:
            saved.append((obj, obj.hide_viewport, hidden))
            obj.hide_viewport = False
            if hidden:
                obj.hide_set(False)
    layers, todo = [], [layer.layer_collection]
    while todo:
        lc = todo.pop()
        if lc.hide_viewport:
            layers.append(lc)
            lc.hide_viewport = False
        todo.extend(lc.children)
    try:
        yield
    finally:
        for lc in layers:
            lc.hide_viewport = True
        for obj, hide_viewport, hidden in saved:
            obj.hide_viewport = hide_viewport
            if hidden:
                obj.hide_set(True)


def _mesh_arrays(obj_eval) -> tuple[np.ndarray, np.ndarray]:
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


def _shared_mesh_key(obj) -> str | None:
    """Cache key of a mesh object whose evaluated mesh is its datablock's own (no modifier
    changes it), so every object sharing the datablock evaluates to the same arrays."""
    if obj.type != "MESH" or obj.data is None or len(obj.modifiers):
        return None
    return f"mesh:{obj.data.name_full}"


_JOB_MESHES: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []


@contextlib.contextmanager
def mesh_data_kept() -> Iterator[None]:
    """For a job that opens several files cut from one scene without editing mesh data
    (``scene_rebuild``: the scene, then each island saved from it): a mesh datablock without
    shape keys, used by objects without modifiers, is read once for the whole job - its
    evaluated mesh is its own vertices and faces, the same in every file that copied it."""
    _JOB_MESHES.append({})
    try:
        yield
    finally:
        _JOB_MESHES.pop()


def _job_key(obj) -> str | None:
    key = _shared_mesh_key(obj)
    if key is None or not _JOB_MESHES or obj.data.shape_keys is not None \
            or obj.data.library is not None:
        return None
    return key


def unit_geometry(roots: Sequence[str]) -> dict[str, UnitGeometry]:
    """Evaluated geometry of each unit in its root's local frame (module docstring)."""
    units = unit_objects(roots)
    owner = {o.name: root for root, objs in units.items() for o in objs}
    everything = [o for objs in units.values() for o in objs]
    chunks: dict[str, list] = {root: [] for root in units}
    with revealed(everything):
        layer = bpy.context.view_layer
        layer.update()
        depsgraph = bpy.context.evaluated_depsgraph_get()
        # A zero-scale root has no frame to measure in (no inverse): its unit has no
        # geometry here; ``refusals`` names it, and as context it is ignored.
        worlds = {root: _np(objs[0].evaluated_get(depsgraph).matrix_world)
                  for root, objs in units.items()}
        to_root = {root: np.linalg.inv(m) for root, m in worlds.items() if not degenerate(m)}
        cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        shared: dict[str, str | None] = {}   # root -> its own shared mesh's key
        for inst in depsgraph.object_instances:
            ob = inst.object
            if inst.is_instance:
                top = inst.parent.original
                if top.name not in owner:
                    continue
                source = ob.original
                # collection instances: the source object's evaluated geometry is the same for
                # every instance; geometry-nodes instances (source == instancer) are not cached
                key = None if source.name == top.name else f"{source.name_full}"
            else:
                top = ob.original
                if top.name not in owner:
                    continue
                source, key = top, _shared_mesh_key(top)
            if owner[top.name] not in to_root:
                continue
            if ob.type in NO_GEOMETRY_TYPES or source.hide_render:
                continue
            kept = _job_key(source) if not inst.is_instance else None
            if key is not None and key in cache:
                verts, tris = cache[key]
            elif kept is not None and kept in _JOB_MESHES[-1]:
                verts, tris = cache[kept] = _JOB_MESHES[-1][kept]
            else:
                verts, tris = _mesh_arrays(ob)
                if key is not None:
                    cache[key] = (verts, tris)
                if kept is not None:
                    _JOB_MESHES[-1][kept] = (verts, tris)
            if not len(tris):
                continue
            root = owner[top.name]
            own = top.name == root and not inst.is_instance
            if own:
                part = verts   # the root's own mesh is in the root's frame already
            else:
                m = to_root[root] @ _np(inst.matrix_world)
                part = verts @ m[:3, :3].T + m[:3, 3]
            chunks[root].append((part, tris,
                                 {"object": top.name,
                                  "instance_of": source.name if inst.is_instance else None,
                                  "triangles": int(len(tris))}))
            shared[root] = key if own and key is not None else None
    out = {}
    # A unit that is its root's own shared mesh and nothing else (96 linked-duplicate chairs)
    # gets the one pair of arrays, read-only: a scene's units cost memory per distinct mesh.
    finished: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for root, parts in chunks.items():
        key = shared.get(root) if len(parts) == 1 else None
        if key is not None and key in finished:
            out[root] = UnitGeometry(*finished[key], [p for _, _, p in parts])
            continue
        if parts:
            offsets = np.cumsum([0] + [len(v) for v, _, _ in parts[:-1]])
            # At Blender's own precision: the parts' float32 vertices carried through float64
            # matrices pick up noise (1e-16 m) that differs from chair to chair and stage to
            # stage; rounded back, the same mesh is the same array everywhere, so what is
            # derived from it (meshcache.mesh_digest keys at float32) is the same in a fresh
            # CLI and in a long-lived add-on, step host or scene run.
            verts = np.concatenate([v for v, _, _ in parts]).astype(np.float32).astype(float)
            tris = np.concatenate([t + o for (_, t, _), o in zip(parts, offsets)]).astype(
                np.int32)
        else:
            verts, tris = np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int32)
        if key is not None:
            verts.setflags(write=False)
            tris.setflags(write=False)
            finished[key] = (verts, tris)
        out[root] = UnitGeometry(verts, tris, [p for _, _, p in parts])
    return out


def geometry_refusals(geometry: Mapping[str, UnitGeometry]) -> list[dict]:
    """Units without a single triangle (an Empty with nothing under it, only helpers); a
    zero-scale root is not one of them (``refusals`` names it)."""
    objs = bpy.data.objects
    return [{"member": root, "object": root,
             "cause": f"has no geometry: its unit ({objs[root].type.lower()} and "
                      f"{max(0, len(unit_objects([root])[root]) - 1)} descendant(s)) has no "
                      "rendered triangles",
             "fix": "name the furniture's root object (the one whose children are its meshes), "
                    "or un-hide its meshes for rendering"}
            for root, g in geometry.items()
            if not len(g.triangles) and not degenerate(_np(objs[root].matrix_world))]


# --------------------------------------------------------------------------- context
def owner_boxes(all_roots: Sequence[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """World bounding box (lo, hi) of every *owner* in the view layer: a unit root for the
    objects of a unit (what it instances included), else the object itself (an instancer
    owns its instances). Evaluated bounds, rendered objects only; one depsgraph pass."""
    units = unit_objects(all_roots)
    owner = {o.name: root for root, objs in units.items() for o in objs}
    boxes: dict[str, list[np.ndarray]] = {}
    with revealed([o for objs in units.values() for o in objs]):
        bpy.context.view_layer.update()
        depsgraph = bpy.context.evaluated_depsgraph_get()
        for inst in depsgraph.object_instances:
            ob = inst.object
            top = inst.parent.original if inst.is_instance else ob.original
            source = ob.original if inst.is_instance else top
            if ob.type in NO_GEOMETRY_TYPES or source.hide_render:
                continue
            corners = np.array([tuple(c) for c in ob.bound_box], dtype=float)
            m = _np(inst.matrix_world)
            pts = corners @ m[:3, :3].T + m[:3, 3]
            boxes.setdefault(owner.get(top.name, top.name), []).append(pts)
    return {n: (np.vstack(p).min(axis=0), np.vstack(p).max(axis=0)) for n, p in boxes.items()}


def context_owners(group_roots: Sequence[str], boxes: Mapping[str, tuple[np.ndarray, np.ndarray]],
                   reach: float, above: float) -> list[str]:
    """Owners (``owner_boxes``) that are not the group's and come within ``reach`` (floor
    plane) of where the group's members are or could be - around the anchor (the first
    root) by the largest member's size - between the group's floor and ``above`` over its
    top: walls, other groups' units and bystanders a member could run into."""
    mine = [boxes[r] for r in group_roots if r in boxes]
    if not mine or group_roots[0] not in boxes:
        return []
    size = max((float(np.linalg.norm(boxes[r][1][:2] - boxes[r][0][:2]))
                for r in group_roots[1:] if r in boxes), default=0.0)
    alo, ahi = boxes[group_roots[0]]
    grown = (np.r_[alo[:2] - size, alo[2]], np.r_[ahi[:2] + size, ahi[2]])
    lo = np.min([b[0] for b in [*mine, grown]], axis=0)
    hi = np.max([b[1] for b in [*mine, grown]], axis=0)
    out = []
    for name, (blo, bhi) in boxes.items():
        if name in group_roots:
            continue
        gap = np.maximum(np.maximum(blo[:2] - hi[:2], lo[:2] - bhi[:2]), 0.0)
        if float(np.hypot(*gap)) <= reach and bhi[2] >= lo[2] and blo[2] <= hi[2] + above:
            out.append(name)
    return sorted(out)


# --------------------------------------------------------------------------- riders
RIDER_REACH_M = 0.5          # a rider's base within this over its unit's top (a book pile)


def rider_candidates(all_roots: Sequence[str], unit_scale: float) -> list[str]:
    """Top-most objects of the view layer outside the units of ``all_roots`` (and not
    holding one) whose box lies over a unit's (``island_tools.measure.riders``' footprint
    tolerance) with its base above the unit's base and at most ``RIDER_REACH_M`` over its
    top: the objects that may rest on a unit. Cheap: evaluated bounds only."""
    from island_tools.measure.riders import FOOTPRINT_TOL_M, OFF_FLOOR_M

    layer = bpy.context.view_layer
    in_layer = {o.name for o in layer.objects}
    units = unit_objects(all_roots)
    parts = {o.name for objs in units.values() for o in objs}
    holders = {a.name for r in units for a in ancestors(bpy.data.objects[r])}
    # the top-most objects outside the units: under no parent, or right under an object
    # that holds units (a scene-root Empty over the whole room)
    tops = [o.name for o in layer.objects
            if (o.parent is None or o.parent.name not in in_layer or o.parent.name in holders)
            and o.name not in parts and o.name not in holders]
    if not tops or not units:
        return []
    boxes = owner_boxes([*units, *tops])
    tol = FOOTPRINT_TOL_M / unit_scale
    out = []
    for name in tops:
        if name not in boxes:
            continue
        lo, hi = boxes[name]
        for root in units:
            if root not in boxes:
                continue
            clo, chi = boxes[root]
            if (np.all(lo[:2] >= clo[:2] - tol) and np.all(hi[:2] <= chi[:2] + tol)
                    and lo[2] >= clo[2] + OFF_FLOOR_M / unit_scale
                    and lo[2] <= chi[2] + RIDER_REACH_M / unit_scale):
                out.append(name)
                break
    return sorted(out)


def unit_riders(all_roots: Sequence[str], candidates: Sequence[str],
                geometry: Mapping[str, UnitGeometry], unit_scale: float) -> dict[str, str]:
    """``{rider: unit root}`` (``island_tools.measure.riders.find_riders``, the one rule
    ``propose`` uses too) of ``candidates`` on the units of ``all_roots``; ``geometry``
    holds both (``unit_geometry``). The units named never ride."""
    from island_tools.measure.riders import find_riders

    objs = bpy.data.objects
    bodies = {}
    for name in [*all_roots, *candidates]:
        g = geometry.get(name)
        if g is None or not len(g.triangles):
            continue
        m = _np(objs[name].matrix_world)
        bodies[name] = ((g.vertices @ m[:3, :3].T + m[:3, 3]) * unit_scale, g.triangles)
    roots = set(all_roots)
    return {r: c for r, c in find_riders(bodies, fixed=roots).items() if c in roots}


# --------------------------------------------------------------------------- proxies
RENDER_MAX_TRIANGLES = 2_500   # per unit, drawn; measurement always uses the full mesh


def render_arrays(vertices: np.ndarray, triangles: np.ndarray,
                  max_triangles: int = RENDER_MAX_TRIANGLES) -> tuple[np.ndarray, np.ndarray]:
    """The arrays a render draws for a unit: the mesh itself up to ``max_triangles``, above
    that a vertex-clustered copy (vertices snapped to a grid cell's mean, collapsed and
    repeated triangles dropped) with the cell grown until it fits. Deterministic; the
    cell starts at 1/sqrt(max_triangles) of the unit's size (1/50: a centimetre or two on
    a chair, one or two pixels of a 512 px view of its group), so the picture keeps the
    unit's shape while Workbench draws a fraction of the triangles (its shadows cost per
    drawn triangle: at 2500 a 65k-200k-triangle group renders in 1.4x the time of a
    low-poly one, at 5000 in 1.8x)."""
    v = np.asarray(vertices, dtype=float).reshape(-1, 3)
    f = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    if len(f) <= max_triangles or len(v) == 0:
        return v, f
    from island_tools.measure.meshcache import keyed_vertices, mesh_digest, remembered

    # Once per distinct mesh in this process: the same chair drawn by every render of every
    # iteration, by the masked scene render and by its five siblings.
    return remembered("render.proxy", f"{mesh_digest(v, f)}:{max_triangles}",
                      lambda: _clustered(keyed_vertices(v), f, max_triangles))


def _clustered(v: np.ndarray, f: np.ndarray,
               max_triangles: int) -> tuple[np.ndarray, np.ndarray]:
    lo = v.min(axis=0)
    extent = float((v.max(axis=0) - lo).max()) or 1.0
    cell = extent / max(8.0, np.sqrt(max_triangles))
    while True:
        q = np.floor((v - lo) / cell).astype(np.int64)       # < 2**20 cells per axis
        cells = (q[:, 0] << 40) | (q[:, 1] << 20) | q[:, 2]
        _, inverse = np.unique(cells, return_inverse=True)
        inverse = inverse.reshape(-1)
        counts = np.bincount(inverse)
        out_v = np.stack([np.bincount(inverse, weights=v[:, i]) / counts for i in range(3)],
                         axis=1)
        out_f = inverse[f]
        keep = ((out_f[:, 0] != out_f[:, 1]) & (out_f[:, 1] != out_f[:, 2])
                & (out_f[:, 0] != out_f[:, 2]))
        out_f = out_f[keep]
        if len(out_f):
            srt = np.sort(out_f, axis=1)
            if len(out_v) < (1 << 21):   # one int64 per triangle: a fast 1-D unique
                _, uniq = np.unique((srt[:, 0] << 42) | (srt[:, 1] << 21) | srt[:, 2],
                                    return_index=True)
            else:
                _, uniq = np.unique(srt, axis=0, return_index=True)
            out_f = out_f[np.sort(uniq)]
        if len(out_f) <= max_triangles or cell > extent:
            return out_v, out_f
        cell *= 1.5


def proxy_mesh(name: str, vertices: np.ndarray, triangles: np.ndarray):
    """A plain mesh datablock from arrays (``foreach_set``: fast on 200k triangles)."""
    verts = np.ascontiguousarray(vertices, dtype=np.float32).reshape(-1)
    tris = np.ascontiguousarray(triangles, dtype=np.int32).reshape(-1)
    n_tri = len(tris) // 3
    mesh = bpy.data.meshes.new(name)
    mesh.vertices.add(len(verts) // 3)
    mesh.vertices.foreach_set("co", verts)
    mesh.loops.add(len(tris))
    mesh.loops.foreach_set("vertex_index", tris)
    mesh.polygons.add(n_tri)
    mesh.polygons.foreach_set("loop_start", np.arange(0, len(tris), 3, dtype=np.int32))
    with contextlib.suppress(AttributeError, TypeError, RuntimeError):  # read-only from 4.0
        mesh.polygons.foreach_set("loop_total", np.full(n_tri, 3, dtype=np.int32))
    mesh.update(calc_edges=True)
    return mesh
