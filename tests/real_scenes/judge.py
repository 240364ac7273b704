"""Dump what the test judges, from the input and the MERGED .blend (run in a subprocess).

``python tests/real_scenes/judge.py VARIANT_DIR...``: for each ``<dir>`` (holding
``truth.json`` and ``scene/``) opens ``scene/blend/stage3-sub-planned.blend`` ("before") and
``scene/blend/stage3-scene.blend`` ("after", if present) with scripts disabled and writes
``<dir>/judge_<phase>.json`` + ``<dir>/judge_<phase>.npz``:

* npz ``<root>|verts`` / ``<root>|tris``: the evaluated world-space triangles of every unit
  root of the relation graph (anchors and members), from ``object_instances`` with the test's
  own attribution (``bpyutil.world_triangles``; hidden objects revealed for the evaluation);
* json ``truth_world``: world matrix of each member's truth object (an object's
  ``matrix_world``, or the instance matrix of the instanced source under the member);
  ``objects``: every object's ``matrix_world``, ``matrix_basis``, parent, type, hide flags,
  instance type/collection; ``unit_scale``.

Nothing from the project is imported (no measuring code of island_tools or worker).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import bpy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bpyutil import np_mat, reveal, world_triangles  # noqa: E402


def dump(blend: Path, truth: dict, out_json: Path, out_npz: Path) -> None:
    bpy.ops.wm.open_mainfile(filepath=str(blend), load_ui=False, use_scripts=False)
    layer = bpy.context.view_layer
    layer.update()
    in_layer = {o.name for o in layer.objects}
    flags = {o.name: (bool(o.hide_get()) if o.name in in_layer else None,
                      bool(o.hide_viewport)) for o in bpy.data.objects}
    # a viewport-hidden object is not evaluated, and Blender (>= 4.1) does not store world
    # matrices in the file: reveal everything before reading matrix_world (never saved)
    reveal(list(in_layer))
    objects = {}
    for obj in bpy.data.objects:
        objects[obj.name] = {
            "type": obj.type,
            "parent": obj.parent.name if obj.parent is not None else None,
            "in_view_layer": obj.name in in_layer,
            "matrix_world": np_mat(obj.matrix_world).tolist(),
            "matrix_basis": np_mat(obj.matrix_basis).tolist(),
            "matrix_parent_inverse": np_mat(obj.matrix_parent_inverse).tolist(),
            "hide_get": flags[obj.name][0],
            "hide_viewport": flags[obj.name][1],
            "instance_type": obj.instance_type,
            "instance_collection": (obj.instance_collection.name
                                    if obj.instance_collection is not None else None),
            "modifiers": [m.type for m in getattr(obj, "modifiers", ())],
        }
    roots = [*truth["anchors"], *truth["members"]]
    static = [n for n in truth.get("static", []) if n in bpy.data.objects]
    geo = world_triangles([*roots, *static])
    arrays = {}
    for root, entry in geo.items():
        arrays[f"{root}|verts"] = entry["verts"]
        arrays[f"{root}|tris"] = entry["tris"]
    truth_world = {}
    for member, info in truth["members"].items():
        t = info["truth"]
        if t["kind"] == "object":
            truth_world[member] = objects[t["object"]]["matrix_world"]
        else:
            mats = geo[member]["instances"].get(t["source"], [])
            truth_world[member] = mats[0] if len(mats) == 1 else None
    doc = {"blend": str(blend), "objects": objects, "truth_world": truth_world,
           "unit_scale": float(bpy.context.scene.unit_settings.scale_length),
           "parts": {r: sorted(set(e["parts"])) for r, e in geo.items()},
           "instance_counts": {r: {k: len(v) for k, v in e["instances"].items()}
                               for r, e in geo.items()}}
    out_json.write_text(json.dumps(doc))
    np.savez(out_npz, **arrays)


def main(argv: list[str]) -> int:
    for arg in argv:
        vdir = Path(arg)
        truth = json.loads((vdir / "truth.json").read_text())
        for phase, rel in (("before", "stage3-sub-planned.blend"),
                           ("after", "stage3-scene.blend")):
            blend = vdir / "scene" / "blend" / rel
            if blend.is_file():
                dump(blend, truth, vdir / f"judge_{phase}.json", vdir / f"judge_{phase}.npz")
        print(f"judged {vdir.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
