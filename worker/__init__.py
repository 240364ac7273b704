"""Everything that touches ``bpy``: open/save .blend files, rebuild islands, apply poses,
render the persp + BEV views, export mesh arrays.

Runs inside any Blender from 3.4 (Debian's package, its own Python with only numpy) to 5.0
(the embedded ``bpy`` wheel). Allowed imports: bpy/mathutils, numpy, the stdlib and the
stdlib+numpy modules of ``island_tools`` (errors, atomic, blendfile, frames, meshcache, locks).

Importing this package does NOT import bpy: ``worker.launch`` (backend resolution and the
subprocess runner) must be importable from plain Python. Modules that need bpy import it
themselves (``blend_io``, ``meshes``, ``render``, ``build``, ``jobs``, ``entry``).

Entry points:

* ``worker.jobs.run_job(job)`` - the single job dispatcher, shared by the in-process path
  and the subprocess path;
* ``worker.launch.resolve_blender(...)`` + ``worker.launch.run_job(job, backend)`` - pick a
  Blender (flag, DIRECTORYS.yaml, $BLENDER, embedded bpy, PATH) and run a job on it;
* ``worker/entry.py`` - the script a Blender binary runs with ``--python``.
"""
