"""The island loop's two steps, ``init_iter0`` and ``iter_step``, as library functions.

Blender work is injected as ``run_job(job) -> dict`` (``worker.launch`` binds it to the
embedded bpy module or a Blender binary), so this module never imports bpy and the CLIs,
the add-on and the batch runner all call the same code.

Safety: every output of a step is produced in a hidden staging directory and moved into
place only after the worker, the sanity check and the geometry succeeded; ``current_state.json``
is moved last and marks an iteration complete. A failed step therefore leaves iteration N-1
and everything before it byte-identical, and the group's own files untouched.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .annotate import annotate_bev
from .config import Settings
from .errors import GeometryError, GroupInputError, IslandError, SanityError, UsageError
from .files import atomic, blendfile, locks, portable
from .files.atomic import sha256_file
from .files.jsonio import read_object
from .measure import frames, meshcache
from .schemas import (
    Metadata,
    TargetSpec,
    Transforms,
    is_finite,
    load_metadata,
    load_target_spec,
    load_transforms,
)

RunJob = Callable[[dict[str, Any]], dict[str, Any]]

REFINER_DIR = "simple_refiner"
INFO_NOTES = "INFO ONLY — score-based gating has been removed from the island-refiner."
MESH_CACHE = "meshes.npz"
CONTEXT_CACHE = "context.npz"   # fixed context near the group, canonical frame (optional)
FORWARD_AXES = "forward_axes.json"
ITER_OUTPUTS = ("island.blend", "render_persp.png", "render_bev.png",
                "render_bev_annotated.png", "info.json", "geometry.json")


@dataclass
class StepResult:
    iter: int
    iter_dir: Path
    trivial: bool
    geometry: dict[str, Any]
    info: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Group:
    """A group directory and its validated inputs."""

    root: Path
    metadata: Metadata
    target_spec: TargetSpec

    @property
    def refiner(self) -> Path:
        return self.root / REFINER_DIR

    def iter_dir(self, n: int) -> Path:
        return self.refiner / f"iter_{n}"


def resolve_group_dir(path: str | os.PathLike[str]) -> Path:
    raw = Path(path)
    root = atomic.check_resolved(raw, raw.expanduser().resolve())
    if not root.exists():
        raise UsageError("group directory does not exist", file=str(raw),
                         fix="pass --group-dir <scene_dir>/relation_groups/<G>")
    if not root.is_dir():
        raise UsageError("is not a directory", file=str(raw), fix="pass the group directory")
    return root


def load_group(path: str | os.PathLike[str]) -> Group:
    root = resolve_group_dir(path)
    metadata = load_metadata(root / "metadata.json")
    spec = load_target_spec(root / "target_spec.json", len(metadata.refined_members))
    return Group(root, metadata, spec)


def is_complete(iter_dir: Path) -> bool:
    return (iter_dir / "current_state.json").is_file()


def _refuse_symlink(path: Path) -> None:
    if path.is_symlink():
        raise GroupInputError("is a symlink; iterations are real directories inside the group "
                              "(a link could point anywhere)", file=str(path),
                              fix="remove the link and rerun init_iter0.py")


def completed_iters(group: Group) -> list[int]:
    """Complete iterations, ascending. A symlinked ``simple_refiner`` or ``iter_N`` is
    refused (GroupInputError): steps write there, and a link may lead out of the group."""
    out = []
    _refuse_symlink(group.refiner)
    if group.refiner.is_dir():
        for child in group.refiner.iterdir():
            name = child.name
            if name.startswith("iter_") and name[5:].isdigit():
                _refuse_symlink(child)
                if is_complete(child):
                    out.append(int(name[5:]))
    return sorted(out)


GROUP_LOCK = ".group.lock"   # only where a directory cannot be opened (Windows)


@contextlib.contextmanager
def group_lock(root: Path) -> Iterator[None]:
    """One step at a time per group (a second concurrent call is a usage error)."""
    # POSIX: the lock on the directory itself, so no lock file is left behind in the group;
    # Windows opens no directory: a lock file in it (locks.lock_fd: filelock there).
    if portable.O_DIRECTORY:
        fd = os.open(root, os.O_RDONLY | portable.O_DIRECTORY)
    else:
        fd = os.open(root / GROUP_LOCK, os.O_RDWR | os.O_CREAT | portable.O_BINARY, 0o600)
    try:
        if not locks.lock_fd(fd, blocking=False):
            raise UsageError("another init_iter0/iter_step is running on this group",
                             file=str(root), fix="wait for it to finish")
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def staging_dir(parent: Path, label: str) -> Iterator[Path]:
    """A hidden scratch directory, removed afterwards; ones left by killed runs are swept.

    Callers hold the group lock, so any other staging directory belongs to a dead process.
    """
    for stale in parent.glob(".staging.*"):
        atomic.remove_tree(stale)
    path = parent / f".staging.{label}.{os.getpid()}"
    atomic.make_dir(path, parents=True)
    try:
        yield path
    finally:
        atomic.remove_tree(path)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def same_bytes(a: Path, b: Path) -> bool:
    """Do the two files hold the same bytes? One file under two names (hard links: an
    island promoted or reused by link) is without reading it; different sizes are not;
    else their SHA-256 decide."""
    sa, sb = os.stat(a), os.stat(b)
    if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
        return True
    if sa.st_size != sb.st_size:
        return False
    return sha256_file(a) == sha256_file(b)


def _poses_from_job(result: dict[str, Any], members: tuple[str, ...]) -> dict[str, np.ndarray]:
    poses = result.get("poses") or {}
    missing = [m for m in members if m not in poses]
    if missing:
        raise GroupInputError(f"object '{missing[0]}' not found in island.blend",
                              fix="rebuild the island")
    return {m: frames.as_matrix(poses[m]) for m in members}


def load_meshes(group: Group) -> tuple[meshcache.Meshes, dict[str, dict]]:
    path = group.root / MESH_CACHE
    try:
        meshes, props = meshcache.load_shared(path)
    except (ValueError, FileNotFoundError) as exc:
        raise GroupInputError(f"mesh cache unreadable: {exc}", file=str(path),
                              fix="delete it and rerun init_iter0.py") from exc
    missing = [m for m in group.metadata.members if m not in meshes]
    if missing:
        raise GroupInputError(f"has no mesh for '{missing[0]}'", file=str(path),
                              fix="delete it and rerun init_iter0.py")
    return meshes, props


def load_context(group: Group) -> meshcache.Meshes | None:
    """The group's fixed context (``context.npz``, canonical frame), or None without one."""
    from .measure.obstacles import load

    path = group.root / CONTEXT_CACHE
    try:
        return load(path)
    except ValueError as exc:
        raise GroupInputError(f"context cache unreadable: {exc}", file=str(path),
                              fix="rebuild the island (island-refine run --restart)") from exc


