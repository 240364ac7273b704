"""Generate a small corpus of procedural furniture meshes with Infinigen's asset factories.

Run it with the Python of a separate Infinigen venv (infinigen==1.15.5, bpy==4.2.0; see
tools/infinigen_corpus/README.md for how to build it), from anywhere:

    /work/infinigen_venv/bin/python tools/infinigen_corpus/generate.py            # everything
    /work/infinigen_venv/bin/python tools/infinigen_corpus/generate.py --only bed --jobs 2
    /work/infinigen_venv/bin/python tools/infinigen_corpus/generate.py --manifest-only

What it produces, in assets/infinigen/ (``--out``):

* ``<category>_<factory>_s<seed>.glb``: one mesh object per asset, all modifiers and
  geometry-node instances realised, joined, cleaned (duplicate vertices merged, degenerate
  and loose geometry and far-away stray parts removed), decimated to at most
  ``--max-tris`` triangles, no materials / normals / UVs, exported with Blender's glTF
  exporter. The origin is where Infinigen leaves it (not recentred).
* ``MANIFEST.tsv``: one row per glb; triangle count and bounding box are measured on the
  glb re-imported with Blender's glTF importer; the front axis, the contact sheet it was
  checked on and the notes come from ``fronts.tsv`` beside this script (filled in by a
  person looking at the sheets made by ``render_checks.py``).

Each asset is built in its own child process (``--one``), so a crash or a hang in one
factory only loses that seed. The same seed gives the same file: every factory is seeded
from the plan below and nothing else is random.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "assets" / "infinigen"
FRONTS_TSV = HERE / "fronts.tsv"
MANIFEST_HEADER = [
    "file", "category", "factory", "seed", "triangles", "bbox_extent_blender_xyz",
    "front_axis", "checked", "notes",
]
# With --bed-cloth sim: cloth frames for BedFactory's sheets/covers (Infinigen's default
# is 50/80, about 3.5 min per bed on 2 cores); the draped shape is nearly settled by then.
BED_CLOTH_FRAMES = 20
DISSOLVE_MAX = 200_000

log = logging.getLogger("infinigen_corpus")


@dataclass(frozen=True)
class Entry:
    """One kind of asset: a category, the factory that makes it and the seeds to use."""

    category: str
    module: str
    factory: str
    seeds: tuple[int, ...]
    kwargs: Callable[[int], dict[str, Any]] = field(default=lambda seed: {})
    drawers_only: bool = False  # KitchenCabinetFactory: reject a seed that grew a door
    params: dict[str, Any] = field(default_factory=dict)  # set in factory.params after init
    timeout_s: int = 600


def _nightstand_kwargs(seed: int) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(10_000 + seed)
    dims = (rng.uniform(0.35, 0.45), rng.uniform(0.45, 0.6), rng.uniform(0.62, 0.75))
    return {"dimensions": tuple(float(x) for x in dims), "drawer_only": True}


def _dresser_kwargs(seed: int) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(20_000 + seed)
    dims = (rng.uniform(0.4, 0.5), rng.uniform(0.9, 1.3), rng.uniform(1.0, 1.35))
    return {"dimensions": tuple(float(x) for x in dims), "drawer_only": True}


SEAT = "infinigen.assets.objects.seating"
SHELF = "infinigen.assets.objects.shelves"
TABLE = "infinigen.assets.objects.tables"

PLAN: list[Entry] = [
    Entry("dining_chair", SEAT, "ChairFactory", (1, 2, 3, 4, 5)),
    Entry("office_chair", SEAT, "OfficeChairFactory", (1, 2, 4, 6, 10)),
    Entry("bar_chair", SEAT, "BarChairFactory", (1, 2, 3)),
    Entry("armchair", SEAT, "ArmChairFactory", (1, 2, 3, 4)),
    Entry("sofa", SEAT, "SofaFactory", (1, 2, 3, 4, 5)),
    Entry("bed", SEAT, "BedFactory", (1, 2, 3, 4), timeout_s=1500),
    Entry("cabinet", SHELF, "SingleCabinetFactory", (1, 2, 3, 4)),
    # drawer_only=True still gives a door to half the columns: these seeds grow drawers only
    Entry("nightstand", SHELF, "KitchenCabinetFactory", (1, 2, 4, 11),
          kwargs=_nightstand_kwargs, drawers_only=True),
    Entry("dresser", SHELF, "KitchenCabinetFactory", (1, 6, 16, 18),
          kwargs=_dresser_kwargs, drawers_only=True),
    Entry("desk", SHELF, "SimpleDeskFactory", (1, 2, 3, 4)),
    # Infinigen's TV stand is an open cubby, open at the back too (has_backboard=False):
    # with the back board its front is the open side.
    Entry("tv_stand", SHELF, "TVStandFactory", (1, 2, 3, 4), params={"has_backboard": True}),
    Entry("dining_table", TABLE, "TableDiningFactory", (1, 2, 3)),
    Entry("coffee_table", TABLE, "CoffeeTableFactory", (1, 2, 3)),
    Entry("side_table", TABLE, "SideTableFactory", (1, 2)),
    Entry("round_table", TABLE, "TableCocktailFactory", (1, 4)),  # seeds with a round top
]


def asset_name(category: str, factory: str, seed: int) -> str:
    return f"{category}_{factory}_s{seed}"


# --------------------------------------------------------------------------- child side


def _init_infinigen() -> None:
    """The minimum of generate_individual_assets.py's set-up: gin configs, then Blender."""
    from infinigen.core import init

    init.apply_gin_configs(
        ["infinigen_examples/configs_indoor", "infinigen_examples/configs_nature"],
        skip_unknown=True,
    )
    init.configure_blender()


