"""Issue 25, deliverable 3: no progress is a stop, not a twitch.

One fixed movement tolerance (``frames.MOVE_TOL_M`` metres, ``frames.MOVE_TOL_DEG``
degrees, never relative to the distance from the anchor) decides what a trivial transform
is, when a step is quiet (nothing applied, iter_(N-1) reused) and what the read-back sanity
check (exit 4) calls moved. A decision whose every delta is below it does not trigger exit
4: the loop stops on it with a stated reason. Exit 4 still fires when a real move is not
applied.

Tier 1 drives the real ``island_tools.iteration`` with the fake worker of
``tests/test_adapter.py``; tier 2 (``bpy``) steps a real fixture island in Blender.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from island_tools.adapter import check_policy, run_group, write_decision
from island_tools.config import Settings
from island_tools.errors import EXIT_SANITY, EXIT_TRANSFORMS, SanityError, TransformsError
from island_tools.files import atomic
from island_tools.iteration import init_iter0, iter_step, sanity_check
from island_tools.measure import frames, meshcache
from island_tools.schemas import MemberDelta, Transforms
from tests.test_adapter import FakeWorker, planned_agent

SETTINGS = Settings(blender_bin="bpy", engine="workbench", resolution=64, samples=1)
MICRO = 7e-6   # the 7 micrometres the long table's loop died on


def move(dx: float = 0.0, dy: float = 0.0, yaw: float = 0.0) -> dict[str, Any]:
    return {"delta_xyz": [dx, dy, 0.0], "delta_yaw_deg": yaw}


def transforms(members: dict[str, dict[str, Any]], n: int = 2) -> Transforms:
    return Transforms(n, {k: MemberDelta(tuple(v["delta_xyz"]), v["delta_yaw_deg"])
                          for k, v in members.items()}, False, False, None, {})


def pose_at(x: float, y: float = 0.0, yaw: float = 0.0) -> np.ndarray:
    return frames.translation([x, y, 0.0]) @ frames.rot_z(yaw)


def float32(pose: np.ndarray) -> np.ndarray:
    """What Blender's float32 matrix_world gives back."""
    return pose.astype(np.float32).astype(float)


# ------------------------------------------------------------------------------ tolerance
def test_one_fixed_tolerance_in_metres_and_degrees() -> None:
    assert frames.MOVE_TOL_M == 1e-4 and frames.MOVE_TOL_DEG == 0.01
    assert frames.MOVE_TOL_TEXT == "0.1 mm / 0.01 deg"
    assert MemberDelta((MICRO, -MICRO, MICRO), 0.0).trivial
    assert MemberDelta((0.0, 0.0, 0.0), 0.004).trivial
    assert not MemberDelta((0.0005, 0.0, 0.0), 0.0).trivial
    assert not MemberDelta((0.05, 0.0, 0.0), 0.0).trivial
    assert not MemberDelta((0.0, 0.0, 0.0), 0.5).trivial
    # The length counts, not each axis alone: 8e-5 on each of x and y is 0.11 mm.
    assert not MemberDelta((8e-5, 8e-5, 0.0), 0.0).trivial


@pytest.mark.parametrize("turns", [360.0, 720.0, -360.0, -1080.0, 360.004])
def test_a_whole_turn_is_trivial(turns: float) -> None:
    assert MemberDelta((0.0, 0.0, 0.0), turns).trivial
    assert transforms({"chair_1": move(yaw=turns)}).trivial
    pose = pose_at(0.6, -0.3, 35.0)
    turned = frames.rot_z(turns) @ pose
    assert not frames.pose_moved(pose, turned)
    assert not MemberDelta((0.0, 0.0, 0.0), turns + 90.0).trivial