def _forward_axes_problem(doc: dict[str, Any]) -> tuple[str, str] | None:
    """(field, problem) for a cached forward_axes.json that is not the document
    ``forward_axis.forward_axes_document`` writes, else None."""
    members = doc.get("members")
    if not isinstance(members, dict):
        return "members", "must be an object mapping member -> forward-axis entry"
    entries = [(f"members.{k}", v) for k, v in members.items()]
    if doc.get("anchor") is not None:
        entries.append(("anchor", doc["anchor"]))
    for where, entry in entries:
        if not isinstance(entry, dict):
            return where, "must be an object"
        axis = entry.get("axis_local")
        if axis is not None and not (
                isinstance(axis, list) and len(axis) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        and is_finite(v) for v in axis)):
            return f"{where}.axis_local", f"must be null or two finite numbers, got {axis!r}"
        if "status" in entry and not isinstance(entry["status"], str):
            return f"{where}.status", "must be a string"
    return None


def forward_axes(group: Group, meshes: meshcache.Meshes, props: dict[str, dict]
                  ) -> dict[str, Any]:
    """forward_axes.json: computed once per group and cached; overrides win."""
    path = group.root / FORWARD_AXES
    if path.is_file():
        fix = "delete forward_axes.json; init_iter0.py recomputes it"
        doc = read_object(path, GroupInputError, "forward_axes.json", fix)
        problem = _forward_axes_problem(doc)
        if problem is not None:
            raise GroupInputError(problem[1], file=str(path), field=problem[0], fix=fix)
        return doc
    from .measure.forward_axis import forward_axes_document

    overrides = {name: p["forward_axis"] for name, p in props.items() if "forward_axis" in p}
    overrides.update(group.metadata.forward_axis_overrides)
    try:
        doc = forward_axes_document(meshes, group.metadata.anchor_id, overrides)
    except ValueError as exc:
        raise GroupInputError(f"bad forward axis override: {exc}", file=str(path),
                              fix="use +X, -X, +Y, -Y, [x, y] or 'symmetric'") from exc
    atomic.write_json(path, doc)
    return doc


