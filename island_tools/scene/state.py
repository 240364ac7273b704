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
     "islands_uncertain": [{"id", "reason"}],   # refined with propose's membership doubt
                                                # open: never pass (also in another list)
     "groups": {id: {"status", "rounds": [...], "accepted_round", "accepted_score",
                     "baseline_score", "unknowns": [...], "verification": {...}}}}

A stage's "done" in ``stages`` is a hint only: the director re-checks every completion gate
against the artifacts on disk before skipping anything.

Validated on load (:func:`check_state`), before anything is written: a regular file (not a
directory, not a symlink), UTF-8 JSON, an object of the known fields only, each of its type
(what :func:`new_state` and the writers put there), group ids the relation graph knows, a
group in at most one of the terminal lists. Anything else is exit 2 with one line naming
``state.json``, the field and the fix. A field that is missing takes its ``new_state``
default (a state from before the field existed); the ledger is then what restores
``islands_completed`` / ``islands_failed`` (:func:`check_claims`, :func:`reconcile`).

A batch island task works on a :class:`DetachedState` (a snapshot that never writes): what it
changed - the group's record, its terminal list, new trace entries, stage seconds - goes into
the island's result marker and is applied to ``state.json`` in one locked read-modify-write
(``island_tools.scene.batch``), so concurrent islands of one scene never overwrite each other.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import same_bytes
from .errors import EXIT_GROUPS_FAILED, EXIT_PARTIAL
from .ledger import GroupOutcome, utc_now
from .paths import GroupPaths

STATE_VERSION = 1
GROUP_PENDING, GROUP_RUNNING = "pending", "running"
GROUP_COMPLETED, GROUP_FAILED = "completed", "failed"
GROUP_REFUSED = "refused"
GROUP_STATUSES = (GROUP_PENDING, GROUP_RUNNING, GROUP_COMPLETED, GROUP_FAILED, GROUP_REFUSED)
SCENE_STATUSES = ("new", "running", "finished", "failed")
RESTART_FIX = "pass --restart to start over (earlier outputs are moved to previous/<UTC>/)"


def new_state() -> dict[str, Any]:
    return {"version": STATE_VERSION, "status": "new", "run_id": None, "runs": [],
            "inputs": {}, "options": {}, "stage_trace": [], "stages": {},
            "groups_needing_island": [], "islands_completed": [], "islands_failed": [],
            "islands_refused": [], "islands_uncertain": [], "groups": {},
            "updated_utc": utc_now()}


class SceneState:
    def __init__(self, path: Path, doc: dict[str, Any]) -> None:
        self.path = path
        self.doc = doc

    @classmethod
    def load(cls, path: Path, group_ids: Collection[str] | None = None) -> SceneState:
        """``state.json`` checked by :func:`check_state` (a new state when there is none);
        ``group_ids``: the relation graph's, to refuse ids it does not know."""
        if path.is_symlink():
            raise UsageError("is a symlink, not the file island-refine writes", file=str(path),
                             fix=f"replace the link with a copy of its target, or {RESTART_FIX}")
        if not path.exists():
            return cls(path, new_state())
        if not path.is_file():
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise UsageError(f"is {kind}, not the file island-refine writes", file=str(path),
                             fix=f"move it away and {RESTART_FIX}")
        doc = read_object(path, UsageError, "state.json",
                          f"restore it as island-refine wrote it, or {RESTART_FIX}")
        check_state(doc, path, group_ids)
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

    def set_uncertain(self, uncertain: dict[str, dict[str, Any]]) -> None:
        """``uncertain``: group id -> ``{"reason"}`` (``validate.uncertain_refined``): refined
        with the membership doubt ``propose`` named still open."""
        self.doc["islands_uncertain"] = [{"id": gid, "reason": r["reason"]}
                                         for gid, r in uncertain.items()]
        self.save()


def scene_exit_code(doc: dict[str, Any]) -> int:
    """A finished run's exit code: 21 if a group failed, else 24 (partial) if a group was
    refused or refined with its membership doubt open (``islands_uncertain``: its result is
    not earned), else 0 (``island_tools.scene.errors``)."""
    if doc.get("islands_failed"):
        return EXIT_GROUPS_FAILED
    if doc.get("islands_refused") or doc.get("islands_uncertain"):
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


