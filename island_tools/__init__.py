"""Pure-Python core of island-refiner (numpy, trimesh, fcl, pillow). Never imports bpy.

Modules that the Blender-side ``worker`` package may import (stdlib + numpy only):
``errors``, ``files.atomic``, ``files.blendfile``, ``files.locks``, ``measure.frames``,
``measure.meshcache``. Keep them free of trimesh/pillow/yaml.

Subpackages: ``measure`` (frames, geometry, forward axes, layouts, obstacles, the mesh
cache), ``files`` (atomic writes, strict JSON, .blend headers, locks, DIRECTORYS.yaml
without PyYAML), ``scene`` (the scene pipeline, ``island-refine``).
"""
