"""Tier 3: the add-on inside a real Blender binary (Debian's 3.4 in CI), which has no
fcl/PIL/yaml and does not install wheels: installed from the built linux-x64 zip as a legacy
add-on (3.4 ignores the manifest), it first says exactly what it lacks; an island is rebuilt
from objects of the open file by the worker in 3.4 itself; with *External Python* set to the
venv's Python (no repository: the zip's own lib/ is used), Init iter_0 and Geometry are
delegated to it, and its CLI renders with this same Blender."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.blender_bin
REPO = Path(__file__).resolve().parents[1]
BLENDER_BIN = os.environ.get("BLENDER") or shutil.which("blender")

SCRIPT = r"""
import json, math, sys
import addon_utils, bmesh, bpy

args = json.loads(sys.argv[sys.argv.index("--") + 1])
if bpy.app.version >= (4, 2, 0):  # an extension
    module = "bl_ext.user_default.island_refiner"
    bpy.ops.extensions.package_install_files(filepath=args["zip"], repo="user_default",
                                             enable_on_install=True)
else:  # a legacy add-on: the zip's top-level folder holds __init__.py with bl_info
    module = "island_refiner"
    bpy.ops.preferences.addon_install(filepath=args["zip"])
    addon_utils.enable(module, default_set=True)
prefs = bpy.context.preferences.addons[module].preferences
prefs.config_path = args["config"]

bpy.ops.wm.read_homefile(use_empty=True)
def cube(name, size, loc, yaw):
    mesh = bpy.data.meshes.new(name)
    bm = bmesh.new(); bmesh.ops.create_cube(bm, size=1.0); bm.to_mesh(mesh); bm.free()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.location, obj.scale, obj.rotation_euler = loc, size, (0, 0, math.radians(yaw))
    obj.select_set(True)
    return obj
cube("chair_a", (0.45, 0.45, 0.9), (1.0, -0.6, 0.45), 20)
cube("chair_b", (0.45, 0.45, 0.9), (1.2, 0.9, 0.45), 200)
bpy.context.view_layer.objects.active = cube("table", (1.6, 0.8, 0.75), (1.0, 0.2, 0.375), 30)

st = bpy.context.scene.island_refiner
st.scene_dir, st.new_group_id = args["scene"], "G1"
assert bpy.ops.island.rebuild_island.poll()
assert bpy.ops.island.rebuild_island(source="SELECTION") == {"FINISHED"}
st.target_spec.fill(args["spec"], 2, "")
assert bpy.ops.island.save_target_spec() == {"FINISHED"}
try:  # no external Python yet: one line naming what is missing and what to do
    bpy.ops.island.init_iter0()
    raise SystemExit("a missing package was not reported")
except RuntimeError as exc:
    for word in ("lacks python-fcl", "External Python", "pip install python-fcl"):
        assert word in str(exc), exc
assert st.last_exit_code == 2
prefs.use_external, prefs.python_path = True, args["python"]
assert bpy.ops.island.init_iter0() == {"FINISHED"}
loaded = sorted(o["island_member"] for o in bpy.data.scenes["Island G1"].objects)
assert loaded == ["chair_a", "chair_b", "table"], loaded
assert bpy.ops.island.member_geometry() == {"FINISHED"}
assert len(st.members) == 2
# the verdict line comes from the one review, computed by the external Python (no fcl here)
assert st.review_verdict in ("pass", "fail", "uncertain"), st.review_line
assert st.review_line.startswith("Review: " + st.review_verdict), st.review_line
try:
    bpy.ops.island.load_iteration(iteration=5)
    raise SystemExit("an error was not reported")
except RuntimeError as exc:
    assert "iter_5 is not complete" in str(exc), exc
print("ADDON SMOKE OK", bpy.app.version_string, st.last_message)
"""


def test_addon_in_blender_binary_delegates_to_the_venv(tmp_path: Path) -> None:
    from blender_addon.build import cached_build

    zip_path = cached_build(["linux-x64"])[0]
    config = tmp_path / "DIRECTORYS.yaml"
    config.write_text("engine: workbench\nresolution: 64\nsamples: 1\n")
    spec = {"anchor_role": "long_table", "member_count": 2, "pattern": "row",
            "facing": "toward_anchor", "spacing": "tight", "clearance_m": 0.1}
    args = {"zip": str(zip_path), "python": sys.executable,
            "config": str(config), "scene": str(tmp_path / "scene"), "spec": spec}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(BLENDER_USER_SCRIPTS=str(tmp_path / "scripts"),
               BLENDER_USER_CONFIG=str(tmp_path / "config"),
               BLENDER_USER_RESOURCES=str(tmp_path / "resources"))
    proc = subprocess.run(
        [BLENDER_BIN, "--background", "--factory-startup", "--python-exit-code", "1",
         "--python-expr", SCRIPT, "--", json.dumps(args)],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, (proc.stdout[-2500:], proc.stderr[-2500:])
    assert "ADDON SMOKE OK" in proc.stdout, proc.stdout[-2500:]
    info = json.loads((tmp_path / "scene/relation_groups/G1/simple_refiner/iter_0/info.json")
                      .read_text())
    version = proc.stdout.split("ADDON SMOKE OK", 1)[1].split()[0]
    assert info["blender_version"] == version  # the worker ran in this same Blender
