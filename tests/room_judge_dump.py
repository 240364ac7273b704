"""Dump what ``tests/room_judge.py`` measures from one .blend (run in a subprocess, bpy).

``python tests/room_judge_dump.py BLEND NAMES_JSON OUT_NPZ``: opens ``BLEND`` with scripts
disabled, and for every unit root named in ``NAMES_JSON`` (a JSON list) writes the evaluated
world-space vertices and triangles (``<name>|verts``, ``<name>|tris``, the test's own
attribution: ``tests/real_scenes/bpyutil.world_triangles``) and its root's world matrix
(``<name>|matrix``). Nothing from island_tools or worker is imported.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import bpy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "real_scenes"))

from bpyutil import np_mat, reveal, world_triangles  # noqa: E402


def main(argv: list[str]) -> int:
    blend, names_json, out = argv
    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False, use_scripts=False)
    names = [n for n in json.loads(Path(names_json).read_text()) if n in bpy.data.objects]
    reveal([o.name for o in bpy.context.view_layer.objects])
    geo = world_triangles(names)
    arrays = {}
    for name in names:
        arrays[f"{name}|verts"] = geo[name]["verts"]
        arrays[f"{name}|tris"] = geo[name]["tris"]
        arrays[f"{name}|matrix"] = np_mat(bpy.data.objects[name].matrix_world)
    np.savez(out, **arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]))
