"""The layer rules, checked statically over every module and dynamically in a subprocess."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLENDER_MODULES = {"bpy", "mathutils", "bmesh", "gpu", "bpy_extras"}
NOT_IN_BLENDER_PYTHON = {"trimesh", "PIL", "rich", "tqdm", "dask", "fcl", "yaml", "scipy"}
# island_tools modules the worker may import: stdlib + numpy only.
WORKER_SAFE = {"island_tools", "island_tools.errors", "island_tools.atomic",
               "island_tools.blendfile", "island_tools.frames", "island_tools.meshcache",
               "island_tools.locks"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            pkg = path.parent.name
            mod = f"{pkg}.{node.module}" if node.module else pkg
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)
    return names


def test_island_tools_never_imports_blender_or_upper_layers() -> None:
    for path in (REPO / "island_tools").rglob("*.py"):
        roots = {n.split(".")[0] for n in _imports(path)}
        assert not roots & BLENDER_MODULES, f"{path} imports {roots & BLENDER_MODULES}"
        assert not roots & {"worker", "blender_addon", "scripts", "fixtures"}, path


def test_worker_imports_only_what_blender_python_has() -> None:
    for path in (REPO / "worker").rglob("*.py"):
        names = _imports(path)
        roots = {n.split(".")[0] for n in names}
        assert not roots & NOT_IN_BLENDER_PYTHON, f"{path} imports {roots & NOT_IN_BLENDER_PYTHON}"
        assert not roots & {"blender_addon", "scripts", "fixtures"}, path
        island = {n for n in names if n.startswith("island_tools")}
        modules = {n for n in island if n in WORKER_SAFE or n.rsplit(".", 1)[0] in WORKER_SAFE}
        assert island == modules, f"{path} imports non-worker-safe {island - modules}"


def test_worker_safe_modules_import_without_third_party_packages() -> None:
    # Simulate Blender's Python: block every third-party package it lacks (bpy/numpy stay).
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {sorted(NOT_IN_BLENDER_PYTHON)!r}:\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import worker, worker.launch, worker.jobs, worker.entry\n"
        + "".join(f"import {m}\n" for m in sorted(WORKER_SAFE))
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_scene_director_has_no_import_circles() -> None:
    """Issue 17's map: one module per stage, nothing importing back up
    (``tools/package_map.py`` is the same scan the closing note quotes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("package_map", REPO / "tools/package_map.py")
    assert spec is not None and spec.loader is not None
    package_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package_map)
    (lines, name, _), (fname, flines), circles = package_map.scan(REPO / "island_tools/scene")
    assert circles == [], circles
    assert lines < 300 and flines < 600, (name, lines, fname, flines)   # no god class again


def test_the_worker_package_has_no_import_circles() -> None:
    """Issue 27: ``worker.launch`` and the warm-worker client took pieces from each other;
    the shared ones (options, errors, a binary's environment) live below both in
    ``worker/daemon_common.py``, so every arrow runs one way (same scan as issue 17's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("package_map", REPO / "tools/package_map.py")
    assert spec is not None and spec.loader is not None
    package_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package_map)
    _, _, circles = package_map.scan(REPO / "worker")
    assert circles == [], circles
