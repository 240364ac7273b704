"""The self-contained extension (Blender 4.2+): the zips ``blender_addon/build.py`` builds, and
the linux-x64 one installed into the ``bpy`` module in a child Python that can import
neither the checkout nor the venv's packages - only ``bpy`` and numpy, what a stock Blender
ships - so the library and python-fcl / Pillow / PyYAML can only come from the zip.

There every operator's call runs on the fixture scene (five relation groups): islands from
relation_graph.json (target specs inferred as the scene pipeline does), Init iter_0 and
Solver Step in Blender's own Python, then Step from Viewport, Render and Geometry through
the child CLIs a window's modal operators run (``Execution: Child process``: this
interpreter again, with only this process's ``sys.path``), Merge Back; the merged file is
saved, opened again, and this test judges the files and the read-back matrices with its
own numpy. It runs under whichever ``bpy`` the test's Python has: 5.0 (Python 3.11,
``.venv``) or 5.2 (Python 3.13, ``.venv313``), each using its own cp3XX wheels of the zip.

The build itself: every zip passes Blender's own validator (``blender_ext.py validate`` of
this Python's bpy, run here), ``--help`` names the platforms built, and in a ``git clone`` of
this repository only tracked files ship (an untracked one refuses the build), a zip the
validator rejects never appears, and without a validator the build fails unless told.

Wheels and built zips are cached under ``~/.cache/island-refiner/`` (``build.cached_build``):
the first run downloads from PyPI, later runs with unchanged sources build nothing.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
SITE = Path(np.__file__).resolve().parents[1]  # the venv's site-packages
KEY = "bl_ext.user_default.island_refiner"
WANTED = {"python_fcl", "pillow", "pyyaml"}   # one wheel per Python and platform
PURE = {("filelock", "py3")}                  # one py3-none-any wheel for every zip

# Every driver that installs the zip starts so (tests/test_lts.py too): what was importable
# before, the install timed, the add-on's key.
INSTALL_PROLOGUE = r'''
import hashlib, json, math, sys, time
import bpy

args = json.loads(sys.argv[1])
out = {"timings_s": {}, "messages": {}, "version": list(bpy.app.version)}


def timed(name, fn, *a, **k):
    t0 = time.perf_counter()
    result = fn(*a, **k)
    out["timings_s"][name] = round(time.perf_counter() - t0, 3)
    assert result == {"FINISHED"}, (name, result)
    out["messages"][name] = bpy.context.scene.island_refiner.last_message
    return result


for name in ("island_tools", "fixtures", "trimesh", "fcl", "PIL", "yaml"):
    try:
        __import__(name)
        out.setdefault("before_install", []).append(name)
    except ImportError:
        pass
t0 = time.perf_counter()
assert bpy.ops.extensions.package_install_files(
    filepath=args["zip"], repo="user_default", enable_on_install=True) == {"FINISHED"}
out["timings_s"]["install"] = round(time.perf_counter() - t0, 3)
key = "bl_ext.user_default.island_refiner"
'''

DRIVER = INSTALL_PROLOGUE + r'''
assert key in bpy.context.preferences.addons, list(bpy.context.preferences.addons.keys())
prefs = bpy.context.preferences.addons[key].preferences
prefs.config_path = args["config"]
import fcl, PIL, yaml, island_tools, worker, numpy
out["origins"] = {m.__name__: m.__file__ for m in (fcl, PIL, yaml, island_tools, worker, numpy)}
for name in ("fixtures", "trimesh"):
    try:
        __import__(name)
        out.setdefault("importable", []).append(name)
    except ImportError:
        pass

bpy.ops.wm.open_mainfile(filepath=args["scene_blend"])
st = bpy.context.scene.island_refiner
st.scene_dir = args["scene_dir"]
timed("build islands (relation graph)", bpy.ops.island.rebuild_island, source="RELATION_GRAPH")
out["groups"] = [(g.name, g.status) for g in st.groups]
st.group_index = [g.name for g in st.groups].index("dining")
timed("init iter_0", bpy.ops.island.init_iter0)
assert bpy.data.filepath == args["scene_blend"]  # worker jobs ran in a child: file kept
timed("solver step", bpy.ops.island.solver_step)
# what a window's modal operators do: the child CLIs, in this interpreter with this sys.path
prefs.execution = "SUBPROCESS"
import importlib
runner = importlib.import_module(key + ".runner")
out["missing_modules"] = runner.missing_modules()
ops_mod = importlib.import_module(key + ".ops")
r = ops_mod.make_runner(bpy.context)
out["runner"] = {"in_process": r.in_process, "own_python": r.own_python,
                 "child": r.python_command()[0]}
island = bpy.data.scenes["Island dining"]
chair = next(o for o in island.objects if o.get("island_member") == "dining.chair_3")
chair.location.x += 0.05
chair.rotation_euler.z += math.radians(10.0)
island.view_layers[0].update()
timed("step from viewport", bpy.ops.island.step_from_viewport)
timed("render", bpy.ops.island.render)
timed("geometry", bpy.ops.island.member_geometry)
timed("merge back", bpy.ops.island.merge_back, scope="SELECTED")
out["scene_objects"] = sorted(o.name for o in bpy.data.scenes[args["scene_name"]].objects)
bpy.ops.wm.save_as_mainfile(filepath=args["merged"])
bpy.ops.wm.open_mainfile(filepath=args["merged"])
out["merged"] = {o.name: [list(r) for r in o.matrix_world] for o in bpy.data.objects
                 if o.name.startswith("dining.")}
print("EXTENSION RESULT " + json.dumps(out))
'''


def isolated_env(tmp: Path) -> tuple[dict[str, str], Path]:
    """Env + PYTHONPATH dir for ``python -s -S``: bpy and numpy only (a stock Blender)."""
    iso = tmp / "iso"
    iso.mkdir()
    for name in ("bpy", "numpy", "numpy.libs"):
        if (SITE / name).exists():
            (iso / name).symlink_to(SITE / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(iso), PYTHONNOUSERSITE="1",
               BLENDER_USER_RESOURCES=str(tmp / "user"), BLENDER_USER_CONFIG=str(tmp / "cfg"),
               BLENDER_USER_SCRIPTS=str(tmp / "scripts"))
    return env, iso


@pytest.fixture(scope="session")
def linux_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from blender_addon.build import cached_build

    return cached_build(["linux-x64"])[0]


def test_zip_carries_addon_library_and_wheels_for_both_pythons(linux_zip: Path) -> None:
    with zipfile.ZipFile(linux_zip) as zf:
        names = set(zf.namelist())
        manifest = tomllib.loads(zf.read("island_refiner/blender_manifest.toml").decode())
        infos = {i.filename: i for i in zf.infolist()}
    assert linux_zip.name == "island_refiner-0.1.0-linux_x64.zip"
    assert manifest["platforms"] == ["linux-x64"] and manifest["blender_version_min"] == "4.2.0"
    listed = [w.removeprefix("./") for w in manifest["wheels"]]
    assert all(f"island_refiner/{w}" in names for w in listed)
    tags = {(w.split("/")[-1].split("-")[0].lower(), w.split("-")[2]) for w in listed}
    assert tags == {(p, py) for p in WANTED for py in ("cp311", "cp313")} | PURE, tags
    assert len(listed) == len(set(listed)) == 2 * len(WANTED) + len(PURE)
    assert all("linux" in w and "x86_64" in w for w in listed if "none-any" not in w)
    assert not any("numpy" in n.lower() for n in names)  # Blender ships it
    assert all(infos[f"island_refiner/{w}"].compress_type == zipfile.ZIP_STORED for w in listed)
    for rel in ("__init__.py", "ops.py", "runner.py", "tasks.py", "sync.py",
                "lib/island_tools/iteration.py", "lib/island_tools/scene/validate.py",
                "lib/worker/entry.py", "lib/scripts/iter_step.py", "lib/scripts/_cli.py",
                "lib/DIRECTORYS.yaml"):
        assert f"island_refiner/{rel}" in names, rel
    assert "island_refiner/build.py" not in names and not any(n.endswith(".pyc") for n in names)


def test_every_platform_has_wheels_for_both_pythons() -> None:
    """All four zips (wheels and zips cached after the first build), Windows' included:
    built and listed here, never run (docs/ADDON.md "Windows and macOS")."""
    from blender_addon.build import PLATFORMS, cached_build

    zips = cached_build(list(PLATFORMS))
    arch = {"linux-x64": ("linux", "x86_64"), "macos-arm64": ("macosx", "arm64"),
            "macos-x64": ("macosx", "x86_64"), "windows-x64": ("win_amd64",)}
    assert sorted(PLATFORMS) == sorted(arch)
    for path, platform in zip(zips, PLATFORMS):
        with zipfile.ZipFile(path) as zf:
            manifest = tomllib.loads(zf.read("island_refiner/blender_manifest.toml").decode())
        assert manifest["platforms"] == [platform]
        wheels = [w.split("/")[-1] for w in manifest["wheels"]]
        assert {(w.split("-")[0].lower(), w.split("-")[2]) for w in wheels} == {
            (p, py) for p in WANTED for py in ("cp311", "cp313")} | PURE, (platform, wheels)
        assert all(all(part in w for part in arch[platform]) for w in wheels
                   if "none-any" not in w), wheels
        with zipfile.ZipFile(path) as zf:   # what the add-on needs is in every zip
            names = set(zf.namelist())
        for rel in ("__init__.py", "compat.py", "lib/island_tools/files/portable.py",
                    "lib/island_tools/files/locks.py", "lib/worker/entry.py"):
            assert f"island_refiner/{rel}" in names, (platform, rel)
        assert all(f"island_refiner/{w.removeprefix('./')}" in names
                   for w in manifest["wheels"]), platform


def test_installed_extension_runs_every_operator_on_bundled_wheels_only(
        linux_zip: Path, tmp_path: Path) -> None:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    scene = build_scene(tmp_path / "scene", resolve_blender("bpy", None))
    config = tmp_path / "DIRECTORYS.yaml"
    config.write_text("engine: workbench\nresolution: 64\nsamples: 1\n")
    env, _ = isolated_env(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    args = {"zip": str(linux_zip), "config": str(config), "scene_dir": str(scene),
            "scene_blend": str(scene / "blend/stage3-sub-planned.blend"),
            "merged": str(tmp_path / "merged.blend"), "scene_name": "Scene"}
    proc = subprocess.run([sys.executable, "-s", "-S", "-c", DRIVER, json.dumps(args)],
                          cwd=work, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    line = next((ln for ln in proc.stdout.splitlines()
                 if ln.startswith("EXTENSION RESULT ")), None)
    assert proc.returncode == 0 and line, (proc.stdout[-3000:], proc.stderr[-3000:])
    out = json.loads(line[len("EXTENSION RESULT "):])
    print("operator times (s):", out["timings_s"])

    # nothing but bpy + numpy before the install; everything else came from the zip
    assert out.get("before_install") is None and out.get("importable") is None
    py = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = tmp_path / f"user/extensions/.local/lib/{py}/site-packages"
    lib = tmp_path / "user/extensions/user_default/island_refiner/lib"
    for name in ("fcl", "PIL", "yaml"):
        assert Path(out["origins"][name]).is_relative_to(site), out["origins"]
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert installed >= {"python_fcl", "pillow", "pyyaml"}, installed
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    assert any(tag in so.name for so in (site / "fcl").glob("*.so")), list(site.iterdir())
    # nothing was asked for: no missing package, the work in this Blender's own interpreter
    assert out["missing_modules"] == []
    assert out["runner"] == {"in_process": False, "own_python": True,
                             "child": [sys.executable, "-s", "-S"]}
    for name in ("island_tools", "worker"):
        assert Path(out["origins"][name]).is_relative_to(lib), out["origins"]

    # islands: every group has a target spec; the graph's hints are in the inferred ones
    groups = dict(map(tuple, out["groups"]))
    assert groups == {g: "ready" for g in ("dining", "lounge", "office", "ring", "tv")}
    spec = {g: json.loads((scene / f"relation_groups/{g}/target_spec.json").read_text())
            for g in groups}
    graph = json.loads((scene / "inputs/relation_graph.json").read_text())
    for g in graph["groups"]:
        if "target_spec" in g:
            assert spec[g["id"]] == g["target_spec"]
        for key, value in (g.get("relation") or {}).items():
            assert spec[g["id"]][key] == value, (g["id"], key)
        assert spec[g["id"]]["member_count"] == len(g["members"])
    meta = json.loads((scene / "relation_groups/dining/metadata.json").read_text())
    assert meta["forward_axis_overrides"] == {"dining.chair_1": "-Y"}

    # the loop: iter_0 .. iter_2 complete, the artist's step moved chair_3 only
    group = scene / "relation_groups/dining"
    refiner = group / "simple_refiner"
    for n in range(3):
        for name in ("island.blend", "current_state.json", "geometry.json", "info.json",
                     "render_persp.png", "render_bev.png"):
            assert (refiner / f"iter_{n}" / name).is_file(), (n, name)
    artist = json.loads((refiner / "iter_2/transforms.json").read_text())
    assert list(artist["members"]) == ["dining.chair_3"]
    assert artist["_island_meta"]["model"] == "artist"
    assert artist["members"]["dining.chair_3"]["delta_yaw_deg"] == pytest.approx(10.0, abs=1e-3)
    info = json.loads((refiner / "iter_2/info.json").read_text())
    assert info["blender_version"].startswith("{}.{}".format(*out["version"]))
    from PIL import Image
    for view in ("persp", "bev"):
        with Image.open(group / f"renders/iter_2/render_{view}.png") as img:
            assert img.size == (64, 64)

    # merge back placed M_anchor @ canonical of iter_2 (read back from the saved file)
    state = json.loads((refiner / "iter_2/current_state.json").read_text())["poses"]
    m_anchor = np.array(meta["M_anchor_4x4"])
    for name, entry in state.items():
        merged = np.array(out["merged"][name])
        assert np.allclose(merged, m_anchor @ np.array(entry["matrix_4x4"]), atol=1e-4), name
    assert out["messages"]["merge back"].startswith("Merged dining iter_2 (loaded)")
    assert "Island dining" not in out["scene_objects"]


# ------------------------------------------------------------ Blender's validator, git, --help

PLATFORM_NAME = r"\b(?:linux|macos|windows)-(?:x64|arm64)\b"
COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
LONG_FILES_REASON = "Reads and writes island group folders and runs the worker in child processes"


def blender_validator() -> list[str]:
    """Blender's own ``blender_ext.py validate`` from this Python's bpy, with the tag list
    ``blender -c extension validate`` gives it: found here, not through build.py."""
    import importlib.util

    spec = importlib.util.find_spec("bpy")
    assert spec is not None and spec.origin, "bpy is not installed in this Python"
    bpy_dir = Path(spec.origin).parent
    scripts = sorted(bpy_dir.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    assert len(scripts) == 1, scripts
    tags = scripts[0].parents[3] / "modules/_bpy_internal/extensions/tags.py"
    assert tags.is_file(), tags
    return [sys.executable, "-I", str(scripts[0]), "validate", "--valid-tags", str(tags)]


def zip_platforms(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        with zipfile.ZipFile(path) as zf:
            out += tomllib.loads(zf.read("island_refiner/blender_manifest.toml").decode())[
                "platforms"]
    return out


def test_every_zip_passes_blenders_own_validator() -> None:
    """What ``blender -c extension validate`` and the extensions platform check."""
    import importlib.metadata

    from blender_addon.build import PLATFORMS, cached_build

    zips = cached_build(list(PLATFORMS))
    assert sorted(zip_platforms(zips)) == sorted(PLATFORMS)
    validate = blender_validator()
    for path in zips:
        proc = subprocess.run([*validate, str(path)], capture_output=True, text=True,
                              timeout=120, check=False)
        assert proc.returncode == 0 and "FATAL_ERROR" not in proc.stdout + proc.stderr, (
            path.name, proc.stdout, proc.stderr)
        with zipfile.ZipFile(path) as zf:
            info = json.loads(zf.read("island_refiner/lib/build_info.json"))
            manifest = tomllib.loads(zf.read("island_refiner/blender_manifest.toml").decode())
        assert info["validated"] is True
        assert info["validator"]["blender_version"] == importlib.metadata.version("bpy")
        assert all(len(reason) <= 64 for reason in manifest["permissions"].values())


def test_help_names_exactly_the_platforms_a_default_build_writes() -> None:
    from blender_addon.build import cached_build

    built = sorted(zip_platforms(cached_build()))
    proc = subprocess.run([sys.executable, str(REPO / "blender_addon/build.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=True)
    text = " ".join(proc.stdout.split())
    assert sorted(set(re.findall(PLATFORM_NAME, text))) == built, text
    counts = [COUNT_WORDS[w] for w in re.findall(r"\ball (\w+)\b", text) if w in COUNT_WORDS]
    assert all(n == len(built) for n in counts), (counts, built, text)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=test",
                           "-c", "user.email=test@example.invalid", *args],
                          capture_output=True, text=True, timeout=60, check=True).stdout


@pytest.fixture()
def clone(tmp_path: Path) -> Path:
    """A clone of this repository whose HEAD holds this working tree's tracked files."""
    repo = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(repo)], check=True, timeout=120)
    for rel in git(REPO, "ls-files", "-z").split("\0"):
        if rel and (REPO / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes((REPO / rel).read_bytes())
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "this working tree")
    return repo