def _fold_over(cloth: Any, support: Any, gap: float = 0.008) -> None:
    """A deterministic stand-in for draping ``cloth`` over ``support``: every part of the
    cloth beyond the support's footprint (in X or Y) is folded straight down over that edge,
    no lower than the support's bottom."""
    import numpy as np

    mw = np.array(support.matrix_world)
    sco = np.array([v.co[:] for v in support.data.vertices]) @ mw[:3, :3].T + mw[:3, 3]
    lo, hi = sco.min(0), sco.max(0)
    cw = np.array(cloth.matrix_world)
    co = np.array([v.co[:] for v in cloth.data.vertices]) @ cw[:3, :3].T + cw[:3, 3]
    drop = np.zeros(len(co))
    for axis in (0, 1):
        over = co[:, axis] - (hi[axis] + gap)
        under = (lo[axis] - gap) - co[:, axis]
        drop += np.clip(over, 0, None) + np.clip(under, 0, None)
        co[:, axis] = np.clip(co[:, axis], lo[axis] - gap, hi[axis] + gap)
    co[:, 2] = np.maximum(co[:, 2] - drop, lo[2])
    local = (co - cw[:3, 3]) @ np.linalg.inv(cw[:3, :3]).T
    for v, c in zip(cloth.data.vertices, local, strict=True):
        v.co = c
    cloth.data.update()


def _patch_cloth(mode: str, frames: int) -> None:
    """BedFactory's sheets and cover are cloth-simulated against the mattress, which takes
    minutes and is not reproducible (Blender's threaded collision solver). ``fold``: fold
    them over the mattress edges instead (deterministic). ``sim``: Blender's cloth, capped at
    ``frames`` frames. Collider-free sims (pillows, the mattress cover) run as they are."""
    from infinigen.assets.scatters import clothes

    original = clothes.cloth_sim

    def patched(obj: Any, colliders: Any = None, end_frame: int = 50, **kw: Any) -> Any:
        if colliders and mode == "fold":
            support = colliders[0] if isinstance(colliders, list) else colliders
            return _fold_over(obj, support)
        return original(obj, colliders, end_frame=min(end_frame, frames), **kw)

    clothes.cloth_sim = patched


def _make_factory(entry: Entry, seed: int) -> Any:
    import importlib

    cls = getattr(importlib.import_module(entry.module), entry.factory)
    if entry.drawers_only:
        base = cls

        class Recording(base):  # type: ignore[misc, valid-type]
            """Remembers which attachment (drawer/door/none) each cabinet column got."""

            attach: list[tuple[str, int]] = []

            def create_cabinet_components(self, i: int, drawer_only: bool = False) -> Any:
                comps = super().create_cabinet_components(i, drawer_only=drawer_only)
                self.attach = [(c[1], len(c[2]) if c[1] == "drawer" else 0) for c in comps]
                return comps

        cls = Recording
    fac = cls(seed, **entry.kwargs(seed))
    if entry.params:
        fac.params.update(entry.params)
    return fac


