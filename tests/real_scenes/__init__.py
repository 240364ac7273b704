"""Real-scene end-to-end tests: build scenes from the real glb assets (``build.py``), refine
them with the CLI, judge the merged .blend with the test's own code (``judge.py``,
``measure.py``). Everything bpy runs in subprocesses of the project's venv Python; this
module is plain Python (the variant lists and the subprocess runners)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
_VENV_PY = REPO / ".venv" / "bin" / "python"
PYTHON = str(_VENV_PY if _VENV_PY.is_file() else Path(sys.executable))

REFINE_VARIANTS = ("gltf_hierarchy", "empty_roots", "collection_instances", "modifier_anchor",
                   "centimetres", "room_parent", "hide_viewport_root",
                   "hide_viewport_anchor", "walls_and_neighbours")
REFUSAL_VARIANTS = ("refuse_keyframed", "refuse_driven_parent", "refuse_constraint",
                    "refuse_constraint_parent", "refuse_nonuniform_parent", "refuse_shear_parent",
                    "refuse_library", "refuse_excluded", "refuse_tilted", "refuse_no_geometry",
                    "refuse_modifier_outside")
REFINE_FLAGS = ("--blender-bin", "bpy", "--resolution", "64", "--samples", "1",
                "--max-iter", "6", "--max-rounds", "2", "--quiet")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["ISLAND_REFINER_DAEMON"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_script(script: str, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    proc = subprocess.run([PYTHON, str(HERE / script), *args], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(args[:3])}... exited {proc.returncode}:\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc


def run_refine(scene_dir: Path, timeout: float = 300.0, extra: tuple[str, ...] = ()) -> dict:
    """``scripts/refine_scene.py run`` on one scene, as a user runs it (``extra``: more
    flags, e.g. ``--strict``)."""
    cmd = [PYTHON, str(REPO / "scripts" / "refine_scene.py"), "run", "--scene-dir",
           str(scene_dir), *REFINE_FLAGS, *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    return {"code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
            "seconds": time.perf_counter() - t0,
            "command": "ISLAND_REFINER_DAEMON=0 .venv/bin/python " + " ".join(
                [str(Path("scripts") / "refine_scene.py"), *cmd[2:]])}


_SPOIL_UNIT = textwrap.dedent("""
    import sys, bpy
    blend, how, name = sys.argv[1:4]
    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False, use_scripts=False)
    chair = bpy.data.objects[name]
    if how == "keyframed":
        chair.keyframe_insert("location", frame=1)
        chair.keyframe_insert("location", frame=20)
    else:   # a Copy Location constraint onto an Empty where the chair stands: it stays put
        target = bpy.data.objects.new("copy_target", None)
        bpy.context.scene.collection.objects.link(target)
        target.location = chair.matrix_world.translation
        con = chair.constraints.new("COPY_LOCATION")
        con.target = target
    bpy.ops.wm.save_mainfile(filepath=blend)
""")


def spoil_unit(blend: Path, how: str, name: str) -> None:
    """Make object ``name`` of the saved ``blend`` unrefinable as a user's file would hold
    it: ``keyframed`` (two location keys) or ``constrained`` (a Copy Location constraint onto
    an Empty where it stands, so it does not move); saved in place."""
    proc = subprocess.run([PYTHON, "-c", _SPOIL_UNIT, str(blend), how, name], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"spoil_unit {how} {name}: {proc.stderr[-3000:]}")
