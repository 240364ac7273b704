"""Tier 2 (bpy wheel): the scene pipeline end to end on the fixture scene built from the real
assets (5 groups with different anchors and non-zero anchor yaws, unrelated objects, a
member parented to its anchor, shared meshes).

Renders are 64 px, loops 6 iterations. The island loop is the real adapter with its default
policy, the built-in solver; a few tests drive it through an external agent command instead
(tests/scene_greedy_agent.py: the command path, a no-op refiner, an answer between rounds).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from island_tools.config import Settings
from island_tools.iteration import sha256_file
from island_tools.measure import frames
from island_tools.scene.errors import EXIT_GROUPS_FAILED, EXIT_RELATION_GRAPH
from island_tools.scene.pipeline import RunOptions, ScenePipeline
from tests._helpers import ledger_rows, load, running_groups, snapshot

pytestmark = pytest.mark.bpy
REPO = Path(__file__).resolve().parents[1]
AGENT = f"command:{sys.executable} {REPO / 'tests' / 'scene_greedy_agent.py'}"
FLAGS = ["--blender-bin", "bpy", "--resolution", "64", "--samples", "1", "--max-iter", "6",
         "--quiet"]
SETTINGS = Settings(blender_bin="bpy", resolution=64, samples=1)
ITEM_KEYS = {"id", "verdict", "reason", "item_kind", "target_id", "owner_id", "failure_family",
             "blocked_by", "confidence", "evidence"}
FLAGGED = ["dining", "ring", "tv", "lounge"]


def run_job(job: dict) -> dict:
    from worker.launch import resolve_blender
    from worker.launch import run_job as _run

    return _run(job, resolve_blender("bpy", None))


def cli(*args: str) -> int:
    from scripts.refine_scene import main

    return main(list(args))








def scene_poses(blend: Path) -> dict[str, np.ndarray]:
    objects = run_job({"op": "scene_read", "blend": str(blend), "names": [],
                       "export_meshes": None})["objects"]
    return {n: np.asarray(o["matrix_world"]) for n, o in objects.items()}


@pytest.fixture(scope="session")
def scene_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    return build_scene(tmp_path_factory.mktemp("scene") / "scene", resolve_blender("bpy", None))


@pytest.fixture(scope="session")
def tv_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    return build_scene(tmp_path_factory.mktemp("tv") / "scene", resolve_blender("bpy", None),
                       groups=["tv"])


def fresh(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest)
    return dest


@pytest.fixture(scope="module")
def full_run(scene_template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    scene = fresh(scene_template, tmp_path_factory.mktemp("full") / "scene")
    input_sha = sha256_file(scene / "blend/stage3-sub-planned.blend")
    t0 = time.perf_counter()
    code = cli("run", "--scene-dir", str(scene), *FLAGS)
    return {"scene": scene, "code": code, "input_sha": input_sha,
            "seconds": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- round trip
def test_rebuild_then_merge_without_deltas_is_exact(scene_template: Path, tmp_path: Path
                                                    ) -> None:
    scene = fresh(scene_template, tmp_path / "scene")
    pipeline = ScenePipeline(scene, RunOptions(settings=SETTINGS), run_job)
    prep = pipeline.preflight()
    with pipeline.session(prep, ["round-trip test"]):
        flagged = pipeline.validate(prep)
        pipeline.rebuild_islands()
        report = pipeline.merge_back(group_ids=flagged)
    assert flagged == FLAGGED
    graph = load(scene / "inputs/relation_graph.json")
    yaws = []
    for g in graph["groups"]:
        if g["id"] not in flagged:
            continue
        gdir = scene / "relation_groups" / g["id"]
        meta = load(gdir / "metadata.json")
        anchor = np.asarray(meta["canonical_poses"][g["anchor"]])
        _, rot, scale = frames.decompose(anchor)
        assert np.allclose(rot, np.eye(3), atol=1e-6) and np.allclose(anchor[:3, 3], 0, atol=1e-6)
        assert scale[0] > 0.1 and not np.isclose(scale[0], 1.0)   # life-size scale stays on it
        yaws.append(frames.yaw_deg(np.asarray(meta["M_anchor_4x4"])))
        island = run_job({"op": "read_poses", "blend": str(gdir / "island.blend"),
                          "members": meta["members"]})
        for name, pose in island["poses"].items():
            assert np.allclose(pose, meta["canonical_poses"][name], atol=1e-6)
        built = load(gdir / "rounds/round_0/result.json")
        # only the group's units: the members and what hangs under them (the TV cabinet
        # carries an empty parented to it)
        unit_objects = {o for objs in meta["units"].values() for o in objs}
        assert set(meta["units"]) == set(meta["members"])
        assert sorted(built["materials"]) == sorted(unit_objects)
        assert all(built["materials"][n] for n in meta["members"])      # materials intact
        from PIL import Image
        with Image.open(gdir / "masked.png") as img:
            assert img.size == (64, 64)
    assert len({round(y) for y in yaws}) == len(yaws) and all(abs(y) > 1 for y in yaws)
    before = scene_poses(scene / "blend/stage3-sub-planned.blend")
    after = scene_poses(scene / "blend/stage3-scene.blend")
    assert set(before) == set(after) == set(load(scene / "fixture.json")["world_poses"])
    worst = max(float(np.abs(after[n] - before[n]).max()) for n in before)
    assert worst <= 1e-6, worst
    assert len(report["assigned"]) == 16 and report["untouched_objects"] > 10


# ----------------------------------------------------------------------------- bad graphs
def _mutate(graph: dict, case: str) -> None:
    groups = {g["id"]: g for g in graph["groups"]}
    if case == "unknown_object":
        groups["tv"]["members"].append("tv.chair_99")
    elif case == "object_in_two_groups":
        groups["ring"]["members"].append("dining.chair_1")
    elif case == "anchor_as_member":
        groups["office"]["members"].append("office.desk")
    elif case == "empty_group":
        groups["lounge"]["members"] = []
    else:
        groups["tv"]["id"] = case.split(":", 1)[1]


@pytest.mark.parametrize("case,needle", [
    ("unknown_object", "group 'tv': object 'tv.chair_99' is not in the scene"),
    ("object_in_two_groups", "object 'dining.chair_1' is in two groups: 'dining' and 'ring'"),
    ("anchor_as_member", "group 'office': the anchor 'office.desk' is also listed"),
    ("empty_group", "group 'lounge' is empty"),
    ("id:../escape", "group id '../escape' is not a safe directory name"),
    ("id:.hidden", "group id '.hidden' is not a safe directory name"),
    ("id:a/b", "group id 'a/b' is not a safe directory name"),
    ("id:" + "x" * 65, "is 65 characters long"),
    ("id:tab\tid", "contains a control character"),
])
def test_bad_relation_graph_errors_and_writes_nothing(scene_template: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture, case: str,
                                                      needle: str) -> None:
    scene = fresh(scene_template, tmp_path / "scene")
    graph = load(scene / "inputs/relation_graph.json")
    _mutate(graph, case)
    (scene / "inputs/relation_graph.json").write_text(json.dumps(graph))
    before = snapshot(scene)
    capsys.readouterr()
    assert cli("--scene-dir", str(scene), *FLAGS) == EXIT_RELATION_GRAPH
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "relation_graph.json" in err[0], err
    assert snapshot(scene) == before


def test_missing_input_scene_is_exit_8_and_writes_nothing(scene_template: Path,
                                                          tmp_path: Path) -> None:
    scene = fresh(scene_template, tmp_path / "scene")
    (scene / "blend/stage3-sub-planned.blend").unlink()
    before = snapshot(scene)
    assert cli("--scene-dir", str(scene), *FLAGS) == 8
    assert snapshot(scene) == before


# ----------------------------------------------------------------------------- full run
def test_full_run_completes_every_flagged_group(full_run: dict) -> None:
    scene = full_run["scene"]
    assert full_run["code"] == 0
    state = load(scene / "state.json")
    assert state["status"] == "finished"
    assert state["groups_needing_island"] == FLAGGED            # office is correct
    assert sorted(state["islands_completed"]) == sorted(FLAGGED)
    assert state["islands_failed"] == []
    trace = state["stage_trace"]
    assert trace[0].startswith("run:") and trace[1] == "validate"
    assert trace[-3:] == ["merge_back", "finalize", "eval"]
    for gid in FLAGGED:
        assert trace.index(f"refine:{gid}:round_1") < trace.index(f"verify:{gid}:round_1") \
            < trace.index(f"refine:{gid}:completed") < trace.index("merge_back")
        assert load(scene / f"relation_groups/{gid}/rounds/round_1/result.json")["contract"]["ok"]
    findings = load(scene / "json/island_groups.json")["groups"]
    assert findings["office"]["needs_island"] is False and not findings["office"]["findings"]
    assert {f["check"] for f in findings["tv"]["findings"]} >= {"facing_tv.chair_1"}
    # turned round: 180 deg less the seat's watching range (square to the screen .. its centre)
    assert findings["tv"]["findings"][0]["evidence"]["facing_error_deg"] > 150


def test_iter0_keeps_the_rebuilt_mesh_cache_equal_to_a_fresh_export(full_run: dict,
                                                                     tmp_path: Path) -> None:
    """The run's init_iter0 does not export the meshes again: the cache rebuild wrote from
    the island is kept, and it is byte for byte what exporting iter_0's island gives."""
    for gid in FLAGGED:
        g = full_run["scene"] / "relation_groups" / gid
        assert load(g / "simple_refiner/iter_0/info.json")["meshes_reused"] is True
        meta = load(g / "metadata.json")
        island = tmp_path / gid / "island.blend"
        island.parent.mkdir()
        shutil.copyfile(g / "simple_refiner/iter_0/island.blend", island)
        out = tmp_path / gid / "meshes.npz"
        run_job({"op": "step", "blend": str(island), "members": meta["members"],
                 "anchor_id": meta["anchor_id"], "poses": None, "render": None,
                 "export_meshes": str(out)})
        assert out.read_bytes() == (g / "meshes.npz").read_bytes(), gid


