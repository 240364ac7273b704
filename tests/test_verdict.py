"""One verdict (issue 24): the island loop and the scene pipeline judge a state alike.

The loop's verdict is what ``adapter.run_group`` records - each iteration's ``review`` in
``run.json``, the final ``review``, the report sentence, the convergence gate - and the
scene pipeline's is ``scene.verify.review_group`` called as ``verify_stage.verify_group``
calls it: geometry recomputed by ``GeometryContext.compute`` from the iteration's read-back
poses, the group's target spec, forward axes, refined members and resolutions. Both must say
the same on every state:

(a) a chair inside a wall (the island's fixed context; whether it is inside is judged here,
    by a footprint overlap computed with shapely from the mesh vertices),
(b) a member whose front is undetermined (``forward_axes.json`` status ``undetermined``),
(c) a pattern mismatch, a pattern the geometry cannot check, and a member missing from
    the geometry (a count mismatch),
(d) a clean pass (the built-in solver on a perturbed real fixture).

Groups are real fixtures (``fixtures.specs``: CC0 furniture meshes, real arrangements) with
``FakeWorker`` standing in for Blender, so the real iteration code (staging, read-back,
geometry, context) runs in seconds. A pure tier checks the sentence and the gate on
hand-written geometry documents.
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shapely.geometry import MultiPoint, box

from fixtures import specs
from island_tools import review
from island_tools.adapter import REPORT_MAX_WORDS, report_text, run_group
from island_tools.config import Settings
from island_tools.files import atomic
from island_tools.iteration import load_current_poses, load_group
from island_tools.measure import frames, meshcache
from island_tools.measure.forward_axis import forward_axes_document
from island_tools.measure.geometry import GeometryContext
from island_tools.measure.obstacles import load as load_context
from island_tools.policy import MIN_ITER
from island_tools.scene import verify
from tests.test_adapter import FakeWorker

REPO = Path(__file__).resolve().parents[1]
SETTINGS = Settings(blender_bin="bpy", engine="workbench", resolution=64, samples=1)
NUDGE = {"delta_xyz": [0.0, -0.01, 0.0], "delta_yaw_deg": 0.0}
FACES = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
WALL_DEPTH_M = 0.15     # how far the end chair's back reaches into the wall


def _box(lo: list[float], hi: list[float]) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                  for z in (lo[2], hi[2])], dtype=float)
    return v, FACES.copy()


# ------------------------------------------------------------------------------ groups
def build_group(root: Path, fixture: str, variant: str, *, spec: dict | None = None,
                wall: bool = False, undetermined: str | None = None) -> Path:
    """A fake-worker group of a real fixture arrangement (as tests/test_adapter.py builds
    them), optionally with a wall in its fixed context that ``chair_5`` stands inside,
    or one member whose front is declared undetermined in forward_axes.json."""
    arr = specs.arrange(fixture, variant)
    root.mkdir(parents=True)
    poses = dict(arr.canonical)
    if wall:   # a wall across the back of the end chair (chair_5, on +x): it stands in it
        chair = frames.transform_points(poses["chair_5"], arr.meshes["chair_5"][0])
        face = float(chair[:, 0].max()) - WALL_DEPTH_M
        meshcache.save(root / "context.npz", {
            "wall_east": _box([face, -3.0, 0.0], [face + 0.1, 3.0, 2.5]),
            "floor": _box([-6.0, -6.0, -0.01], [6.0, 6.0, 0.0])})
    props = {n: p for n, p in specs.member_props(fixture).items() if p}
    if undetermined:
        axes = forward_axes_document(arr.meshes, arr.anchor, {
            n: p["forward_axis"] for n, p in props.items() if "forward_axis" in p})
        axes["members"][undetermined] = {"axis_local": None, "method": "pca",
                                         "confidence": 0.2, "status": "undetermined"}
        atomic.write_json(root / "forward_axes.json", axes)
    atomic.write_json(root / "metadata.json", arr.metadata())
    atomic.write_json(root / "target_spec.json", {**arr.target_spec(), **(spec or {})})
    meshcache.save(root / "meshes_src.npz", arr.meshes, props)
    (root / "island.blend").write_text(json.dumps(
        {"poses": {n: [list(map(float, row)) for row in poses[n]] for n in arr.names},
         "mesh_cache": str(root / "meshes_src.npz")}))
    return root


def planned_agent(tmp_path: Path, plan: dict[int, dict]) -> str:
    """A command agent answering iteration n with plan[n] (default: no move)."""
    (tmp_path / "plan.json").write_text(json.dumps({str(k): v for k, v in plan.items()}))
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        prompt = json.load(sys.stdin)
        plan = json.load(open({str(tmp_path / 'plan.json')!r}))
        print(json.dumps(plan.get(str(prompt["iter"]), {{"members": {{}}}})))
    """))
    return f"command:{sys.executable} {script}"