def outcome_on_disk(gp: GroupPaths, record: Mapping[str, Any], outcome: str) -> bool:
    """The completion gate of a terminal group (``refine.group_gate``): a completed group's
    accepted round, verification and island agree; a failed group has its round_0."""
    if outcome == GROUP_FAILED:
        return gp.round_done(0)
    k = record.get("accepted_round", -1)
    return (_is_int(k) and k >= 0 and gp.round_done(k) and gp.verification.is_file()
            and gp.island.is_file() and same_bytes(gp.island, gp.round(k) / "island.blend"))


# --------------------------------------------------------------------------- validation
_REMOVE = "remove the field: "
_FIELD_FIX = {
    "islands_completed": _REMOVE + "it is rebuilt from ledger.sqlite",
    "islands_failed": _REMOVE + "it is rebuilt from ledger.sqlite",
    "islands_refused": _REMOVE + "it is read again from json/island_groups.json",
    "islands_uncertain": _REMOVE + "it is read again from inputs/relation_graph.json",
    "groups_needing_island": _REMOVE + "it is read again from json/island_groups.json",
    "stage_trace": _REMOVE + "it is a history only",
    "stages": _REMOVE + "a stage's status is a hint only, every gate is checked on disk",
    "runs": _REMOVE + "the runs are in ledger.sqlite",
}
_WRITTEN_AGAIN = ("status", "run_id", "options", "updated_utc", "notes", "failure", "batch",
                  "scene_dir")
STATE_FIELDS = (*new_state(), "notes", "failure", "batch", "scene_dir")


def _field_fix(field: str) -> str:
    top = field.split("[")[0].split(".")[0]
    if top in _FIELD_FIX:
        return f"{_FIELD_FIX[top]}, or {RESTART_FIX}"
    if top in _WRITTEN_AGAIN:
        return f"{_REMOVE}the next run writes it again, or {RESTART_FIX}"
    return f"restore it as island-refine wrote it, or {RESTART_FIX}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return "a list" if isinstance(value, list) else "an object"


class _Checker:
    def __init__(self, path: Path, group_ids: Collection[str] | None) -> None:
        self.path = path
        self.group_ids = None if group_ids is None else set(group_ids)

    def fail(self, field: str, problem: str, fix: str | None = None) -> UsageError:
        return UsageError(problem, file=str(self.path), field=field,
                          fix=fix or _field_fix(field))

    def want(self, ok: bool, field: str, what: str, value: Any) -> None:
        if not ok:
            raise self.fail(field, f"must be {what}, got {_describe(value)}")

    def object(self, value: Any, field: str) -> dict[str, Any]:
        self.want(isinstance(value, dict), field, "an object", value)
        return value

    def strings(self, value: Any, field: str) -> list[str]:
        self.want(isinstance(value, list), field, "a list of strings", value)
        for i, item in enumerate(value):
            self.want(isinstance(item, str), f"{field}[{i}]", "a string", item)
        return value

    def group_id(self, gid: str, field: str) -> None:
        if self.group_ids is not None and gid not in self.group_ids:
            raise self.fail(field, f"group '{gid}' is not in inputs/relation_graph.json",
                            fix=f"remove it (state.json names only the graph's groups), "
                                f"or {RESTART_FIX}")

    def ids(self, value: Any, field: str) -> list[str]:
        seen: set[str] = set()
        for i, gid in enumerate(self.strings(value, field)):
            self.group_id(gid, f"{field}[{i}]")
            if gid in seen:
                raise self.fail(f"{field}[{i}]", f"group '{gid}' is listed twice")
            seen.add(gid)
        return value

    def entries(self, value: Any, field: str) -> list[str]:
        """``[{"id", "reason"}]`` (islands_failed / islands_refused): the ids."""
        self.want(isinstance(value, list), field, 'a list of {"id", "reason"} objects', value)
        ids = []
        for i, entry in enumerate(value):
            where = f"{field}[{i}]"
            self.object(entry, where)
            self.want(isinstance(entry.get("id"), str), f"{where}.id", "a group id (string)",
                      entry.get("id"))
            # a batch marker's reason may be null (``batch.apply_marker``)
            self.want(entry.get("reason") is None or isinstance(entry["reason"], str),
                      f"{where}.reason", "a string", entry.get("reason"))
            self.group_id(entry["id"], f"{where}.id")
            if entry["id"] in ids:
                raise self.fail(where, f"group '{entry['id']}' is listed twice")
            ids.append(entry["id"])
        return ids

    def record(self, gid: str, record: Any) -> None:
        where = f"groups.{gid}"
        self.object(record, where)
        self.want(record.get("status") in GROUP_STATUSES, f"{where}.status",
                  f"one of {', '.join(GROUP_STATUSES)}", record.get("status"))
        for key in ("rounds", "unknowns"):
            if key in record:
                self.want(isinstance(record[key], list), f"{where}.{key}", "a list",
                          record[key])
                for i, item in enumerate(record[key]):
                    self.object(item, f"{where}.{key}[{i}]")
        for i, u in enumerate(record.get("unknowns", [])):
            for key in ("id", "status"):
                self.want(isinstance(u.get(key), str), f"{where}.unknowns[{i}].{key}",
                          "a string", u.get(key))
        for key in ("accepted_round", "current_round"):
            if key in record:
                value = record[key]
                self.want(_is_int(value) and value >= 0, f"{where}.{key}",
                          "a round number >= 0", value)
        for key in ("accepted_score", "baseline_score"):
            if record.get(key) is not None:
                self.want(_is_number(record[key]), f"{where}.{key}", "a finite number or null",
                          record[key])
        if record.get("verification") is not None:
            self.object(record["verification"], f"{where}.verification")
        for key in ("failure_reason", "refusal_reason"):
            if key in record:
                self.want(isinstance(record[key], str), f"{where}.{key}", "a string",
                          record[key])


