"""The add-on's viewport drawing: forward arrows of loaded members, and the proposals of
*Find Groups*.

Each loaded unit root carries its local forward axis (``island_forward_local``, from the
group's ``forward_axes.json``) and its unit's local footprint centre
(``island_footprint_local``, from ``meshes.npz``); the arrow is drawn live from the root's
current matrix, so it turns with the unit when an artist rotates it.

Proposals (``Scene.island_refiner.proposals``): a line from each proposal's anchor's
footprint centre to each member's (green confident, orange uncertain, grey not accepted)
and a label at the anchor ("id 0.92" / "id ? uncertain"). :func:`proposal_segments` and
:func:`proposal_labels` are plain data (no GPU), drawn by ``POST_VIEW`` / ``POST_PIXEL``
handlers. Only with a UI: nothing is registered in background mode.
"""
import bpy

from . import compat

ARROW_M = 0.6
HEAD_M = 0.15
COLOR = (1.0, 0.55, 0.0, 1.0)
COLORS = {"confident": (0.2, 0.85, 0.3, 1.0), "uncertain": (1.0, 0.5, 0.0, 1.0),
          "rejected": (0.4, 0.4, 0.4, 0.9)}
LIFT_M = 0.05          # proposal lines run this far above the units' tops
LABEL_PX = 13
_handle = None
_labels_handle = None


def _shader():
    return compat.uniform_color_shader()


def arrow_segments(obj) -> list:
    """Line segments (pairs of world points) of one object's forward arrow, or []."""
    from mathutils import Vector

    axis = obj.get("island_forward_local")
    if axis is None or len(axis) != 2:
        return []
    corners = [Vector(c) for c in obj.bound_box]
    local_centre = Vector(((min(c.x for c in corners) + max(c.x for c in corners)) / 2,
                           (min(c.y for c in corners) + max(c.y for c in corners)) / 2,
                           max(c.z for c in corners)))
    footprint = obj.get("island_footprint_local")  # the unit's, when the root is an Empty
    if footprint is not None and len(footprint) == 2:
        local_centre.x, local_centre.y = float(footprint[0]), float(footprint[1])
    m = obj.matrix_world
    start = m @ local_centre
    direction = m.to_3x3() @ Vector((float(axis[0]), float(axis[1]), 0.0))
    direction.z = 0.0
    if direction.length < 1e-9:
        return []
    direction.normalize()
    start.z += 0.02
    tip = start + direction * ARROW_M
    side = Vector((-direction.y, direction.x, 0.0)) * HEAD_M * 0.6
    back = tip - direction * HEAD_M
    return [(start, tip), (tip, back + side), (tip, back - side)]


def _world_box(obj):
    """(lo, hi) world corners of ``obj`` with its children and instanced collection, or
    None (no geometry)."""
    from mathutils import Matrix, Vector

    points = []

    def add(o, m) -> None:
        if o.type in ("MESH", "CURVE", "SURFACE", "META", "FONT"):
            points.extend(m @ Vector(c) for c in o.bound_box)
        coll = o.instance_collection if o.instance_type == "COLLECTION" else None
        if coll is not None:
            inst = m @ Matrix.Translation(-coll.instance_offset)
            for child in coll.all_objects:
                if child.parent is None or child.parent.name not in coll.all_objects:
                    add_tree(child, inst @ child.matrix_world, inst)

    def add_tree(o, m, base) -> None:
        add(o, m)
        for c in o.children:
            add_tree(c, base @ c.matrix_world, base)

    add_tree(obj, obj.matrix_world, Matrix.Identity(4))
    if not points:
        return None
    lo = tuple(min(p[i] for p in points) for i in range(3))
    hi = tuple(max(p[i] for p in points) for i in range(3))
    return lo, hi


