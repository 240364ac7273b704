"""The pure half of batch refinement (``island-refine batch``, ``scripts/batch.py``): one
scene run split into tasks that may run in different processes, on different hosts.

Per scene, under one *batch run* (``BatchRun``: id, the orchestrator's process identity,
argv) that the orchestrator owns:

1. prepare  ``ScenePipeline.prepare_batch``: validate + rebuild_islands; the run is started
            (or continued, when the task is retried) and left open.
2. island   ``ScenePipeline.refine_island`` per flagged group, concurrently: the group's
            rounds exactly as ``island-refine run`` does them, on a snapshot of state.json
            (``state.DetachedState``) and a buffered ledger. The result - outcome, the
            group's state record, trace entries, stage seconds, ledger rows - is written
            atomically to ``relation_groups/<G>/island_done.json`` (the *marker*) and then
            committed (:func:`commit_marker`).
3. finish   ``ScenePipeline.finish_batch``: merge_back, finalize, eval; the run finishes.

Exactly once. A marker is written before anything else learns of the result; committing it
is idempotent (the ledger block is skipped when the run already has the group's terminal
event, the state record when it carries the marker's ``attempt_id``), so whoever finds a
marker - a retried task, the finish stage, a later batch - can commit it again safely. A
group with a marker is never refined again (``island-refine run``'s reset of an unfinished
group moves the marker away with the group's other leftovers). An island task killed before
its marker leaves state.json and the ledger as they were, except one ``attempt_started``
event; the next attempt resets the group (the no-resume policy: a fresh simple_refiner).

Locks (``flock``; all released by the kernel when a process dies): the scene lock
``.refine_scene.lock`` (prepare/finish exclusive, islands shared, so ``island-refine run``
cannot start in the middle), the per-group ``relation_groups/<G>/.island.lock`` (two attempts
of one island never overlap), and ``.state.lock`` around every state.json read-modify-write
and batch ledger write. Each batch ledger write opens, writes and closes its connection.

A scene directory moved away or deleted during a batch costs that scene only and is never
re-created: the orchestrator notes each directory's identity (device, inode) when the batch
starts (:func:`dir_identity`) and checks it before it hands out a task or records anything;
each task runs :func:`scene_held`, which refuses a directory that is not the one the batch
started with and confines every write to it (``atomic.confined``, which never creates a
confined root again).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import IslandError, UsageError, WorkerError
from ..files import atomic, locks
from ..files.jsonio import read_object
from .ledger import Ledger, ProcessIdentity, utc_now
from .paths import ISLAND_ATTEMPT, ISLAND_MARKER, GroupPaths, ScenePaths
from .state import GROUP_COMPLETED, GROUP_FAILED, SceneState

MARKER_VERSION = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class BatchRun:
    """One batch run of a scene; the orchestrator's process owns it (a kill -9 of the
    orchestrator leaves it 'started' until the next run marks it failed)."""

    run_id: str
    owner: ProcessIdentity
    argv: tuple[str, ...] = ()

    @classmethod
    def new(cls, argv: list[str] | tuple[str, ...] = ()) -> BatchRun:
        stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime())
        return cls(f"batch-{stamp}-{os.getpid()}", ProcessIdentity.current(), tuple(argv))


@dataclass(frozen=True)
class Attempt:
    """Who is refining an island now (``island_attempt.json``)."""

    run_id: str
    group_id: str
    attempt: int
    host: str
    pid: int
    key: str = ""
    started_utc: str = field(default_factory=utc_now)

    @property
    def attempt_id(self) -> str:
        return f"{self.run_id}#{self.attempt}"


def scene_id(scene_dir: str | os.PathLike[str]) -> str:
    """Stable, unique name of a scene directory: its name plus a hash of its absolute path
    (two scenes both called ``scene`` in different folders stay apart; the same directory
    gets the same id in every batch)."""
    path = Path(scene_dir).expanduser().resolve()
    name = _UNSAFE.sub("_", path.name).strip("._") or "scene"
    return f"{name[:48]}-{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"


Identity = tuple[int, int]
VANISHED = ("the scene directory vanished during the batch (moved or deleted); nothing is "
            "written at its old path")
REPLACED = ("the scene directory was replaced by another one during the batch; nothing is "
            "written into the new one")


def dir_identity(path: str | os.PathLike[str]) -> Identity | None:
    """(device, inode) of the directory at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if os.path.isdir(path) else None


