"""Island Refiner: the island loop as Blender operators, over the same worker and library.

Installs as a Blender extension (``blender_manifest.toml``, Blender 4.2+, the ``bpy``
module) that carries its library (``lib/``: ``island_tools``, ``worker``, the loop CLIs)
and the third-party wheels it needs, and, through ``bl_info`` below, as a legacy add-on in
Blender 3.4 to 4.1, which do not read manifests (docs/ADDON.md). Submodules are imported in
``register`` so that ``build.py`` and ``tasks.py`` run under a plain Python without ``bpy``.
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


def _lib_on_path():
    """Put the bundled ``lib/`` first on ``sys.path``; returns a function undoing it (and
    forgetting the modules imported from there, so an updated extension loads its own)."""
    import os
    import sys

    lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
    if not os.path.isdir(os.path.join(lib, "island_tools")):
        return lambda: None
    if lib not in sys.path:
        sys.path.insert(0, lib)

    def undo():
        if lib in sys.path:
            sys.path.remove(lib)
        prefix = lib + os.sep
        for name, module in list(sys.modules.items()):
            if (getattr(module, "__file__", None) or "").startswith(prefix):
                del sys.modules[name]

    return undo


def register():
    global _unregister
    undo_path = _lib_on_path()
    from . import draw, ops, panel, prefs, props, sync

    modules = (prefs, props, ops, panel)
    classes = [cls for module in modules for cls in module.CLASSES]
    import bpy

    register_classes, unregister_classes = bpy.utils.register_classes_factory(classes)
    register_classes()
    props.register_properties()
    draw.register_handler()
    sync.register()

    def unregister_all():
        sync.unregister()
        draw.unregister_handler()
        props.unregister_properties()
        unregister_classes()
        undo_path()

    _unregister = unregister_all


def unregister():
    global _unregister
    if _unregister is not None:
        _unregister()
        _unregister = None
