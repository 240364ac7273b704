"""Tier 3: smoke runs of the agent CLIs under a real Blender binary (Debian's 3.4 in CI).

The island is built with the binary it runs (Blender 3.4 cannot read files saved by 5.0);
a 5.0 island under the 3.4 binary must be a clear one-line error naming both versions.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from island_tools.errors import EXIT_OK, EXIT_WORKER
from island_tools.files import atomic
from island_tools.iteration import sha256_file
from island_tools.schemas import transforms_doc
from tests.greedy_agent import propose

pytestmark = pytest.mark.blender_bin
REPO = Path(__file__).resolve().parents[1]
BLENDER = os.environ.get("BLENDER") or shutil.which("blender") or "/usr/bin/blender"


def _cli(script: str, group: Path, *extra: str, blender: str = BLENDER
         ) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "scripts" / script), "--group-dir", str(group),
           "--blender-bin", blender, "--resolution", "64", "--samples", "1", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def binary_backend():
    from worker.launch import resolve_blender

    return resolve_blender(BLENDER, None, env={})


def test_init_and_step_under_the_binary(binary_backend, tmp_path: Path) -> None:
    from fixtures.build import build_fixture

    marker = tmp_path / "autoexec_ran.txt"
    evil = [{"name": "autorun.py", "use_module": True,
             "body": f"open({str(marker)!r}, 'w').write('ran')\n"}]
    group = build_fixture("tv_row_3", "turned_90", tmp_path, backend=binary_backend,
                          text_blocks=evil)
    init = _cli("init_iter0.py", group)
    assert init.returncode == EXIT_OK, init.stderr[-2000:]
    it0 = group / "simple_refiner" / "iter_0"
    info = json.loads((it0 / "info.json").read_text())
    assert info["blender_version"].startswith("3.4") and info["autoexec_fail"] is True
    assert not marker.exists(), "an embedded script ran while opening the island"
    geometry = json.loads((it0 / "geometry.json").read_text())
    decision = propose(geometry, 1)
    (group / "simple_refiner" / "iter_1").mkdir()
    atomic.write_json(group / "simple_refiner" / "iter_1" / "transforms.json",
                      transforms_doc(decision, 1, sha256_file(it0 / "render_bev.png"),
                                     model="greedy_agent", generated_by="tests.greedy_agent"))
    step = _cli("iter_step.py", group, "--iter", "1")
    assert step.returncode == EXIT_OK, step.stderr[-2000:]
    assert "[iter_step] sanity OK" in step.stdout.splitlines()
    after = json.loads((group / "simple_refiner/iter_1/geometry.json").read_text())
    assert after["group"]["facing_error_max_deg"] < geometry["group"]["facing_error_max_deg"]
    assert not marker.exists()
    # The embedded module (5.0) opens the 3.4 island with scripts disabled as well.
    init5 = _cli("init_iter0.py", group, blender="bpy")
    assert init5.returncode == EXIT_OK, init5.stderr[-2000:]
    assert not marker.exists()


@pytest.mark.bpy
def test_newer_file_on_older_blender_is_a_clear_error(tmp_path: Path) -> None:
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender

    group = build_fixture("desk_chair", "correct", tmp_path, backend=resolve_blender("bpy", None))
    before = sorted(p.name for p in group.iterdir())
    run = _cli("init_iter0.py", group)
    assert run.returncode == EXIT_WORKER
    last = run.stderr.strip().splitlines()[-1]
    import bpy  # 5.0.x in .venv, 5.2.x in .venv313: the message names the one that saved it

    saved_by = "Blender {}.{}".format(*bpy.app.version[:2])
    assert saved_by in last and "3.4" in last and "island.blend" in last, last
    assert sorted(p.name for p in group.iterdir()) == before  # nothing written