def test_input_scene_hash_unchanged(full_run: dict) -> None:
    scene = full_run["scene"]
    assert sha256_file(scene / "blend/stage3-sub-planned.blend") == full_run["input_sha"]
    final = load(scene / "json/finalization.json")
    assert final["input_sha256_before"] == final["input_sha256_after"] == full_run["input_sha"]
    assert load(scene / "state.json")["inputs"]["scene_sha256_after"] == full_run["input_sha"]


def test_verification_items_and_the_resolved_unknown(full_run: dict) -> None:
    scene = full_run["scene"]
    graph = {g["id"]: g for g in load(scene / "inputs/relation_graph.json")["groups"]}
    for gid in FLAGGED:
        doc = load(scene / f"relation_groups/{gid}/verification.json")
        items = {i["id"]: i for i in doc["review_results"]}
        assert all(set(i) == ITEM_KEYS for i in items.values())
        for m in graph[gid]["members"]:
            assert items[f"object_{m}"]["item_kind"] == "object"
            assert {items[f"facing_{m}"]["item_kind"], items[f"clearance_{m}"]["item_kind"]} \
                == {"constraint"}
        assert {"pattern", "spacing"} <= set(items)
        assert doc["summary"]["all_pass"], [i for i in items.values() if i["verdict"] != "pass"]
    # the coffee table's mesh is measurably symmetric under a half turn (order 2): no
    # unknown, and its facing is measured modulo 180 deg (its long side toward the sofa)
    state = load(scene / "state.json")
    assert state["groups"]["lounge"]["unknowns"] == []
    axes = load(scene / "relation_groups/lounge/forward_axes.json")
    assert axes["members"]["lounge.coffee_table"]["status"] == "symmetric"
    assert axes["members"]["lounge.coffee_table"]["symmetry"]["order"] == 2
    items = {i["id"]: i for i in load(scene / "relation_groups/lounge/verification.json")
             ["review_results"]}
    assert "measured symmetric of order 2" in items["object_lounge.coffee_table"]["reason"]
    facing = items["facing_lounge.coffee_table"]
    assert facing["verdict"] == "pass" and "modulo 180 deg" in facing["reason"]
    assert facing["evidence"]["facing_error_deg"] <= 10.0
    assert state["groups"]["lounge"]["verification"]["verdict"] == "pass"


