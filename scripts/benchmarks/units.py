"""Section ``units``: what a furniture unit's evaluated geometry costs, low-poly and at ~200k
triangles.

A unit here is what an importer or an asset library produces: an Empty root with the chair
as a child mesh and two more children (a cushion and a pillow: the same mesh, scaled), each
evaluated through a Subdivision Surface modifier at levels 0 (low-poly, 510 triangles) and
4 (~196k triangles). Timed, in the
embedded bpy of this process (medians of ``--repeat``):

* ``evaluate``: ``worker.units.unit_geometry`` (depsgraph evaluation, ``to_mesh`` +
  ``calc_loop_triangles`` per part, vertices into the root's frame, concatenation);
* ``export``: ``worker.meshes.export_meshes`` (the above plus the refusal checks and the
  atomic ``meshes.npz`` write: once per island, at rebuild and at init_iter0);
* ``proxy``: ``worker.units.proxy_mesh`` (the render proxy built from the cached arrays:
  once per render call);
* ``front``: ``island_tools.measure.forward_axis.detect_forward_axis`` on the unit (once per group).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TITLE = "units: evaluated unit geometry, low-poly and ~200k triangles"


def _build(levels: int) -> str:
    import bpy

    from fixtures.assets import life_scale, load_asset

    bpy.ops.wm.read_factory_settings(use_empty=True)
    rel = "kenney-cco/chair.glb"
    mesh = load_asset(rel)
    data = bpy.data.meshes.new("chair")
    data.from_pydata(mesh.vertices.tolist(), [], mesh.faces.tolist())
    root = bpy.data.objects.new("unit_root", None)
    bpy.context.scene.collection.objects.link(root)
    for name, scale in (("chair", 1.0), ("cushion", 0.5), ("pillow", 0.3)):
        part = bpy.data.objects.new(name, data)
        part.scale = (life_scale(rel) * scale,) * 3
        part.parent = root
        if levels:
            mod = part.modifiers.new("subsurf", "SUBSURF")
            mod.levels = mod.render_levels = levels
        bpy.context.scene.collection.objects.link(part)
    bpy.context.view_layer.update()
    return root.name


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import bpy

    from island_tools.measure.forward_axis import detect_forward_axis
    from worker.meshes import export_meshes
    from worker.units import proxy_mesh, unit_geometry

    repeat = 1 if getattr(args, "smoke", False) else max(3, args.repeat)
    columns = ["unit", "triangles", "parts", "evaluate s", "export s", "proxy s", "front s"]
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, levels in (("low-poly", 0), ("subdivided x4", 4)):
            root = _build(levels)
            geo = unit_geometry([root])[root]
            evaluate = _median(lambda root=root: unit_geometry([root]), repeat)
            npz = Path(tmp) / f"{levels}.npz"
            export = _median(lambda root=root, npz=npz: export_meshes([root], npz), repeat)

            def proxy(geo=geo) -> None:
                bpy.data.meshes.remove(proxy_mesh("p", geo.vertices, geo.triangles))

            proxy_s = _median(proxy, repeat)
            front = _median(lambda geo=geo: detect_forward_axis(geo.vertices, geo.triangles),
                            repeat)
            rows.append([label, len(geo.triangles), len(geo.parts), round(evaluate, 4),
                         round(export, 4), round(proxy_s, 4), round(front, 4)])
            data[label] = dict(zip(columns, rows[-1]))
    return {"columns": columns, "rows": rows, "data": data,
            "notes": [f"medians of {repeat}; evaluate/export run once per island (rebuild, "
                      "init_iter0), proxy once per render call, front once per group"]}
