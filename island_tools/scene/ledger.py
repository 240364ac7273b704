"""``<scene_dir>/ledger.sqlite``: the append-only audit trail of every run on a scene.

Tables (every row is an event; triggers refuse UPDATE and DELETE):

* ``runs``       run_id, event (started | finished | failed), pid, proc_start, boot_id,
                 host, argv, exit_code, detail
* ``groups``     run_id, group_id, event (queued, round_started, completed, failed, skipped,
                 reset, ...), status, detail
* ``iterations`` run_id, group_id, round, iter, members_moved, converged, final,
                 facing_error_max_deg, facing_error_mean_deg, clearance_violations,
                 penetration_pairs, spacing
* ``decisions``  run_id, group_id, round, decision (accept | rollback | resolve_unknown |
                 repair | finalize), score_before, score_after, delta, min_delta, reason
* ``failures``   run_id, group_id (NULL for run-level), stage, error_type, exit_code, message

Crash safety: WAL journal, ``synchronous=FULL`` and one transaction per event, so a kill -9
loses at most the event being written. Several processes may write (a batch's island tasks):
the connection's 30 s busy timeout makes a writer wait for another's transaction instead of
failing. A batch island's events are collected by a :class:`BufferedLedger` and appended in
ONE transaction (:meth:`Ledger.append_group_block`) that is skipped when the run already
holds a terminal event for the group, so replaying it after a crash never duplicates rows.

A run's status is its latest ``runs`` event; a run whose latest event is ``started`` but
whose process is gone is marked ``failed`` by the next run (:meth:`Ledger.mark_dead_runs`):
the caller holds the scene lock, so no live run on this machine can be running; pid +
process start time + boot id identify the process exactly (a batch run's process is its
orchestrator, :class:`ProcessIdentity`).

Read back for the state's sake (:func:`read_outcomes`): each group's last terminal event and
its last event of any kind, counted from the latest ``--restart`` run (its ``started`` row
has detail ``restart``; earlier outputs were moved away then, so earlier outcomes say
nothing of the files now on disk). A ledger that is not a readable SQLite file (garbage,
truncated, a directory) is :class:`LedgerError`, exit 2, one line naming the file and the
fix, before anything is written.
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import UsageError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at_utc TEXT NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('started', 'finished', 'failed')),
    pid INTEGER, proc_start INTEGER, boot_id TEXT, host TEXT, argv TEXT,
    exit_code INTEGER, detail TEXT);
CREATE TABLE IF NOT EXISTS groups (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at_utc TEXT NOT NULL,
    group_id TEXT NOT NULL, event TEXT NOT NULL, status TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS iterations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at_utc TEXT NOT NULL,
    group_id TEXT NOT NULL, round INTEGER NOT NULL, iter INTEGER NOT NULL,
    members_moved INTEGER, converged INTEGER, final INTEGER,
    facing_error_max_deg REAL, facing_error_mean_deg REAL, clearance_violations INTEGER,
    penetration_pairs INTEGER, spacing REAL);
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at_utc TEXT NOT NULL,
    group_id TEXT NOT NULL, round INTEGER, decision TEXT NOT NULL,
    score_before REAL, score_after REAL, delta REAL, min_delta REAL, reason TEXT);
CREATE TABLE IF NOT EXISTS failures (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at_utc TEXT NOT NULL,
    group_id TEXT, stage TEXT NOT NULL, error_type TEXT, exit_code INTEGER, message TEXT);
"""
TABLES = ("runs", "groups", "iterations", "decisions", "failures")


def _append_only_triggers() -> str:
    out = []
    for t in TABLES:
        for op in ("UPDATE", "DELETE"):
            out.append(f"CREATE TRIGGER IF NOT EXISTS {t}_no_{op.lower()} BEFORE {op} ON {t} "
                       f"BEGIN SELECT RAISE(ABORT, 'ledger is append-only: {op} on {t}'); END;")
    return "\n".join(out)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: count fields after the last ')'.
    rest = stat[stat.rfind(")") + 2:].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def process_alive(pid: int | None, proc_start: int | None, boot: str | None) -> bool:
    """Is the process that wrote a ledger row still running (same boot, pid, start time)?"""
    if pid is None:
        return False
    if boot is not None and boot_id() is not None and boot != boot_id():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = process_start(pid)
    if proc_start is not None and now is not None:
        return now == proc_start
    return True


@dataclass(frozen=True)
class ProcessIdentity:
    """The process that owns a run: when it is gone, the run died (see ``mark_dead_runs``).
    A batch run is owned by its orchestrator, not by the worker that writes the row."""

    pid: int
    proc_start: int | None
    boot_id: str | None
    host: str

    @classmethod
    def current(cls) -> ProcessIdentity:
        pid = os.getpid()
        return cls(pid, process_start(pid), boot_id(), socket.gethostname())


TERMINAL_GROUP_EVENTS = ("completed", "failed")
RESTART = "restart"   # the ``detail`` of a --restart run's ``started`` row
LEDGER_FIX = ("restore it from a backup, or move it away (e.g. to ledger.sqlite.corrupt) and "
              "pass --restart to start over (earlier outputs are moved to previous/<UTC>/)")