def test_merged_scene_moves_members_and_nothing_else(full_run: dict) -> None:
    scene = full_run["scene"]
    before = scene_poses(scene / "blend/stage3-sub-planned.blend")
    after = scene_poses(scene / "blend/stage3-scene.blend")
    merge = load(scene / "json/merge_back.json")
    assigned = set(merge["assigned"])
    assert len(assigned) == 16 and merge["max_abs_error"] <= 1e-5
    for gid in FLAGGED:
        gdir = scene / "relation_groups" / gid
        meta = load(gdir / "metadata.json")
        island = run_job({"op": "read_poses", "blend": str(gdir / "island.blend"),
                          "members": meta["members"]})["poses"]
        for name in meta["members"][1:]:
            target = np.asarray(meta["M_anchor_4x4"]) @ np.asarray(island[name])
            assert np.allclose(after[name], target, atol=1e-5)
    moved = [n for n in assigned if not np.allclose(after[n], before[n], atol=1e-3)]
    assert len(moved) >= 10
    for name in set(before) - assigned:   # anchors, office, floor, props, camera, lamp
        assert np.array_equal(after[name], before[name]), name


def test_metrics_and_report(full_run: dict, capsys: pytest.CaptureFixture) -> None:
    scene = full_run["scene"]
    metrics = load(scene / "metrics.json")
    b, a = metrics["scene"]["before"], metrics["scene"]["after"]
    assert a["pass_rate"] == 1.0 > b["pass_rate"]
    assert a["facing_error_max_deg"] < 1.0 and b["facing_error_max_deg"] > 170.0
    assert b["penetration_pairs"] >= 1 and a["penetration_pairs"] == 0
    assert a["violation_score"] < b["violation_score"]
    assert metrics["groups"]["office"]["status"] == "not_flagged"
    assert metrics["groups"]["office"]["before"] == metrics["groups"]["office"]["after"]
    for stage in ("validate", "rebuild_islands", "refine", "verify", "merge_back", "eval"):
        assert metrics["stage_seconds_total"][stage] > 0
    capsys.readouterr()
    assert cli("report", str(scene)) == 0
    out = capsys.readouterr().out
    for heading in ("RUNS", "GROUP OUTCOMES", "ITERATIONS", "DECISIONS", "FAILURES", "SCENE",
                    "GROUPS (before -> after)", "WALL TIME PER STAGE"):
        assert heading in out
    assert "finished" in out and "lounge" in out and "pass rate" in out


