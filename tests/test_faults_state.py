"""Tier 2 (bpy wheel): a mistyped or inconsistent ``state.json`` and a corrupt ``ledger.sqlite``
on a finished scene (issue 26, items 1 and 5).

One scene (``tv`` and ``ring`` flagged, ``office`` correct) is refined once per module; each
test copies it, damages one thing and runs ``island-refine run`` (or ``report``) as a user
would, in a subprocess with a time limit. A refusal must be exit 2 with one line on stderr
naming the file (and the field) and the fix, and nothing under the scene directory may have
changed: every file's bytes and mtime, every directory, the ledger's rows, no
``rounds.bak.*``. A state that only lost what the ledger holds (``islands_completed: []``,
the field removed) is reconciled: exit 0, one warning line, no group refined again (the
ledger's count of ``completed`` events per group is unchanged). The judging is this
module's own: hashes, ``os.lstat`` and SQL on the ledger, not the pipeline's code.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
FLAGS = ["--blender-bin", "bpy", "--resolution", "64", "--samples", "1", "--max-iter", "6",
         "--quiet"]
GROUPS = ["tv", "ring", "office"]   # office is correct: validate does not flag it
FLAGGED = {"ring", "tv"}
TIMEOUT_S = 240


def refine(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, str(REPO / "scripts" / "refine_scene.py"), *args],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                          check=False)


def run(scene: Path, *extra: str) -> subprocess.CompletedProcess:
    return refine("run", "--scene-dir", str(scene), *FLAGS, *extra)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    scene = build_scene(tmp_path_factory.mktemp("state") / "scene",
                        resolve_blender("bpy", None), groups=GROUPS)
    proc = run(scene)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(json.loads((scene / "state.json").read_text())["islands_completed"]) == FLAGGED
    return scene


@pytest.fixture
def scene(finished: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / "scene", symlinks=True))


# --------------------------------------------------------------------------- judging
def tree(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: a file's sha256, size and mtime; a link's target; a dir."""
    out: dict[str, tuple] = {}
    for p in sorted(root.rglob("*")):
        st = os.lstat(p)
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_dir():
            out[rel] = ("dir",)
        else:
            out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size,
                        st.st_mtime_ns)
    return out


def connect(ledger: Path) -> sqlite3.Connection:
    """Read only, and without the ``-wal``/``-shm`` a read-only WAL connection leaves behind
    (after a run the ledger has no ``-wal``: every row is in the file)."""
    immutable = "" if Path(f"{ledger}-wal").exists() else "&immutable=1"
    return sqlite3.connect(f"file:{ledger}?mode=ro{immutable}", uri=True)


def ledger_counts(scene: Path) -> dict[str, int] | None:
    """Rows per table, or None when the file is not a readable SQLite database."""
    path = scene / "ledger.sqlite"
    if not path.is_file():
        return None
    try:
        conn = connect(path)
        try:
            return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                    for t in ("runs", "groups", "iterations", "decisions", "failures")}
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None


def completions(scene: Path) -> dict[str, int]:
    conn = connect(scene / "ledger.sqlite")
    try:
        return dict(conn.execute("SELECT group_id, COUNT(*) FROM groups "
                                 "WHERE event = 'completed' GROUP BY group_id").fetchall())
    finally:
        conn.close()


def refining_events(scene: Path) -> int:
    conn = connect(scene / "ledger.sqlite")
    try:
        return conn.execute("SELECT COUNT(*) FROM groups WHERE event IN ('started', "
                            "'round_started', 'reset')").fetchone()[0]
    finally:
        conn.close()


def backups(scene: Path) -> list[str]:
    return sorted(str(p.relative_to(scene)) for p in scene.rglob("rounds.bak.*"))