def footprint_point(name: str):
    """The footprint centre of the unit rooted at ``name``, just above its top; or None."""
    obj = bpy.data.objects.get(name)
    box = _world_box(obj) if obj is not None else None
    if box is None:
        return None
    lo, hi = box
    return ((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, hi[2] + LIFT_M)


def _colour(p) -> tuple:
    return COLORS["rejected" if not p.accepted else
                  "confident" if p.status == "confident" else "uncertain"]


def proposal_segments(st) -> list[dict]:
    """One segment per member of every proposal: ``{"id", "anchor", "member", "start",
    "end", "color"}`` (world points, RGBA by status; not accepted is grey)."""
    out = []
    for p in st.proposals:
        start = footprint_point(p.anchor)
        if start is None:
            continue
        for m in p.members:
            end = footprint_point(m.name)
            if end is not None:
                out.append({"id": p.name, "anchor": p.anchor, "member": m.name,
                            "start": start, "end": end, "color": _colour(p)})
    return out


def proposal_labels(st) -> list[tuple]:
    """``(world point, text, colour)`` per proposal, at its anchor: "id 0.92" or
    "id ? uncertain" (orange even before it is accepted: doubt is always marked)."""
    out = []
    for p in st.proposals:
        at = footprint_point(p.anchor)
        if at is None:
            continue
        text = f"{p.name} ? uncertain" if p.status == "uncertain" \
            else f"{p.name} {p.confidence:.2f}"
        colour = COLORS["uncertain"] if p.status == "uncertain" else _colour(p)
        out.append(((at[0], at[1], at[2] + LIFT_M), text, colour))   # doubt always shows
    return out


def _draw_proposals(st) -> None:
    segs = proposal_segments(st)
    shader = _shader() if segs else None
    if shader is None:
        return
    import gpu
    from gpu_extras.batch import batch_for_shader

    gpu.state.line_width_set(2.5)
    shader.bind()
    for colour in {s["color"] for s in segs}:
        points = [pt for s in segs if s["color"] == colour for pt in (s["start"], s["end"])]
        batch = batch_for_shader(shader, "LINES", {"pos": points})
        shader.uniform_float("color", colour)
        batch.draw(shader)
    gpu.state.line_width_set(1.0)


def _draw_labels() -> None:
    context = bpy.context
    st = getattr(context.scene, "island_refiner", None)
    if st is None or not st.show_proposals or not len(st.proposals):
        return
    import blf
    from bpy_extras.view3d_utils import location_3d_to_region_2d

    region, rv3d = context.region, context.region_data
    if region is None or rv3d is None:
        return
    compat.set_font_size(0, LABEL_PX)
    for at, text, colour in proposal_labels(st):
        xy = location_3d_to_region_2d(region, rv3d, at)
        if xy is None:
            continue
        blf.color(0, *colour)
        blf.position(0, xy[0] + 4, xy[1] + 4, 0)
        blf.draw(0, text)


def _draw() -> None:
    context = bpy.context
    st = getattr(context.scene, "island_refiner", None)
    if st is None:
        return
    if st.show_proposals and len(st.proposals):
        _draw_proposals(st)
    if not st.show_arrows:
        return
    points = []
    for obj in context.scene.objects:
        if obj.visible_get():
            for a, b in arrow_segments(obj):
                points += [a, b]
    shader = _shader() if points else None
    if shader is None:
        return
    import gpu
    from gpu_extras.batch import batch_for_shader

    batch = batch_for_shader(shader, "LINES", {"pos": [tuple(p) for p in points]})
    gpu.state.line_width_set(3.0)
    shader.bind()
    shader.uniform_float("color", COLOR)
    batch.draw(shader)
    gpu.state.line_width_set(1.0)


def register_handler() -> None:
    global _handle, _labels_handle
    if _handle is None and not bpy.app.background:
        _handle = bpy.types.SpaceView3D.draw_handler_add(_draw, (), "WINDOW", "POST_VIEW")
        _labels_handle = bpy.types.SpaceView3D.draw_handler_add(_draw_labels, (), "WINDOW",
                                                                "POST_PIXEL")


def unregister_handler() -> None:
    global _handle, _labels_handle
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, "WINDOW")
        _handle = None
    if _labels_handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_labels_handle, "WINDOW")
        _labels_handle = None