def test_rerun_skips_complete_work(full_run: dict, tmp_path: Path) -> None:
    scene = tmp_path / "scene"
    shutil.copytree(full_run["scene"], scene)
    islands = {g: sha256_file(scene / f"relation_groups/{g}/island.blend") for g in FLAGGED}
    assert cli("--scene-dir", str(scene), *FLAGS) == 0
    trace = load(scene / "state.json")["stage_trace"]
    tail = trace[trace.index(next(t for t in trace if t.endswith(":resumed"))):]
    assert {"validate:skipped:complete", "rebuild_islands:skipped:complete",
            "merge_back:skipped:complete"} <= set(tail)
    assert all(f"refine:{g}:skipped:completed" in tail for g in FLAGGED)
    assert islands == {g: sha256_file(scene / f"relation_groups/{g}/island.blend")
                       for g in FLAGGED}


# ----------------------------------------------------------------------------- gate / failure
def test_score_gate_rolls_back_and_keeps_the_previous_island(tv_template: Path,
                                                             tmp_path: Path) -> None:
    scene = fresh(tv_template, tmp_path / "scene")
    assert cli("--scene-dir", str(scene), *FLAGS, "--min-delta", "1000",
               "--max-rounds", "2") == 0
    state = load(scene / "state.json")
    tv = state["groups"]["tv"]
    assert state["islands_completed"] == ["tv"] and tv["accepted_round"] == 0
    assert [r["decision"] for r in tv["rounds"]] == ["rollback: keep round 0"] * 2
    assert all(r["score_after"] < r["score_before"] for r in tv["rounds"])  # better, not enough
    gdir = scene / "relation_groups/tv"
    assert sha256_file(gdir / "island.blend") == sha256_file(gdir / "rounds/round_0/island.blend")
    assert not (gdir / "rounds/round_1/island.blend").exists()
    decisions = [(d["round"], d["decision"]) for d in ledger_rows(scene, "decisions")]
    assert decisions == [(1, "rollback"), (1, "repair"), (2, "rollback"), (2, "finalize")]
    rollback = ledger_rows(scene, "decisions")[0]
    assert rollback["min_delta"] == 1000 and "round 0 kept" in rollback["reason"]
    assert load(scene / "relation_groups/tv/verification.json")["summary"]["fail"] > 0
    before = scene_poses(scene / "blend/stage3-sub-planned.blend")
    after = scene_poses(scene / "blend/stage3-scene.blend")
    assert max(float(np.abs(after[n] - before[n]).max()) for n in before) <= 1e-6


