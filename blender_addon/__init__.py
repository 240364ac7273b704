"""Island Refiner: the island loop as Blender operators, over the same worker and library.

Installs as a Blender extension (``blender_manifest.toml``, Blender 4.2+, the ``bpy`` 5.0
wheel) and, through ``bl_info`` below, as a legacy add-on in Blender 3.4 to 4.1, which do
not read manifests (docs/ADDON.md). Submodules are imported in ``register`` so that
``build.py`` and ``tasks.py`` run under a plain Python without ``bpy``.
"""

bl_info = {
    "name": "Island Refiner",
    "author": "island-refiner developers",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "View3D > Sidebar > Island",
    "description": "Refine furniture groups around their anchor, island by island",
    "category": "3D View",
}

_unregister = None


def register():
    global _unregister
    from . import draw, ops, panel, prefs, props

    modules = (prefs, props, ops, panel)
    classes = [cls for module in modules for cls in module.CLASSES]
    import bpy

    register_classes, unregister_classes = bpy.utils.register_classes_factory(classes)
    register_classes()
    props.register_properties()
    draw.register_handler()

    def unregister_all():
        draw.unregister_handler()
        props.unregister_properties()
        unregister_classes()

    _unregister = unregister_all


def unregister():
    global _unregister
    if _unregister is not None:
        _unregister()
        _unregister = None