class LedgerError(UsageError):
    """``ledger.sqlite`` cannot be read as the ledger (exit 2, like an unreadable state)."""

    @classmethod
    def of(cls, path: Path, exc: BaseException | str) -> LedgerError:
        return cls(f"not a readable SQLite ledger ({exc})", file=str(path), fix=LEDGER_FIX)


@dataclass(frozen=True)
class GroupOutcome:
    """What the ledger says of one group since the latest --restart: ``terminal`` its last
    completed / failed / refused event (``skipped`` and ``reconciled`` rows carry the
    outcome they kept in ``status``), ``latest`` the outcome of its last event of any kind
    (``open`` for started, round_started, reset, attempt_started: work under way)."""

    group_id: str
    terminal: str | None
    terminal_run: str | None
    terminal_detail: str | None
    terminal_seq: int
    latest: str


def event_outcome(event: str, status: str | None) -> str:
    if event in ("completed", "failed", "refused"):
        return event
    if event in ("skipped", "reconciled") and status in TERMINAL_GROUP_EVENTS:
        return status
    return "open"


def read_outcomes(path: Path) -> dict[str, GroupOutcome]:
    """Each group's :class:`GroupOutcome`, read only; ``{}`` when there is no ledger. Raises
    :class:`LedgerError` when ``path`` is not a readable, undamaged SQLite file."""
    if not os.path.lexists(path):
        return {}
    if not path.is_file():
        raise LedgerError.of(path, "a directory" if path.is_dir() else "not a regular file")
    try:
        conn = open_readonly(path)
        try:
            damage = conn.execute("PRAGMA quick_check").fetchall()
            if damage != [("ok",)]:
                raise LedgerError.of(path, f"damaged: {' '.join(str(damage[0][0]).split())}")
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"runs", "groups"} <= tables:
                return {}
            row = conn.execute("SELECT MAX(seq) FROM runs WHERE event = 'started' AND "
                               "detail = ?", (RESTART,)).fetchone()
            since = row[0] or 0
            rows = conn.execute(
                "SELECT g.seq, g.run_id, g.group_id, g.event, g.status, g.detail FROM groups g "
                "WHERE g.run_id IN (SELECT run_id FROM runs WHERE event = 'started' AND "
                "seq >= ?) ORDER BY g.seq", (since,)).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise LedgerError.of(path, exc) from None
    out: dict[str, GroupOutcome] = {}
    for seq, run_id, gid, event, status, detail in rows:
        outcome = event_outcome(event, status)
        before = out.get(gid)
        if outcome == "open":
            if before is not None:
                out[gid] = GroupOutcome(gid, before.terminal, before.terminal_run,
                                        before.terminal_detail, before.terminal_seq, outcome)
            else:
                out[gid] = GroupOutcome(gid, None, None, None, 0, outcome)
        else:
            out[gid] = GroupOutcome(gid, outcome, run_id, detail, seq, outcome)
    return out


