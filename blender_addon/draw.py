"""Forward arrows in the 3D viewport for members loaded by the iteration browser.

Each loaded unit root carries its local forward axis (``island_forward_local``, from the
group's ``forward_axes.json``) and its unit's local footprint centre
(``island_footprint_local``, from ``meshes.npz``); the arrow is drawn live from the root's
current matrix, so it turns with the unit when an artist rotates it. Only with a UI:
nothing is registered in background mode.
"""
import bpy

ARROW_M = 0.6
HEAD_M = 0.15
COLOR = (1.0, 0.55, 0.0, 1.0)
_handle = None


def _shader():
    import gpu

    for name in ("UNIFORM_COLOR", "3D_UNIFORM_COLOR"):  # 4.x+ / 3.x
        try:
            return gpu.shader.from_builtin(name)
        except (ValueError, TypeError):
            continue
    return None


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


def _draw() -> None:
    context = bpy.context
    st = getattr(context.scene, "island_refiner", None)
    if st is None or not st.show_arrows:
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
    global _handle
    if _handle is None and not bpy.app.background:
        _handle = bpy.types.SpaceView3D.draw_handler_add(_draw, (), "WINDOW", "POST_VIEW")


def unregister_handler() -> None:
    global _handle
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, "WINDOW")
        _handle = None
