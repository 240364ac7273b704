"""The scene pipeline director: validate -> rebuild_islands -> refine (+ verify, unknowns,
repair rounds, score gate) -> merge_back -> finalize -> eval.

Resumable: before doing a stage's work the director checks that stage's completion gate
against the artifacts on disk (not against ``state.json`` alone) and skips what is complete,
recording ``<stage>:skipped:<why>`` in the stage trace. A group that was not completed or
failed when a run died is reset (its rounds rotated to ``rounds.bak.<UTC>/``, its pristine
inputs restored from ``rounds/round_0``) and redone; the island loop itself rotates the old
``simple_refiner/`` (the contract's no-resume policy).

Nothing is written before the inputs validate: a bad relation graph, a missing scene or a
worker failure while reading the scene leaves the scene directory untouched. Blender work
is injected as ``run_job(job) -> dict`` and the island loop as ``run_group`` (default
``island_tools.adapter.run_group``). See docs/SCENE_PIPELINE.md.

The same stages also run split into tasks for ``island-refine batch`` (``prepare_batch``,
``refine_island``, ``finish_batch``; exactly-once bookkeeping in ``island_tools.scene.batch``,
docs/BATCH.md).
"""
from __future__ import annotations

import contextlib
import fcntl
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from .. import atomic, frames, meshcache
from ..config import Settings
from ..errors import EXIT_INTERNAL, IslandError, UsageError, refusal_line
from ..forward_axis import forward_axes_document
from ..geometry import GeometryContext
from ..iteration import REFINER_DIR, RunJob, sha256_file
from ..jsonio import read_object
from ..schemas import load_metadata, load_target_spec, parse_target_spec
from . import batch as batching
from . import contract, verify
from .batch import BatchRun
from .errors import EXIT_GROUPS_FAILED, IntegrityError, RelationGraphError, SceneRefusedError
from .ledger import BufferedLedger, Ledger, utc_now
from .metrics import build_metrics
from .relation_graph import GroupSpec, RelationGraph, load_relation_graph
from .state import (
    GROUP_COMPLETED,
    GROUP_FAILED,
    GROUP_PENDING,
    GROUP_RUNNING,
    DetachedState,
    SceneState,
)
from .validate import Measured, measure_group

RunGroup = Callable[..., Any]
Progress = Callable[[str], None]

SCENE_BLEND = "blend/stage3-sub-planned.blend"
OUTPUT_BLEND = "blend/stage3-scene.blend"
RELATION_GRAPH = "inputs/relation_graph.json"
UNTOUCHED_TOL = 1e-9         # objects outside the groups: bit-for-bit the same floats
CHECKABLE_PATTERNS = ("ring", "row", "2+2+1", "2+2+1+1", "L", "T")


@dataclass(frozen=True)
class RunOptions:
    policy: str = "solver"
    max_iter: int = 20
    max_rounds: int = 3
    min_delta: float = 0.01
    timeout_s: float = 120.0
    restart: bool = False
    settings: Settings = field(default_factory=Settings)

    def check(self) -> None:
        if self.max_iter < 1:
            raise UsageError(f"--max-iter must be >= 1, got {self.max_iter}")
        if self.max_rounds < 1:
            raise UsageError(f"--max-rounds must be >= 1, got {self.max_rounds}")
        if not math.isfinite(self.min_delta) or self.min_delta < 0:
            raise UsageError(f"--min-delta must be a finite number >= 0, got {self.min_delta}")
        if not self.timeout_s > 0:
            raise UsageError(f"--timeout-s must be > 0, got {self.timeout_s}")
        if self.policy != "solver" and not (self.policy.startswith("command:")
                                            and self.policy[8:].strip()):
            raise UsageError(f"unknown policy {self.policy!r}", field="--policy",
                             fix="use 'solver' or 'command:<shell command>'")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("restart")
        return out


class ScenePaths:
    def __init__(self, scene_dir: str | os.PathLike[str]) -> None:
        raw = Path(scene_dir)
        self.root = raw.expanduser().resolve()
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
        self.merge_report = self.json_dir / "merge_back.json"
        self.finalization = self.json_dir / "finalization.json"
        self.groups_dir = self.root / "relation_groups"
        self.state = self.root / "state.json"
        self.ledger = self.root / "ledger.sqlite"
        self.metrics = self.root / "metrics.json"
        self.lock = self.root / ".refine_scene.lock"
        self.state_lock = self.root / batching.STATE_LOCK

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
        self.verification = root / "verification.json"
        self.rounds = root / "rounds"
        self.island_done = root / batching.ISLAND_MARKER      # batch: the island's result
        self.island_attempt = root / batching.ISLAND_ATTEMPT  # batch: the running attempt
        self.island_lock = root / batching.ISLAND_LOCK

    def round(self, k: int) -> Path:
        return self.rounds / f"round_{k}"

    def round_done(self, k: int) -> bool:
        return (self.round(k) / "result.json").is_file()

    def rebuilt(self) -> bool:
        return all(p.is_file() for p in (self.island, self.metadata, self.target_spec,
                                         self.masked, self.meshes, self.forward_axes)
                   ) and self.round_done(0)


@dataclass
class Prepared:
    """What pre-flight learned without writing anything."""

    graph: RelationGraph
    scene_sha256: str
    state: SceneState
    measured: dict[str, Measured] | None = None
    scene_objects: dict[str, Any] | None = None
    temp_dir: Path | None = None
    validate_seconds: float = 0.0


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d_%H%M%S")


def _unique(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}_{n}")
    return candidate


def _poses_doc(poses: Mapping[str, np.ndarray]) -> dict[str, Any]:
    return {"frame": "canonical", "poses": {n: frames.to_list(m) for n, m in poses.items()}}


def _load_poses(path: Path) -> dict[str, np.ndarray]:
    doc = read_object(path, IntegrityError, path.name, "rerun the group")
    return {n: frames.as_matrix(m) for n, m in doc["poses"].items()}


def write_forward_axes(gp: GroupPaths) -> dict[str, Any]:
    """``forward_axes.json`` exactly as init_iter0 computes it (mesh-cache properties, then
    metadata overrides), so the group is complete for any policy before its loop starts."""
    meshes, props = meshcache.load(gp.meshes)
    metadata = load_metadata(gp.metadata)
    overrides = {n: p["forward_axis"] for n, p in props.items() if "forward_axis" in p}
    overrides.update(metadata.forward_axis_overrides)
    doc = forward_axes_document({n: meshes[n] for n in metadata.members}, metadata.anchor_id,
                                overrides)
    atomic.write_json(gp.forward_axes, doc)
    return doc


def _max_abs(a: Any, b: Any) -> float:
    return float(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)).max())