def test_contract_breaking_run_goes_to_islands_failed(tv_template: Path, tmp_path: Path) -> None:
    scene = fresh(tv_template, tmp_path / "scene")
    noop = f"command:{sys.executable} {REPO / 'tests' / 'scene_greedy_agent.py'} --noop"
    assert cli("--scene-dir", str(scene), *FLAGS, "--policy", noop) == EXIT_GROUPS_FAILED
    state = load(scene / "state.json")
    assert state["islands_completed"] == []
    [failed] = state["islands_failed"]
    assert failed["id"] == "tv" and "contract" in failed["reason"]
    assert "iter_0 only" in failed["reason"] or "iter_1 rule" in failed["reason"]
    [failure] = ledger_rows(scene, "failures")
    assert failure["group_id"] == "tv" and failure["error_type"] == "ContractViolation"
    before = scene_poses(scene / "blend/stage3-sub-planned.blend")
    after = scene_poses(scene / "blend/stage3-scene.blend")   # written, tv left as it was
    assert all(np.array_equal(after[n], before[n]) for n in before)
    assert load(scene / "metrics.json")["groups"]["tv"]["status"] == "failed"


# a block with a 3 cm groove across each of two opposite faces, at different heights: which
# one is the drawer gap and which the gap above a back rail? (One groove alone is relief on
# one face only, which the detector reads as a front.)
GROOVE_M = (0.45, 0.59)
BACK_GROOVE_M = (0.15, 0.29)