NUDGES = {"members": {f"chair_{i}": NUDGE for i in (1, 2, 3)}}
CONVERGE = {"members": {}, "converged": True}


def scene_review(root: Path, n: int) -> dict[str, Any]:
    """The scene pipeline's review of iteration n's state, computed its way
    (``verify_stage.geometry_context`` + ``verify_group``): geometry recomputed from the
    read-back poses, then ``verify.review_group``."""
    group = load_group(root)
    meshes, _ = meshcache.load_shared(root / "meshes.npz")
    axes = json.loads((root / "forward_axes.json").read_text())
    spec = group.target_spec.to_dict()
    geo = GeometryContext({m: meshes[m] for m in group.metadata.members},
                          group.metadata.anchor_id, axes, load_context(root / "context.npz"))
    geometry = geo.compute(load_current_poses(group, n), spec, n)
    return verify.review_group(root.name, geometry, spec, axes,
                               list(group.metadata.refined_members), {})


def loop_run(root: Path, policy: str) -> dict[str, Any]:
    lines: list[str] = []
    report = run_group(root, policy, SETTINGS, FakeWorker(), progress=lines.append)
    assert report.ok, report.errors
    log = json.loads((root / "simple_refiner" / "run.json").read_text())
    assert log["report"] == report.report_text
    assert len(report.report_text.split()) <= REPORT_MAX_WORDS
    assert report.review is not None and report.review["verdict"] == log["review"]["verdict"]
    # the per-iteration progress line says that iteration's verdict
    progress = [ln for ln in lines if ln.startswith("[agent] iter ")]
    assert len(progress) == len(log["iterations"])
    for line, entry in zip(progress, log["iterations"]):
        assert f"; review {entry['review']['verdict']} (" in line, line
    return log


def assert_agree(root: Path, log: dict[str, Any]) -> dict[str, Any]:
    """Every iteration's loop verdict equals the scene's on the same state; returns the
    final scene review."""
    for entry in log["iterations"]:
        scene = scene_review(root, entry["iter"])
        assert entry["review"]["verdict"] == scene["summary"]["verdict"], entry["iter"]
        assert entry["review"]["not_measured"] == scene["summary"]["not_measured"]
        assert [f["id"] for f in entry["review"]["failing"]] == [
            i["id"] for i in scene["review_results"] if i["verdict"] == "fail"]
    final = scene_review(root, log["final_iter"])
    assert log["review"]["verdict"] == final["summary"]["verdict"]
    assert log["review"]["review_results"] == final["review_results"]
    verdict = final["summary"]["verdict"]
    assert f"Review: {verdict} (" in log["report"]
    if verdict != "pass":
        assert "Review: pass" not in log["report"] and "meets" not in log["report"]
    return final


def footprint_in_wall(root: Path, n: int, member: str) -> float:
    """Test code's own judge: the area (m^2) of ``member``'s floor footprint (convex hull of
    its mesh vertices at iteration n's pose) inside the wall's footprint box."""
    group = load_group(root)
    meshes, _ = meshcache.load_shared(root / "meshes.npz")
    world = frames.transform_points(load_current_poses(group, n)[member], meshes[member][0])
    wall_v, _ = meshcache.load_shared(root / "context.npz")[0]["wall_east"]
    wall = box(wall_v[:, 0].min(), wall_v[:, 1].min(), wall_v[:, 0].max(), wall_v[:, 1].max())
    return float(MultiPoint(world[:, :2]).convex_hull.intersection(wall).area)