@dataclass
class Polys:
    """A polygon soup: vertex positions, each face's vertex count, the faces' vertex ids."""

    co: Any  # (n, 3) float64
    sizes: Any  # (f,) int64
    verts: Any  # (sizes.sum(),) int64

    def triangles(self) -> int:
        return int((self.sizes - 2).sum())

    def face_of_corner(self) -> Any:
        import numpy as np

        return np.repeat(np.arange(len(self.sizes)), self.sizes)


def _evaluated_polygons(objs: list[Any]) -> tuple[Polys, list[str]]:
    """World-space polygons of ``objs`` as evaluated (modifiers applied, geometry-node
    instances realised), read from the depsgraph's instance list. Polygons, not loop
    triangles: Blender's tessellation order is not the same from run to run."""
    import bpy
    import numpy as np

    wanted = {o.name for o in objs}
    dg = bpy.context.evaluated_depsgraph_get()
    cos: list[Any] = []
    sizes: list[Any] = []
    corners: list[Any] = []
    used: list[str] = []
    offset = 0
    for inst in dg.object_instances:
        owner = inst.parent if inst.is_instance else inst.object
        if owner is None or owner.original.name not in wanted:
            continue
        ob = inst.object
        if ob.type not in {"MESH", "CURVE", "SURFACE", "FONT", "META"}:
            continue
        mesh = ob.to_mesh()
        if mesh is None:
            continue
        nv, nf, nl = len(mesh.vertices), len(mesh.polygons), len(mesh.loops)
        if nv and nf:
            co = np.empty(nv * 3, dtype=np.float64)
            mesh.vertices.foreach_get("co", co)
            mw = np.array(inst.matrix_world, dtype=np.float64)
            cos.append(co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3])
            size = np.empty(nf, dtype=np.int64)
            mesh.polygons.foreach_get("loop_total", size)
            start = np.empty(nf, dtype=np.int64)
            mesh.polygons.foreach_get("loop_start", start)
            loop_v = np.empty(nl, dtype=np.int64)
            mesh.loops.foreach_get("vertex_index", loop_v)
            order = np.concatenate([np.arange(s, s + n) for s, n in zip(start, size, strict=True)])
            sizes.append(size)
            corners.append(loop_v[order] + offset)
            offset += nv
            used.append(f"{ob.original.name}{'*' if inst.is_instance else ''}:{nf}")
        ob.to_mesh_clear()
    if not cos:
        raise RuntimeError("the asset has no evaluated polygons")
    polys = Polys(np.concatenate(cos), np.concatenate(sizes), np.concatenate(corners))
    return _canonical(polys), used


def _canonical(p: Polys) -> Polys:
    """A form that does not depend on element order: vertices rounded to 1 micrometre,
    exact duplicates merged and sorted, faces sorted, each starting at its lowest vertex id
    (winding kept). Some geometry nodes (ChairFactory's, BedFrameFactory's) emit the same
    geometry in a different vertex/face order from run to run."""
    import numpy as np

    co, inverse = np.unique(np.round(p.co, 6), axis=0, return_inverse=True)
    p = Polys(co, p.sizes, inverse.reshape(-1)[p.verts])
    first = np.concatenate([[0], np.cumsum(p.sizes)[:-1]])
    sizes_out, verts_out = [], []
    for k in np.unique(p.sizes):
        rows = p.verts[first[p.sizes == k][:, None] + np.arange(k)]
        shift = rows.argmin(axis=1)
        rows = rows[np.arange(len(rows))[:, None], (np.arange(k) + shift[:, None]) % k]
        rows = rows[np.lexsort(rows.T[::-1])]
        sizes_out.append(np.full(len(rows), k))
        verts_out.append(rows.ravel())
    return Polys(p.co, np.concatenate(sizes_out), np.concatenate(verts_out))


