"""Where a scene directory keeps what (docs/SCENE_PIPELINE.md, "Scene directory").

``ScenePaths`` and ``GroupPaths`` name every file the stages read and write; they import
nothing of the pipeline, so every stage module (and the batch bookkeeping) can use them
without importing back up.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..errors import UsageError
from ..files import atomic, locks

SCENE_BLEND = "blend/stage3-sub-planned.blend"
OUTPUT_BLEND = "blend/stage3-scene.blend"
RELATION_GRAPH = "inputs/relation_graph.json"
ISLAND_MARKER = "island_done.json"      # batch: an island task's committed result
ISLAND_ATTEMPT = "island_attempt.json"  # batch: the running attempt
ISLAND_LOCK = ".island.lock"
STATE_LOCK = ".state.lock"


class ScenePaths:
    def __init__(self, scene_dir: str | os.PathLike[str]) -> None:
        raw = Path(scene_dir)
        self.root = atomic.check_resolved(raw, raw.expanduser().resolve())
        if not self.root.is_dir():
            raise UsageError("scene directory does not exist", file=str(raw),
                             fix="pass --scene-dir <dir holding inputs/ and blend/>")
        self.relation_graph = self.root / RELATION_GRAPH
        self.scene_blend = self.root / SCENE_BLEND
        self.output_blend = self.root / OUTPUT_BLEND
        self.json_dir = self.root / "json"
        self.island_groups = self.json_dir / "island_groups.json"
        self.scene_objects = self.json_dir / "scene_objects.json"
        self.scene_meshes = self.json_dir / "scene_meshes.npz"
        self.scene_context = self.json_dir / "scene_context.npz"   # world frame
        self.merge_report = self.json_dir / "merge_back.json"
        self.finalization = self.json_dir / "finalization.json"
        self.groups_dir = self.root / "relation_groups"
        self.state = self.root / "state.json"
        self.ledger = self.root / "ledger.sqlite"
        self.metrics = self.root / "metrics.json"
        self.lock = self.root / ".refine_scene.lock"
        self.state_lock = self.root / STATE_LOCK

    def group(self, gid: str) -> GroupPaths:
        return GroupPaths(self.groups_dir / gid)


class GroupPaths:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.island = root / "island.blend"
        self.metadata = root / "metadata.json"
        self.target_spec = root / "target_spec.json"
        self.masked = root / "masked.png"
        self.forward_axes = root / "forward_axes.json"
        self.meshes = root / "meshes.npz"
        self.context = root / "context.npz"
        self.verification = root / "verification.json"
        self.rounds = root / "rounds"
        self.island_done = root / ISLAND_MARKER      # batch: the island's result
        self.island_attempt = root / ISLAND_ATTEMPT  # batch: the running attempt
        self.island_lock = root / ISLAND_LOCK

    def round(self, k: int) -> Path:
        return self.rounds / f"round_{k}"

    def round_done(self, k: int) -> bool:
        return (self.round(k) / "result.json").is_file()

    def rebuilt(self) -> bool:
        return all(p.is_file() for p in (self.island, self.metadata, self.target_spec,
                                         self.masked, self.meshes, self.forward_axes)
                   ) and self.round_done(0)


@contextlib.contextmanager
def scene_locked(paths: ScenePaths, shared: bool = False) -> Iterator[None]:
    """The scene lock (``.refine_scene.lock``, ``locks.lock_fd``, never waited for): exclusive for a
    run, a batch's prepare/finish and ``propose`` (which rewrites the graph a run refines),
    shared for batch islands. Held elsewhere: UsageError (exit 2, one line)."""
    fd = atomic.open_beneath(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not locks.lock_fd(fd, shared=shared, blocking=False):
            raise UsageError("another refine_scene run is active on this scene",
                             file=str(paths.root), fix="wait for it to finish")
        yield
    finally:
        os.close(fd)


def stamp() -> str:
    """UTC ``YYYYMMDD_HHMMSS`` for backup directory names."""
    return datetime.now(UTC).strftime("%Y%m%d_%H%M%S")


def unique_path(path: Path) -> Path:
    """``path``, or ``path_2``, ``path_3``, ... : the first that does not exist yet."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}_{n}")
    return candidate
