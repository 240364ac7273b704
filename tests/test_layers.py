"""The layer rules, checked statically over every module and dynamically in a subprocess."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLENDER_MODULES = {"bpy", "mathutils", "bmesh", "gpu", "bpy_extras"}
NOT_IN_BLENDER_PYTHON = {"trimesh", "PIL", "rich", "tqdm", "dask", "fcl", "yaml", "scipy"}
# island_tools modules the worker may import: stdlib + numpy only.
WORKER_SAFE = {"island_tools", "island_tools.errors", "island_tools.files",
               "island_tools.files.atomic", "island_tools.files.blendfile",
               "island_tools.files.locks", "island_tools.files.portable", "island_tools.measure",
               "island_tools.measure.frames", "island_tools.measure.meshcache",
               "island_tools.measure.riders"}


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


def _import_blocking(blocked: set[str], modules: str) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {sorted(blocked)!r}:\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"import {modules}\n"
        + "".join(f"import {m}\n" for m in sorted(WORKER_SAFE))
    )
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True)


def test_worker_safe_modules_import_without_third_party_packages() -> None:
    # Blender's Python without the packages it lacks, and - a pure tier has no bpy wheel -
    # without bpy: the launcher side and the worker-safe modules never need it.
    proc = _import_blocking(NOT_IN_BLENDER_PYTHON | BLENDER_MODULES,
                            "worker, worker.launch, worker.entry")
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.bpy
def test_the_jobs_import_in_blenders_python_without_third_party_packages() -> None:
    # Simulate Blender's Python: block every third-party package it lacks (bpy/numpy stay).
    proc = _import_blocking(NOT_IN_BLENDER_PYTHON, "worker, worker.launch, worker.jobs, "
                                                   "worker.entry")
    assert proc.returncode == 0, proc.stderr[-2000:]


def _package_map():
    """``tools/package_map.py``: the same scan the closing notes of issues 17 and 27 quote."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("package_map", REPO / "tools/package_map.py")
    assert spec is not None and spec.loader is not None
    package_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package_map)
    return package_map


def test_the_scene_director_has_no_import_circles() -> None:
    """Issue 17's map: one module per stage, nothing importing back up."""
    (lines, name, _), (fname, flines), circles = _package_map().scan(REPO / "island_tools/scene")
    assert circles == [], circles
    assert lines < 300 and flines < 600, (name, lines, fname, flines)   # no god class again


def test_the_worker_package_has_no_import_circles() -> None:
    """Issue 27: ``worker.launch`` and the warm-worker client took pieces from each other;
    the shared ones (options, errors, a binary's environment) live below both in
    ``worker/daemon_common.py``, so every arrow runs one way (same scan as issue 17's)."""
    _, _, circles = _package_map().scan(REPO / "worker")
    assert circles == [], circles


def test_the_core_has_no_import_circles() -> None:
    """Issue 27: the solver takes the phase rules from ``policy`` below it, not back from the
    adapter that calls it; every arrow between island_tools' modules runs one way."""
    _, _, circles = _package_map().scan(REPO / "island_tools")
    assert circles == [], circles


def _phase_tables(path: Path) -> list[str]:
    """Functions of ``path`` that spell the contract's phase table themselves: the iteration
    bounds 3 and 10 compared against, and the caps 1.0, 0.3 and 0.05 m."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = list(ast.walk(node))
            floats = {n.value for n in inner
                      if isinstance(n, ast.Constant) and type(n.value) is float}
            bounds = {c.value for n in inner if isinstance(n, ast.Compare)
                      for c in n.comparators if isinstance(c, ast.Constant)}
            if {1.0, 0.3, 0.05} <= floats and {3, 10} <= bounds:
                found.append(f"{path.relative_to(REPO)}::{node.name}")
    return found


def test_the_magnitude_policy_has_one_source() -> None:
    """Issue 27: one copy of the phase caps (``island_tools/policy.py``); the adapter, the
    solver, the scene's contract check and the tests' greedy agent take it from there."""
    tables = [t for d in ("island_tools", "worker", "blender_addon", "scripts", "tests")
              for path in sorted((REPO / d).rglob("*.py")) for t in _phase_tables(path)]
    assert tables == ["island_tools/policy.py::phase_for"], tables


def test_scripts_holds_the_commands_and_benchmarks_the_sections() -> None:
    """Issue 27: ``scripts/`` shows what a user runs; the bench's sections and the quality
    cases are a package of their own, and every section ``scripts/bench.py`` names is there."""
    internals = sorted(p.name for p in (REPO / "scripts").glob("_*.py")
                       if p.name.startswith(("_bench_", "_quality_")))
    assert internals == [], internals
    tree = ast.parse((REPO / "scripts/bench.py").read_text(encoding="utf-8"))
    sections = next(ast.literal_eval(node.value) for node in tree.body
                    if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", None) == "SECTIONS" for t in node.targets))
    missing = [s for s in sections if not (REPO / "scripts/benchmarks" / f"{s}.py").is_file()]
    assert sections and missing == [], missing
