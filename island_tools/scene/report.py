"""``island-refine report DIR``: the ledger and metrics.json as plain-text tables (read only)."""
from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import printable
from .ledger import LedgerError, open_readonly

METRIC_ROWS = (
    ("facing mean (deg)", "facing_error_mean_deg"),
    ("facing max (deg)", "facing_error_max_deg"),
    ("clearance violations", "clearance_violations"),
    ("penetrating pairs", "penetration_pairs"),
    ("spacing max dev (m)", "spacing_max_deviation_m"),
    ("ring gap CV", "ring_gap_cv"),
    ("pass rate", "pass_rate"),
    ("violation score", "violation_score"),
)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return printable(str(value))   # names and causes: a control character cannot break a row


def _fit(text: str, width: int | None) -> str:
    """``text`` within ``width`` characters, a cut one ending in "..." (never silently)."""
    if width is None or len(text) <= width:
        return text
    return text[:width - 3] + "..."


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], max_width: int = 60) -> str:
    """Plain-text columns. Inner columns are cut at ``max_width`` (marked "..."); the last
    column (details, reasons, messages) runs to its end, as nothing stands after it."""
    last = len(headers) - 1
    cells = [[_fit(_cell(v), None if i == last else max_width) for i, v in enumerate(row)]
             for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _query(conn, sql: str) -> list[tuple]:
    return conn.execute(sql).fetchall()


def ledger_tables(ledger_path: Path) -> list[str]:
    conn = open_readonly(ledger_path)
    try:
        runs = _query(conn, """
            SELECT s.run_id, s.at_utc, s.pid,
                   (SELECT event FROM runs x WHERE x.run_id = s.run_id ORDER BY seq DESC LIMIT 1),
                   (SELECT exit_code FROM runs x WHERE x.run_id = s.run_id ORDER BY seq DESC
                    LIMIT 1),
                   (SELECT detail FROM runs x WHERE x.run_id = s.run_id ORDER BY seq DESC LIMIT 1)
            FROM runs s WHERE s.event = 'started' ORDER BY s.seq""")
        groups = _query(conn, """
            SELECT run_id, group_id, event, status, detail FROM groups
            WHERE event IN ('completed', 'failed', 'refused', 'reset', 'skipped',
                            'attempt_started', 'reconciled')
            ORDER BY seq""")
        iters = _query(conn, """
            SELECT run_id, group_id, round, COUNT(*) - 1, SUM(members_moved > 0),
                   MAX(CASE WHEN final = 1 THEN facing_error_max_deg END)
            FROM iterations GROUP BY run_id, group_id, round ORDER BY MIN(seq)""")
        decisions = _query(conn, """
            SELECT run_id, group_id, round, decision, score_before, score_after, delta, reason
            FROM decisions ORDER BY seq""")
        failures = _query(conn, """
            SELECT run_id, group_id, stage, error_type, exit_code, message FROM failures
            ORDER BY seq""")
    finally:
        conn.close()
    out = ["RUNS", table(("run", "started", "pid", "status", "exit", "detail"), runs)]
    out += ["", "GROUP OUTCOMES", table(("run", "group", "event", "status", "detail"), groups)]
    out += ["", "ITERATIONS", table(("run", "group", "round", "iters", "non-empty",
                                     "final facing max"), iters)]
    out += ["", "DECISIONS", table(("run", "group", "round", "decision", "score before",
                                    "score after", "delta", "reason"), decisions)]
    out += ["", "FAILURES", table(("run", "group", "stage", "type", "exit", "message"),
                                  failures) if failures else "(none)"]
    return out


def metrics_tables(metrics: dict[str, Any]) -> list[str]:
    scene = metrics["scene"]
    rows = [(label, scene["before"].get(key), scene["after"].get(key))
            for label, key in METRIC_ROWS]
    title = (f"SCENE ({scene['groups_total']} groups, {scene['groups_flagged']} flagged, "
             f"{scene['islands_completed']} completed, {scene['islands_failed']} failed, "
             f"{scene.get('islands_refused', 0)} refused"
             f"{'; PARTIAL' if scene.get('partial') else ''})")
    out = [title, table(("metric", "before", "after"), rows)]
    group_rows = []
    for gid, g in metrics["groups"].items():
        if g["status"] == "refused":
            group_rows.append((gid, "refused", "-", "-", "-", "-", "-", "-", "-"))
            continue
        b, a = g["before"], g["after"]

        def arrow(key: str, b=b, a=a) -> str:
            return f"{_cell(b[key])} -> {_cell(a[key])}"

        group_rows.append((gid, g["status"], arrow("verdict"), g["accepted_round"],
                           arrow("facing_error_max_deg"), arrow("clearance_violations"),
                           arrow("penetration_pairs"), arrow("pass_rate"),
                           arrow("violation_score")))
    out += ["", "GROUPS (before -> after)",
            table(("group", "status", "verdict", "accepted", "facing max", "clear. viol.",
                   "penetr.", "pass rate", "score"), group_rows)]
    unmeasured = [f"  {gid}: {line}" for gid, g in metrics["groups"].items()
                  for line in (g["after"] or {}).get("not_measured") or []]
    refused = [f"  {gid}: {g['refusal_reason']}" for gid, g in metrics["groups"].items()
               if g["status"] == "refused"]
    if refused:
        out += ["", "REFUSED (left as the input scene holds them; the run is partial)",
                *refused]
    doubted = [f"  {gid}: geometry {_cell(g['before'].get('geometry_verdict'))} -> "
               f"{_cell(g['after'].get('geometry_verdict'))}; doubtful (kept where they "
               f"stand): {', '.join(g['membership']['doubtful']) or '-'}; doubted members: "
               f"{', '.join(g['membership']['uncertain_members']) or '-'}"
               for gid, g in metrics["groups"].items()
               if g.get("membership") and g.get("before") and g.get("after")]
    if doubted:
        out += ["", "MEMBERSHIP UNCERTAIN (propose's doubt is open: verdict uncertain, never "
                "pass; the geometry's own verdict beside it)", *doubted]
    if unmeasured:
        out += ["", "NOT MEASURED (these groups are uncertain, not passing)", *unmeasured]
    # a refused group has no "after" (it was never refined)
    infeasible = [f"  {gid}: {g['after']['infeasible']}" for gid, g in metrics["groups"].items()
                  if (g.get("after") or {}).get("infeasible")]
    if infeasible:
        out += ["", "INFEASIBLE (the spec cannot be met keeping walls, units and members "
                "apart; these groups fail)", *infeasible]
    seconds = metrics.get("stage_seconds_total") or {}
    if seconds:
        out += ["", "WALL TIME PER STAGE (s, all runs)",
                table(("stage", "seconds"), sorted(seconds.items()))]
    return out


def render_report(scene_dir: Path) -> str:
    """Everything ``report`` prints; raises FileNotFoundError naming what is missing."""
    if not scene_dir.is_dir():
        what = "is not a directory" if scene_dir.exists() else "does not exist"
        raise FileNotFoundError(f"{scene_dir}: scene directory {what} (fix: pass the "
                                "--scene-dir an island-refine run was given)")
    ledger = scene_dir / "ledger.sqlite"
    if ledger.is_dir():
        raise LedgerError.of(ledger, "a directory")
    if not ledger.is_file():
        raise FileNotFoundError(f"{ledger}: no ledger (has refine_scene run on this scene?)")
    try:
        tables = ledger_tables(ledger)
    except sqlite3.Error as exc:
        raise LedgerError.of(ledger, exc) from None
    out = [f"island-refine report: {scene_dir}", ""] + tables
    metrics_path = scene_dir / "metrics.json"
    if metrics_path.is_file():
        out += [""] + metrics_tables(json.loads(metrics_path.read_text(encoding="utf-8")))
    else:
        out += ["", "(no metrics.json yet: the run has not reached eval)"]
    return "\n".join(out) + "\n"


def report_result(scene_dir: str | os.PathLike[str]) -> tuple[int, str]:
    """What ``island-refine report`` answers: (0, the report) or (2, why there is none: no
    ledger, or one that cannot be read, named with its fix)."""
    try:
        return 0, render_report(Path(scene_dir).expanduser().resolve())
    except FileNotFoundError as exc:
        return 2, str(exc)
    except LedgerError as exc:
        return exc.exit_code, exc.one_line()