def scene_gone(path: str | os.PathLike[str], identity: Identity | None) -> str | None:
    """Why the directory at ``path`` is no longer the batch's scene (None: it still is)."""
    if identity is None:
        return None
    now = dir_identity(path)
    return None if now == identity else VANISHED if now is None else REPLACED


@contextlib.contextmanager
def scene_held(scene_dir: str | os.PathLike[str], identity: Identity | None
               ) -> Iterator[None]:
    """A batch task's hold on its scene: UsageError (exit 2, not retried) when the directory
    is not the one the batch started with; while held, every write goes beneath it through
    a descriptor (``atomic.confined``), so a directory moved away mid-task is neither
    written at its old path nor re-created there."""
    why = scene_gone(scene_dir, identity)
    if why is not None:
        raise UsageError(why, file=str(scene_dir), fix="put the scene back and run the batch "
                                                       "again")
    if identity is None:
        yield
        return
    guard = atomic.Confined([scene_dir])
    guard.pin(scene_dir)
    with atomic.confined(guard):
        yield


def retryable(exc: BaseException) -> bool:
    """May another attempt succeed? Blender/worker failures and crashes may be transient; a
    bad input (relation graph, missing scene, changed inputs, integrity) stays bad."""
    return isinstance(exc, WorkerError) or not isinstance(exc, IslandError)


def flock(path: Path, shared: bool = False, blocking: bool = True
          ) -> contextlib.AbstractContextManager[bool]:
    """Hold ``flock`` on ``path`` (created 0644 if needed); yields False if non-blocking and
    busy."""
    return locks.flock(path, shared=shared, blocking=blocking, mode=0o644)