def _drop_stray_parts(p: Polys) -> tuple[Polys, int]:
    """Remove connected parts that reach far outside the bulk of the asset (a few Infinigen
    seeds leave slivers kilometres away, e.g. BedFrameFactory's leg decorations)."""
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(p.co)
    face = p.face_of_corner()
    first = np.concatenate([[0], np.cumsum(p.sizes)[:-1]])
    graph = coo_matrix((np.ones(len(p.verts)), (p.verts, p.verts[first[face]])), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    lo, hi = np.percentile(p.co, 2, axis=0), np.percentile(p.co, 98, axis=0)
    margin = np.max(hi - lo) + 1.0  # metres: real parts never reach this far out
    outside = np.any((p.co < lo - margin) | (p.co > hi + margin), axis=1)
    keep_v = ~np.isin(label, np.unique(label[outside]))
    keep_f = np.logical_and.reduceat(keep_v[p.verts], first)
    kept = Polys(p.co, p.sizes[keep_f], p.verts[keep_f[face]])
    return kept, p.triangles() - kept.triangles()


def _count_tris(obj: Any) -> int:
    return sum(len(p.vertices) - 2 for p in obj.data.polygons)


def _build_mesh(name: str, p: Polys) -> Any:
    """A clean single-object mesh: merged duplicates, no degenerate or loose geometry."""
    import bmesh
    import bpy
    import numpy as np

    used, verts = np.unique(p.verts, return_inverse=True)
    bounds = np.cumsum(p.sizes)[:-1]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(p.co[used].tolist(), [],
                     [f.tolist() for f in np.split(verts, bounds)])
    bm = bmesh.new()
    bm.from_mesh(mesh)
    bmesh.ops.remove_doubles(bm, verts=bm.verts, dist=1e-5)
    bmesh.ops.dissolve_degenerate(bm, edges=bm.edges, dist=1e-6)
    bmesh.ops.delete(bm, geom=[f for f in bm.faces if f.calc_area() < 1e-12], context="FACES")
    bmesh.ops.delete(bm, geom=[e for e in bm.edges if not e.link_faces], context="EDGES")
    bmesh.ops.delete(bm, geom=[v for v in bm.verts if not v.link_faces], context="VERTS")
    # Merging can fuse cloth layers or touching parts along edges shared by 3+ faces;
    # Decimate (collapse) stalls on those, so cut them apart again.
    bmesh.ops.split_edges(bm, edges=[e for e in bm.edges if len(e.link_faces) > 2])
    bm.to_mesh(mesh)
    bm.free()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def _apply_modifier(obj: Any, kind: str, **props: Any) -> None:
    import bpy

    mod = obj.modifiers.new(kind.lower(), kind)
    for key, value in props.items():
        setattr(mod, key, value)
    with bpy.context.temp_override(object=obj, active_object=obj, selected_objects=[obj]):
        bpy.ops.object.modifier_apply(modifier=mod.name)


def _decimate(obj: Any, max_tris: int) -> None:
    """Planar dissolve (shape-preserving), triangulate, then collapse until <= max_tris.
    Planar dissolve takes many minutes on the largest meshes (beds, ~600k triangles), so
    those are collapsed to DISSOLVE_MAX first."""
    n = _count_tris(obj)
    if n > DISSOLVE_MAX:
        _apply_modifier(obj, "DECIMATE", decimate_type="COLLAPSE", ratio=DISSOLVE_MAX / n,
                        use_collapse_triangulate=True)
    if _count_tris(obj) > max_tris:
        _apply_modifier(obj, "DECIMATE", decimate_type="DISSOLVE",
                        angle_limit=math.radians(1.0), use_dissolve_boundaries=False)
    _apply_modifier(obj, "TRIANGULATE")
    counts = [_count_tris(obj)]
    for _ in range(8):
        if counts[-1] <= max_tris:
            return
        _apply_modifier(obj, "DECIMATE", decimate_type="COLLAPSE",
                        ratio=max(0.001, 0.97 * max_tris / counts[-1]),
                        use_collapse_triangulate=True)
        counts.append(_count_tris(obj))
    raise RuntimeError(f"could not decimate below {max_tris} triangles: {counts}")


def _weld(obj: Any) -> None:
    """Share vertices again where _build_mesh cut non-manifold edges apart (smaller glb)."""
    import bmesh

    bm = bmesh.new()
    bm.from_mesh(obj.data)
    bmesh.ops.remove_doubles(bm, verts=bm.verts, dist=1e-6)
    bmesh.ops.delete(bm, geom=[v for v in bm.verts if not v.link_faces], context="VERTS")
    bm.to_mesh(obj.data)
    bm.free()


def measure_glb(path: Path) -> dict[str, Any]:
    """Re-import a glb into an empty Blender scene; its triangles and Blender-frame bbox."""
    import bpy
    import numpy as np

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=str(path))
    meshes = [o for o in bpy.context.scene.objects if o.type == "MESH"]
    cos, n_tri = [], 0
    for o in meshes:
        o.data.calc_loop_triangles()
        n_tri += len(o.data.loop_triangles)
        co = np.empty(len(o.data.vertices) * 3)
        o.data.vertices.foreach_get("co", co)
        mw = np.array(o.matrix_world)
        cos.append(co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3])
    co = np.concatenate(cos)
    return {"objects": len(meshes), "triangles": n_tri,
            "bbox_min": co.min(0).tolist(), "bbox_max": co.max(0).tolist()}