def test_far_from_the_anchor_a_millimetre_is_a_move() -> None:
    far = pose_at(50.0, 3.0, 20.0)
    mm = frames.translation([0.001, 0.0, 0.0]) @ far
    assert frames.pose_moved(far, mm)
    # numpy's relative tolerance grows with the distance from the anchor: 50 m out it calls
    # a 0.4 mm move "close"; the fixed tolerance does not.
    tenths = frames.translation([0.0004, 0.0, 0.0]) @ far
    assert np.allclose(tenths, far, atol=1e-7) and frames.pose_moved(far, tenths)
    # ... and float32 storage 50 m out is not a move.
    assert not frames.pose_moved(mm, float32(mm))
    assert frames.pose_change(far, mm)[0] == pytest.approx(0.001)


def test_rotation_is_measured_in_degrees_about_any_axis() -> None:
    pose = pose_at(0.4, 0.4)
    assert frames.pose_change(pose, pose @ frames.rot_z(0.5))[1] == pytest.approx(0.5)
    assert not frames.pose_moved(pose, pose @ frames.rot_z(0.005))
    tilt = np.eye(4)
    a = np.radians(0.02)
    tilt[1, 1], tilt[1, 2], tilt[2, 1], tilt[2, 2] = np.cos(a), -np.sin(a), np.sin(a), np.cos(a)
    assert frames.pose_moved(pose, pose @ tilt)


# ------------------------------------------------------------------------------ sanity (unit)
def test_sanity_a_member_50m_out_moved_1mm_counts() -> None:
    prev = {"chair_1": pose_at(50.0, 0.0, 90.0), "chair_2": pose_at(1.0)}
    t = transforms({"chair_1": move(0.001)})
    planned = {**prev, "chair_1": frames.translation([0.001, 0, 0]) @ prev["chair_1"]}
    sanity_check(2, t, prev, planned, {**prev, "chair_1": float32(planned["chair_1"])},
                 Path("iter_2/island.blend"))
    with pytest.raises(SanityError, match="identical") as err:   # not applied
        sanity_check(2, t, prev, planned, dict(prev), Path("iter_2/island.blend"))
    assert err.value.exit_code == EXIT_SANITY
    # A member without a delta that moved 1 mm 50 m out is caught too.
    quiet = transforms({"chair_2": move(0.05)})
    planned2 = {**prev, "chair_2": frames.translation([0.05, 0, 0]) @ prev["chair_2"]}
    with pytest.raises(SanityError, match="moved although"):
        sanity_check(2, quiet, prev, planned2, {**planned2, "chair_1": planned["chair_1"]},
                     Path("iter_2/island.blend"))


def test_sanity_passes_sub_tolerance_and_whole_turn_deltas_not_applied() -> None:
    prev = {"chair_1": pose_at(0.8, 0.3, 10.0), "chair_2": pose_at(-0.8, 0.3, 190.0)}
    t = transforms({"chair_1": move(MICRO, -MICRO), "chair_2": move(yaw=360.0)})
    assert t.trivial
    planned = {"chair_1": frames.translation([MICRO, -MICRO, 0]) @ prev["chair_1"],
               "chair_2": frames.rot_z(360.0) @ prev["chair_2"]}
    sanity_check(2, t, prev, planned, dict(prev), Path("iter_2/island.blend"))


def test_a_move_just_above_the_tolerance_is_not_exit_4_after_float32() -> None:
    """Applied and read back within float32 of what was put: never "identical"."""
    prev = {"chair_1": pose_at(3.0, 2.0)}
    d = frames.MOVE_TOL_M * 1.0000001
    t = transforms({"chair_1": move(d)})
    planned = {"chair_1": frames.translation([d, 0, 0]) @ prev["chair_1"]}
    back = {"chair_1": prev["chair_1"].copy()}
    back["chair_1"][0, 3] += d * (1 - 1e-4)   # float32 lands a hair short
    sanity_check(2, t, prev, planned, back, Path("iter_2/island.blend"))


def test_iter_1_of_sub_tolerance_moves_is_refused() -> None:
    t = transforms({f"chair_{i}": move(MICRO) for i in (1, 2, 3)}, n=1)
    with pytest.raises(TransformsError, match="above 0.1 mm") as err:
        check_policy(t, 1, 5, {}, "iter_1/transforms.json")
    assert err.value.exit_code == EXIT_TRANSFORMS
    assert check_policy(transforms({"chair_1": move(MICRO)}, n=7), 7, 5, {}, "x").moved == ()