# --------------------------------------------------------------------------- markers
def read_marker(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    doc = read_object(path, IslandError, ISLAND_MARKER, "move it away to refine the island again")
    if doc.get("version") != MARKER_VERSION or doc.get("outcome") not in (GROUP_COMPLETED,
                                                                         GROUP_FAILED):
        raise IslandError("not an island result marker", file=str(path),
                          fix="move it away to refine the island again")
    return doc


def island_marker(attempt: Attempt, outcome: str, reason: str | None, group: dict[str, Any],
                  trace: list[str], stage_seconds: dict[str, float],
                  ledger_rows: list[tuple[str, dict[str, Any]]], seconds: float
                  ) -> dict[str, Any]:
    return {"version": MARKER_VERSION, "kind": "island_result", "group_id": attempt.group_id,
            "run_id": attempt.run_id, "attempt": attempt.attempt,
            "attempt_id": attempt.attempt_id, "outcome": outcome, "reason": reason,
            "worker": {"host": attempt.host, "pid": attempt.pid, "key": attempt.key},
            "seconds": round(seconds, 3), "group": group, "trace": trace,
            "stage_seconds": stage_seconds,
            "ledger": [[table, values] for table, values in ledger_rows], "at_utc": utc_now()}


def apply_marker(state: SceneState, marker: dict[str, Any]) -> bool:
    """Put an island's result into ``state`` (not saved); False if it is there already."""
    gid, outcome = marker["group_id"], marker["outcome"]
    current = state.doc["groups"].get(gid) or {}
    if ((current.get("batch") or {}).get("attempt_id") == marker["attempt_id"]
            and state.terminal(gid) == outcome):
        return False
    record = dict(marker["group"])
    record["batch"] = {"run_id": marker["run_id"], "attempt": marker["attempt"],
                       "attempt_id": marker["attempt_id"], "worker": marker["worker"]}
    state.doc["groups"][gid] = record
    state.forget_terminal(gid)
    if outcome == GROUP_COMPLETED:
        state.doc["islands_completed"].append(gid)
    else:
        state.doc["islands_failed"].append({"id": gid, "reason": marker["reason"]})
    state.doc["stage_trace"].extend(marker["trace"])
    for stage, seconds in marker["stage_seconds"].items():
        state.add_seconds(stage, float(seconds))
    return True


def commit_marker(paths: ScenePaths, marker: dict[str, Any]) -> dict[str, bool]:
    """Append the marker's ledger block and apply it to state.json; idempotent."""
    with flock(paths.state_lock):
        ledger = Ledger(paths.ledger)
        try:
            appended = ledger.append_group_block(
                marker["run_id"], marker["group_id"],
                [(table, values) for table, values in marker["ledger"]])
        finally:
            ledger.close()
        state = SceneState.load(paths.state)
        applied = apply_marker(state, marker)
        if applied:
            state.save()
    return {"ledger": appended, "state": applied}


# --------------------------------------------------------------------------- attempts
def begin_attempt(paths: ScenePaths, gp: GroupPaths, batch: BatchRun, key: str
                  ) -> Attempt:
    """Number this attempt (per run), write ``island_attempt.json`` and log it."""
    previous = 0
    if gp.island_attempt.is_file():
        with contextlib.suppress(IslandError):
            old = read_object(gp.island_attempt, IslandError, ISLAND_ATTEMPT, "")
            if old.get("run_id") == batch.run_id:
                previous = int(old.get("attempt", 0))
    me = ProcessIdentity.current()
    attempt = Attempt(batch.run_id, gp.root.name, previous + 1, me.host, me.pid, key)
    atomic.write_json(gp.island_attempt, asdict(attempt))
    ledger_event(paths, batch.run_id, gp.root.name, "attempt_started", "running",
                 f"attempt {attempt.attempt} on {me.host} pid {me.pid}"
                 + (f" (task {key})" if key else ""))
    return attempt


def ledger_event(paths: ScenePaths, run_id: str, gid: str, event: str, status: str | None,
                 detail: str) -> None:
    with flock(paths.state_lock):
        ledger = Ledger(paths.ledger)
        try:
            ledger.group_event(run_id, gid, event, status, detail)
        finally:
            ledger.close()


# --------------------------------------------------------------------------- failures
def record_island_failure(paths: ScenePaths, gp: GroupPaths, batch: BatchRun,
                          reason: str, error_type: str, exit_code: int) -> dict[str, Any]:
    """The orchestrator's verdict on an island whose task never returned (its worker died
    more often than allowed, or the task kept raising): failed, as a marker like any other,
    with the round_0 island restored (failed groups are not merged)."""
    with flock(gp.island_lock):
        existing = read_marker(gp.island_done)
        if existing is not None:
            commit_marker(paths, existing)
            return existing
        attempt = Attempt(batch.run_id, gp.root.name, _attempts(gp, batch), batch.owner.host,
                          batch.owner.pid, "orchestrator")
        round0 = gp.round(0) / "island.blend"
        if round0.is_file():
            atomic.copy_file(round0, gp.island)
        state = SceneState.load(paths.state)
        group = dict(state.doc["groups"].get(attempt.group_id) or {})
        group.update(status=GROUP_FAILED, failure_reason=reason)
        now = utc_now()
        rows: list[tuple[str, dict[str, Any]]] = [
            ("failures", {"run_id": batch.run_id, "group_id": attempt.group_id,
                          "stage": "batch:island", "error_type": error_type,
                          "exit_code": exit_code, "message": reason, "at_utc": now}),
            ("groups", {"run_id": batch.run_id, "group_id": attempt.group_id,
                        "event": "failed", "status": GROUP_FAILED, "detail": reason,
                        "at_utc": now})]
        marker = island_marker(attempt, GROUP_FAILED, reason, group,
                               [f"refine:{attempt.group_id}:failed"], {}, rows, 0.0)
        atomic.write_json(gp.island_done, marker)
        commit_marker(paths, marker)
        return marker


def _attempts(gp: GroupPaths, batch: BatchRun) -> int:
    with contextlib.suppress(IslandError):
        doc = read_object(gp.island_attempt, IslandError, ISLAND_ATTEMPT, "")
        if doc.get("run_id") == batch.run_id:
            return int(doc.get("attempt", 0))
    return 0


def record_scene_failure(paths: ScenePaths, batch: BatchRun, stage: str, reason: str,
                         error_type: str, exit_code: int) -> None:
    """A scene's prepare or finish task never succeeded: the run is failed in the ledger
    (started first if it never was) and in state.json if the run had reached it."""
    with flock(paths.state_lock):
        ledger = Ledger(paths.ledger)
        try:
            if ledger.run_status(batch.run_id) is None:
                ledger.run_started(batch.run_id, batch.argv, batch.owner)
            ledger.failure(batch.run_id, None, f"batch:{stage}", error_type, exit_code, reason)
            if ledger.run_status(batch.run_id) == "started":
                ledger.run_failed(batch.run_id, exit_code, reason)
        finally:
            ledger.close()
        if paths.state.is_file():
            state = SceneState.load(paths.state)
            if state.doc.get("run_id") == batch.run_id:
                state.doc["status"] = "failed"
                state.doc["failure"] = {"run_id": batch.run_id, "exit_code": exit_code,
                                        "message": reason, "stage": stage}
                state.doc["stage_trace"].append(f"run:{batch.run_id}:failed")
                state.save()
