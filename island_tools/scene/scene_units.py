"""Which objects of a scene are furniture units, and their evaluated geometry, through the
worker's ``scene_read`` job (``island-refine propose``)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import refusal_line
from ..iteration import RunJob
from ..measure import frames, meshcache
from ..measure.geometry import convex_hull_2d, convex_signed_distance, polygon_area
from ..measure.riders import find_riders
from .furniture import ZERO_SCALE_REASON, ZERO_SCALE_WHY, UnitInput

# --------------------------------------------------------------------------- the scene
GEOMETRY_TYPES = ("MESH", "CURVE", "SURFACE", "META", "FONT", "CURVES", "POINTCLOUD",
                  "VOLUME")
SPLIT_GAP_M = 0.05           # parts this far apart in plan are separate pieces
PIECE_MIN_HEIGHT_M = 0.25    # ... when each is at least this tall
PIECE_MIN_AREA_M2 = 0.03     # ... and covers this much floor


def _has_own_geometry(o: Mapping[str, Any]) -> bool:
    return o.get("type") in GEOMETRY_TYPES or (o.get("type") == "EMPTY"
                                               and o.get("instance_collection") is not None)


def unit_roots(objects: Mapping[str, Mapping[str, Any]],
               world_points: Mapping[str, np.ndarray]) -> list[str]:
    """The furniture unit roots of a scene (``scene_read``'s ``objects``) from its hierarchy
    and each object's own evaluated geometry (``world_points``: object name -> its points in
    world metres, for the objects that have triangles).

    A top-level object in the view layer is a root. An Empty that groups pieces standing
    apart (a room's Empty over its furniture, a set imported as one file) is no unit: each
    child is considered in its place. A child subtree standing apart in plan from its
    parent's own mesh (``SPLIT_GAP_M``; a coffee table parented to its sofa) is a unit of its
    own. Parts that touch or overlap (legs, seat, back; a mattress on its frame) stay with
    their root. Cameras, lights and other objects without geometry in their subtree are no
    units."""
    live = {n for n, o in objects.items() if o.get("in_view_layer", True)}
    children: dict[str, list[str]] = {}
    for n in sorted(live):
        parent = objects[n].get("parent")
        if parent in live:
            children.setdefault(parent, []).append(n)

    def points(n: str) -> np.ndarray:
        todo, got = [n], []
        while todo:
            x = todo.pop()
            if x in world_points:
                got.append(world_points[x])
            todo.extend(children.get(x, []))
        return np.vstack(got) if got else np.zeros((0, 3))

    def is_piece(p: np.ndarray) -> bool:
        if len(p) < 3 or float(np.ptp(p[:, 2])) < PIECE_MIN_HEIGHT_M:
            return False
        hull = convex_hull_2d(p[:, :2])
        return len(hull) >= 3 and polygon_area(hull) >= PIECE_MIN_AREA_M2

    def apart(a: np.ndarray, b: np.ndarray) -> bool:
        ha, hb = convex_hull_2d(a[:, :2]), convex_hull_2d(b[:, :2])
        if len(ha) < 3 or len(hb) < 3:
            return False
        return convex_signed_distance(ha, hb)[0] > SPLIT_GAP_M

    def split(n: str) -> list[str]:
        kids = children.get(n, [])
        if not len(points(n)):
            return []
        if not kids:
            return [n]
        kid_points = {c: points(c) for c in kids}
        own = world_points.get(n)
        if own is None:   # an Empty: a grouping node when two of its pieces stand apart
            pieces = [c for c in kids if is_piece(kid_points[c])]
            if any(apart(kid_points[a], kid_points[b])
                   for i, a in enumerate(pieces) for b in pieces[i + 1:]):
                return [r for c in kids for r in split(c)]
            return [n]
        out = [n]
        for c in kids:
            if is_piece(kid_points[c]) and apart(kid_points[c], own):
                out += split(c)
        return out

    tops = [n for n in sorted(live) if objects[n].get("parent") not in live]
    return [r for n in tops for r in split(n)]


def _world_points(meshes: Mapping[str, tuple[np.ndarray, np.ndarray]],
                  objects: Mapping[str, Mapping[str, Any]], unit_scale: float
                  ) -> dict[str, np.ndarray]:
    out = {}
    for name, (v, f) in meshes.items():
        if not len(f):
            continue
        m = np.asarray(objects[name]["matrix_world"], dtype=float)
        out[name] = (np.asarray(v, dtype=float) @ m[:3, :3].T + m[:3, 3]) * unit_scale
    return out


def _zero_scale(objects: Mapping[str, Mapping[str, Any]], live: set[str],
                roots: list[str]) -> dict[str, str]:
    """Objects with a degenerate world matrix (``frames.degenerate``: a zero scale) that
    would be units or stand outside every unit: name -> why. Collapsed to a point, line or
    plane they have no shape to propose from (issue 33: they were ``LinAlgError``). A
    collapsed part of a unit (a hidden-by-scale pillow) stays with its unit; only the
    topmost collapsed object of a chain is named."""
    flat = {n for n in live if frames.degenerate(objects[n].get("matrix_world", np.eye(4)))}
    units = set(roots)
    out: dict[str, str] = {}
    parents = {objects[n].get("parent") for n in live} if flat else set()
    for n in sorted(flat):
        parent = objects[n].get("parent")
        if parent in flat:
            continue   # its collapsed parent is named instead
        up, inside = parent, n in units
        while up in live and not inside:   # a collapsed part of a unit stays with it
            inside = up in units
            up = objects[up].get("parent")
        if n in units or (not inside and (_has_own_geometry(objects[n]) or n in parents)):
            out[n] = ZERO_SCALE_WHY
    return out


Measure = Callable[[list[str]], tuple[dict[str, tuple[np.ndarray, np.ndarray]],
                                       list[dict[str, Any]]]]


def units_of(objects: Mapping[str, Mapping[str, Any]], unit_scale: float, measure: Measure
             ) -> tuple[dict[str, UnitInput], list[dict[str, Any]]]:
    """(units, left out) of a scene given ``scene_read``'s ``objects`` and ``measure(names)
    -> (meshes, refusals)`` (the units rooted at ``names`` evaluated as ``measure_only``
    does). ``measure`` is called twice when the scene has hierarchies (each object's own
    geometry decides where units split, :func:`unit_roots`), else once. Riders (objects
    resting on a unit) are merged into their unit and left out as props
    (:func:`attach_riders`). The saved file (:func:`read_scene_units`) and the add-on's
    open file go through here alike."""
    live = {n for n, o in objects.items() if o.get("in_view_layer", True)}
    nested = any(o.get("parent") in live for n, o in objects.items() if n in live)
    if nested:
        own = sorted(n for n in live if _has_own_geometry(objects[n]))
        meshes, _ = measure(own)
        roots = unit_roots(objects, _world_points(meshes, objects, unit_scale))
    else:   # no hierarchy: every object with geometry of its own is a unit
        roots = sorted(n for n in live if _has_own_geometry(objects[n]))
    zero = _zero_scale(objects, live, roots)
    roots = [r for r in roots if r not in zero]
    meshes, refusals = measure(roots)
    left_out: list[dict[str, Any]] = [
        {"name": n, "role": None, "reason": f"{ZERO_SCALE_REASON} ({why})"}
        for n, why in sorted(zero.items())]
    refused: dict[str, list[dict[str, Any]]] = {}
    for r in refusals or []:
        refused.setdefault(r["member"], []).append(r)
    units: dict[str, UnitInput] = {}
    for name in roots:
        if name in refused:
            left_out.append({"name": name, "role": None,
                             "reason": f"refused by the worker: {refusal_line(refused[name])}"})
            continue
        if name not in meshes:
            continue
        o = objects[name]
        v, f = meshes[name]
        units[name] = UnitInput(name, np.asarray(o["matrix_world"], dtype=float), v, f,
                                o.get("parent"), tuple(o.get("collections") or ()),
                                str(o.get("type")))
    return attach_riders(units, unit_scale, left_out)


PART_OF_PIECE_SHARE = 0.5    # a rider covering this share of its unit's plan is part of it


def attach_riders(units: Mapping[str, UnitInput], unit_scale: float = 1.0,
                  left_out: list[dict[str, Any]] | None = None
                  ) -> tuple[dict[str, UnitInput], list[dict[str, Any]]]:
    """(units, left out) with every rider (``island_tools.measure.riders``: an object
    resting on a unit - a frame on a nightstand, a TV on its stand) merged into the unit it
    rests on: its triangles carried into the unit's root frame and appended (a rider
    covering ``PART_OF_PIECE_SHARE`` of the unit's plan - a mattress on its frame - before
    the small ones: ``UnitInput.own_faces`` counts the unit's own and those), its name in
    ``UnitInput.riders``, and listed as left out: role ``prop``, "rides on '<unit>'"."""
    out = dict(units)
    left = list(left_out or [])
    bodies = {}
    for name, u in units.items():
        m = np.asarray(u.world, dtype=float).reshape(4, 4)
        v = np.asarray(u.vertices, dtype=float).reshape(-1, 3)
        bodies[name] = ((v @ m[:3, :3].T + m[:3, 3]) * unit_scale,
                        np.asarray(u.faces, dtype=np.int64).reshape(-1, 3))
    riders = find_riders(bodies)
    by_unit: dict[str, list[str]] = {}
    for r, c in sorted(riders.items()):
        by_unit.setdefault(c, []).append(r)

    def area(name: str) -> float:
        v, f = bodies[name]
        hull = convex_hull_2d(v[np.unique(f), :2])
        return polygon_area(hull) if len(hull) >= 3 else 0.0

    for c, names in sorted(by_unit.items()):
        u = units[c]
        to_local = np.linalg.inv(np.asarray(u.world, dtype=float).reshape(4, 4))
        big = [r for r in names if area(r) >= PART_OF_PIECE_SHARE * area(c)]
        small = [r for r in names if r not in big]
        verts = [np.asarray(u.vertices, dtype=float).reshape(-1, 3)]
        faces = [np.asarray(u.faces, dtype=np.int64).reshape(-1, 3)]
        count = len(verts[0])
        own = len(faces[0])
        for r in [*big, *small]:
            ru = units[r]
            m = to_local @ np.asarray(ru.world, dtype=float).reshape(4, 4)
            v = np.asarray(ru.vertices, dtype=float).reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
            verts.append(v)
            faces.append(np.asarray(ru.faces, dtype=np.int64).reshape(-1, 3) + count)
            count += len(v)
            if r in big:
                own += len(faces[-1])
        out[c] = UnitInput(u.name, u.world, np.concatenate(verts), np.concatenate(faces),
                           u.parent, u.collections, u.type, tuple([*big, *small]), own)
    for r, c in sorted(riders.items()):
        out.pop(r, None)
        left.append({"name": r, "role": "prop",
                     "reason": f"rides on '{c}': part of that unit, it moves with it"})
    return out, left


def read_scene_units(blend: str, run_job: RunJob, work_dir: str
                     ) -> tuple[dict[str, UnitInput], float, list[dict[str, Any]]]:
    """(units, unit_scale, left out) of the scene file ``blend`` through the worker's
    ``scene_read`` (``measure_only``: refused units are measured too, to say why they are
    left out): :func:`units_of` over the file's objects."""
    first = run_job({"op": "scene_read", "blend": blend, "names": [], "export_meshes": None})
    objects = first["objects"]
    unit_scale = float(first.get("unit_scale") or 1.0)
    reads = [0]

    def measure(names: list[str]) -> tuple[dict, list[dict[str, Any]]]:
        reads[0] += 1
        npz = f"{work_dir}/units_{reads[0]}.npz"
        result = run_job({"op": "scene_read", "blend": blend, "names": names,
                          "export_meshes": npz, "measure_only": True})
        meshes, _ = meshcache.load(npz) if names else ({}, {})
        return meshes, list(result.get("refusals") or [])

    units, left_out = units_of(objects, unit_scale, measure)
    return units, unit_scale, left_out