def build_one(entry: Entry, seed: int, out_dir: Path, max_tris: int,
              bed_cloth: str = "fold") -> dict[str, Any]:
    """Build, clean, decimate and export one asset; returns what was measured."""
    import bpy
    import numpy as np
    from infinigen.core.util import blender as butil
    from infinigen.core.util.math import FixedSeed

    _init_infinigen()
    if entry.factory == "BedFactory":
        _patch_cloth(bed_cloth, BED_CLOTH_FRAMES)
    butil.clear_scene()
    t0 = time.time()
    with FixedSeed(seed):
        fac = _make_factory(entry, seed)
        root = fac.spawn_asset(0)
    info: dict[str, Any] = {"build_s": round(time.time() - t0, 1)}
    if entry.drawers_only:
        info["attach"] = fac.attach
        if any(kind != "drawer" for kind, _ in fac.attach):
            raise RuntimeError(f"seed {seed} grew {fac.attach}, not drawers only")
    objs = [root, *root.children_recursive]
    polys, used = _evaluated_polygons(objs)
    info["parts"] = used
    info["raw_triangles"] = polys.triangles()
    info["left_out_objects"] = sorted(o.name for o in bpy.data.objects if o not in objs)
    polys, info["stray_triangles_removed"] = _drop_stray_parts(polys)

    name = asset_name(entry.category, entry.factory, seed)
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob, do_unlink=True)
    obj = _build_mesh(name, polys)
    info["clean_triangles"] = _count_tris(obj)
    _decimate(obj, max_tris)
    _weld(obj)
    for attr in list(obj.data.attributes):
        if not attr.is_required and not attr.is_internal:
            try:
                obj.data.attributes.remove(attr)
            except RuntimeError:
                pass
    pre = np.array([v.co[:] for v in obj.data.vertices])
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.glb"
    bpy.ops.object.select_all(action="DESELECT")
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.export_scene.gltf(
        filepath=str(path), export_format="GLB", use_selection=True, export_apply=True,
        export_materials="NONE", export_normals=False, export_texcoords=False,
        export_attributes=False, export_vertex_color="NONE", export_tangents=False,
        export_cameras=False, export_lights=False, export_animations=False,
        export_skins=False, export_morph=False, export_extras=False, export_yup=True,
    )
    measured = measure_glb(path)
    # A glTF round trip must keep Blender's frame: same bbox before export and after import.
    if not np.allclose(measured["bbox_min"], pre.min(0), atol=1e-4) or not np.allclose(
        measured["bbox_max"], pre.max(0), atol=1e-4
    ):
        raise RuntimeError(f"bbox changed in the glTF round trip: {measured} vs {pre.min(0)}")
    info.update(measured)
    info["bytes"] = path.stat().st_size
    return info


# -------------------------------------------------------------------------- parent side