RENDER_FILES = ("render_persp.png", "render_bev.png")


def render_key(render_job: dict[str, Any]) -> str:
    """What the renders of a given island.blend depend on: the render settings, the forward
    axes drawn, and the mesh/context caches they are drawn from (by size and mtime)."""
    parts: dict[str, Any] = dict(render_job)
    for field_ in ("meshes_npz", "context_npz"):
        path = render_job.get(field_)
        if path:
            st = os.stat(path)
            parts[field_] = [path, st.st_size, st.st_mtime_ns]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _reuse_renders(group: Group, n: int, transforms: Transforms, key: str, stage: Path
                   ) -> dict[str, Any] | None:
    """For a step that moves nothing (every delta trivial: within ``frames.MOVE_TOL_M`` /
    ``MOVE_TOL_DEG``, whole turns included, so nothing is applied): link iter_(N-1)'s
    renders into ``stage`` and return a stand-in worker result (the previous render data),
    or None when they cannot stand (a member moves, other render settings or caches, a file
    missing). The read-back poses are iter_(N-1)'s, so the geometry kept for that state
    (``geometry.compute_geometry``) is handed out again."""
    if not transforms.trivial:
        return None
    prev_dir = group.iter_dir(n - 1)
    try:
        prev_info = read_object(prev_dir / "info.json", GroupInputError, "info.json", "")
    except GroupInputError:
        return None
    render = prev_info.get("render")
    if prev_info.get("render_key") != key or not isinstance(render, dict) or not all(
            (prev_dir / f).is_file() for f in RENDER_FILES):
        return None
    for name in RENDER_FILES:
        atomic.link_or_copy(prev_dir / name, stage / name)
    render = {**render, "persp": str(stage / RENDER_FILES[0]),
              "bev": str(stage / RENDER_FILES[1])}
    return {"render": render, "blender_version": prev_info.get("blender_version"),
            "file_version": prev_info.get("file_version"),
            "autoexec_fail": prev_info.get("autoexec_fail"), "timings_s": None}


