"""``island-refine report`` (issue 27, item 6): a missing directory is named as missing, not
as a scene without a ledger; the last column of a table (details, reasons, messages) is
never cut, and a cut inner cell says so. The ledger is written through its own API, the
report read from the CLI's output."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from island_tools.errors import EXIT_USAGE

REPO = Path(__file__).resolve().parents[1]


def report(scene: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/refine_scene.py", "report", str(scene)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ))


def the_line(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_report_on_a_missing_directory_says_it_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "no_scene"
    line = the_line(report(missing), EXIT_USAGE)
    assert f"{missing}: scene directory does not exist" in line and "ledger" not in line
    (tmp_path / "a_file").write_text("")
    line = the_line(report(tmp_path / "a_file"), EXIT_USAGE)
    assert "is not a directory" in line
    empty = tmp_path / "scene"
    empty.mkdir()
    assert "no ledger" in the_line(report(empty), EXIT_USAGE)


def test_report_keeps_the_last_column_whole_and_marks_a_cut_cell(tmp_path: Path) -> None:
    from island_tools.scene.ledger import Ledger

    detail = ("refused: member 'chair_3': 'chair_3' is keyframed (location) (fix: clear its "
              "animation or bake the pose, then rerun)")
    long_id = "g" * 75
    led = Ledger(tmp_path / "ledger.sqlite")
    led.run_started("r1", ["run"])
    led.group_event("r1", "dining", "refused", "refused", detail)
    led.group_event("r1", long_id, "completed", "completed", "accepted round 1")
    led.run_finished("r1", 24, "completed=1 failed=0 refused=1")
    led.close()
    proc = report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.splitlines()
    assert any(row.endswith(detail) for row in rows), proc.stdout
    cut = next(row for row in rows if "ggg" in row)
    assert long_id not in cut and "g..." in cut and cut.endswith("accepted round 1")
    assert all(row == row.rstrip() for row in rows)
