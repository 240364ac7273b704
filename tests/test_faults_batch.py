"""Tier 2 (bpy wheel): one bad scene must not stop a batch (issue 33, item 3).

Three copies of the one-group ``tv`` scene go into one ``island-refine batch`` on a
2-worker LocalCluster, run as a user would (a subprocess, a time limit):

* ``good``     nothing wrong: it must finish;
* ``mistyped`` a ``state.json`` whose ``islands_completed`` is a string: the batch used to
               stop before any scene started (exit 2, nothing on stdout). It costs that scene
               only: a ``failed`` row naming the file and the field, nothing in it touched;
* ``victim``   moved away in the middle of its island (the test agent's pause hook holds
               the island between two iterations): it used to end the batch with exit 2
               and an empty stdout, or with exit 21 and its old path re-created holding
               ``state.json``, ``ledger.sqlite`` and ``relation_groups/``. Now: a
               ``failed`` row saying the directory vanished; its old path stays absent.

The batch exits 21 (a scene failed) with its table on stdout. Judged here by the table's
rows, the files on disk and ``os.lstat``, not by the batch's own bookkeeping.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._helpers import load, snapshot

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
AGENT = f"{sys.executable} {REPO / 'tests' / 'batch_agent.py'}"
FLAGS = ["--workers", "2", "--blender-bin", "bpy", "--resolution", "64", "--samples", "1",
         "--max-iter", "6", "--max-rounds", "1"]
EXIT_GROUPS_FAILED = 21
TIMEOUT_S = 400


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    return build_scene(tmp_path_factory.mktemp("tpl") / "tv", resolve_blender("bpy", None),
                       groups=["tv"])


def rows(out: str) -> dict[str, str]:
    """The batch table's row of each scene (by the name its id starts with)."""
    return {line.split("-", 1)[0]: line for line in out.splitlines()
            if line.split("-", 1)[0] in ("good", "mistyped", "victim")}


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, "the batch ended before the island could be held"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_mistyped_state_and_a_vanished_directory_cost_their_scene_only(
        template: Path, tmp_path: Path) -> None:
    good, mistyped, victim = (Path(shutil.copytree(template, tmp_path / n))
                              for n in ("good", "mistyped", "victim"))
    (mistyped / "state.json").write_text(json.dumps(
        {"version": 1, "status": "running", "islands_completed": "tv"}))
    untouched = snapshot(mistyped)
    moved = tmp_path / "elsewhere" / "victim"
    moved.parent.mkdir()
    pause = tmp_path / "pause"
    pause.write_text("")
    policy = f"command:{AGENT} --pause-file {pause} --pause-scene victim"
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts/refine_scene.py"), "batch",
                             str(good), str(mistyped), str(victim), *FLAGS, "--policy", policy],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "ISLAND_REFINER_DAEMON": "0"})
    try:
        wait_for(Path(f"{pause}.waiting"), proc)   # the victim's island, between iterations
        os.rename(victim, moved)
        pause.unlink()
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == EXIT_GROUPS_FAILED, (proc.returncode, out, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    table = rows(out)
    assert set(table) == {"good", "mistyped", "victim"}, out
    assert "3 scene(s), 1 finished, 2 failed" in out, out

    assert table["good"].split()[1] == "finished", table["good"]
    state = load(good / "state.json")
    assert state["status"] == "finished" and state["islands_completed"] == ["tv"]

    assert table["mistyped"].split()[1] == "failed", table["mistyped"]
    assert "state.json" in table["mistyped"] and "islands_completed" in table["mistyped"]
    assert snapshot(mistyped) == untouched

    assert table["victim"].split()[1] == "failed", table["victim"]
    assert "vanished" in table["victim"], table["victim"]
    # never re-created: not even an empty directory at the old path
    with pytest.raises(FileNotFoundError):
        os.lstat(victim)
    assert (moved / "blend" / "stage3-sub-planned.blend").is_file()