# ------------------------------------------------------------------------------ (a)-(d)
def test_a_chair_inside_a_wall_fails_in_the_loop_as_in_the_scene(tmp_path: Path) -> None:
    root = build_group(tmp_path / "walled", "long_table_5", "correct", wall=True)
    log = loop_run(root, planned_agent(tmp_path, {1: NUDGES, MIN_ITER: CONVERGE}))
    assert footprint_in_wall(root, log["final_iter"], "chair_5") > 0.01   # truly inside
    final = assert_agree(root, log)
    assert final["summary"]["verdict"] == "fail"
    assert all(e["review"]["verdict"] == "fail" for e in log["iterations"])
    item = {i["id"]: i for i in final["review_results"]}["object_chair_5"]
    assert item["verdict"] == "fail" and "wall_east" in item["reason"]
    assert "chair_5 penetrates wall_east by up to" in log["report"]
    figures = log["review"]["figures"]
    assert figures["obstacle_penetrations"] == 1
    assert figures["obstacle_penetrations_m"]["chair_5"]["wall_east"] == pytest.approx(
        WALL_DEPTH_M, abs=0.01)
    assert figures["penetration_pairs"] == 0 and len(log["review"]["failing"]) == 1
    # the gate: converged on a failing state is written false, the loop goes on to its
    # empties stop, and the report never says the target is met
    gate = {e["iter"]: e for e in log["iterations"]}[MIN_ITER]
    assert gate["converged_requested"] and not gate["converged_honoured"]
    assert any("fails its review" in w for w in gate["warnings"])
    assert "converged" not in log["stop_reason"]
    # the add-on: its group list and its panel line say the same verdict
    from blender_addon import tasks
    n = log["final_iter"]
    assert tasks.group_status(root)["status"] == f"final iter_{n}, fail"
    panel = tasks.review_summary(root, n)
    assert panel["verdict"] == "fail" and panel["line"].startswith("Review: fail (1/")
    proc = subprocess.run([sys.executable, str(REPO / "blender_addon" / "tasks.py"), "--repo",
                           str(REPO), "review", "--group-dir", str(root), "--iter", str(n)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == panel


def test_an_undetermined_front_is_uncertain_in_the_loop_as_in_the_scene(tmp_path: Path
                                                                        ) -> None:
    root = build_group(tmp_path / "front", "long_table_5", "correct", undetermined="chair_2")
    log = loop_run(root, planned_agent(tmp_path, {1: NUDGES, MIN_ITER: CONVERGE}))
    final = assert_agree(root, log)
    assert final["summary"]["verdict"] == "uncertain"
    assert any(line.startswith("chair_2: the front of 'chair_2' could not be determined")
               for line in final["summary"]["not_measured"])
    assert "Review: uncertain" in log["report"] and "front of chair_2" in log["report"]
    # uncertain is honoured by the gate (moving furniture cannot measure a front)
    assert log["stop_reason"] == f"converged at iter {MIN_ITER}"


@pytest.mark.parametrize("spec,verdict,words", [
    ({"pattern": "row"}, "fail", "pattern row expected"),          # 2+2+1 chairs, row spec
    ({"pattern": "cluster"}, "uncertain", "pattern cluster cannot be checked"),
])
def test_a_pattern_mismatch_or_an_uncheckable_pattern_agree(
        tmp_path: Path, spec: dict, verdict: str, words: str) -> None:
    root = build_group(tmp_path / "pattern", "long_table_5", "correct", spec=spec)
    log = loop_run(root, planned_agent(tmp_path, {1: NUDGES}))
    final = assert_agree(root, log)
    assert final["summary"]["verdict"] == verdict
    assert words in log["report"]


def test_a_solver_run_to_a_clean_pass_agrees(tmp_path: Path) -> None:
    root = build_group(tmp_path / "solved", "long_table_6", "turned_90")
    log = loop_run(root, "solver")
    final = assert_agree(root, log)
    assert final["summary"]["verdict"] == "pass" and final["summary"]["all_pass"]
    assert log["stop_reason"] == f"converged at iter {MIN_ITER}"
    assert f"Review: pass ({final['summary']['total']}/" in log["report"]


def test_a_member_missing_from_the_geometry_fails_everywhere(tmp_path: Path) -> None:
    """(c) a count mismatch: a state whose geometry lacks a refined member."""
    root = build_group(tmp_path / "count", "long_table_5", "correct")
    log = loop_run(root, planned_agent(tmp_path, {1: NUDGES}))
    geometry = json.loads((root / "simple_refiner" / f"iter_{log['final_iter']}" /
                           "geometry.json").read_text())
    del geometry["members"]["chair_4"]
    geometry["group"]["member_count"] = {"target": 5, "observed": 4, "match": False}
    loop = review.review_island(root, geometry)
    group = load_group(root)
    scene = verify.review_group(root.name, geometry, group.target_spec.to_dict(),
                                json.loads((root / "forward_axes.json").read_text()),
                                list(group.metadata.refined_members), {})
    assert loop["summary"] == scene["summary"] and loop["summary"]["verdict"] == "fail"
    assert "chair_4 is not in the island" in review.sentence(loop)


# ------------------------------------------------------------------------------ pure tier
def _doc(**group: Any) -> dict[str, Any]:
    members = {f"chair_{i}": {"facing_error_deg": 1.0, "clearance_m": 0.1,
                              "clearance_error_m": 0.0, "penetrations": {}}
               for i in (1, 2, 3, 4)}
    g = {"facing_error_max_deg": 1.0, "clearance_error_max_m": 0.0, "penetration_pairs": 0,
         "pattern": {"match": True}, "member_count": {"match": True},
         "spacing": {"mode": "ring", "ring_gap_cv": 0.01}, **group}
    return {"members": members, "group": g, "anchor": {"id": "table"}}


SPEC = {"pattern": "ring", "facing": "toward_anchor", "spacing": "even_around_anchor",
        "clearance_m": 0.1, "member_count": 4, "anchor_role": "round_table"}
AXES = {"members": {f"chair_{i}": {"axis_local": [0.0, -1.0], "method": "pca",
                                   "confidence": 1.0, "status": "front"} for i in (1, 2, 3, 4)}}
INPUTS = review.ReviewInputs("ring", SPEC, AXES, ("chair_1", "chair_2", "chair_3", "chair_4"))


def old_quality_passed(geometry: dict[str, Any]) -> bool:
    """The removed ``adapter.quality`` passed-flag (kept here to show what it missed)."""
    g = geometry["group"]
    spacing = g.get("spacing", {})
    ring = spacing.get("mode") == "ring"
    value = spacing.get("ring_gap_cv") if ring else spacing.get("max_deviation_m")
    facing, clearance = g.get("facing_error_max_deg"), g.get("clearance_error_max_m")
    return all([facing is None or facing <= 5.0,
                clearance is not None and clearance <= 0.03,
                g.get("penetration_pairs", 0) == 0,
                value is None or value <= (0.05 if ring else 0.05),
                g.get("pattern", {}).get("match") is not False
                and g.get("member_count", {}).get("match", True)])


def test_the_ring_whose_4th_chair_stands_in_a_wall_is_a_fail_not_a_met_target() -> None:
    """The issue's case: 0 penetration pairs, every number in range, chair_4 0.22 m inside
    wall_north. The old quality() said it met target_spec; the one review fails it."""
    geometry = _doc(obstacle_penetrations=1)
    geometry["members"]["chair_4"]["obstacle_penetrations"] = {"wall_north": 0.22}
    assert old_quality_passed(geometry)
    rev = review.review_island(INPUTS, geometry)
    assert review.verdict(rev) == "fail"
    text = report_text(7, "converged at iter 7", [1, 2], SPEC, rev)
    assert "Review: fail (1/14 items fail: chair_4 penetrates wall_north by up to 0.220 m)" \
        in text
    assert "meets" not in text and "Review: pass" not in text
    assert len(text.split()) <= REPORT_MAX_WORDS
    assert rev["figures"]["obstacle_penetrations_m"] == {"chair_4": {"wall_north": 0.22}}


def test_unmeasured_facing_and_a_missing_pattern_are_uncertain_not_met() -> None:
    geometry = _doc()
    geometry["members"]["chair_1"].update(facing_error_deg=None,
                                          facing_note="forward axis is vertical at this pose")
    geometry["group"]["pattern"] = {"match": None, "note": "no layout to compare"}
    assert old_quality_passed(geometry)
    rev = review.review_island(INPUTS, geometry)
    assert review.verdict(rev) == "uncertain" and rev["summary"]["fail"] == 0
    line = review.sentence(rev)
    assert line.startswith("Review: uncertain (2/14 items not measured: ")
    assert "facing of chair_1 is not measured" in line and "pattern ring cannot be" in line
    assert review.status(rev) == "review uncertain (2 not measured)"


def test_the_sentence_fits_the_report_with_many_failures() -> None:
    geometry = _doc()
    for i in (1, 2, 3, 4):
        geometry["members"][f"chair_{i}"]["obstacle_penetrations"] = {
            "a_very_long_wall_name_of_the_north_side_of_the_dining_room": 0.1 * i}
    geometry["group"]["spacing"]["ring_gap_cv"] = 0.4
    rev = review.review_island(INPUTS, geometry)
    stop = "iter_step failed at iter 9 (exit 6): " + "word " * 90   # longer than a report
    text = report_text(9, stop, list(range(1, 9)), SPEC, rev)
    assert len(text.split()) <= REPORT_MAX_WORDS and "Review: fail (5/14 items fail: " in text
    assert text.startswith("Final iter_9; stop: iter_step failed at iter 9 (exit 6): word")
    head = report_text(9, "max_iter (20) reached", [1, 2], SPEC, rev)
    assert "Review: fail (5/14 items fail: " in head and "ring gap CV 0.400" in head
    assert len(head.split()) <= REPORT_MAX_WORDS
    short = review.sentence(rev, 20)   # a tight budget: the first items, then a count
    assert short.startswith("Review: fail (5/14 items fail: chair_1 penetrates")
    assert short.endswith("more).") and len(short.split()) <= 20


def test_resolutions_come_from_the_scene_state(tmp_path: Path) -> None:
    scene = tmp_path / "scene"
    root = build_group(scene / "relation_groups" / "ring_g", "round_table_6", "correct",
                       spec={"pattern": "cluster"})
    rev0 = review.review_island(root, {"members": {}, "group": {}})
    assert rev0["summary"]["verdict"] == "fail"            # every member absent
    (scene / "state.json").write_text(json.dumps({"groups": {"ring_g": {"unknowns": [
        {"id": "unknown_pattern_ring_g", "status": "resolved",
         "resolution": {"note": "a cluster needs no pattern check", "source": "test"}},
        {"id": "unknown_pattern_other", "status": "open"}]}}}))
    inputs = review.review_inputs(root)
    assert inputs.resolved == {"unknown_pattern_ring_g": {
        "note": "a cluster needs no pattern check", "source": "test"}}
    assert review.scene_resolutions(tmp_path) == {}


def test_the_review_document_is_not_changed_by_figures() -> None:
    geometry = _doc()
    before = copy.deepcopy(geometry)
    rev = review.review_island(INPUTS, geometry)
    assert geometry == before
    plain = verify.review_group("ring", geometry, SPEC, AXES, INPUTS.members)
    assert {k: v for k, v in rev.items() if k != "figures"} == plain


# ------------------------------------------------------------------------------ the scene
@pytest.mark.bpy
def test_the_scene_pipeline_and_its_island_loops_give_one_verdict(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A real fixture scene (fixtures.scenes, Blender rebuilds the islands) refined by the
    scene pipeline: each group's verification.json (verify_group) equals review_island on
    the accepted round's poses, and where the last round was accepted, its loop's run.json
    verdict and report say the same."""
    from fixtures.scenes import build_scene
    from island_tools.scene.group_files import load_poses
    from scripts.refine_scene import main as refine_scene
    from worker.launch import resolve_blender

    scene = build_scene(tmp_path_factory.mktemp("verdict_scene") / "scene",
                        resolve_blender("bpy", None), groups=["dining", "ring", "tv", "lounge"])
    code = refine_scene(["run", "--scene-dir", str(scene), "--blender-bin", "bpy",
                         "--resolution", "64", "--samples", "1", "--max-iter", "6", "--quiet"])
    assert code in (0, 3), code
    state = json.loads((scene / "state.json").read_text())
    assert state["islands_completed"], state["islands_failed"]
    for gid in state["islands_completed"]:
        root = scene / "relation_groups" / gid
        g = state["groups"][gid]
        verification = json.loads((root / "verification.json").read_text())
        accepted = int(verification["accepted_round"])
        group = load_group(root)
        meshes, _ = meshcache.load_shared(root / "meshes.npz")
        axes = json.loads((root / "forward_axes.json").read_text())
        spec = group.target_spec.to_dict()
        geo = GeometryContext({m: meshes[m] for m in group.metadata.members},
                              group.metadata.anchor_id, axes,
                              load_context(root / "context.npz"))
        geometry = geo.compute(load_poses(root / "rounds" / f"round_{accepted}" /
                                          "poses.json"), spec, verification["round"])
        mine = review.review_island(root, geometry)
        assert mine["summary"] == verification["summary"], gid
        assert mine["review_results"] == verification["review_results"], gid
        last = g["rounds"][-1]
        if last["decision"] == "accept":
            run = json.loads((root / "simple_refiner" / "run.json").read_text())
            assert run["review"]["verdict"] == verification["summary"]["verdict"], gid
            assert f"Review: {run['review']['verdict']} (" in last["report"], gid