def _lounge_with_an_ambiguous_member(template: Path, dest: Path) -> Path:
    """The lounge group alone, its coffee table replaced by a block whose front the mesh
    cannot tell (forward_axes.json says ``undetermined``): two opposite faces, each with a
    shallow groove at its own height, either of which could be a drawer gap."""
    import bpy

    from worker.blend_io import open_blend, save_blend

    scene = fresh(template, dest)
    graph_path = scene / "inputs/relation_graph.json"
    graph = load(graph_path)
    graph["groups"] = [g for g in graph["groups"] if g["id"] == "lounge"]
    graph_path.write_text(json.dumps(graph))
    blend = scene / "blend/stage3-sub-planned.blend"
    open_blend(blend)
    z0, z1 = GROOVE_M
    b0, b1 = BACK_GROOVE_M
    parts = [[(-0.25, -0.25, 0.0), (0.25, 0.25, b0)], [(-0.25, -0.25, b0), (0.25, 0.22, b1)],
             [(-0.25, -0.25, b1), (0.25, 0.25, z0)], [(-0.25, -0.22, z0), (0.25, 0.25, z1)],
             [(-0.25, -0.25, z1), (0.25, 0.25, 0.8)]]
    verts, faces = [], []
    for lo, hi in parts:
        n = len(verts)
        verts += [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
        faces += [tuple(n + i for i in q) for q in ((0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1),
                                                    (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3))]
    mesh = bpy.data.meshes.new("ambiguous_block")
    mesh.from_pydata(verts, [], faces)
    bpy.data.objects["lounge.coffee_table"].data = mesh
    save_blend(blend)
    return scene


def test_undetermined_front_is_asked_and_answered_through_the_relation_graph(
        scene_template: Path, tmp_path: Path) -> None:
    """A person answers the forward-axis question between rounds: the next round reads the
    relation graph again, the override becomes the member's front and facing is measured."""
    from island_tools.adapter import run_group

    scene = _lounge_with_an_ambiguous_member(scene_template, tmp_path / "scene")
    graph_path = scene / "inputs/relation_graph.json"
    calls = []

    def answering_run_group(*args, **kwargs):
        report = run_group(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            axes = load(scene / "relation_groups/lounge/forward_axes.json")
            assert axes["members"]["lounge.coffee_table"]["status"] == "undetermined"
            doc = load(graph_path)
            doc["groups"][0]["forward_axis"] = {"lounge.coffee_table": "+Y"}
            graph_path.write_text(json.dumps(doc))
        return report

    options = RunOptions(policy=AGENT, max_iter=6, settings=SETTINGS)
    assert ScenePipeline(scene, options, run_job, answering_run_group).run() == 0
    [unknown] = load(scene / "state.json")["groups"]["lounge"]["unknowns"]
    assert unknown["resolution"]["source"] == "relation_graph"
    assert unknown["resolution"]["value"] == "+Y"
    axes = load(scene / "relation_groups/lounge/forward_axes.json")
    assert axes["members"]["lounge.coffee_table"]["axis_local"] == [0.0, 1.0]
    items = {i["id"]: i for i in load(scene / "relation_groups/lounge/verification.json")
             ["review_results"]}
    assert items["facing_lounge.coffee_table"]["evidence"]["facing_error_deg"] is not None


def test_unanswered_front_leaves_the_group_uncertain_not_passing(
        scene_template: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    scene = _lounge_with_an_ambiguous_member(scene_template, tmp_path / "scene")
    options = RunOptions(policy=AGENT, max_iter=6, settings=SETTINGS)
    progress: list[str] = []
    assert ScenePipeline(scene, options, run_job, progress=progress.append).run() == 0
    state = load(scene / "state.json")
    [unknown] = state["groups"]["lounge"]["unknowns"]
    assert unknown["status"] == "open" and "forward_axis" in unknown["unresolved"]
    assert state["groups"]["lounge"]["verification"]["verdict"] == "uncertain"
    assert len(state["groups"]["lounge"]["rounds"]) == 2   # asked once, then no repair churn
    metrics = load(scene / "metrics.json")
    after = metrics["groups"]["lounge"]["after"]
    assert after["verdict"] == "uncertain" and after["pass_rate"] < 1.0
    assert metrics["scene"]["after"]["groups_pass"] == 0
    assert metrics["scene"]["after"]["groups_uncertain"] == 1
    [line] = after["not_measured"]
    assert line.startswith("lounge.coffee_table: ") and "forward_axis" in line
    assert any("UNCERTAIN lounge.coffee_table" in p for p in progress)
    assert cli("report", str(scene)) == 0
    out = capsys.readouterr().out
    assert "NOT MEASURED" in out and "lounge.coffee_table" in out


def test_failed_merge_leaves_the_earlier_output_or_none(tv_template: Path,
                                                       tmp_path: Path) -> None:
    """merge_back's read-back check runs on a staged file: when it fails (exit 22) the merged
    scene at blend/stage3-scene.blend is the earlier one, or absent, and the line says so."""
    from island_tools.scene.errors import IntegrityError

    scene = fresh(tv_template, tmp_path / "scene")
    output = scene / "blend/stage3-scene.blend"
    corrupt = {"on": False}

    def faulty(job: dict) -> dict:
        result = run_job(job)
        if job["op"] == "scene_merge" and corrupt["on"]:
            name = next(iter(job["poses"]))
            result["after"][name] = (np.asarray(result["after"][name]) + 0.02).tolist()
        return result

    def merge(expect_error: bool) -> str:
        pipeline = ScenePipeline(scene, RunOptions(settings=SETTINGS), faulty)
        prep = pipeline.preflight()
        with pipeline.session(prep, ["merge test"]):
            flagged = pipeline.validate(prep)
            pipeline.rebuild_islands()
            if not expect_error:
                pipeline.merge_back(group_ids=flagged)
                return ""
            with pytest.raises(IntegrityError) as err:
                pipeline.merge_back(group_ids=flagged)
        assert err.value.exit_code == 22
        return err.value.one_line()

    corrupt["on"] = True
    line = merge(expect_error=True)
    assert "no blend/stage3-scene.blend was written" in line and not output.exists()
    assert not list(output.parent.glob(".stage3-scene.*"))          # no staged leftovers
    corrupt["on"] = False
    merge(expect_error=False)
    good = sha256_file(output)
    corrupt["on"] = True
    line = merge(expect_error=True)
    assert "the earlier blend/stage3-scene.blend is kept" in line and "elsewhere" in line
    assert sha256_file(output) == good
    assert not list(output.parent.glob(".stage3-scene.*"))


# ----------------------------------------------------------------------------- kill -9
def test_kill9_mid_run_then_resume(scene_template: Path, tmp_path: Path) -> None:
    scene = fresh(scene_template, tmp_path / "scene")
    env = {**os.environ, "ISLAND_REFINER_DAEMON": "0"}
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts/refine_scene.py"),
                             "--scene-dir", str(scene), *FLAGS], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    state: dict = {}
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            state, running = running_groups(scene)
            mid_loop = [g for g in running if (scene / "relation_groups" / g / "simple_refiner"
                                               / "iter_1" / "current_state.json").is_file()]
            if state.get("islands_completed") and mid_loop:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        with_timeout = proc.wait(timeout=30)
    assert with_timeout == -signal.SIGKILL
    killed = load(scene / "state.json")
    done_first = list(killed["islands_completed"])
    interrupted = [g for g, s in killed["groups"].items() if s["status"] == "running"]
    assert done_first and interrupted
    kept = {g: snapshot(scene / "relation_groups" / g / "rounds") for g in done_first}
    iterations_first = len(ledger_rows(scene, "iterations"))
    first_run = killed["run_id"]

    assert cli("--scene-dir", str(scene), *FLAGS) == 0
    state = load(scene / "state.json")
    outcome = state["islands_completed"] + [f["id"] for f in state["islands_failed"]]
    assert sorted(outcome) == sorted(FLAGGED)            # every group, exactly once
    assert {g: snapshot(scene / "relation_groups" / g / "rounds") for g in done_first} == kept
    runs = ledger_rows(scene, "runs")
    first = [r for r in runs if r["run_id"] == first_run]
    assert [r["event"] for r in first] == ["started", "failed"]
    assert "died without a terminal status" in first[-1]["detail"]
    assert runs[-1]["event"] == "finished" and runs[-1]["exit_code"] == 0
    second = state["run_id"]
    events = {(r["group_id"], r["event"]) for r in ledger_rows(scene, "groups")
              if r["run_id"] == second}
    assert {(g, "skipped") for g in done_first} <= events
    assert {(g, "reset") for g in interrupted} <= events
    assert len(ledger_rows(scene, "iterations")) > iterations_first   # nothing lost, appended
    assert f"run:{second}:resumed" in state["stage_trace"]
    for g in interrupted:
        assert list((scene / "relation_groups" / g).glob("simple_refiner.bak.*"))


# ----------------------------------------------------------------------------- operations
def test_second_run_on_a_locked_scene_is_refused(tv_template: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    import fcntl

    scene = fresh(tv_template, tmp_path / "scene")
    fd = os.open(scene / ".refine_scene.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        capsys.readouterr()
        assert cli("--scene-dir", str(scene), *FLAGS) == 2
        assert "another refine_scene run is active" in capsys.readouterr().err
    finally:
        os.close(fd)
    assert not (scene / "state.json").exists() and not (scene / "ledger.sqlite").exists()


def test_changed_inputs_need_restart_and_restart_keeps_the_old_outputs(
        tv_template: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    scene = fresh(tv_template, tmp_path / "scene")
    assert cli("--scene-dir", str(scene), *FLAGS) == 0
    graph = load(scene / "inputs/relation_graph.json")
    graph["groups"][0]["members"].pop()
    (scene / "inputs/relation_graph.json").write_text(json.dumps(graph))
    before = snapshot(scene)
    capsys.readouterr()
    assert cli("--scene-dir", str(scene), *FLAGS) == 2
    assert "changed since run" in capsys.readouterr().err
    assert snapshot(scene) == before
    assert cli("--scene-dir", str(scene), *FLAGS, "--restart") == 0
    [previous] = list((scene / "previous").iterdir())
    assert (previous / "state.json").is_file() and (previous / "relation_groups/tv").is_dir()
    state = load(scene / "state.json")
    assert len(state["runs"]) == 1 and state["islands_completed"] == ["tv"]
    assert len([r for r in ledger_rows(scene, "runs") if r["event"] == "finished"]) == 2


def test_sigterm_marks_the_run_failed(scene_template: Path, tmp_path: Path) -> None:
    scene = fresh(scene_template, tmp_path / "scene")
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts/refine_scene.py"),
                             "--scene-dir", str(scene), *FLAGS], cwd=REPO,
                            env={**os.environ, "ISLAND_REFINER_DAEMON": "0"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if (scene / "relation_groups/dining/simple_refiner/iter_1/current_state.json").is_file():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    run = ledger_rows(scene, "runs")[-1]
    assert run["event"] == "failed" and run["exit_code"] == 143
    assert load(scene / "state.json")["status"] == "failed"