# ------------------------------------------------------------------------------ loop (fake)
@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures import specs

    out = tmp_path_factory.mktemp("no_progress")
    arr = specs.arrange("long_table_5", "turned_90")
    root = out / "long_table_5__turned_90"
    root.mkdir()
    atomic.write_json(root / "metadata.json", arr.metadata())
    atomic.write_json(root / "target_spec.json", arr.target_spec())
    meshcache.save(out / "m.npz", arr.meshes,
                   {n: p for n, p in specs.member_props("long_table_5").items() if p})
    (root / "island.blend").write_text(json.dumps(
        {"poses": {n: [list(map(float, row)) for row in arr.canonical[n]] for n in arr.names},
         "mesh_cache": str(out / "m.npz")}))
    return root


@pytest.fixture
def fake_group(template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "g"
    shutil.copytree(template, dest)
    return dest


THREE = {f"chair_{i}": move(0.0, -0.01) for i in (1, 2, 3)}
MICROS = {f"chair_{i}": move(MICRO, -MICRO) for i in (1, 2, 3)}


def test_seven_micrometre_moves_stop_the_loop_with_a_reason(fake_group: Path,
                                                            tmp_path: Path) -> None:
    plan = {1: {"members": THREE}, 2: {"members": THREE}, 4: {"members": {"chair_1": move(0.05)}},
            6: {"members": {"chair_2": move(0.0, 0.05)}}, 7: {"members": MICROS}}
    report = run_group(fake_group, planned_agent(tmp_path, plan), SETTINGS, FakeWorker())
    assert report.ok and report.exit_code == 0 and report.final_iter == 7
    reason = "no progress: the agent's moves are below 0.1 mm / 0.01 deg (iter 7)"
    assert report.stop_reason == reason
    assert reason in report.report_text
    refiner = fake_group / "simple_refiner"
    log = json.loads((refiner / "run.json").read_text())
    assert log["stop_reason"] == reason and log["status"] == "completed"
    assert log["iterations"][-1]["no_progress"] is True and log["iterations"][-1]["moved"] == []
    assert not (refiner / "iter_8").exists()
    info = json.loads((refiner / "iter_7/info.json").read_text())
    assert info["trivial_transforms"] and info["island_reused_from"] == "iter_6"
    assert info["sanity"].startswith("skipped")
    poses = [json.loads((refiner / f"iter_{k}/current_state.json").read_text())["poses"]
             for k in (6, 7)]
    assert poses[0] == poses[1]
    assert (fake_group / "island.blend").read_bytes() == \
        (refiner / "iter_6/island.blend").read_bytes()
    # The MCP server's reading of the same loop (group_status) says the same, before the
    # stop marks iter_7 final.
    mcp_server = pytest.importorskip("island_tools.mcp_server")
    from island_tools.iteration import completed_iters, load_group

    doc = json.loads((refiner / "iter_7/transforms.json").read_text())
    atomic.write_json(refiner / "iter_7/transforms.json", {**doc, "final": False})
    loaded = load_group(fake_group)
    state = mcp_server.loop_state(loaded, completed_iters(loaded))
    assert state["stop"] and state["stop_reason"] == reason


def test_a_whole_turn_step_keeps_the_saved_pose(fake_group: Path) -> None:
    init_iter0(fake_group, SETTINGS, FakeWorker())
    write_decision(fake_group, 1, {"members": THREE}, model="t", generated_by="t")
    iter_step(fake_group, 1, SETTINGS, FakeWorker())
    write_decision(fake_group, 2, {"members": {"chair_1": move(yaw=360.0),
                                               "chair_2": move(yaw=-720.0)}},
                   model="t", generated_by="t")
    result = iter_step(fake_group, 2, SETTINGS, FakeWorker())
    assert result.trivial and result.info["sanity"].startswith("skipped")
    assert any("whole-turn" in w and "chair_1, chair_2" in w for w in result.warnings)
    refiner = fake_group / "simple_refiner"
    states = [json.loads((refiner / f"iter_{k}/current_state.json").read_text())["poses"]
              for k in (1, 2)]
    assert states[0] == states[1]


def test_a_real_move_not_applied_is_still_exit_4(fake_group: Path) -> None:
    init_iter0(fake_group, SETTINGS, FakeWorker())
    write_decision(fake_group, 1, {"members": {f"chair_{i}": move(0.05) for i in (1, 2, 3)}},
                   model="t", generated_by="t")
    with pytest.raises(SanityError, match="identical") as err:
        iter_step(fake_group, 1, SETTINGS, FakeWorker(apply=False))
    assert err.value.exit_code == EXIT_SANITY
    result = iter_step(fake_group, 1, SETTINGS, FakeWorker())
    assert not result.trivial and result.info["sanity"] == "ok"


# ------------------------------------------------------------------------------ Blender
@pytest.fixture(scope="module")
def real_group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("bpy")
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender

    return build_fixture("long_table_5", "turned_90", tmp_path_factory.mktemp("real"),
                         backend=resolve_blender("bpy", None))


def _run_job(job: dict) -> dict:
    from worker.launch import resolve_blender, run_job

    return run_job(job, resolve_blender("bpy", None))


@pytest.mark.bpy
def test_blender_micro_and_whole_turn_steps_are_quiet_and_a_real_move_counts(
        real_group: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = tmp_path / "g"
    shutil.copytree(real_group, g)
    init_iter0(g, SETTINGS, _run_job)
    five_cm = {f"chair_{i}": move(0.05) for i in (1, 2, 3)}
    write_decision(g, 1, {"members": five_cm}, model="t", generated_by="t")
    step1 = iter_step(g, 1, SETTINGS, _run_job)
    assert not step1.trivial and step1.info["sanity"] == "ok"
    refiner = g / "simple_refiner"
    state = [json.loads((refiner / f"iter_{k}/current_state.json").read_text())["poses"]
             for k in (0, 1)]
    for i in (1, 2, 3):
        before, after = (np.array(s[f"chair_{i}"]["matrix_4x4"]) for s in state)
        assert frames.pose_change(before, after)[0] == pytest.approx(0.05, abs=1e-5)
    # 7 micrometres on three chairs and a whole turn on a fourth: quiet, nothing saved moves.
    write_decision(g, 2, {"members": {**MICROS, "chair_4": move(yaw=360.0)}},
                   model="t", generated_by="t")
    step2 = iter_step(g, 2, SETTINGS, _run_job)
    assert step2.trivial and step2.info["sanity"].startswith("skipped")
    state2 = json.loads((refiner / "iter_2/current_state.json").read_text())["poses"]
    assert state2 == state[1]
    # A real 5 cm move the saved file silently drops is still exit 4.
    from worker import blend_io

    write_decision(g, 3, {"members": five_cm}, model="t", generated_by="t")
    monkeypatch.setattr(blend_io, "save_blend", lambda path: None)
    with pytest.raises(SanityError, match="identical") as err:
        iter_step(g, 3, SETTINGS, _run_job)
    assert err.value.exit_code == EXIT_SANITY


def test_a_viewport_edit_leaves_float32_noise_and_whole_turns_out(fake_group: Path) -> None:
    from blender_addon.tasks import deltas_from_poses
    from island_tools.iteration import load_current_poses, load_group

    init_iter0(fake_group, SETTINGS, FakeWorker())
    prev = load_current_poses(load_group(fake_group), 0)
    poses = {name: float32(p) for name, p in prev.items()}
    poses["chair_2"] = frames.rot_z(360.0) @ prev["chair_2"]
    poses["chair_3"] = frames.translation([MICRO, 0, 0]) @ prev["chair_3"]
    poses["chair_1"] = frames.translation([0.001, 0, 0]) @ prev["chair_1"]
    members = deltas_from_poses(fake_group, 1, poses)
    assert list(members) == ["chair_1"]
    assert members["chair_1"]["delta_xyz"] == pytest.approx([0.001, 0.0, 0.0], abs=1e-6)
