"""``<scene_dir>/state.json``: the director's persisted state (rewritten atomically on every
transition, so a kill -9 leaves the previous consistent version).

Shape::

    {"version": 1, "status": "running" | "finished" | "failed", "run_id": <latest run>,
     "runs": [run ids, oldest first],
     "inputs": {"relation_graph_structure_sha256", "scene_sha256"},
     "options": {policy, max_iter, max_rounds, min_delta, ...},
     "stage_trace": ["validate", "rebuild_islands", "refine:dining:round_1", ...],
     "stages": {"validate": {"status": "done", "seconds": 1.2}, ...},
     "groups_needing_island": [...],
     "islands_completed": [ids], "islands_failed": [{"id", "reason"}],
     "islands_refused": [{"id", "reason"}],   # units that cannot be refined as they are
     "groups": {id: {"status", "rounds": [...], "accepted_round", "accepted_score",
                     "baseline_score", "unknowns": [...], "verification": {...}}}}

A stage's "done" in ``stages`` is a hint only: the director re-checks every completion gate
against the artifacts on disk before skipping anything.

A batch island task works on a :class:`DetachedState` (a snapshot that never writes): what it
changed - the group's record, its terminal list, new trace entries, stage seconds - goes into
the island's result marker and is applied to ``state.json`` in one locked read-modify-write
(``island_tools.scene.batch``), so concurrent islands of one scene never overwrite each other.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..files import atomic
from ..files.jsonio import read_object
from .errors import EXIT_GROUPS_FAILED, EXIT_PARTIAL
from .ledger import utc_now

STATE_VERSION = 1
GROUP_PENDING, GROUP_RUNNING = "pending", "running"
GROUP_COMPLETED, GROUP_FAILED = "completed", "failed"
GROUP_REFUSED = "refused"


def new_state() -> dict[str, Any]:
    return {"version": STATE_VERSION, "status": "new", "run_id": None, "runs": [],
            "inputs": {}, "options": {}, "stage_trace": [], "stages": {},
            "groups_needing_island": [], "islands_completed": [], "islands_failed": [],
            "islands_refused": [], "groups": {}, "updated_utc": utc_now()}


class SceneState:
    def __init__(self, path: Path, doc: dict[str, Any]) -> None:
        self.path = path
        self.doc = doc

    @classmethod
    def load(cls, path: Path) -> SceneState:
        if not path.is_file():
            return cls(path, new_state())
        doc = read_object(path, UsageError, "state.json",
                          "move state.json away (or pass --restart) to start over")
        if doc.get("version") != STATE_VERSION:
            raise UsageError(f"unsupported state version {doc.get('version')!r}",
                             file=str(path), fix="pass --restart to start over")
        fresh = new_state()
        for key, value in fresh.items():
            doc.setdefault(key, value)
        return cls(path, doc)

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    def save(self) -> None:
        self.doc["updated_utc"] = utc_now()
        atomic.write_json(self.path, self.doc)

    # ------------------------------------------------------------------ trace / stages
    def trace(self, entry: str) -> None:
        self.doc["stage_trace"].append(entry)
        self.save()

    def stage_done(self, name: str) -> bool:
        return self.doc["stages"].get(name, {}).get("status") == "done"

    def stage_finished(self, name: str, seconds: float, status: str = "done") -> None:
        entry = self.doc["stages"].setdefault(name, {"status": status, "seconds": 0.0})
        entry["status"] = status
        entry["seconds"] = round(float(entry.get("seconds", 0.0)) + seconds, 4)
        self.save()

    def add_seconds(self, name: str, seconds: float) -> None:
        entry = self.doc["stages"].setdefault(name, {"status": "started", "seconds": 0.0})
        entry["seconds"] = round(float(entry.get("seconds", 0.0)) + seconds, 4)

    # ------------------------------------------------------------------ groups
    def group(self, gid: str) -> dict[str, Any]:
        return self.doc["groups"].setdefault(gid, {"status": GROUP_PENDING, "rounds": [],
                                                   "unknowns": []})

    def terminal(self, gid: str) -> str | None:
        if gid in self.doc["islands_completed"]:
            return GROUP_COMPLETED
        if any(f["id"] == gid for f in self.doc["islands_failed"]):
            return GROUP_FAILED
        return None

    def forget_terminal(self, gid: str) -> None:
        self.doc["islands_completed"] = [g for g in self.doc["islands_completed"] if g != gid]
        self.doc["islands_failed"] = [f for f in self.doc["islands_failed"] if f["id"] != gid]

    def mark_completed(self, gid: str) -> None:
        self.forget_terminal(gid)
        self.group(gid)["status"] = GROUP_COMPLETED
        self.doc["islands_completed"].append(gid)
        self.save()

    def mark_failed(self, gid: str, reason: str) -> None:
        self.forget_terminal(gid)
        self.group(gid)["status"] = GROUP_FAILED
        self.group(gid)["failure_reason"] = reason
        self.doc["islands_failed"].append({"id": gid, "reason": reason})
        self.save()


    def set_refused(self, refused: dict[str, dict[str, Any]]) -> None:
        """``refused``: group id -> ``{"reason", ...}`` (validate's ``groups_refused``). A
        refused group is in none of the other lists: it is left as the input holds it."""
        self.doc["islands_refused"] = [{"id": gid, "reason": r["reason"]}
                                       for gid, r in refused.items()]
        for gid, r in refused.items():
            self.forget_terminal(gid)
            record = self.group(gid)
            record["status"] = GROUP_REFUSED
            record["refusal_reason"] = r["reason"]
        self.save()


def scene_exit_code(doc: dict[str, Any]) -> int:
    """A finished run's exit code: 21 if a group failed, else 24 (partial) if a group was
    refused, else 0 (``island_tools.scene.errors``)."""
    if doc.get("islands_failed"):
        return EXIT_GROUPS_FAILED
    if doc.get("islands_refused"):
        return EXIT_PARTIAL
    return 0


class DetachedState(SceneState):
    """A snapshot of ``state.json`` for one batch island task: ``save`` writes nothing; new
    trace entries and stage seconds are kept for the island's result marker."""

    def __init__(self, path: Path, doc: dict[str, Any]) -> None:
        super().__init__(path, doc)
        self.new_trace: list[str] = []
        self.new_seconds: dict[str, float] = {}

    def save(self) -> None:
        self.doc["updated_utc"] = utc_now()

    def trace(self, entry: str) -> None:
        self.new_trace.append(entry)
        super().trace(entry)

    def add_seconds(self, name: str, seconds: float) -> None:
        self.new_seconds[name] = round(self.new_seconds.get(name, 0.0) + seconds, 4)
        super().add_seconds(name, seconds)

    def stage_finished(self, name: str, seconds: float, status: str = "done") -> None:
        raise RuntimeError("a batch island task does not finish stages")