def check_state(doc: dict[str, Any], path: Path, group_ids: Collection[str] | None = None
                ) -> None:
    """Refuse (UsageError, exit 2) a ``state.json`` document island-refine would not have
    written: an unknown field, a field of the wrong type, a group id the relation graph
    (``group_ids``) does not know, a group listed twice or in two terminal lists."""
    c = _Checker(path, group_ids)
    if doc.get("version") != STATE_VERSION:
        raise c.fail("version", f"unsupported state version {doc.get('version')!r}")
    for key in doc:
        if key not in STATE_FIELDS:
            raise c.fail(key, "unknown field (a typo?)",
                         fix=f"remove it or correct its name (docs/SCENE_PIPELINE.md, "
                             f"'state.json'), or {RESTART_FIX}")
    if "status" in doc:
        c.want(doc["status"] in SCENE_STATUSES, "status",
               f"one of {', '.join(SCENE_STATUSES)}", doc["status"])
    for key in ("run_id", "updated_utc", "scene_dir"):
        if doc.get(key) is not None:
            c.want(isinstance(doc[key], str), key, "a string", doc[key])
    for key in ("runs", "stage_trace", "notes"):
        if key in doc:
            c.strings(doc[key], key)
    for key in ("options", "failure"):
        if key in doc:
            c.object(doc[key], key)
    if doc.get("batch") is not None:
        c.object(doc["batch"], "batch")
    for key, value in c.object(doc.get("inputs", {}), "inputs").items():
        c.want(isinstance(value, str), f"inputs.{key}", "a sha256 (string)", value)
    for name, entry in c.object(doc.get("stages", {}), "stages").items():
        c.object(entry, f"stages.{name}")
        if "status" in entry:
            c.want(isinstance(entry["status"], str), f"stages.{name}.status", "a string",
                   entry["status"])
        if "seconds" in entry:
            c.want(_is_number(entry["seconds"]) and entry["seconds"] >= 0,
                   f"stages.{name}.seconds", "a number >= 0", entry["seconds"])
    c.ids(doc.get("groups_needing_island", []), "groups_needing_island")
    terminal = {
        "islands_completed": c.ids(doc.get("islands_completed", []), "islands_completed"),
        "islands_failed": c.entries(doc.get("islands_failed", []), "islands_failed"),
        "islands_refused": c.entries(doc.get("islands_refused", []), "islands_refused")}
    # not terminal: a group refined with its membership doubt open completes or fails too
    c.entries(doc.get("islands_uncertain", []), "islands_uncertain")
    owner: dict[str, str] = {}
    for field, ids in terminal.items():
        for gid in ids:
            if gid in owner:
                raise c.fail(field, f"group '{gid}' is in both {owner[gid]} and {field}",
                             fix=f"remove it from the list that is wrong (ledger.sqlite "
                                 f"records what really happened), or {RESTART_FIX}")
            owner[gid] = field
    for gid, record in c.object(doc.get("groups", {}), "groups").items():
        c.group_id(gid, f"groups.{gid}")
        c.record(gid, record)