@dataclass(frozen=True)
class DeadRun:
    run_id: str
    pid: int | None
    host: str | None
    started_utc: str


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise LedgerError.of(self.path, "a directory")
        # check_same_thread off: groups refined side by side (refine.refine_side_by_side)
        # write from their own threads, one at a time under the run's lock.
        try:
            self.conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=30.0,
                                        check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerError.of(self.path, exc) from None
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(SCHEMA + _append_only_triggers())
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise LedgerError.of(self.path, exc) from None

    def close(self) -> None:
        self.conn.close()

    def _insert(self, table: str, **values: Any) -> None:
        values.setdefault("at_utc", utc_now())
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        # isolation_level=None: this single INSERT is its own committed transaction.
        self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})",
                          tuple(values.values()))

    # ------------------------------------------------------------------ runs
    def run_started(self, run_id: str, argv: Iterable[str],
                    owner: ProcessIdentity | None = None, restart: bool = False) -> None:
        """``restart``: the run moved the earlier outputs away (``read_outcomes`` counts
        from here)."""
        owner = owner or ProcessIdentity.current()
        self._insert("runs", run_id=run_id, event="started", pid=owner.pid,
                     proc_start=owner.proc_start, boot_id=owner.boot_id, host=owner.host,
                     argv=json.dumps(list(argv)), detail=RESTART if restart else None)

    def run_finished(self, run_id: str, exit_code: int, detail: str = "") -> None:
        self._insert("runs", run_id=run_id, event="finished", exit_code=exit_code,
                     detail=detail)

    def run_failed(self, run_id: str, exit_code: int | None, detail: str) -> None:
        self._insert("runs", run_id=run_id, event="failed", exit_code=exit_code, detail=detail)

    def run_status(self, run_id: str) -> str | None:
        row = self.conn.execute("SELECT event FROM runs WHERE run_id = ? ORDER BY seq DESC "
                                "LIMIT 1", (run_id,)).fetchone()
        return row[0] if row else None

    def running(self) -> list[dict[str, Any]]:
        """Runs whose latest event is 'started', with the started row's process identity."""
        rows = self.conn.execute(
            "SELECT r.run_id, r.pid, r.proc_start, r.boot_id, r.host, r.at_utc FROM runs r "
            "WHERE r.event = 'started' AND r.seq = (SELECT MAX(seq) FROM runs x "
            "WHERE x.run_id = r.run_id)").fetchall()
        keys = ("run_id", "pid", "proc_start", "boot_id", "host", "started_utc")
        return [dict(zip(keys, row)) for row in rows]

    def mark_dead_runs(self, exclude: Iterable[str] = ()) -> list[DeadRun]:
        """Mark every 'running' run whose process is gone as failed (caller holds the lock).

        ``exclude``: runs the caller continues (a batch stage of its own run)."""
        dead = []
        here = socket.gethostname()
        skip = set(exclude)
        for run in self.running():
            if run["run_id"] in skip:
                continue
            same_host = run["host"] == here
            if same_host and process_alive(run["pid"], run["proc_start"], run["boot_id"]):
                continue
            where = "" if same_host else f" on host {run['host']} (its lock is free)"
            self.run_failed(run["run_id"], None,
                            f"process {run['pid']}{where} died without a terminal status; "
                            "marked failed by the next run")
            dead.append(DeadRun(run["run_id"], run["pid"], run["host"], run["started_utc"]))
        return dead

    # ------------------------------------------------------------------ events
    def group_event(self, run_id: str, group_id: str, event: str, status: str | None = None,
                    detail: str = "") -> None:
        self._insert("groups", run_id=run_id, group_id=group_id, event=event, status=status,
                     detail=detail)

    def iteration(self, run_id: str, group_id: str, round_: int, row: dict[str, Any]) -> None:
        self._insert("iterations", run_id=run_id, group_id=group_id, round=round_,
                     iter=row["iter"], members_moved=row.get("members_moved"),
                     converged=int(bool(row.get("converged"))),
                     final=int(bool(row.get("final"))),
                     facing_error_max_deg=row.get("facing_error_max_deg"),
                     facing_error_mean_deg=row.get("facing_error_mean_deg"),
                     clearance_violations=row.get("clearance_violations"),
                     penetration_pairs=row.get("penetration_pairs"),
                     spacing=row.get("spacing"))

    def decision(self, run_id: str, group_id: str, round_: int | None, decision: str,
                 score_before: float | None = None, score_after: float | None = None,
                 min_delta: float | None = None, reason: str = "") -> None:
        delta = (None if score_before is None or score_after is None
                 else round(score_before - score_after, 6))
        self._insert("decisions", run_id=run_id, group_id=group_id, round=round_,
                     decision=decision, score_before=score_before, score_after=score_after,
                     delta=delta, min_delta=min_delta, reason=reason)

    def failure(self, run_id: str, group_id: str | None, stage: str, error_type: str,
                exit_code: int | None, message: str) -> None:
        self._insert("failures", run_id=run_id, group_id=group_id, stage=stage,
                     error_type=error_type, exit_code=exit_code, message=message)

    def group_terminal(self, run_id: str, group_id: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM groups WHERE run_id = ? AND group_id = ? AND event IN (?, ?) LIMIT 1",
            (run_id, group_id, *TERMINAL_GROUP_EVENTS)).fetchone()
        return row is not None

    def append_group_block(self, run_id: str, group_id: str,
                           rows: Iterable[tuple[str, dict[str, Any]]]) -> bool:
        """Append a buffered group's rows in one transaction, unless ``run_id`` already has a
        terminal event for the group (the block was appended before). True if appended."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if self.group_terminal(run_id, group_id):
                self.conn.execute("ROLLBACK")
                return False
            for table, values in rows:
                if table not in TABLES:
                    raise KeyError(table)
                self._insert(table, **values)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return True

    # ------------------------------------------------------------------ reading
    def rows(self, table: str) -> list[dict[str, Any]]:
        if table not in TABLES:
            raise KeyError(table)
        cur = self.conn.execute(f"SELECT * FROM {table} ORDER BY seq")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


class BufferedLedger(Ledger):
    """Collects events instead of writing them (a batch island task): ``rows`` is a list of
    ``(table, values)`` with each event's own timestamp, for :meth:`Ledger.append_group_block`.
    Reading methods are not available: there is no database behind it."""

    def __init__(self) -> None:  # deliberately no connection: nothing is written
        self.rows_buffered: list[tuple[str, dict[str, Any]]] = []

    def close(self) -> None:
        pass

    def _insert(self, table: str, **values: Any) -> None:
        values.setdefault("at_utc", utc_now())
        self.rows_buffered.append((table, values))


def open_readonly(path: Path) -> sqlite3.Connection:
    """For ``report`` and pre-flight: never creates the file, never writes. A ledger closed
    cleanly has no ``-wal`` companion: it is opened ``immutable``, so that reading it does
    not leave a ``-wal`` and ``-shm`` beside it (a read-only WAL connection makes them)."""
    wal = Path(f"{path}-wal")
    mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    return sqlite3.connect(f"file:{path}?{mode}", uri=True)
