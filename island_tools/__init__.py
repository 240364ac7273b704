"""Pure-Python core of island-refiner (numpy, trimesh, fcl, pillow). Never imports bpy.

Modules that the Blender-side ``worker`` package may import (stdlib + numpy only):
``errors``, ``atomic``, ``blendfile``, ``frames``, ``meshcache``, ``locks``. Keep them free of
trimesh/pillow/yaml.
"""