# --------------------------------------------------------------------------- the ledger
def check_claims(state: SceneState, outcomes: Mapping[str, GroupOutcome], ledger: Path
                 ) -> None:
    """Every completion and failure ``state.json`` claims must be the ledger's own last
    word on that group (``GroupOutcome.terminal``, since the last ``--restart``); else exit 2.

    Refused rather than reconciled down: the ledger gets each terminal event before
    ``state.json`` is told (``refine.rounds``, ``batch.commit_marker``), so a claim it lacks
    was not written by a run - the state was edited, or the ledger replaced or lost. Trusting
    the claim would merge work nobody recorded as finished; dropping it would silently redo
    (or, for a failure, retry) a group. Neither is this tool's to guess: the line names the
    group, and removing it from the list or ``--restart`` is the user's explicit choice.
    A later attempt the ledger records after the claimed outcome (``latest`` open: a batch
    island retried, a group reset) does not contradict it; the gate on disk decides then,
    as before."""
    doc = state.doc
    claims = [(f"islands_completed[{i}]", gid, GROUP_COMPLETED)
              for i, gid in enumerate(doc["islands_completed"])]
    claims += [(f"islands_failed[{i}]", f["id"], GROUP_FAILED)
               for i, f in enumerate(doc["islands_failed"])]
    for field, gid, claimed in claims:
        outcome = outcomes.get(gid)
        if outcome is not None and outcome.terminal == claimed:
            continue
        found = ("no outcome" if outcome is None or outcome.terminal is None
                 else f"'{outcome.terminal}' (run {outcome.terminal_run})")
        raise UsageError(f"claims group '{gid}' {claimed}, but {ledger.name} records {found} "
                         "for it", file=str(state.path), field=field,
                         fix=f"remove '{gid}' from {field.split('[')[0]} to refine it again, "
                             f"or restore {ledger.name}, or {RESTART_FIX}")


@dataclass(frozen=True)
class Reconciled:
    """A terminal outcome put back into ``state.json`` from the ledger."""

    group_id: str
    outcome: str
    run_id: str


def reconcile(state: SceneState, outcomes: Mapping[str, GroupOutcome], flagged: list[str],
              group_paths: Callable[[str], GroupPaths], ledger: Path) -> list[Reconciled]:
    """Put back (in memory; the run saves it) each flagged group's terminal outcome that
    ``state.json`` lost but the ledger holds as its last word on the group, when the files on
    disk agree (:func:`outcome_on_disk` with the state's record): the ledger is append-only,
    the record of what really completed, so that group is not refined again. A group whose
    files do not agree is redone, as any unfinished group. A flagged group the ledger
    records terminal but ``state.json`` has no record of cannot be checked against its files
    (the accepted round is in the record): exit 2, never redone on a guess."""
    doc, found = state.doc, []
    for gid in flagged:
        outcome = outcomes.get(gid)
        if (state.terminal(gid) is not None or outcome is None
                or outcome.latest not in (GROUP_COMPLETED, GROUP_FAILED)):
            continue
        record = doc["groups"].get(gid)
        if record is None:
            raise UsageError(f"has no record of group '{gid}', which {ledger.name} records "
                             f"{outcome.latest} (run {outcome.terminal_run})",
                             file=str(state.path), field=f"groups.{gid}",
                             fix=f"restore state.json from a backup, or {RESTART_FIX}")
        if not outcome_on_disk(group_paths(gid), record, outcome.latest):
            continue
        found.append((outcome.terminal_seq, gid, outcome))
    out = []
    for _, gid, outcome in sorted(found):
        record = doc["groups"][gid]
        record["status"] = outcome.latest
        if outcome.latest == GROUP_COMPLETED:
            doc["islands_completed"].append(gid)
        else:
            reason = record.get("failure_reason") or outcome.terminal_detail or "failed"
            record["failure_reason"] = reason
            doc["islands_failed"].append({"id": gid, "reason": reason})
        out.append(Reconciled(gid, outcome.latest, outcome.terminal_run or ""))
    return out