def run_build(repo: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(repo / "blender_addon/build.py"), "--out",
                           str(out), "--platform", "linux-x64", "--python", "3.11", *flags],
                          capture_output=True, text=True, timeout=600, check=False)


def shipped(path: Path) -> tuple[set[str], dict]:
    """The repository files a zip carries (as repository paths) and its build_info.json."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        info = json.loads(zf.read("island_refiner/lib/build_info.json"))
    out = set()
    for name in names:
        rel = name.removeprefix("island_refiner/")
        if rel.startswith("wheels/") or rel in ("blender_manifest.toml", "lib/build_info.json"):
            continue
        out.add(rel.removeprefix("lib/") if rel.startswith("lib/") else f"blender_addon/{rel}")
    return out, info


def test_only_tracked_files_ship_and_an_untracked_one_refuses_the_build(
        clone: Path, tmp_path: Path) -> None:
    stray = clone / "island_tools/stray_untracked.py"
    stray.write_text("SECRET = 1\n")
    proc = run_build(clone, tmp_path / "dirty")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, (proc.stdout, proc.stderr)
    assert "island_tools/stray_untracked.py" in lines[0] and "--allow-dirty" in lines[0]
    assert not (tmp_path / "dirty").exists() or not any((tmp_path / "dirty").iterdir())

    proc = run_build(clone, tmp_path / "allowed", "--allow-dirty")
    assert proc.returncode == 0, proc.stderr
    files, info = shipped(next((tmp_path / "allowed").glob("*.zip")))
    assert info["dirty"] is True
    assert info["dirty_files"] == {"untracked": ["island_tools/stray_untracked.py"]}
    assert "island_tools/stray_untracked.py" in files

    stray.unlink()
    proc = run_build(clone, tmp_path / "clean")
    assert proc.returncode == 0, proc.stderr
    files, info = shipped(next((tmp_path / "clean").glob("*.zip")))
    tracked = {f for f in git(clone, "ls-files", "island_tools", "worker").split("\n")
               if f.endswith(".py")}
    assert {f for f in files if f.startswith(("island_tools/", "worker/"))} == tracked
    assert info["source_commit"] == git(clone, "rev-parse", "HEAD").strip()
    assert info["git"] is True and info["dirty"] is False and info["validated"] is True

    # an exported tree (no .git): the files as found, and build_info.json says so
    exported = tmp_path / "exported"
    subprocess.run(["git", "-C", str(clone), "checkout-index", "-a",
                    f"--prefix={exported}/"], check=True, timeout=60)
    proc = run_build(exported, tmp_path / "nogit")
    assert proc.returncode == 0, proc.stderr
    files, info = shipped(next((tmp_path / "nogit").glob("*.zip")))
    assert info["git"] is False and info["source_commit"] is None
    assert {f for f in files if f.startswith(("island_tools/", "worker/"))} == tracked


def test_a_zip_the_validator_rejects_never_appears(clone: Path, tmp_path: Path) -> None:
    manifest = clone / "blender_addon/blender_manifest.toml"
    text = manifest.read_text()
    old = tomllib.loads(text)["permissions"]["files"]
    manifest.write_text(text.replace(f'"{old}"', f'"{LONG_FILES_REASON}"'))
    git(clone, "commit", "--quiet", "--allow-empty", "-am", "a 76-character permissions.files")
    out = tmp_path / "out"
    proc = run_build(clone, out)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, (proc.stdout, proc.stderr)
    assert "island_refiner-0.1.0-linux_x64.zip" in lines[0]
    assert "permissions.files" in lines[0] and "blender_manifest.toml" in lines[0]
    assert not out.exists() or list(out.iterdir()) == []


def test_without_a_validator_the_build_fails_unless_told_where_or_not_to(
        clone: Path, tmp_path: Path) -> None:
    """A Python without bpy (``-S``) and only Debian's Blender 3.4 on PATH: no validator."""
    import importlib.metadata
    import shutil

    script = blender_validator()[2]
    blender, git_bin = shutil.which("blender"), shutil.which("git")
    assert blender and git_bin, "Debian's blender 3.4 and git are on PATH in CI"
    # env given explicitly: an imported bpy 5.2 sets OCIO in the C environment only, and
    # Blender 3.4 aborts on that 2.5 colour config (os.environ never held it).
    said = subprocess.run([blender, "--version"], capture_output=True, text=True, timeout=120,
                          check=True, env=dict(os.environ)).stdout.split()
    version = said[said.index("Blender") + 1]
    assert tuple(map(int, version.split(".")[:2])) < (4, 2), version
    bin_dir = tmp_path / "bin"   # PATH: only git and that blender
    bin_dir.mkdir()
    for tool in (blender, git_bin):
        (bin_dir / Path(tool).name).symlink_to(tool)
    env = {k: v for k, v in os.environ.items() if k != "ISLAND_REFINER_EXT_VALIDATOR"}
    env["PATH"] = str(bin_dir)

    def build(out: str, *flags: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-S", str(clone / "blender_addon/build.py"), "--out",
             str(tmp_path / out), "--platform", "linux-x64", "--python", "3.11", *flags],
            capture_output=True, text=True, timeout=600, check=False, env={**env, **extra})

    proc = build("none")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, (proc.stdout, proc.stderr)
    assert "no extension validator" in lines[0] and "--validator" in lines[0]
    assert "--no-validate" in lines[0] and f"Blender {version}" in lines[0]
    assert not (tmp_path / "none").exists()

    proc = build("unchecked", "--no-validate")
    assert proc.returncode == 0, proc.stderr
    info = shipped(next((tmp_path / "unchecked").glob("*.zip")))[1]
    assert info["validated"] is False and info["validator"] is None

    for out, flags, extra in (("flag", ("--validator", script), {}),
                              ("env", (), {"ISLAND_REFINER_EXT_VALIDATOR": script})):
        proc = build(out, *flags, **extra)
        assert proc.returncode == 0, proc.stderr
        info = shipped(next((tmp_path / out).glob("*.zip")))[1]
        assert info["validated"] is True
        assert info["validator"]["blender_version"] == importlib.metadata.version("bpy")
