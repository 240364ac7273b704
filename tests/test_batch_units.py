"""Tier 1 (pure): the exactly-once bookkeeping of island-refine batch without Blender: scene
ids, committing an island marker twice, a buffered ledger block replayed, the detached
state, failures recorded by the orchestrator."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from island_tools.scene import batch as batching
from island_tools.scene.batch import Attempt, BatchRun
from island_tools.scene.ledger import BufferedLedger, Ledger, ProcessIdentity
from island_tools.scene.pipeline import ScenePaths
from island_tools.scene.state import DetachedState, SceneState


def rows(path: Path, table: str) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY seq")]
    finally:
        conn.close()


@pytest.fixture
def scene(tmp_path: Path) -> ScenePaths:
    root = tmp_path / "scene"
    (root / "relation_groups" / "tv" / "rounds" / "round_0").mkdir(parents=True)
    state = SceneState.load(root / "state.json")
    state.doc.update(status="running", run_id="batch-1", groups_needing_island=["tv"])
    state.group("tv")
    state.save()
    return ScenePaths(root)


def _marker(paths: ScenePaths, attempt: int = 1, outcome: str = "completed") -> dict:
    detached = DetachedState(paths.state, SceneState.load(paths.state).doc)
    ledger = BufferedLedger()
    ledger.group_event("batch-1", "tv", "round_started", "running", "round 1")
    ledger.iteration("batch-1", "tv", 1, {"iter": 0})
    ledger.iteration("batch-1", "tv", 1, {"iter": 1, "members_moved": 3})
    ledger.group_event("batch-1", "tv", outcome, outcome, "done")
    detached.trace("refine:tv:round_1")
    detached.add_seconds("refine", 2.5)
    if outcome == "completed":
        detached.mark_completed("tv")
    else:
        detached.mark_failed("tv", "broken")
    assert detached.path.read_text() == paths.state.read_text()   # a snapshot never writes
    record = detached.group("tv")
    return batching.island_marker(Attempt("batch-1", "tv", attempt, "host", 1, "s/tv"),
                                  outcome, record.get("failure_reason"), record,
                                  detached.new_trace, detached.new_seconds,
                                  ledger.rows_buffered, 2.5)


def test_scene_id_is_stable_and_unique(tmp_path: Path) -> None:
    a, b = tmp_path / "x" / "scene", tmp_path / "y" / "scene"
    assert batching.scene_id(a) == batching.scene_id(a) == batching.scene_id(f"{a}/")
    assert batching.scene_id(a) != batching.scene_id(b)
    assert batching.scene_id(a).startswith("scene-")
    assert "/" not in batching.scene_id(tmp_path / "we ird:name")


def test_marker_commits_once_however_often_it_is_replayed(scene: ScenePaths) -> None:
    marker = _marker(scene)
    assert batching.commit_marker(scene, marker) == {"ledger": True, "state": True}
    for _ in range(3):   # a retried task, the finish stage, a later batch
        assert batching.commit_marker(scene, marker) == {"ledger": False, "state": False}
    state = json.loads(scene.state.read_text())
    assert state["islands_completed"] == ["tv"] and state["islands_failed"] == []
    assert state["stage_trace"].count("refine:tv:round_1") == 1
    assert state["stages"]["refine"]["seconds"] == 2.5
    assert state["groups"]["tv"]["batch"]["attempt_id"] == "batch-1#1"
    assert len(rows(scene.ledger, "iterations")) == 2
    assert [r["event"] for r in rows(scene.ledger, "groups")] == ["round_started", "completed"]


def test_a_later_attempt_replaces_the_state_record_but_not_the_ledger(scene: ScenePaths
                                                                        ) -> None:
    batching.commit_marker(scene, _marker(scene, attempt=1, outcome="failed"))
    second = _marker(scene, attempt=2, outcome="completed")
    # the run already has a terminal event for the group: its block is not appended twice
    assert batching.commit_marker(scene, second) == {"ledger": False, "state": True}
    state = json.loads(scene.state.read_text())
    assert state["islands_completed"] == ["tv"] and state["islands_failed"] == []


def test_orchestrator_failure_is_a_marker_too(scene: ScenePaths) -> None:
    gp = scene.group("tv")
    run = BatchRun("batch-1", ProcessIdentity.current())
    attempt_doc = {"run_id": "batch-1", "group_id": "tv", "attempt": 3, "host": "h",
                      "pid": 1, "key": "s/tv", "started_utc": "now"}
    gp.island_attempt.write_text(json.dumps(attempt_doc))
    marker = batching.record_island_failure(scene, gp, run, "KilledWorker: died", "KilledWorker",
                                            7)
    assert marker["outcome"] == "failed" and marker["attempt"] == 3
    assert batching.read_marker(gp.island_done) == marker
    again = batching.record_island_failure(scene, gp, run, "other", "X", 1)
    assert again["attempt_id"] == marker["attempt_id"]           # the first verdict stands
    state = json.loads(scene.state.read_text())
    assert state["islands_failed"] == [{"id": "tv", "reason": "KilledWorker: died"}]
    assert [r["error_type"] for r in rows(scene.ledger, "failures")] == ["KilledWorker"]


def test_scene_failure_starts_then_fails_the_run_once(scene: ScenePaths) -> None:
    run = BatchRun("batch-1", ProcessIdentity.current(), ("batch", "x"))
    batching.record_scene_failure(scene, run, "prepare", "KilledWorker: died", "KilledWorker",
                                  7)
    batching.record_scene_failure(scene, run, "finish", "again", "X", 1)
    events = [(r["event"], r["exit_code"]) for r in rows(scene.ledger, "runs")]
    assert events == [("started", None), ("failed", 7)]
    assert json.loads(scene.state.read_text())["status"] == "failed"


def test_dead_run_check_skips_the_run_a_batch_stage_continues(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    try:
        gone = ProcessIdentity(pid=2 ** 22 + 7, proc_start=1, boot_id=None, host="elsewhere")
        ledger.run_started("batch-1", [], gone)
        ledger.run_started("batch-0", [], gone)
        dead = ledger.mark_dead_runs(exclude=["batch-1"])
        assert [d.run_id for d in dead] == ["batch-0"]
        assert ledger.run_status("batch-1") == "started"
    finally:
        ledger.close()


def test_retryable_errors() -> None:
    from island_tools.errors import GroupInputError, WorkerError

    assert batching.retryable(WorkerError("blender crashed"))
    assert batching.retryable(RuntimeError("bug or lost node"))
    assert not batching.retryable(GroupInputError("not a .blend file"))