class ScenePipeline:
    """One scene directory. ``run()`` is the whole flow; the stage methods are public so a
    test (or a caller that wants only some stages) can drive them inside ``session()``."""

    def __init__(self, scene_dir: str | os.PathLike[str], options: RunOptions, run_job: RunJob,
                 run_group: RunGroup | None = None, progress: Progress | None = None) -> None:
        options.check()
        self.paths = ScenePaths(scene_dir)
        self.options = options
        self.run_job = run_job
        self._run_group = run_group
        self.progress = progress
        self.state: SceneState | None = None
        self.ledger: Ledger | None = None
        self.graph: RelationGraph | None = None
        self.run_id = ""
        self.exit_code = 0
        self.stage_seconds: dict[str, float] = {}

    # ================================================================== plumbing
    def say(self, msg: str) -> None:
        if self.progress:
            self.progress(f"[refine_scene] {msg}")

    def _time(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = round(self.stage_seconds.get(stage, 0.0) + seconds, 4)
        assert self.state is not None
        self.state.add_seconds(stage, seconds)

    @property
    def _ledger(self) -> Ledger:
        if self.ledger is None:
            raise UsageError("stage methods run inside ScenePipeline.session()")
        return self.ledger

    @property
    def _state(self) -> SceneState:
        assert self.state is not None
        return self.state

    def run_group_fn(self) -> RunGroup:
        if self._run_group is None:
            from ..adapter import run_group
            self._run_group = run_group
        return self._run_group

    # ================================================================== pre-flight
    def preflight(self) -> Prepared:
        """Parse and check every input; measure the scene if validation must (re)run.

        Writes nothing (the scene is read through the worker into a temporary directory
        outside the scene directory).
        """
        graph = load_relation_graph(self.paths.relation_graph)
        if not self.paths.scene_blend.is_file():
            from ..errors import GroupInputError
            raise GroupInputError("input scene is missing", file=str(self.paths.scene_blend),
                                  fix=f"put the planned scene at <scene_dir>/{SCENE_BLEND}")
        scene_sha = sha256_file(self.paths.scene_blend)
        state = SceneState.load(self.paths.state)
        inputs = state.doc.get("inputs") or {}
        if state.exists and inputs and not self.options.restart:
            changed = [name for name, now in (
                ("relation_graph.json (ids/anchors/members)", graph.structure_sha256),
                ("the input scene", scene_sha))
                if inputs.get("relation_graph_structure_sha256" if "relation" in name
                              else "scene_sha256") != now]
            if changed:
                raise UsageError(f"{' and '.join(changed)} changed since run "
                                 f"{state.doc.get('run_id')}", file=str(self.paths.state),
                                 fix="pass --restart to start over (previous outputs are "
                                     "moved to previous/<UTC>/)")
        prep = Prepared(graph, scene_sha, state)
        if self.options.restart or not self._validation_gate(graph, scene_sha):
            self._measure(prep)
        return prep

    def _validation_gate(self, graph: RelationGraph, scene_sha: str) -> bool:
        p = self.paths
        if not (p.island_groups.is_file() and p.scene_objects.is_file()
                and p.scene_meshes.is_file()):
            return False
        try:
            doc = read_object(p.island_groups, UsageError, "island_groups.json", "")
        except UsageError:
            return False
        if (doc.get("relation_graph_structure_sha256") != graph.structure_sha256
                or doc.get("scene_sha256") != scene_sha):
            return False
        return all(p.group(g).target_spec.is_file() for g in doc["groups_needing_island"])

    def _measure(self, prep: Prepared) -> None:
        t0 = time.perf_counter()
        graph = prep.graph
        tmp = Path(tempfile.mkdtemp(prefix="island_refine_validate_"))
        prep.temp_dir = tmp
        self.say(f"validate: reading {self.paths.scene_blend.name} "
                 f"({len(graph.groups)} groups in the relation graph)")
        result = self.run_job({"op": "scene_read", "blend": str(self.paths.scene_blend),
                               "names": graph.object_names,
                               "export_meshes": str(tmp / "scene_meshes.npz")})
        objects = result["objects"]
        graph.check_against_scene({n: o["type"] for n, o in objects.items()})
        refused = result.get("refusals") or []
        if refused:
            raise SceneRefusedError(refusal_line(refused), file=graph.path,
                                    field=graph.where(refused[0]["member"]))
        unit_scale = float(result.get("unit_scale") or 1.0)
        meshes, _ = meshcache.load(tmp / "scene_meshes.npz")
        world = {n: frames.as_matrix(objects[n]["matrix_world"]) for n in graph.object_names}
        props = {n: objects[n]["props"] for n in graph.object_names}
        measured = {}
        for g in graph.groups:
            measured[g.id] = measure_group(g, world, meshes, props, graph.path, unit_scale)
        prep.measured = measured
        prep.scene_objects = {"blend": str(self.paths.scene_blend),
                              "scene_sha256": prep.scene_sha256,
                              "blender_version": result.get("blender_version"),
                              "file_version": result.get("file_version"),
                              "autoexec_fail": result.get("autoexec_fail"),
                              "unit_scale": unit_scale,
                              "scene": result.get("scene"),
                              "view_layer": result.get("view_layer"),
                              "units": result.get("units") or {},
                              "objects": objects}
        prep.validate_seconds = time.perf_counter() - t0

    # ================================================================== session
    @contextlib.contextmanager
    def _scene_lock(self, shared: bool = False) -> Iterator[None]:
        """Exclusive for a run (and a batch's prepare/finish); shared for batch islands."""
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UsageError("another refine_scene run is active on this scene",
                                 file=str(self.paths.root), fix="wait for it to finish") from None
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def session(self, prep: Prepared, argv: list[str] | tuple[str, ...] = (),
                batch: BatchRun | None = None) -> Iterator[ScenePipeline]:
        """Lock the scene, open the ledger, start a run; any exception marks it failed.

        ``batch``: a batch's prepare stage. The batch's run is started (or continued by a
        retried task) and stays open; an error another attempt may cure (a Blender crash)
        is only logged as a failure - the orchestrator fails the run after the last try."""
        try:
            with self._scene_lock():
                self.ledger = Ledger(self.paths.ledger)
                self.run_id = ""
                try:
                    try:
                        self._start_run(prep, argv, batch)
                        yield self
                    except BaseException as exc:
                        if self.run_id:
                            self._fail_run(exc, batch)
                        raise
                    if batch is None and self.ledger.run_status(self.run_id) == "started":
                        self._finish_run()
                finally:
                    self.ledger.close()
                    self.ledger = None
        finally:
            if prep.temp_dir is not None:
                shutil.rmtree(prep.temp_dir, ignore_errors=True)

    def _start_run(self, prep: Prepared, argv: list[str] | tuple[str, ...],
                   batch: BatchRun | None = None) -> None:
        ledger = self._ledger
        own = (batch.run_id,) if batch else ()
        for dead in ledger.mark_dead_runs(exclude=own):
            self.say(f"run {dead.run_id} (pid {dead.pid}) died without finishing: marked failed")
        # A retried prepare task continues its batch run instead of starting another.
        continuing = batch is not None and prep.state.doc.get("run_id") == batch.run_id
        if self.options.restart and not continuing:
            self._rotate_outputs()
            prep.state = SceneState.load(self.paths.state)
        self.state = prep.state
        self.graph = prep.graph
        doc = self.state.doc
        self.input_sha_before = prep.scene_sha256
        if continuing:
            assert batch is not None
            self.run_id = batch.run_id
            self.state.trace(f"run:{self.run_id}:prepare_retried")
            return
        if doc.get("status") == "running":
            doc["status"] = "failed"
            doc.setdefault("notes", []).append(f"run {doc.get('run_id')} died while running")
        self.run_id = batch.run_id if batch else f"{_stamp()}-{os.getpid()}"
        if ledger.run_status(self.run_id) is None:
            ledger.run_started(self.run_id, batch.argv if batch else argv,
                               batch.owner if batch else None)
        doc.pop("batch", None)
        if batch is not None:
            doc["batch"] = {"run_id": batch.run_id, "stage_seconds_at_start": {
                k: v.get("seconds", 0.0) for k, v in doc["stages"].items()}}
        resumed = bool(doc["runs"])
        doc.update(status="running", run_id=self.run_id, options=self.options.to_dict(),
                   scene_dir=str(self.paths.root))
        doc["runs"].append(self.run_id)
        doc["inputs"] = {"relation_graph_structure_sha256": prep.graph.structure_sha256,
                         "scene_sha256": prep.scene_sha256}
        self.state.trace(f"run:{self.run_id}:{'resumed' if resumed else 'started'}")
        self.say(f"run {self.run_id} {'resumes' if resumed else 'starts'} on {self.paths.root}")

    def _rotate_outputs(self) -> None:
        dest = _unique(self.paths.root / "previous" / _stamp())
        moved = []
        for p in (self.paths.state, self.paths.json_dir, self.paths.groups_dir,
                  self.paths.output_blend, self.paths.metrics):
            if p.exists():
                target = dest / p.relative_to(self.paths.root)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(p, target)
                moved.append(p.name)
        if moved:
            self.say(f"--restart: moved {', '.join(moved)} to {dest}")

    def _finish_run(self) -> None:
        self._ledger.run_finished(self.run_id, self.exit_code,
                                  f"completed={len(self._state.doc['islands_completed'])} "
                                  f"failed={len(self._state.doc['islands_failed'])}")

    def _fail_run(self, exc: BaseException, batch: BatchRun | None = None) -> None:
        if batch is not None and batching.retryable(exc):
            kind = type(exc).__name__
            code = exc.exit_code if isinstance(exc, IslandError) else EXIT_INTERNAL
            msg = exc.one_line() if isinstance(exc, IslandError) else f"internal: {kind}: {exc}"
            with contextlib.suppress(Exception):
                self._ledger.failure(self.run_id, None, "batch:attempt", kind, code,
                                     " ".join(msg.split()))
            return
        if isinstance(exc, IslandError):
            code, kind, msg = exc.exit_code, type(exc).__name__, exc.one_line()
        elif isinstance(exc, KeyboardInterrupt):
            code, kind, msg = 130, "KeyboardInterrupt", "interrupted"
        elif isinstance(exc, SystemExit):
            code, kind, msg = int(exc.code or 1), "SystemExit", f"terminated ({exc.code})"
        else:
            code, kind = EXIT_INTERNAL, type(exc).__name__
            msg = " ".join(f"internal: {kind}: {exc}".split())
        with contextlib.suppress(Exception):
            self._ledger.failure(self.run_id, None, "run", kind, code, msg)
        with contextlib.suppress(Exception):
            self._ledger.run_failed(self.run_id, code, msg)
        if self.state is not None:
            with contextlib.suppress(Exception):
                self.state.doc["status"] = "failed"
                self.state.doc["failure"] = {"run_id": self.run_id, "exit_code": code,
                                             "message": msg}
                self.state.trace(f"run:{self.run_id}:failed")

    # ================================================================== the flow
    def run(self, argv: list[str] | tuple[str, ...] = ()) -> int:
        prep = self.preflight()
        with self.session(prep, argv):
            self.validate(prep)
            self.rebuild_islands()
            self.refine()
            self.merge_back()
            self.finalize()
            self.evaluate()
            self.exit_code = EXIT_GROUPS_FAILED if self._state.doc["islands_failed"] else 0
            self._finish_run()
        return self.exit_code

    # ================================================================== batch stages
    def prepare_batch(self, batch: BatchRun) -> list[str]:
        """Batch task 1: validate + rebuild_islands under the batch's run (left open).
        Returns the flagged groups; each becomes an island task."""
        prep = self.preflight()
        with self.session(prep, batch.argv, batch=batch):
            flagged = self.validate(prep)
            self.rebuild_islands()
        return flagged

    def refine_island(self, gid: str, batch: BatchRun, key: str = "") -> dict[str, Any]:
        """Batch task 2, one per flagged group, concurrently with the scene's other groups:
        the group's rounds as ``run`` does them, recorded through an island marker.

        Returns ``{"group_id", "outcome", "reason", "skipped", "attempt", "seconds"}``;
        ``skipped`` when the island already has a result (never refined twice)."""
        p = self.paths
        gp = p.group(gid)
        if not gp.rounds.is_dir():
            raise UsageError(f"group '{gid}' has no rebuilt island", file=str(gp.root),
                             fix="run the batch's prepare stage (or island-refine run) first")
        with self._scene_lock(shared=True), batching.flock(gp.island_lock):
            marker = batching.read_marker(gp.island_done)
            if marker is not None:
                batching.commit_marker(p, marker)   # a no-op unless an earlier commit died
                if marker["run_id"] != batch.run_id:
                    batching.ledger_event(p, batch.run_id, gid, "skipped", marker["outcome"],
                                          f"result of {marker['attempt_id']} kept")
                return self._island_summary(marker, skipped=True)
            state = DetachedState(p.state, SceneState.load(p.state).doc)
            terminal = state.terminal(gid)
            self.state, self.run_id = state, batch.run_id
            if terminal and self._group_gate(gid, terminal):
                batching.ledger_event(p, batch.run_id, gid, "skipped", terminal,
                                      "terminal in an earlier run")
                return {"group_id": gid, "outcome": terminal, "skipped": True,
                        "reason": None, "attempt": None, "seconds": 0.0}
            self.graph = load_relation_graph(p.relation_graph)
            attempt = batching.begin_attempt(p, gp, batch, key)
            ledger = BufferedLedger()
            self.ledger = ledger
            t0 = time.perf_counter()
            try:
                self._refine_group(gid)
            finally:
                self.ledger = None
            outcome = state.terminal(gid) or GROUP_FAILED
            record = state.group(gid)
            marker = batching.island_marker(
                attempt, outcome, record.get("failure_reason"), record, state.new_trace,
                state.new_seconds, ledger.rows_buffered, time.perf_counter() - t0)
            atomic.write_json(gp.island_done, marker)   # the result exists from here on
            batching.commit_marker(p, marker)
            return self._island_summary(marker, skipped=False)

    @staticmethod
    def _island_summary(marker: Mapping[str, Any], skipped: bool) -> dict[str, Any]:
        return {"group_id": marker["group_id"], "outcome": marker["outcome"],
                "reason": marker.get("reason"), "skipped": skipped,
                "attempt": marker.get("attempt_id"), "seconds": marker.get("seconds", 0.0)}

    def finish_batch(self, batch: BatchRun) -> int:
        """Batch task 3, after every island task of the scene returned or was recorded
        failed: merge_back, finalize, eval; finishes the run. Returns the run's exit code."""
        p = self.paths
        flagged = list(self.island_groups()["groups_needing_island"])
        for gid in flagged:  # results whose commit an earlier process did not finish
            marker = batching.read_marker(p.group(gid).island_done)
            if marker is not None:
                batching.commit_marker(p, marker)
        with self._scene_lock():
            self.ledger = Ledger(p.ledger)
            try:
                self.state = SceneState.load(p.state)
                self.graph = load_relation_graph(p.relation_graph)
                self.run_id = batch.run_id
                doc = self.state.doc
                self.input_sha_before = doc["inputs"]["scene_sha256"]
                try:
                    for gid in flagged:
                        if not self.state.terminal(gid):
                            self._group_failed(gid, 0, "no island result reached the batch",
                                               "MissingResult", EXIT_INTERNAL)
                    at_start = (doc.get("batch") or {}).get("stage_seconds_at_start", {})
                    self.stage_seconds = {
                        k: round(v.get("seconds", 0.0) - at_start.get(k, 0.0), 4)
                        for k, v in doc["stages"].items()}
                    if flagged:
                        for stage in ("refine", "verify", "resolve_unknowns"):
                            if stage in doc["stages"] or stage == "refine":
                                self.state.stage_finished(stage, 0.0)
                    else:
                        self.state.trace("refine:skipped:no_flagged_group")
                    self.merge_back()
                    self.finalize()
                    self.evaluate()
                    self.exit_code = EXIT_GROUPS_FAILED if doc["islands_failed"] else 0
                    self._finish_run()
                except BaseException as exc:
                    self._fail_run(exc, batch)
                    raise
            finally:
                self.ledger.close()
                self.ledger = None
        return self.exit_code

    @staticmethod
    def finished_reason(p: ScenePaths) -> str | None:
        """Read-only: None when the scene is finished and its inputs unchanged (a batch has
        nothing to do), else why not. Checks the artifacts, not only state.json."""
        state = SceneState.load(p.state)
        doc = state.doc
        if doc.get("status") != "finished":
            return f"state is {doc.get('status')!r}"
        for path in (p.finalization, p.metrics, p.output_blend, p.merge_report):
            if not path.is_file():
                return f"{path.relative_to(p.root)} is missing"
        try:
            graph = load_relation_graph(p.relation_graph)
        except IslandError as exc:
            return exc.one_line()
        inputs = doc.get("inputs") or {}
        if not p.scene_blend.is_file() or inputs.get("scene_sha256") != sha256_file(
                p.scene_blend):
            return "the input scene changed"
        if inputs.get("relation_graph_structure_sha256") != graph.structure_sha256:
            return "relation_graph.json changed"
        pending = [g for g in doc.get("groups_needing_island", []) if not state.terminal(g)]
        if pending:
            return f"groups without a result: {', '.join(pending)}"
        merged = read_object(p.merge_report, UsageError, "merge_back.json", "")
        now = {g: sha256_file(p.group(g).island) for g in doc["islands_completed"]}
        if merged.get("islands") != now or merged.get("output_sha256") != sha256_file(
                p.output_blend):
            return "the merged scene does not match the islands"
        return None

    # ------------------------------------------------------------------ 1. validate
    def validate(self, prep: Prepared) -> list[str]:
        state = self._state
        if prep.measured is None:
            # The artifact, not state.json, says which groups are flagged (state may be lost).
            flagged = list(self.island_groups()["groups_needing_island"])
            state.doc["groups_needing_island"] = flagged
            for gid in flagged:
                state.group(gid)
            state.trace("validate:skipped:complete")
            return flagged
        t0 = time.perf_counter()
        p = self.paths
        p.json_dir.mkdir(exist_ok=True)
        flagged = [gid for gid, m in prep.measured.items() if m.needs_island]
        for gid in flagged:
            gp = p.group(gid)
            if gp.round_done(0):
                continue  # already rebuilt: its target_spec.json may carry resolutions
            gp.root.mkdir(parents=True, exist_ok=True)
            atomic.write_json(gp.target_spec, prep.measured[gid].target_spec.to_dict())
        assert prep.temp_dir is not None and prep.scene_objects is not None
        atomic.copy_file(prep.temp_dir / "scene_meshes.npz", p.scene_meshes)
        atomic.write_json(p.scene_objects, prep.scene_objects)
        doc = {"groups_needing_island": flagged,
               "relation_graph_structure_sha256": prep.graph.structure_sha256,
               "scene_sha256": prep.scene_sha256,
               "rules": "a group needs an island when any review fails on the scene as it is "
                        "(docs/SCENE_PIPELINE.md, 'validate')",
               "groups": {gid: m.doc() for gid, m in prep.measured.items()}}
        atomic.write_json(p.island_groups, doc)  # written last: the stage's completion gate
        state.doc["groups_needing_island"] = flagged
        for gid in flagged:
            state.group(gid)
        self._time("validate", prep.validate_seconds + time.perf_counter() - t0)
        state.stage_finished("validate", 0.0)
        state.trace("validate")
        self.say(f"validate: {len(flagged)} of {len(prep.measured)} groups need an island: "
                 f"{', '.join(flagged) or 'none'}")
        return flagged

    def island_groups(self) -> dict[str, Any]:
        return read_object(self.paths.island_groups, UsageError, "island_groups.json",
                           "rerun validate")

    # ------------------------------------------------------------------ 2. rebuild_islands
    def rebuild_islands(self) -> None:
        state, p = self._state, self.paths
        flagged = state.doc["groups_needing_island"]
        todo = [g for g in flagged if not p.group(g).rebuilt()]
        if not todo:
            state.trace("rebuild_islands:skipped:complete" if flagged
                        else "rebuild_islands:skipped:no_flagged_group")
            return
        t0 = time.perf_counter()
        graph = self.graph
        assert graph is not None
        scene_doc = read_object(p.scene_objects, UsageError, "scene_objects.json",
                                "rerun validate")
        objects = scene_doc["objects"]
        unit_scale = float(scene_doc.get("unit_scale") or 1.0)
        jobs, planned = [], {}
        for gid in todo:
            g = graph.group(gid)
            gp = p.group(gid)
            stage = gp.root / ".rebuild.tmp"
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir(parents=True)
            world = {n: frames.as_matrix(objects[n]["matrix_world"]) for n in g.objects}
            m_anchor, m_inv = frames.canonical_frame(world[g.anchor], unit_scale)
            planned[gid] = (m_anchor, m_inv, {n: m_inv @ world[n] for n in g.objects},
                            unit_scale)
            jobs.append({"id": gid, "anchor_id": g.anchor, "members": list(g.objects),
                         "m_inv": frames.to_list(m_inv), "out_blend": str(stage / "island.blend"),
                         "masked_png": str(stage / "masked.png"),
                         "export_meshes": str(stage / "meshes.npz")})
        self.say(f"rebuild_islands: {', '.join(todo)}")
        result = self.run_job({"op": "scene_rebuild", "blend": str(p.scene_blend),
                               "groups": jobs,
                               "masked": {"resolution": self.options.settings.resolution,
                                          "context": graph.object_names}})
        for gid in todo:
            self._commit_island(graph.group(gid), planned[gid], result["groups"][gid])
            state.trace(f"rebuild_islands:{gid}")
        self._time("rebuild_islands", time.perf_counter() - t0)
        state.stage_finished("rebuild_islands", 0.0)

    def _commit_island(self, g: GroupSpec, planned: tuple, built: Mapping[str, Any]) -> None:
        m_anchor, m_inv, canonical, unit_scale = planned
        gp = self.paths.group(g.id)
        stage = gp.root / ".rebuild.tmp"
        read_back = {n: frames.as_matrix(built["poses"][n]) for n in g.objects}
        for n in g.objects:  # canonical poses are in metres
            ratio, detail = frames.pose_mismatch(canonical[n], read_back[n])
            if ratio > 1.0:
                raise IntegrityError(f"group '{g.id}': the pose of '{n}' read back from the "
                                     f"island differs from the planned canonical pose: "
                                     f"{detail}", file=str(stage / "island.blend"))
        metadata = {"anchor_id": g.anchor, "M_anchor_4x4": frames.to_list(m_anchor),
                    "M_inv_4x4": frames.to_list(m_inv), "members": list(g.objects),
                    "canonical_poses": {n: frames.to_list(read_back[n]) for n in g.objects},
                    "unit_scale": unit_scale,
                    "units": built.get("units") or {},
                    "group_id": g.id, "source_scene": str(self.paths.scene_blend),
                    "source_scene_sha256": self.input_sha_before}
        if g.relation_label:
            metadata["relation_label"] = g.relation_label
        if g.forward_axis:
            metadata["forward_axis_overrides"] = dict(g.forward_axis)
        atomic.write_json(stage / "metadata.json", metadata)
        round0 = gp.round(0)
        if round0.exists():
            shutil.rmtree(round0)
        round0.mkdir(parents=True)
        atomic.copy_file(stage / "island.blend", round0 / "island.blend")
        atomic.copy_file(stage / "metadata.json", round0 / "metadata.json")
        atomic.copy_file(gp.target_spec, round0 / "target_spec.json")
        atomic.write_json(round0 / "poses.json", _poses_doc(read_back))
        for name in ("island.blend", "metadata.json", "masked.png", "meshes.npz"):
            os.replace(stage / name, gp.root / name)
        shutil.rmtree(stage, ignore_errors=True)
        write_forward_axes(gp)
        atomic.write_json(round0 / "result.json", {
            "round": 0, "kind": "rebuild", "decision": "baseline",
            "island_sha256": sha256_file(round0 / "island.blend"), "at_utc": utc_now(),
            "materials": built.get("materials"), "masked": built.get("masked")})

    # ------------------------------------------------------------------ 3+4. refine / verify
    def refine(self) -> None:
        state = self._state
        flagged = state.doc["groups_needing_island"]
        if not flagged:
            state.trace("refine:skipped:no_flagged_group")
            return
        for gid in flagged:
            self._refine_group(gid)
        for stage in ("refine", "verify", "resolve_unknowns"):
            if stage in state.doc["stages"] or stage == "refine":
                state.stage_finished(stage, 0.0)

    def _group_gate(self, gid: str, terminal: str) -> bool:
        gp = self.paths.group(gid)
        if terminal == GROUP_FAILED:
            return gp.round_done(0)
        g = self._state.group(gid)
        k = int(g.get("accepted_round", -1))
        return (k >= 0 and gp.round_done(k) and gp.verification.is_file() and gp.island.is_file()
                and sha256_file(gp.island) == sha256_file(gp.round(k) / "island.blend"))

    def _reset_group(self, gid: str) -> None:
        gp = self.paths.group(gid)
        leftovers = [c for c in (gp.rounds.iterdir() if gp.rounds.is_dir() else [])
                     if c.name != "round_0"] + [p for p in (gp.verification, gp.island_done)
                                                if p.exists()]
        backup = None
        if leftovers:
            backup = _unique(gp.root / f"rounds.bak.{_stamp()}")
            backup.mkdir()
            for item in leftovers:
                os.replace(item, backup / item.name)
        round0 = gp.round(0)
        atomic.copy_file(round0 / "island.blend", gp.island)
        atomic.copy_file(round0 / "metadata.json", gp.metadata)
        atomic.copy_file(round0 / "target_spec.json", gp.target_spec)
        write_forward_axes(gp)
        self._state.forget_terminal(gid)
        where = f"; earlier rounds moved to {backup.name}/" if backup else ""
        self._ledger.group_event(self.run_id, gid, "reset", GROUP_PENDING,
                                 f"unfinished by an earlier run: redone from round_0{where}")
        self.say(f"{gid}: unfinished by an earlier run, redone from round_0{where}")

    def _refine_group(self, gid: str) -> None:
        state, gp = self._state, self.paths.group(gid)
        terminal = state.terminal(gid)
        if terminal and self._group_gate(gid, terminal):
            state.trace(f"refine:{gid}:skipped:{terminal}")
            self._ledger.group_event(self.run_id, gid, "skipped", terminal, "terminal in an "
                                                                             "earlier run")
            return
        g = state.group(gid)
        if terminal or g["status"] != GROUP_PENDING or gp.rounds.is_dir() and any(
                c.name != "round_0" for c in gp.rounds.iterdir()):
            self._reset_group(gid)
        g.update(status=GROUP_RUNNING, rounds=[], unknowns=[], accepted_round=0,
                 verification=None, current_round=0)
        g.pop("failure_reason", None)
        state.save()
        self._ledger.group_event(self.run_id, gid, "started", GROUP_RUNNING,
                                 f"policy {self.options.policy}")
        try:
            self._rounds(gid)
        except IslandError as exc:
            self._group_failed(gid, g.get("current_round", 0), f"{type(exc).__name__} "
                               f"(exit {exc.exit_code}): {exc.one_line()}", type(exc).__name__,
                               exc.exit_code)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            msg = " ".join(f"internal: {type(exc).__name__}: {exc}".split())
            self._group_failed(gid, g.get("current_round", 0), msg, type(exc).__name__,
                               EXIT_INTERNAL)

    def _group_failed(self, gid: str, round_: int, reason: str, kind: str, code: int) -> None:
        g = self._state.group(gid)
        accepted = int(g.get("accepted_round", 0))
        gp = self.paths.group(gid)
        if gp.round_done(accepted):
            atomic.copy_file(gp.round(accepted) / "island.blend", gp.island)
        self._ledger.failure(self.run_id, gid, f"refine:round_{round_}", kind, code, reason)
        self._ledger.group_event(self.run_id, gid, "failed", GROUP_FAILED, reason)
        self._state.mark_failed(gid, f"round {round_}: {reason}")
        self._state.trace(f"refine:{gid}:failed")
        self.say(f"{gid}: FAILED in round {round_}: {reason}")

    def _context(self, gid: str) -> tuple[GeometryContext, dict, dict, list[str]]:
        """Geometry context with the group's current meshes, forward axes and target spec."""
        gp = self.paths.group(gid)
        metadata = load_metadata(gp.metadata)
        spec = load_target_spec(gp.target_spec, len(metadata.refined_members)).to_dict()
        meshes, _ = meshcache.load(gp.meshes)
        axes = read_object(gp.forward_axes, IntegrityError, "forward_axes.json",
                           "rerun the group")
        group_meshes = {n: meshes[n] for n in metadata.members}
        return (GeometryContext(group_meshes, metadata.anchor_id, axes), spec, axes,
                list(metadata.refined_members))

    def _rounds(self, gid: str) -> None:
        state, gp, ledger, opts = self._state, self.paths.group(gid), self._ledger, self.options
        g = state.group(gid)
        accepted = 0
        for k in range(1, opts.max_rounds + 1):
            g["current_round"] = k
            kind = "refine"
            if k > 1:
                open_unknowns = [u for u in g["unknowns"] if u["status"] == "open"]
                if open_unknowns:
                    self._resolve_unknowns(gid, open_unknowns, k)
                else:
                    kind = "repair"
            state.trace(f"{kind}:{gid}:round_{k}")
            ledger.group_event(self.run_id, gid, "round_started", GROUP_RUNNING,
                               f"round {k} ({kind})")
            self.say(f"{gid}: round {k} ({kind}) with policy {opts.policy}")
            t0 = time.perf_counter()
            report = self.run_group_fn()(
                gp.root, opts.policy, opts.settings, self.run_job, max_iter=opts.max_iter,
                progress=(lambda msg: self.say(f"{gid}: {msg}")) if self.progress else None,
                timeout_s=opts.timeout_s)
            self._time("refine", time.perf_counter() - t0)
            check = contract.check_loop(gp.root, opts.max_iter)
            for row in check.iterations:
                ledger.iteration(self.run_id, gid, k, row)
            record: dict[str, Any] = {
                "round": k, "kind": kind, "policy": opts.policy,
                "final_iter": getattr(report, "final_iter", None),
                "stop_reason": getattr(report, "stop_reason", None),
                "report": getattr(report, "report_text", None),
                "report_ok": getattr(report, "ok", None),
                "report_errors": list(getattr(report, "errors", []) or []),
                "contract": check.to_dict()}
            if not check.ok:
                record["decision"] = "rejected: contract"
                self._write_round(gid, k, record, island=False)
                g["rounds"].append(record)
                ledger.decision(self.run_id, gid, k, "rollback", reason=f"contract: "
                                                                        f"{check.reason}")
                self._group_failed(gid, k, f"contract: {check.reason}", "ContractViolation",
                                   EXIT_GROUPS_FAILED)
                return
            accepted = self._score_gate(gid, k, accepted, record)
            g["rounds"].append(record)
            g["accepted_round"] = accepted
            state.save()
            review = self._verify(gid, k, accepted)
            route = self._route(gid, k, review)
            if route != "continue":
                break
        v = g["verification"]
        ledger.group_event(self.run_id, gid, "completed", GROUP_COMPLETED,
                           f"accepted round {accepted}; verdict {v['verdict']}: "
                           f"{v['pass']}/{v['total']} reviews pass, {v['fail']} fail, "
                           f"{v['uncertain']} uncertain")
        state.mark_completed(gid)
        state.trace(f"refine:{gid}:completed")
        self.say(f"{gid}: completed (accepted round {accepted}, verdict {v['verdict']}, "
                 f"{v['pass']}/{v['total']} reviews pass)")
        for line in v.get("not_measured") or []:
            self.say(f"{gid}: UNCERTAIN {line}")

    def _score_gate(self, gid: str, k: int, accepted: int, record: dict[str, Any]) -> int:
        """Keep round k only if it lowers the violation score by >= min_delta."""
        gp, opts = self.paths.group(gid), self.options
        final = record["contract"]["final_iter"]
        state_doc = read_object(gp.root / REFINER_DIR / f"iter_{final}" / "current_state.json",
                                IntegrityError, "current_state.json", "rerun the group")
        new_poses = {n: frames.as_matrix(e["matrix_4x4"]) for n, e in state_doc["poses"].items()}
        prev_poses = _load_poses(gp.round(accepted) / "poses.json")
        ctx, spec, _, _ = self._context(gid)
        before = verify.violation_score(ctx.compute(prev_poses, spec, 0), spec)
        after = verify.violation_score(ctx.compute(new_poses, spec, final), spec)
        g = self._state.group(gid)
        if k == 1:
            g["baseline_score"] = before
        improved = before - after >= opts.min_delta
        record.update(score_before=before, score_after=after, min_delta=opts.min_delta)
        if improved:
            record["decision"] = "accept"
            self._write_round(gid, k, record, island=True, poses=new_poses)
            self._ledger.decision(self.run_id, gid, k, "accept", before, after, opts.min_delta,
                                  f"violation score {before:.4f} -> {after:.4f}")
            g["accepted_score"] = after
            self.say(f"{gid}: round {k} accepted: score {before:.4f} -> {after:.4f}")
            return k
        record["decision"] = f"rollback: keep round {accepted}"
        atomic.copy_file(gp.round(accepted) / "island.blend", gp.island)
        self._write_round(gid, k, record, island=False)
        self._ledger.decision(self.run_id, gid, k, "rollback", before, after, opts.min_delta,
                              f"score {before:.4f} -> {after:.4f} improves by less than "
                              f"{opts.min_delta}; round {accepted} kept")
        g["accepted_score"] = before
        self.say(f"{gid}: round {k} rolled back: score {before:.4f} -> {after:.4f} "
                 f"(min delta {opts.min_delta}); round {accepted} kept")
        return accepted

    def _write_round(self, gid: str, k: int, record: dict[str, Any], island: bool,
                     poses: Mapping[str, np.ndarray] | None = None) -> None:
        gp = self.paths.group(gid)
        rdir = gp.round(k)
        if rdir.exists():
            shutil.rmtree(rdir)
        rdir.mkdir(parents=True)
        if island:
            atomic.copy_file(gp.island, rdir / "island.blend")
            assert poses is not None
            atomic.write_json(rdir / "poses.json", _poses_doc(poses))
            record["island_sha256"] = sha256_file(rdir / "island.blend")
        atomic.write_json(rdir / "result.json", {**record, "run_id": self.run_id,
                                                  "at_utc": utc_now()})

    def _verify(self, gid: str, k: int, accepted: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        gp, g = self.paths.group(gid), self._state.group(gid)
        ctx, spec, axes, members = self._context(gid)
        poses = _load_poses(gp.round(accepted) / "poses.json")
        geometry = ctx.compute(poses, spec, k)
        resolved = {u["id"]: u["resolution"] for u in g["unknowns"]
                    if u["status"] == "resolved"}
        review = verify.review_group(gid, geometry, spec, axes, members, resolved)
        doc = {"group_id": gid, "round": k, "accepted_round": accepted,
               "source": "island_tools.scene.verify", "run_id": self.run_id,
               "generated_utc": utc_now(), "target_spec": spec,
               "thresholds": {"facing_tol_deg": verify.FACING_TOL_DEG,
                              "clearance_tol_m": verify.CLEARANCE_TOL_M,
                              "too_far_tol_m": verify.too_far_tolerance(spec["spacing"]),
                              "spacing_tol_m": verify.SPACING_TOL_M,
                              "ring_gap_cv_tol": verify.RING_GAP_CV_TOL},
               "review_results": review["review_results"],
               "new_unknowns": review["new_unknowns"],
               "resolved_unknowns": [u for u in g["unknowns"] if u["status"] == "resolved"],
               "summary": review["summary"], "violation_score": review["violation_score"]}
        atomic.write_json(gp.verification, doc)
        g["verification"] = {k2: review["summary"][k2]
                             for k2 in ("pass", "fail", "uncertain", "total", "pass_rate",
                                        "verdict", "not_measured")}
        known = {u["id"] for u in g["unknowns"]}
        for u in review["new_unknowns"]:
            if u["id"] not in known:
                g["unknowns"].append({**u, "raised_round": k})
        self._state.save()
        self._state.trace(f"verify:{gid}:round_{k}")
        self._time("verify", time.perf_counter() - t0)
        return review

    def _route(self, gid: str, k: int, review: Mapping[str, Any]) -> str:
        """Seed 000's branch after verify: unknowns first, then repair, else finalize.

        An unknown is asked once per round until it is answered; one that nobody answered
        (no override in the relation graph, no object property) stays open and the group
        ends ``uncertain``, never ``pass``. Repair rounds are for failed reviews only: a
        check that cannot be measured is not repaired by moving furniture."""
        ledger, last = self._ledger, k >= self.options.max_rounds
        summary = review["summary"]
        asked = {u["id"] for u in self._state.group(gid)["unknowns"] if u.get("attempts")}
        fresh = [u for u in review["new_unknowns"] if u["id"] not in asked]
        if fresh:
            ids = ", ".join(u["id"] for u in fresh)
            if last:
                ledger.decision(self.run_id, gid, k, "finalize",
                                reason=f"max rounds reached with open unknowns: {ids}")
                return "stop"
            ledger.decision(self.run_id, gid, k, "resolve_unknowns",
                            reason=f"next round resolves {ids} first")
            self.say(f"{gid}: new unknowns {ids}: resolved before the next round")
            return "continue"
        if summary["fail"]:
            bad = [i["id"] for i in review["review_results"] if i["verdict"] == "fail"]
            if last:
                ledger.decision(self.run_id, gid, k, "finalize",
                                reason=f"max rounds reached; failing: {', '.join(bad)}")
                return "stop"
            families = sorted({i["failure_family"] for i in review["review_results"]
                               if i["verdict"] == "fail"})
            ledger.decision(self.run_id, gid, k, "repair",
                            reason=f"{len(bad)} review(s) failing ({', '.join(families)}): "
                                   f"{', '.join(bad[:8])}")
            self.say(f"{gid}: {len(bad)} review(s) failing: repair round {k + 1}")
            return "continue"
        if summary["uncertain"]:
            lines = "; ".join(summary.get("not_measured") or [])
            ledger.decision(self.run_id, gid, k, "finalize",
                            reason=f"uncertain: not measured: {lines}")
            return "stop"
        ledger.decision(self.run_id, gid, k, "finalize", reason="all reviews pass")
        return "stop"

    def _resolve_unknowns(self, gid: str, open_unknowns: list[dict[str, Any]], k: int) -> None:
        """Unknown first: fill each open unknown from the relation graph, read again (a
        person may have answered it since). No answer leaves it open (the group cannot pass
        on it); there is no default that turns an unmeasured check into a pass."""
        t0 = time.perf_counter()
        gp = self.paths.group(gid)
        try:
            fresh = load_relation_graph(self.paths.relation_graph).group(gid)
        except (RelationGraphError, KeyError):
            assert self.graph is not None
            fresh = self.graph.group(gid)
        for u in open_unknowns:
            if u["kind"] == "forward_axis":
                resolution = self._resolve_forward_axis(gp, fresh, u["target_id"])
                ask = (f"groups[{fresh.index}].forward_axis.{u['target_id']} in "
                       "relation_graph.json, or the object's custom property forward_axis")
            else:
                resolution = self._resolve_pattern(gp, fresh)
                ask = f"groups[{fresh.index}].relation.pattern in relation_graph.json"
            u["attempts"] = int(u.get("attempts", 0)) + 1
            if resolution is None:
                u["unresolved"] = f"no answer yet: declare {ask}"
                self._ledger.decision(self.run_id, gid, k, "unknown_open",
                                      reason=f"{u['id']}: no answer; declare {ask}")
                self.say(f"{gid}: {u['id']} stays open: declare {ask}")
                continue
            u.update(status="resolved", resolution=resolution, resolved_round=k)
            u.pop("unresolved", None)
            self._ledger.decision(self.run_id, gid, k, "resolve_unknown",
                                  reason=f"{u['id']}: {resolution['note']} "
                                         f"(source: {resolution['source']})")
            self.say(f"{gid}: {u['id']} resolved: {resolution['note']}")
        self._state.save()
        self._state.trace(f"resolve_unknowns:{gid}:round_{k}")
        self._time("resolve_unknowns", time.perf_counter() - t0)

    def _resolve_forward_axis(self, gp: GroupPaths, fresh: GroupSpec, name: str
                              ) -> dict[str, Any] | None:
        value = fresh.forward_axis.get(name)
        if value is None:
            return None
        meta = read_object(gp.metadata, IntegrityError, "metadata.json", "rebuild the island")
        meta.setdefault("forward_axis_overrides", {})[name] = value
        atomic.write_json(gp.metadata, meta)
        write_forward_axes(gp)  # the loop reads the cached file: refresh it with the answer
        return {"source": "relation_graph", "value": value,
                "note": f"forward axis of '{name}' is {value!r} (override)", "at_utc": utc_now()}

    def _resolve_pattern(self, gp: GroupPaths, fresh: GroupSpec) -> dict[str, Any] | None:
        spec = read_object(gp.target_spec, IntegrityError, "target_spec.json", "rerun validate")
        hint = fresh.relation.get("pattern")
        if hint in CHECKABLE_PATTERNS and hint != spec.get("pattern"):
            new = {**spec, "pattern": hint}
            parse_target_spec(new, str(gp.target_spec), spec.get("member_count"))
            atomic.write_json(gp.target_spec, new)
            return {"source": "relation_graph", "value": hint,
                    "note": f"pattern is '{hint}' (relation hint)", "at_utc": utc_now()}
        return None

    # ------------------------------------------------------------------ 5. merge_back
    def merge_back(self, group_ids: list[str] | None = None) -> dict[str, Any]:
        """Write blend/stage3-scene.blend: the input scene with every refined member of the
        given groups (default: the completed ones) at ``M_anchor @ canonical``."""
        state, p = self._state, self.paths
        groups = list(state.doc["islands_completed"] if group_ids is None else group_ids)
        fingerprint = {gid: sha256_file(p.group(gid).island) for gid in groups}
        if group_ids is None and p.merge_report.is_file() and p.output_blend.is_file():
            old = read_object(p.merge_report, UsageError, "merge_back.json", "")
            if (old.get("islands") == fingerprint
                    and old.get("output_sha256") == sha256_file(p.output_blend)):
                state.trace("merge_back:skipped:complete")
                return old
        t0 = time.perf_counter()
        targets: dict[str, list[list[float]]] = {}
        owner: dict[str, str] = {}
        for gid in groups:
            gp = p.group(gid)
            metadata = load_metadata(gp.metadata)
            read = self.run_job({"op": "read_poses", "blend": str(gp.island),
                                 "members": list(metadata.members)})
            for name in metadata.refined_members:
                canonical = frames.as_matrix(read["poses"][name])
                targets[name] = frames.to_list(
                    frames.world_from_canonical(metadata.m_anchor, canonical))
                owner[name] = gid
        self.say(f"merge_back: {len(targets)} member(s) of {len(groups)} group(s) -> "
                 f"{p.output_blend.relative_to(p.root)}")
        # Written beside the output and moved over it only after the read-back checks: a
        # failed merge leaves the earlier merged scene (or none) where it was.
        staged = p.output_blend.with_name(f".{p.output_blend.stem}.{os.getpid()}.tmp.blend")
        try:
            result = self.run_job({"op": "scene_merge", "blend": str(p.scene_blend),
                                   "out_blend": str(staged), "poses": targets})
            worst, followers = self._check_merged(result, targets, staged)
            os.replace(staged, p.output_blend)
        finally:
            staged.unlink(missing_ok=True)
        before, after = result["before"], result["after"]
        graph_names = set(self.graph.object_names) if self.graph else set()
        report = {"run_id": self.run_id, "groups": groups, "islands": fingerprint,
                  "assigned": owner, "max_abs_error": worst,
                  "untouched_objects": len(before) - len(targets) - len(followers),
                  "followers": followers,
                  "input_sha256": sha256_file(p.scene_blend),
                  "output_sha256": sha256_file(p.output_blend),
                  "after_poses": {n: after[n] for n in sorted(graph_names) if n in after},
                  "unit_scale": result.get("unit_scale"),
                  "blender_version": result.get("blender_version"), "at_utc": utc_now()}
        atomic.write_json(p.merge_report, report)
        self._time("merge_back", time.perf_counter() - t0)
        state.stage_finished("merge_back", 0.0)
        state.trace("merge_back")
        return report

    def _check_merged(self, result: Mapping[str, Any], targets: Mapping[str, Any],
                      staged: Path) -> tuple[float, list[str]]:
        """The merged file as read back: every moved root where it was written (tolerance
        scaled to the scene, ``frames.pose_mismatch``), every descendant of a moved root with
        its local transform unchanged, every other object with its world matrix unchanged.
        Raises IntegrityError naming the object; returns the worst location error in metres
        and the descendants that followed their roots."""
        p = self.paths
        kept = ("the earlier blend/stage3-scene.blend is kept" if p.output_blend.is_file()
                else "no blend/stage3-scene.blend was written")
        before, after, parents = result["before"], result["after"], result["parents"]
        unit_scale = float(result.get("unit_scale") or 1.0)
        worst = 0.0
        for name, pose in targets.items():
            ratio, detail = frames.pose_mismatch(np.asarray(pose), np.asarray(after[name]),
                                                 unit_scale)
            worst = max(worst, _max_abs(np.asarray(pose)[:3, 3],
                                        np.asarray(after[name])[:3, 3]) * unit_scale)
            if ratio > 1.0:
                raise IntegrityError(f"the merged scene read back puts '{name}' elsewhere than "
                                     f"written: {detail}; {kept}", file=str(staged))

        def moved_ancestor(name: str) -> bool:
            while name in parents:
                name = parents[name]
                if name in targets:
                    return True
            return False

        if set(after) != set(before):
            raise IntegrityError(f"the merged scene has other objects than the input: "
                                 f"{sorted(set(after) ^ set(before))[:8]}; {kept}",
                                 file=str(staged))
        followers = sorted(n for n in before if n not in targets and moved_ancestor(n))
        moved_local = [n for n in followers if _max_abs(result["after_basis"][n],
                                                        result["before_basis"][n])
                       > UNTOUCHED_TOL]
        changed = sorted(n for n in before if n not in targets and n not in followers
                         and _max_abs(after[n], before[n]) > UNTOUCHED_TOL)
        if moved_local or changed:
            what = (f"parts of moved units changed their local transform: {moved_local[:8]}"
                    if moved_local else f"objects outside the groups moved: {changed[:8]}")
            raise IntegrityError(f"{what}; {kept}", file=str(staged))
        return worst, followers

    # ------------------------------------------------------------------ 6. finalize + eval
    def finalize(self) -> None:
        t0 = time.perf_counter()
        state, p = self._state, self.paths
        after = sha256_file(p.scene_blend)
        state.doc["inputs"]["scene_sha256_after"] = after
        if after != self.input_sha_before:
            raise IntegrityError("the input scene changed during the run (sha256 "
                                 f"{self.input_sha_before[:12]} -> {after[:12]})",
                                 file=str(p.scene_blend), fix="never write the input scene")
        doc = {"run_id": self.run_id, "runs": state.doc["runs"],
               "groups_needing_island": state.doc["groups_needing_island"],
               "islands_completed": state.doc["islands_completed"],
               "islands_failed": state.doc["islands_failed"],
               "output_blend": str(p.output_blend),
               "output_sha256": sha256_file(p.output_blend),
               "input_sha256_before": self.input_sha_before, "input_sha256_after": after,
               "stage_trace": state.doc["stage_trace"], "at_utc": utc_now()}
        atomic.write_json(p.finalization, doc)
        state.doc["status"] = "finished"
        self._time("finalize", time.perf_counter() - t0)
        state.stage_finished("finalize", 0.0)
        state.trace("finalize")

    def evaluate(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        state, p = self._state, self.paths
        assert self.graph is not None
        metrics = build_metrics(self.graph, p, state.doc)
        self._time("eval", time.perf_counter() - t0)
        metrics["stage_seconds_this_run"] = dict(self.stage_seconds)
        metrics["stage_seconds_total"] = {k: v.get("seconds", 0.0)
                                          for k, v in state.doc["stages"].items()}
        atomic.write_json(p.metrics, metrics)
        state.stage_finished("eval", 0.0)
        state.trace("eval")
        scene = metrics["scene"]
        after = scene["after"]
        self.say(f"eval: pass rate {scene['before']['pass_rate']:.2f} -> "
                 f"{after['pass_rate']:.2f}, violation score "
                 f"{scene['before']['violation_score']:.3f} -> "
                 f"{after['violation_score']:.3f}; groups: {after['groups_pass']} pass, "
                 f"{after['groups_fail']} fail, {after['groups_uncertain']} uncertain")
        for gid, entry in metrics["groups"].items():
            for line in entry["after"]["not_measured"]:
                self.say(f"eval: {gid} UNCERTAIN {line}")
        return metrics
