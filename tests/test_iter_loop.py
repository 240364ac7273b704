"""Tier 2 (bpy wheel): the island loop end to end on real fixture islands.

Every exit code is provoked by a real fault and every failure must leave the earlier
iterations byte-identical. Renders are 64 px to keep the tier fast; one shared build of the
fixtures per session, copied per test.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from island_tools.config import Settings
from island_tools.errors import (
    EXIT_GEOMETRY,
    EXIT_GROUP_INPUT,
    EXIT_SANITY,
    EXIT_TARGET_SPEC,
    EXIT_TRANSFORMS,
    EXIT_USAGE,
    GeometryError,
    GroupInputError,
    SanityError,
    TargetSpecError,
    TransformsError,
    UsageError,
)
from island_tools.files import atomic
from island_tools.iteration import init_iter0, iter_step, sha256_file
from island_tools.measure import meshcache
from island_tools.schemas import transforms_doc
from tests._helpers import snapshot
from tests.greedy_agent import propose

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
SETTINGS = Settings(blender_bin="bpy", engine="workbench", resolution=64, samples=1)


def run_job(job: dict) -> dict:
    from worker.launch import resolve_blender
    from worker.launch import run_job as _run

    return _run(job, resolve_blender("bpy", None))


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender

    out = tmp_path_factory.mktemp("fixtures")
    backend = resolve_blender("bpy", None)
    return {f"{n}__{v}": build_fixture(n, v, out, backend=backend)
            for n, v in (("long_table_6", "turned_90"), ("round_table_6", "bunched"))}


@pytest.fixture
def group(built: dict[str, Path], tmp_path: Path) -> Path:
    dest = tmp_path / "long_table_6__turned_90"
    shutil.copytree(built["long_table_6__turned_90"], dest)
    init_iter0(dest, SETTINGS, run_job)
    return dest




def write_decision(group: Path, n: int, members: dict, **extra) -> Path:
    refiner = group / "simple_refiner"
    (refiner / f"iter_{n}").mkdir(exist_ok=True)
    image = refiner / f"iter_{n - 1}" / "render_bev.png"
    doc = transforms_doc({"members": members, "converged": False, "reason_summary": "test"},
                         n, sha256_file(image), model="test", generated_by="tests")
    doc.update(extra)
    path = refiner / f"iter_{n}" / "transforms.json"
    atomic.write_json(path, doc)
    return path


MOVE = {"chair_1": {"delta_xyz": [0.2, 0.0, 0.0], "delta_yaw_deg": 15.0},
        "chair_2": {"delta_xyz": [0.0, -0.1, 0.0], "delta_yaw_deg": 0.0}}


def test_init_iter0_layout_and_read_back(group: Path) -> None:
    it0 = group / "simple_refiner" / "iter_0"
    for name in ("island.blend", "render_persp.png", "render_bev.png", "info.json",
                 "transforms.json", "current_state.json", "geometry.json"):
        assert (it0 / name).is_file(), name
    assert (group / "forward_axes.json").is_file() and (group / "meshes.npz").is_file()
    meta = json.loads((group / "metadata.json").read_text())
    state = json.loads((it0 / "current_state.json").read_text())
    for name, pose in meta["canonical_poses"].items():
        assert np.allclose(state["poses"][name]["matrix_4x4"], pose, atol=1e-6)
    assert json.loads((it0 / "transforms.json").read_text())["members"] == {}
    axes = json.loads((group / "forward_axes.json").read_text())["members"]
    assert all(axes[f"chair_{i}"]["axis_local"] is not None for i in range(1, 7))
    # The PNGs are real images of the requested size.
    from PIL import Image
    with Image.open(it0 / "render_bev.png") as img:
        assert img.size == (64, 64)


def test_rotation_keeps_every_backup(group: Path) -> None:
    older = group / "simple_refiner.bak.20000101_000000"
    older.mkdir()
    (older / "keep.txt").write_text("old run")
    before = snapshot(group / "simple_refiner")
    init_iter0(group, SETTINGS, run_job)
    backups = sorted(p for p in group.iterdir() if p.name.startswith("simple_refiner.bak."))
    assert len(backups) == 2 and (older / "keep.txt").read_text() == "old run"
    new_backup = [b for b in backups if b != older][0]
    assert len(new_backup.name) == len("simple_refiner.bak.YYYYMMDD_HHMMSS")
    assert snapshot(new_backup) == before
    init_iter0(group, SETTINGS, run_job)  # same second is fine: a suffix, never an overwrite
    assert len([p for p in group.iterdir() if p.name.startswith("simple_refiner.bak.")]) == 3


def test_step_moves_members_and_reads_back_from_saved_file(group: Path) -> None:
    write_decision(group, 1, MOVE)
    result = iter_step(group, 1, SETTINGS, run_job)
    assert not result.trivial and result.info["sanity"] == "ok"
    it0 = json.loads((group / "simple_refiner/iter_0/current_state.json").read_text())["poses"]
    it1 = json.loads((group / "simple_refiner/iter_1/current_state.json").read_text())["poses"]
    assert np.allclose(np.subtract(it1["chair_2"]["location"], it0["chair_2"]["location"]),
                       [0, -0.1, 0], atol=1e-6)
    # Pure yaw pivots on the footprint centre: chair_1's footprint moved only by +0.2 in x.
    d = np.subtract(it1["chair_1"]["footprint_centre"], it0["chair_1"]["footprint_centre"])
    assert np.allclose(d, [0.2, 0.0], atol=1e-6)
    assert it1["chair_1"]["yaw_deg"] - it0["chair_1"]["yaw_deg"] == pytest.approx(15, abs=1e-4)
    assert it1["chair_3"]["matrix_4x4"] == it0["chair_3"]["matrix_4x4"]
    # Independent read-back: open the saved file in Blender and compare.
    read = run_job({"op": "read_poses", "blend": str(group / "simple_refiner/iter_1/island.blend"),
                    "members": ["chair_1"]})
    assert np.allclose(read["poses"]["chair_1"], it1["chair_1"]["matrix_4x4"], atol=1e-6)


def test_scripted_agent_improves_geometry_over_six_iterations(group: Path) -> None:
    refiner = group / "simple_refiner"
    first = json.loads((refiner / "iter_0/geometry.json").read_text())
    geometry = first
    for n in range(1, 7):
        decision = propose(geometry, n)
        write_decision(group, n, decision["members"])
        geometry = iter_step(group, n, SETTINGS, run_job).geometry
    assert first["group"]["facing_error_max_deg"] >= 85.0
    assert geometry["group"]["facing_error_max_deg"] <= 1.0
    assert geometry["group"]["clearance_error_max_m"] <= 0.01
    assert geometry["group"]["penetration_pairs"] == 0
    assert geometry["group"]["pattern"]["match"] is True
    on_disk = json.loads((refiner / "iter_6/geometry.json").read_text())
    assert on_disk["group"] == geometry["group"]


@pytest.mark.parametrize("fault,exc,code", [
    ("anchor_in_members", TransformsError, EXIT_TRANSFORMS),
    ("unknown_member", TransformsError, EXIT_TRANSFORMS),
    ("nan", TransformsError, EXIT_TRANSFORMS),
    ("target_spec_missing", TargetSpecError, EXIT_TARGET_SPEC),
    ("target_spec_enum", TargetSpecError, EXIT_TARGET_SPEC),
    ("wrong_iter", UsageError, EXIT_USAGE),
    ("metadata_malformed", GroupInputError, EXIT_GROUP_INPUT),
    ("geometry_empty_mesh", GeometryError, EXIT_GEOMETRY),
])
def test_faults_leave_earlier_iterations_intact(group: Path, fault: str, exc: type,
                                                code: int) -> None:
    write_decision(group, 1, MOVE)
    iter_step(group, 1, SETTINGS, run_job)
    n = 2
    path = write_decision(group, n, MOVE)
    if fault == "anchor_in_members":
        doc = json.loads(path.read_text())
        doc["members"]["table"] = {"delta_xyz": [0, 0, 0], "delta_yaw_deg": 1}
        path.write_text(json.dumps(doc))
    elif fault == "unknown_member":
        path.write_text(path.read_text().replace("chair_2", "chair_99"))
    elif fault == "nan":
        path.write_text(path.read_text().replace("0.2", "NaN"))
    elif fault == "target_spec_missing":
        (group / "target_spec.json").unlink()
    elif fault == "target_spec_enum":
        spec = json.loads((group / "target_spec.json").read_text())
        (group / "target_spec.json").write_text(json.dumps({**spec, "facing": "sideways"}))
    elif fault == "wrong_iter":
        n = 3
    elif fault == "metadata_malformed":
        (group / "metadata.json").write_text("{not json")
    elif fault == "geometry_empty_mesh":
        meshes, props = meshcache.load(group / "meshes.npz")
        meshes["chair_1"] = (np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int32))
        meshcache.save(group / "meshes.npz", meshes, props)
    before = snapshot(group / "simple_refiner")
    with pytest.raises(exc) as err:
        iter_step(group, n, SETTINGS, run_job)
    assert err.value.exit_code == code
    assert "\n" not in str(err.value)
    assert snapshot(group / "simple_refiner") == before
    assert not list((group / "simple_refiner").glob(".staging*"))


def test_skipped_save_gives_exit_4_and_loses_nothing(group: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from worker import blend_io

    monkeypatch.setattr(blend_io, "save_blend", lambda path: None)  # the apply fails silently
    write_decision(group, 1, MOVE)
    before = snapshot(group / "simple_refiner")
    with pytest.raises(SanityError, match="identical") as err:
        iter_step(group, 1, SETTINGS, run_job)
    assert err.value.exit_code == EXIT_SANITY
    assert snapshot(group / "simple_refiner") == before


def test_ring_fixture_geometry_and_trivial_step(built: dict[str, Path], tmp_path: Path) -> None:
    dest = tmp_path / "ring"
    shutil.copytree(built["round_table_6__bunched"], dest)
    result = init_iter0(dest, SETTINGS, run_job)
    assert result.geometry["anchor"]["shape"] == "round"
    assert result.geometry["group"]["spacing"]["ring_gap_cv"] > 0.3
    write_decision(dest, 1, {"chair_1": {"delta_xyz": [0.01, 0, 0], "delta_yaw_deg": 0}})
    assert iter_step(dest, 1, SETTINGS, run_job).info["sanity"] == "ok"
    write_decision(dest, 2, {})
    step2 = iter_step(dest, 2, SETTINGS, run_job)
    assert step2.trivial and step2.info["sanity"].startswith("skipped")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True)


def test_cli_exit_codes_and_sanity_line(group: Path) -> None:
    flags = ["--group-dir", str(group), "--resolution", "64", "--samples", "1",
             "--blender-bin", "bpy"]
    write_decision(group, 1, MOVE)
    ok = _cli("scripts/iter_step.py", *flags, "--iter", "1")
    assert ok.returncode == 0, ok.stderr[-1500:]
    assert "[iter_step] sanity OK" in ok.stdout.splitlines()
    assert "Saved" not in ok.stdout and "Read blend" not in ok.stdout  # stdout is for agents
    path = write_decision(group, 2, MOVE, groups={})
    bad = _cli("scripts/iter_step.py", *flags, "--iter", "2")
    assert bad.returncode == EXIT_TRANSFORMS
    last = bad.stderr.strip().splitlines()[-1]
    assert str(path) in last and "groups" in last
    usage = _cli("scripts/iter_step.py", *flags, "--iter", "abc")
    assert usage.returncode == EXIT_USAGE
    missing = _cli("scripts/iter_step.py", "--group-dir", str(group / "nope"), "--iter", "1")
    assert missing.returncode == EXIT_USAGE and "does not exist" in missing.stderr
    (group / "target_spec.json").unlink()
    spec = _cli("scripts/init_iter0.py", *flags)
    assert spec.returncode == EXIT_TARGET_SPEC and "target_spec.json" in spec.stderr


def test_concurrent_step_is_refused_and_stale_staging_swept(group: Path) -> None:
    import fcntl
    import os

    refiner = group / "simple_refiner"
    stale = refiner / ".staging.iter_1.999999"  # what a kill -9 mid-step leaves behind
    (stale / "junk").mkdir(parents=True)
    write_decision(group, 1, MOVE)
    fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another step holds the group
        with pytest.raises(UsageError, match="another init_iter0/iter_step is running"):
            iter_step(group, 1, SETTINGS, run_job)
    finally:
        os.close(fd)
    iter_step(group, 1, SETTINGS, run_job)
    assert not stale.exists()