def one_line(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """Exit ``code`` and stderr one line, no traceback, naming every needle."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def refused_untouched(scene: Path, damage: Callable[[Path], None], *needles: str,
                      extra: tuple[str, ...] = ()) -> str:
    """Damage the copy, run, and check the refusal left every byte where it was."""
    damage(scene)
    before, rows = tree(scene), ledger_counts(scene)
    line = one_line(run(scene, *extra), 2, *needles)
    assert "fix:" in line, line
    assert tree(scene) == before
    assert ledger_counts(scene) == rows
    assert backups(scene) == []
    return line


def edit_state(scene: Path, **fields: object) -> None:
    path = scene / "state.json"
    doc = json.loads(path.read_text())
    for key, value in fields.items():
        if value is REMOVE:
            del doc[key]
        else:
            doc[key] = value
    path.write_text(json.dumps(doc, indent=2))


REMOVE = object()


# --------------------------------------------------------------------------- refused
def test_islands_completed_as_a_string_is_refused(scene: Path) -> None:
    refused_untouched(scene, lambda s: edit_state(s, islands_completed="ring"),
                      "state.json", "field 'islands_completed'")


def test_groups_null_is_refused(scene: Path) -> None:
    refused_untouched(scene, lambda s: edit_state(s, groups=None),
                      "state.json", "field 'groups'")


def test_stage_trace_as_an_object_is_refused(scene: Path) -> None:
    refused_untouched(scene, lambda s: edit_state(s, stage_trace={}),
                      "state.json", "field 'stage_trace'")


def test_an_unknown_group_id_is_refused(scene: Path) -> None:
    line = refused_untouched(scene,
                             lambda s: edit_state(s, islands_completed=["ring", "tv", "ghost"]),
                             "state.json", "islands_completed[2]", "ghost")
    assert "relation_graph.json" in line


def test_state_json_as_a_directory_is_refused(scene: Path) -> None:
    def damage(s: Path) -> None:
        (s / "state.json").unlink()
        (s / "state.json").mkdir()

    refused_untouched(scene, damage, "state.json", "directory")


def test_malformed_state_json_is_refused(scene: Path) -> None:
    def damage(s: Path) -> None:
        (s / "state.json").write_text('{"version": 1, "islands_completed": ["ring", ')

    refused_untouched(scene, damage, "state.json", "malformed JSON")


def test_state_json_as_a_symlink_is_refused(scene: Path) -> None:
    def damage(s: Path) -> None:
        (s / "state.elsewhere.json").write_bytes((s / "state.json").read_bytes())
        (s / "state.json").unlink()
        (s / "state.json").symlink_to("state.elsewhere.json")

    refused_untouched(scene, damage, "state.json", "symlink")


def test_a_completion_the_ledger_does_not_have_is_refused(scene: Path) -> None:
    """``office`` was never refined (not flagged): a state that claims it completed was not
    written by a run, so it is refused rather than trusted or silently dropped."""
    refused_untouched(scene,
                      lambda s: edit_state(s, islands_completed=["ring", "tv", "office"]),
                      "state.json", "islands_completed[2]", "office", "ledger.sqlite")


def test_restart_is_the_fix_the_refusal_names(scene: Path) -> None:
    (scene / "state.json").write_text("{not json")
    proc = run(scene, "--restart")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [previous] = (scene / "previous").iterdir()
    assert (previous / "state.json").read_text() == "{not json"
    assert set(json.loads((scene / "state.json").read_text())["islands_completed"]) == FLAGGED


# --------------------------------------------------------------------------- reconciled
def reconciled(scene: Path, **fields: object) -> None:
    """``state.json`` lost the completions: they come back from the ledger, nothing is
    refined again, and one warning line says so."""
    groups_dir, output = scene / "relation_groups", scene / "blend/stage3-scene.blend"
    groups_before, output_before = tree(groups_dir), tree(output.parent)
    counts, work = completions(scene), refining_events(scene)
    assert counts == {"ring": 1, "tv": 1}
    edit_state(scene, **fields)
    line = one_line(run(scene), 0, "warning", "state.json", "ledger.sqlite", "ring", "tv")
    assert "not refined again" in line, line
    assert completions(scene) == counts          # +0: no group completed a second time
    assert backups(scene) == []
    assert tree(groups_dir) == groups_before     # islands and rounds untouched
    assert tree(output.parent) == output_before  # the merged scene is not merged again
    state = json.loads((scene / "state.json").read_text())
    assert set(state["islands_completed"]) == FLAGGED and state["status"] == "finished"
    assert refining_events(scene) == work         # no group started, reset or re-rounded
    conn = connect(scene / "ledger.sqlite")
    try:
        runs = conn.execute("SELECT event, exit_code FROM runs ORDER BY seq").fetchall()
    finally:
        conn.close()
    assert runs[-1] == ("finished", 0)


def test_islands_completed_empty_is_reconciled_not_redone(scene: Path) -> None:
    reconciled(scene, islands_completed=[])


def test_islands_completed_removed_is_reconciled_not_redone(scene: Path) -> None:
    """The fix the type refusal names ("remove the field") works."""
    reconciled(scene, islands_completed=REMOVE)


# --------------------------------------------------------------------------- ledger
def _garbage(s: Path) -> None:
    (s / "ledger.sqlite").write_bytes(b"not a database\n" * 400)


def _truncated(s: Path) -> None:
    data = (s / "ledger.sqlite").read_bytes()
    (s / "ledger.sqlite").write_bytes(data[: len(data) // 3])


def _directory(s: Path) -> None:
    (s / "ledger.sqlite").unlink()
    (s / "ledger.sqlite").mkdir()


@pytest.mark.parametrize("damage", [_garbage, _truncated, _directory],
                         ids=["garbage", "truncated", "directory"])
def test_corrupt_ledger_is_refused(scene: Path, damage: Callable[[Path], None]) -> None:
    line = refused_untouched(scene, damage, "ledger.sqlite", "(exit 2)")
    assert "--restart" in line
    before = tree(scene)
    report = refine("report", str(scene))
    one_line(report, 2, "ledger.sqlite", "fix:")
    assert report.stdout == ""
    assert tree(scene) == before