def _reuse_annotated(group: Group, n: int, geometry_text: str, stage: Path
                     ) -> str | None:
    """For a step whose renders were reused: link iter_(N-1)'s annotated BEV when its
    geometry.json is this one but for the iteration number (the annotation is drawn from
    the BEV and the geometry alone, so it would be drawn the same); the iteration it came
    from, or None."""
    prev_dir = group.iter_dir(n - 1)
    annotated = prev_dir / "render_bev_annotated.png"
    try:
        prev = json.loads((prev_dir / "geometry.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    geometry = json.loads(geometry_text)   # what geometry.json will hold
    if not annotated.is_file() or not isinstance(prev, dict) or \
            {**prev, "iter": geometry.get("iter")} != geometry:
        return None
    atomic.link_or_copy(annotated, stage / "render_bev_annotated.png")
    return f"iter_{n - 1}"


def _render_job(settings: Settings, axes: dict[str, Any], group: Group) -> dict[str, Any]:
    """Render settings, each member's local forward axis (drawn as arrows in the BEV) and the
    group's mesh cache (each unit is drawn from the geometry that is measured)."""
    known = {name: entry["axis_local"] for name, entry in axes.get("members", {}).items()
             if isinstance(entry, dict) and entry.get("axis_local")}
    context = group.root / CONTEXT_CACHE
    return {**settings.render_job(), "forward_axes": known,
            "meshes_npz": str(group.root / MESH_CACHE),
            "context_npz": str(context) if context.is_file() else None}


def _geometry(group: Group, meshes: meshcache.Meshes, axes: dict[str, Any],
              poses: dict[str, np.ndarray], n: int) -> dict[str, Any]:
    from .measure.geometry import compute_geometry

    try:
        doc = compute_geometry(meshes, poses, group.metadata.anchor_id,
                               group.target_spec.to_dict(), axes, n, load_context(group))
        doc["scene_unit_scale"] = group.metadata.unit_scale
        return doc
    except IslandError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure inside geometry is exit 6
        raise GeometryError(f"geometry failed: {type(exc).__name__}: {exc}",
                            file=str(group.iter_dir(n) / "geometry.json")) from exc


def unit_pivot(meshes: meshcache.Meshes, name: str) -> np.ndarray:
    """The unit's local footprint centre (``frames.footprint_centre_local``), once per mesh
    in this process: a 200k-triangle chair's bounding box costs milliseconds, per member per
    iteration otherwise."""
    v, f = meshes[name]
    pivot = meshcache.remembered("frames.footprint_centre", meshcache.mesh_digest(v, f),
                                 lambda: frames.footprint_centre_local(
                                     meshcache.keyed_vertices(v)))
    return pivot.copy()


def current_state_doc(group: Group, n: int, poses: dict[str, np.ndarray],
                      meshes: meshcache.Meshes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, pose in poses.items():
        t, _, scale = frames.decompose(pose)
        pivot = frames.pivot_in_frame(pose, unit_pivot(meshes, name))
        out[name] = {
            "matrix_4x4": frames.to_list(pose),
            "location": [float(v) for v in t],
            "yaw_deg": frames.yaw_deg(pose),
            "scale": [float(v) for v in scale],
            "footprint_centre": [float(pivot[0]), float(pivot[1])],
        }
    return {"iter": n, "frame": "canonical", "anchor_id": group.metadata.anchor_id,
            "source": f"read back from {REFINER_DIR}/iter_{n}/island.blend", "poses": out}


def load_current_poses(group: Group, n: int) -> dict[str, np.ndarray]:
    path = group.iter_dir(n) / "current_state.json"
    doc = read_object(path, GroupInputError, "current_state.json",
                      f"rerun iter_step.py --iter {n} (or init_iter0.py for 0)")
    poses = doc.get("poses")
    if not isinstance(poses, dict):
        raise GroupInputError("missing 'poses'", file=str(path), field="poses")
    out = {}
    for name in group.metadata.members:
        entry = poses.get(name)
        if not isinstance(entry, dict) or "matrix_4x4" not in entry:
            raise GroupInputError(f"no pose for '{name}'", file=str(path), field="poses")
        try:
            out[name] = frames.as_matrix(entry["matrix_4x4"])
        except ValueError as exc:
            raise GroupInputError(str(exc), file=str(path), field=f"poses.{name}") from exc
    return out


def empty_transforms(n: int, image_sha256: str) -> dict[str, Any]:
    return {"iter": n, "members": {}, "converged": False, "final": False,
            "reason_summary": "baseline: no deltas",
            "_island_meta": {"model": "none", "image_sha256": image_sha256,
                             "generated_by": "init_iter0.py", "mode": "island_iter", "iter": n,
                             "timestamp_utc": utc_now()}}


ASIDE_PREFIX = ".old."


def _install_iteration(stage: Path, dest: Path) -> None:
    """Put the staged iteration in place as a whole directory.

    ``stage`` holds every output (``ITER_OUTPUTS`` and ``current_state.json``); the files of
    ``dest`` that are not outputs (the agent's ``transforms.json``) are copied in first.
    Then ``dest`` is renamed aside and ``stage`` renamed to ``dest``, and the aside copy is
    removed. A failure before the swap leaves ``dest`` byte-identical; a kill between the
    two renames leaves no ``dest`` but its aside copy, which the next call on the group
    puts back (``recover_asides``) - so an iteration is complete or untouched, never mixed.
    """
    if dest.is_dir():
        for item in dest.iterdir():
            if item.is_file() and not (stage / item.name).exists():
                atomic.copy_file(item, stage / item.name, keep_times=True)
    aside = dest.with_name(f"{ASIDE_PREFIX}{dest.name}.{os.getpid()}")
    had_dest = dest.exists()
    if had_dest:
        atomic.rename(dest, aside)
    try:
        atomic.rename(stage, dest)
    except BaseException:
        if had_dest:
            atomic.rename(aside, dest)
        raise
    if had_dest:
        atomic.remove_tree(aside)


def recover_asides(refiner: Path) -> None:
    """After a kill mid-swap: an aside copy whose iteration is missing goes back, any other
    is a finished swap's leftover and goes. Callers hold the group lock."""
    if not refiner.is_dir():
        return
    for aside in refiner.glob(f"{ASIDE_PREFIX}iter_*"):
        name = aside.name[len(ASIDE_PREFIX):].rsplit(".", 1)[0]
        target = refiner / name
        if not target.exists():
            atomic.rename(aside, target)
        else:
            atomic.remove_tree(aside)


def _backup_name(refiner: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d_%H%M%S")
    candidate = refiner.with_name(f"{REFINER_DIR}.bak.{stamp}")
    suffix = 1
    while candidate.exists():  # two rotations in one second: never overwrite a backup
        suffix += 1
        candidate = refiner.with_name(f"{REFINER_DIR}.bak.{stamp}_{suffix}")
    return candidate


def _log(progress: Callable[[str], None] | None, msg: str) -> None:
    if progress:
        progress(msg)


def meshes_exported_from(group: Group, blend: Path) -> bool:
    """Was the group's ``meshes.npz`` evaluated from exactly this file (its recorded source
    SHA-256)? Then exporting the file again gives the same cache."""
    recorded = meshcache.load_source(group.root / MESH_CACHE).get("blend_sha256")
    return bool(recorded) and recorded == sha256_file(blend)


def init_iter0(group_dir: str | os.PathLike[str], settings: Settings, run_job: RunJob,
               progress: Callable[[str], None] | None = None,
               reuse_meshes: bool = False) -> StepResult:
    """Fresh ``simple_refiner/iter_0`` (no-resume policy: an old one is rotated to a backup).

    ``reuse_meshes`` (the scene pipeline, whose rebuild exported the cache from the island
    it saved, with the same worker): keep ``meshes.npz`` when it records island.blend's
    own SHA-256 as its source, instead of opening the island to export it again; iter_0's
    ``info.json`` says ``meshes_reused``."""
    group = load_group(group_dir)
    island = group.root / "island.blend"
    if not island.is_file():
        raise GroupInputError("island.blend is missing", file=str(island),
                              fix="run rebuild_islands (or the fixture builder) first")
    blendfile.require_whole(island, "rebuild the island (rebuild_islands or the fixture "
                                    "builder)")
    with group_lock(group.root), staging_dir(group.root, "iter_0") as stage:
        t0 = time.perf_counter()
        iter_stage = stage / "iter_0"
        atomic.make_dir(iter_stage)
        atomic.link_or_copy(island, iter_stage / "island.blend")
        base_job = {"op": "step", "blend": str(iter_stage / "island.blend"),
                    "members": list(group.metadata.members),
                    "anchor_id": group.metadata.anchor_id, "poses": None}
        # A fresh run re-exports the meshes (the island may have been rebuilt), then renders
        # with the forward axes known so the top view can show which way members face.
        meshes_reused = reuse_meshes and meshes_exported_from(group, island)
        if meshes_reused:
            _log(progress, "[init_iter0] meshes.npz was exported from this island.blend: kept")
        else:
            _log(progress, "[init_iter0] opening island, exporting meshes")
            run_job({**base_job, "render": None, "export_meshes": str(stage / MESH_CACHE)})
            atomic.replace(stage / MESH_CACHE, group.root / MESH_CACHE)
        meshes, props = load_meshes(group)
        axes = forward_axes(group, meshes, props)
        _log(progress, "[init_iter0] rendering iter_0")
        render_job = _render_job(settings, axes, group)
        result = run_job({**base_job, "render": render_job, "export_meshes": None})
        poses = _poses_from_job(result, group.metadata.members)
        _log(progress, "[init_iter0] geometry")
        geometry = _geometry(group, meshes, axes, poses, 0)
        annotate_bev(iter_stage / "render_bev.png", iter_stage / "render_bev_annotated.png",
                     geometry, result.get("render") or {})
        masked = group.root / "masked.png"
        image = masked if masked.is_file() else iter_stage / "render_bev.png"
        atomic.write_json(iter_stage / "transforms.json", empty_transforms(0, sha256_file(image)))
        info = _info(0, result, trivial=True, sanity="skipped (baseline)",
                     seconds=time.perf_counter() - t0)
        info["render_key"] = render_key(render_job)
        info["meshes_reused"] = bool(meshes_reused)
        atomic.write_json(iter_stage / "info.json", info)
        atomic.write_json(iter_stage / "geometry.json", geometry)
        atomic.write_json(iter_stage / "current_state.json",
                          current_state_doc(group, 0, poses, meshes))
        new_refiner = stage / REFINER_DIR
        atomic.make_dir(new_refiner)
        atomic.replace(iter_stage, new_refiner / "iter_0")
        if group.refiner.exists():
            backup = _backup_name(group.refiner)
            atomic.replace(group.refiner, backup)
            _log(progress, f"[init_iter0] previous {REFINER_DIR}/ rotated to {backup.name}/")
        atomic.replace(new_refiner, group.refiner)
    return StepResult(0, group.iter_dir(0), True, geometry, info)


def _info(n: int, result: dict[str, Any], *, trivial: bool, sanity: str, seconds: float
          ) -> dict[str, Any]:
    render = dict(result.get("render") or {})
    for view in ("persp", "bev"):
        if view in render:  # the worker rendered into staging; name the final file
            render[view] = f"render_{view}.png"
    return {"iter": n, "notes": INFO_NOTES, "trivial_transforms": trivial, "sanity": sanity,
            "blender_version": result.get("blender_version"),
            "file_version": result.get("file_version"),
            "autoexec_fail": result.get("autoexec_fail"),
            "render": render or None, "worker_timings_s": result.get("timings_s"),
            "seconds": round(seconds, 4)}


def check_iteration_number(group: Group, n: int) -> None:
    done = completed_iters(group)
    if not done or 0 not in done:
        raise UsageError(f"{REFINER_DIR}/iter_0 is missing or incomplete",
                         file=str(group.refiner), fix="run init_iter0.py first")
    latest = done[-1]
    if n < 1:
        raise UsageError(f"--iter must be >= 1, got {n}", fix=f"the next iteration is "
                                                             f"{latest + 1}")
    if not is_complete(group.iter_dir(n - 1)):
        raise UsageError(f"iter_{n - 1} is not complete, so iter_{n} cannot be stepped",
                         file=str(group.iter_dir(n - 1)), fix=f"step iter {latest + 1} next")
    if n < latest:
        raise UsageError(f"iter_{n} would be re-stepped under later iterations "
                         f"(latest complete is iter_{latest})",
                         fix=f"step iter {latest + 1}, or rerun init_iter0.py for a fresh run")


def plan_poses(prev: dict[str, np.ndarray], transforms: Transforms, meshes: meshcache.Meshes
               ) -> dict[str, np.ndarray]:
    new = dict(prev)
    for name, delta in transforms.members.items():
        pivot = unit_pivot(meshes, name)
        new[name] = frames.apply_member_delta(prev[name], delta.delta_xyz, delta.delta_yaw_deg,
                                              pivot)
    return new


def sanity_check(n: int, transforms: Transforms, prev: dict[str, np.ndarray],
                 planned: dict[str, np.ndarray], read_back: dict[str, np.ndarray],
                 blend_path: Path) -> None:
    """Compare the poses READ BACK from the saved island.blend with iteration N-1's and with
    what was applied, by the one movement tolerance (``frames.pose_moved``: MOVE_TOL_M
    metres, MOVE_TOL_DEG degrees, whatever the distance from the anchor).

    A member without a non-trivial delta must not have moved. The step failed silently
    (exit 4, "identical") when every member whose applied pose moves read back where it was
    and not where it was put; any member with a non-trivial delta must read back at the
    pose applied to it."""
    for name in prev:
        if name in transforms.members and not transforms.members[name].trivial:
            continue
        if frames.pose_moved(prev[name], read_back[name]):
            raise SanityError(f"'{name}' moved although transforms.json has no delta above "
                              f"{frames.MOVE_TOL_TEXT} for it "
                              f"({frames.describe_change(prev[name], read_back[name])})",
                              file=str(blend_path))
    written = [m for m, d in transforms.members.items() if not d.trivial]
    moved = [m for m in written if frames.pose_moved(prev[m], planned[m])]
    if moved and all(not frames.pose_moved(prev[m], read_back[m])
                     and frames.pose_moved(planned[m], read_back[m]) for m in moved):
        raise SanityError(f"object positions in iter_{n}/island.blend are identical to "
                          f"iter_{n - 1} despite non-trivial deltas for {len(moved)} member(s); "
                          "the apply step failed silently", file=str(blend_path),
                          fix="STOP the loop and report")
    for m in written:
        if frames.pose_moved(planned[m], read_back[m]):
            raise SanityError(f"'{m}' read back "
                              f"{frames.describe_change(planned[m], read_back[m])} away from "
                              f"the applied pose (tolerance {frames.MOVE_TOL_TEXT})",
                              file=str(blend_path), fix="STOP the loop and report")


def iter_step(group_dir: str | os.PathLike[str], n: int, settings: Settings, run_job: RunJob,
              progress: Callable[[str], None] | None = None) -> StepResult:
    """apply deltas -> save -> read back -> render -> sanity -> geometry, for iteration n."""
    group = load_group(group_dir)
    with group_lock(group.root):
        recover_asides(group.refiner)
        check_iteration_number(group, n)
        iter_dir = group.iter_dir(n)
        previous = group.iter_dir(n - 1) / "island.blend"
        if not previous.is_file():
            raise GroupInputError(f"iter_{n - 1} has no island.blend", file=str(previous),
                                  fix=f"rerun iter_step.py --iter {n - 1} (or init_iter0.py)")
        blendfile.require_whole(previous, "rerun init_iter0.py" if n == 1 else
                                f"rerun iter_step.py --iter {n - 1} (or init_iter0.py)")
        transforms = load_transforms(iter_dir / "transforms.json", n, group.metadata)
        meshes, _ = load_meshes(group)
        axes = forward_axes(group, meshes, {})
        prev = load_current_poses(group, n - 1)
        planned = plan_poses(prev, transforms, meshes)
        with staging_dir(group.refiner, f"iter_{n}") as stage:
            t0 = time.perf_counter()
            blend = stage / "island.blend"
            render_job = _render_job(settings, axes, group)
            key = render_key(render_job)
            reused = _reuse_renders(group, n, transforms, key, stage) if settings.reuse_renders \
                else None
            if reused is not None:
                # Nothing moves: iter_(N-1)'s island.blend (the same file, linked), its
                # read-back poses and its renders of that very file with the same settings
                # stand.
                _log(progress, f"[iter_step] iter_{n}: nothing moves; iter_{n - 1}'s renders "
                               "reused")
                atomic.link_or_copy(previous, blend)
                result, read_back = reused, prev
            else:   # the worker saves the moved poses over the link (a new file)
                atomic.link_or_copy(previous, blend)
                _log(progress, f"[iter_step] iter_{n}: applying {len(transforms.members)} "
                               "member delta(s), saving, rendering")
                result = run_job({"op": "step", "blend": str(blend),
                                  "members": list(group.metadata.members),
                                  "anchor_id": group.metadata.anchor_id,
                                  # Only moved members are written: the others keep their
                                  # exact stored matrices (no float32 round trip).
                                  "poses": {k: frames.to_list(planned[k])
                                            for k, d in transforms.members.items()
                                            if not d.trivial},
                                  "render": render_job, "export_meshes": None})
                read_back = _poses_from_job(result, group.metadata.members)
            sanity_check(n, transforms, prev, planned, read_back, iter_dir / "island.blend")
            _log(progress, f"[iter_step] iter_{n}: geometry")
            geometry = _geometry(group, meshes, axes, read_back, n)
            geometry_text = atomic.dumps_json(geometry)
            annotated_from = _reuse_annotated(group, n, geometry_text, stage) \
                if reused is not None else None
            if annotated_from is None:
                annotate_bev(stage / "render_bev.png", stage / "render_bev_annotated.png",
                             geometry, result.get("render") or {})
            trivial = transforms.trivial
            info = _info(n, result, trivial=trivial,
                         sanity="skipped (trivial transforms)" if trivial else "ok",
                         seconds=time.perf_counter() - t0)
            info["render_key"] = key
            if reused is not None:
                info["renders_reused_from"] = f"iter_{n - 1}"
                info["island_reused_from"] = f"iter_{n - 1}"
            if annotated_from is not None:
                info["annotated_reused_from"] = annotated_from
            atomic.write_json(stage / "info.json", info)
            atomic.write_bytes(stage / "geometry.json", geometry_text.encode("utf-8"))
            atomic.write_json(stage / "current_state.json",
                              current_state_doc(group, n, read_back, meshes))
            _install_iteration(stage, iter_dir)
    return StepResult(n, iter_dir, transforms.trivial, geometry, info,
                      list(transforms.warnings) + below_tolerance_warnings(transforms))


def below_tolerance_warnings(transforms: Transforms) -> list[str]:
    """A line naming the members whose non-zero deltas were not applied because they move
    nothing beyond the tolerance (``frames.MOVE_TOL_M`` / ``MOVE_TOL_DEG``)."""
    dropped = sorted(m for m, d in transforms.members.items()
                     if d.trivial and (any(d.delta_xyz) or d.delta_yaw_deg))
    if not dropped:
        return []
    return [f"not applied: the deltas of {', '.join(dropped)} move less than "
            f"{frames.MOVE_TOL_TEXT} (a whole-turn yaw is no turn)"]


def recompute_geometry(group_dir: str | os.PathLike[str], n: int) -> dict[str, Any]:
    """Rewrite ``iter_N/geometry.json`` from that iteration's read-back poses (e.g. after a
    forward-axis override was added)."""
    group = load_group(group_dir)
    with group_lock(group.root):
        poses = load_current_poses(group, n)
        meshes, props = load_meshes(group)
        geometry = _geometry(group, meshes, forward_axes(group, meshes, props), poses, n)
        atomic.write_json(group.iter_dir(n) / "geometry.json", geometry)
    return geometry