def _run_child(entry: Entry, seed: int, out_dir: Path, max_tris: int, work: Path,
               bed_cloth: str) -> tuple[bool, str]:
    name = asset_name(entry.category, entry.factory, seed)
    log_path = work / f"{name}.log"
    meta_path = work / f"{name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", entry.category,
           entry.factory, str(seed), "--out", str(out_dir), "--max-tris", str(max_tris),
           "--meta", str(meta_path), "--bed-cloth", bed_cloth]
    t0 = time.time()
    try:
        with log_path.open("w") as fh:
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                timeout=entry.timeout_s, check=False).returncode
    except subprocess.TimeoutExpired:
        return False, f"{name}: timeout after {entry.timeout_s}s (log {log_path})"
    took = time.time() - t0
    if rc != 0 or not meta_path.exists():
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
        return False, f"{name}: failed rc={rc} in {took:.0f}s: {tail} (log {log_path})"
    meta = json.loads(meta_path.read_text())
    return True, (f"{name}: {meta['triangles']} tris, {meta['bytes'] // 1024} KB, "
                  f"raw {meta['raw_triangles']}, {took:.0f}s")


def _read_fronts() -> dict[str, dict[str, str]]:
    if not FRONTS_TSV.exists():
        return {}
    with FRONTS_TSV.open(encoding="utf-8") as fh:
        return {r["file"]: r for r in csv.DictReader(fh, delimiter="\t")}


def write_manifest(out_dir: Path) -> int:
    """MANIFEST.tsv from the glbs in out_dir (re-imported) and the verified fronts.tsv."""
    fronts = _read_fronts()
    rows = []
    index = {asset_name(e.category, e.factory, s): (e, s) for e in PLAN for s in e.seeds}
    for path in sorted(out_dir.glob("*.glb")):
        if path.stem not in index:
            log.warning("not in the plan, left out of the manifest: %s", path.name)
            continue
        entry, seed = index[path.stem]
        rel = f"{out_dir.name}/{path.name}"
        m = measure_glb(path)
        ext = [hi - lo for lo, hi in zip(m["bbox_min"], m["bbox_max"], strict=True)]
        front = fronts.get(rel, {})
        rows.append([rel, entry.category, entry.factory, str(seed), str(m["triangles"]),
                     " x ".join(f"{v:.3f}" for v in ext), front.get("front_axis", "UNCHECKED"),
                     front.get("checked", ""), front.get("notes", "")])
    with (out_dir / "MANIFEST.tsv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(MANIFEST_HEADER)
        w.writerows(rows)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--work", type=Path, default=Path("/tmp/infinigen_corpus_work"),
                    help="logs and per-asset measurements")
    ap.add_argument("--only", nargs="*", default=None, help="categories to (re)build")
    ap.add_argument("--seeds", nargs="*", type=int, default=None,
                    help="with --only: these seeds instead of the plan's")
    ap.add_argument("--max-tris", type=int, default=6000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--skip-existing", action="store_true")
    ap.add_argument("--bed-cloth", choices=["fold", "sim"], default="fold",
                    help="beds: fold sheets over the mattress (deterministic, default) or run "
                         f"Blender's cloth sim for at most {BED_CLOTH_FRAMES} frames")
    ap.add_argument("--manifest-only", action="store_true")
    ap.add_argument("--one", nargs=3, metavar=("CATEGORY", "FACTORY", "SEED"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--meta", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    if args.one:
        cat, fac, seed = args.one[0], args.one[1], int(args.one[2])
        entry = next(e for e in PLAN if e.category == cat and e.factory == fac)
        info = build_one(entry, seed, args.out, args.max_tris, args.bed_cloth)
        args.meta.write_text(json.dumps(info, indent=1))
        sys.stdout.flush()
        os._exit(0)  # bpy 4.2 can segfault while the interpreter shuts down

    if not args.manifest_only:
        args.work.mkdir(parents=True, exist_ok=True)
        jobs = []
        for e in PLAN:
            if args.only and e.category not in args.only:
                continue
            for s in (args.seeds if args.only and args.seeds else e.seeds):
                glb = args.out / f"{asset_name(e.category, e.factory, s)}.glb"
                if args.skip_existing and glb.exists():
                    continue
                jobs.append((e, s))
        from concurrent.futures import ThreadPoolExecutor

        failed = 0
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futs = [pool.submit(_run_child, e, s, args.out, args.max_tris, args.work,
                                args.bed_cloth) for e, s in jobs]
            for fut in futs:
                ok, msg = fut.result()
                failed += not ok
                log.info("%s %s", "ok  " if ok else "FAIL", msg)
        log.info("%d built, %d failed", len(jobs) - failed, failed)
    n = write_manifest(args.out)
    log.info("MANIFEST.tsv: %d rows", n)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
