"""The agent adapter: policy rules of ``write``, the loop rules of ``run``, command agents.

Tier 1 drives the real ``island_tools.iteration`` (staging, sanity read-back, geometry,
annotation) with ``FakeWorker`` standing in for Blender: the group's island.blend holds the
poses as JSON and renders are flat PNGs, so every loop rule runs in milliseconds. Tier 2
(``bpy``) repeats the two things only Blender can show: the CLI end to end on a real island,
and exit 4 when the saved file silently keeps the old poses.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from island_tools.adapter import REPORT_MAX_WORDS, read_decision_text, run_group, write_decision
from island_tools.config import Settings
from island_tools.errors import (
    EXIT_AGENT,
    EXIT_SANITY,
    EXIT_TARGET_SPEC,
    EXIT_TRANSFORMS,
    TransformsError,
)
from island_tools.files import atomic
from island_tools.iteration import init_iter0, iter_step, sha256_file
from island_tools.measure import meshcache
from island_tools.policy import EXCEPTION_CAP_M, MIN_ITER
from tests._helpers import snapshot

REPO = Path(__file__).resolve().parents[1]
SETTINGS = Settings(blender_bin="bpy", engine="workbench", resolution=64, samples=1)
NUDGE = {"delta_xyz": [0.0, -0.01, 0.0], "delta_yaw_deg": 0.0}


class FakeWorker:
    """Stands in for Blender. A fake island.blend is JSON ``{"poses": {name: 4x4},
    "mesh_cache": <npz the mesh export copies>}``; renders are flat PNGs."""

    def __init__(self, apply: bool = True) -> None:
        self.apply = apply  # False: "saves" without the new poses (the exit-4 fault)

    def __call__(self, job: dict[str, Any]) -> dict[str, Any]:
        blend = Path(job["blend"])
        doc = json.loads(blend.read_text())
        if job.get("poses") and self.apply:
            doc["poses"].update(job["poses"])
            blend.write_text(json.dumps(doc))
        if job.get("export_meshes"):
            shutil.copyfile(doc["mesh_cache"], job["export_meshes"])
        render = None
        if job.get("render"):
            for view in ("persp", "bev"):
                Image.new("RGB", (64, 64), (242, 242, 242)).save(
                    blend.parent / f"render_{view}.png")
            render = {"persp": "render_persp.png", "bev": "render_bev.png", "resolution": 64,
                      "bev_ortho_scale_m": 5.0, "bev_metres_per_pixel": 5.0 / 64,
                      "bev_center_xy": [0.0, 0.0]}
        return {"poses": doc["poses"], "blender_version": "fake", "file_version": "fake",
                "autoexec_fail": False, "timings_s": {}, "render": render}


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Fake-worker groups built once per session from the real fixture arrangements."""
    from fixtures import specs

    out = tmp_path_factory.mktemp("adapter_groups")
    groups = {}
    for name, variant in (("long_table_5", "turned_90"), ("long_table_5", "pushed_in"),
                          ("long_table_5", "correct")):
        arr = specs.arrange(name, variant)
        root = out / f"{name}__{variant}"
        root.mkdir()
        atomic.write_json(root / "metadata.json", arr.metadata())
        atomic.write_json(root / "target_spec.json", arr.target_spec())
        meshcache.save(out / f"{variant}.npz", arr.meshes,
                       {n: p for n, p in specs.member_props(name).items() if p})
        (root / "island.blend").write_text(json.dumps(
            {"poses": {n: [list(map(float, row)) for row in arr.canonical[n]]
                       for n in arr.names},
             "mesh_cache": str(out / f"{variant}.npz")}))
        groups[variant] = root
    return groups


def fresh(templates: dict[str, Path], tmp_path: Path, variant: str = "turned_90") -> Path:
    dest = tmp_path / variant
    shutil.copytree(templates[variant], dest)
    return dest


@pytest.fixture
def group(templates: dict[str, Path], tmp_path: Path) -> Path:
    dest = fresh(templates, tmp_path)
    init_iter0(dest, SETTINGS, FakeWorker())
    return dest


def advance(group: Path, to_n: int) -> None:
    """Step iterations 1..to_n-1 (iter_1: three verification moves, then empty)."""
    for n in range(1, to_n):
        members = {f"chair_{i}": NUDGE for i in (1, 2, 3)} if n == 1 else {}
        write_decision(group, n, {"members": members}, model="test", generated_by="test")
        iter_step(group, n, SETTINGS, FakeWorker())




def move(dx: float = 0.0, dy: float = 0.0, yaw: float = 0.0) -> dict[str, Any]:
    return {"delta_xyz": [dx, dy, 0.0], "delta_yaw_deg": yaw}


# ------------------------------------------------------------------------------ write rules
THREE = {"chair_1": move(0.1), "chair_2": move(0.1), "chair_3": move(0.1)}
RULES = [
    # (name, iteration, decision, words the one-line error must contain)
    ("anchor", 1, {"members": {**THREE, "table": move(0.1)}}, ["members.table", "anchor"]),
    ("forbidden_key", 1, {"members": THREE, "groups": {}}, ["groups", "forbidden"]),
    ("unknown_member", 1, {"members": {**THREE, "chair_9": move(0.1)}},
     ["members.chair_9", "unknown member"]),
    ("non_finite", 1, {"members": {**THREE, "chair_4": move(math.nan)}},
     ["members.chair_4.delta_xyz", "non-finite"]),
    ("two_numbers", 1, {"members": {**THREE, "chair_4": {"delta_xyz": [0.1, 0.1],
                                                        "delta_yaw_deg": 0.0}}},
     ["members.chair_4.delta_xyz", "three numbers"]),
    ("iter_1_empty", 1, {"members": {}}, ["iter_1", "members"]),
    ("unknown_decision_key", 2, {"members": {}, "phase": "pattern"},
     ["field 'phase'", "unknown key"]),
    ("pattern_too_few", 1, {"members": {"chair_1": move(0.1), "chair_2": move(0.1)}},
     ["pattern phase (iter 1-3)", "at least 3 members", "chair_1, chair_2"]),
    ("pattern_cap", 2, {"members": {**THREE, "chair_2": move(dy=-1.2)}},
     ["pattern phase (iter 1-3)", "1.0 m", "'chair_2'", "|y|", "members.chair_2.delta_xyz"]),
    ("member_too_many", 4, {"members": {f"chair_{i}": move(0.1) for i in (1, 2, 3, 4)}},
     ["member phase (iter 4-10)", "1 to 3 members", "got 4"]),
    ("member_cap", 4, {"members": {"chair_5": move(0.35)}},
     ["member phase (iter 4-10)", "0.3 m", "'chair_5'", "|x|"]),
    ("micro_too_many", 11, {"members": {"chair_1": move(0.01), "chair_2": move(0.01)}},
     ["micro phase (iter 11+)", "exactly 1 member", "chair_1, chair_2"]),
    ("micro_cap", 11, {"members": {"chair_4": move(0.06)}},
     ["micro phase (iter 11+)", "0.05 m", "'chair_4'"]),
]


@pytest.mark.parametrize("name,n,decision,words", RULES, ids=[r[0] for r in RULES])
def test_each_policy_rule_rejects_with_its_message_and_writes_nothing(
        group: Path, name: str, n: int, decision: dict, words: list[str]) -> None:
    advance(group, n)
    before = snapshot(group)
    with pytest.raises(TransformsError) as err:
        write_decision(group, n, decision, model="test", generated_by="test")
    message = str(err.value)
    assert err.value.exit_code == EXIT_TRANSFORMS and "\n" not in message
    assert f"iter_{n}/transforms.json" in message
    for word in words:
        assert word in message, (word, message)
    assert snapshot(group) == before
    assert not (group / "simple_refiner" / f"iter_{n}").exists()


def test_yaw_is_uncapped_and_a_valid_decision_is_written_with_truthful_meta(group: Path
                                                                          ) -> None:
    decision = {"members": {"chair_1": move(0.5, yaw=170.0), "chair_2": move(yaw=-135.0),
                            "chair_3": move(dy=1.0)}, "reason_summary": "turn and pull"}
    result = write_decision(group, 1, decision, model="opus", generated_by="my agent")
    doc = json.loads(result.path.read_text())
    assert doc["members"] == decision["members"] and doc["iter"] == 1
    assert doc["converged"] is False and doc["final"] is False
    meta = doc["_island_meta"]
    bev = group / "simple_refiner" / "iter_0" / "render_bev.png"
    assert meta["model"] == "opus" and meta["generated_by"] == "my agent"
    assert meta["image_sha256"] == sha256_file(bev) and meta["mode"] == "island_iter"
    assert meta["iter"] == 1 and meta["timestamp_utc"].endswith("Z")
    Image.new("RGB", (8, 8), (1, 2, 3)).save(group / "masked.png")
    again = write_decision(group, 1, decision, model="opus", generated_by="my agent")
    assert again.doc["_island_meta"]["image_sha256"] == sha256_file(group / "masked.png")


def test_penetration_exception_lets_one_penetrating_member_move_up_to_its_cap(
        templates: dict[str, Path], tmp_path: Path) -> None:
    g = fresh(templates, tmp_path, "pushed_in")   # every chair 0.15 m inside the table
    init_iter0(g, SETTINGS, FakeWorker())
    alone = write_decision(g, 1, {"members": {"chair_1": move(dy=-1.5)}}, model="t",
                           generated_by="t")
    assert alone.verdict.exception and alone.verdict.moved == ("chair_1",)
    with pytest.raises(TransformsError, match=rf"penetration exception caps each delta_xyz "
                                              rf"component at {EXCEPTION_CAP_M} m, but \|y\| "
                                              rf"of 'chair_1' is 2.500 m"):
        write_decision(g, 1, {"members": {"chair_1": move(dy=-2.5)}}, model="t",
                       generated_by="t")
    write_decision(g, 1, {"members": {"chair_1": move(dy=-1.5)}}, model="t", generated_by="t")
    iter_step(g, 1, SETTINGS, FakeWorker())
    advance_from(g, 2, 4)
    # chair_1 is out of the table now: alone it gets the member phase's cap, not the exception.
    with pytest.raises(TransformsError, match=r"member phase \(iter 4-10\) caps each delta_xyz "
                                              r"component at 0.3 m, but \|y\| of 'chair_1' is "
                                              r"0.500 m"):
        write_decision(g, 4, {"members": {"chair_1": move(dy=-0.5)}}, model="t",
                       generated_by="t")
    still_in = write_decision(g, 4, {"members": {"chair_2": move(dy=-1.5)}}, model="t",
                              generated_by="t")
    assert still_in.verdict.exception


def advance_from(group: Path, first: int, to_n: int) -> None:
    for n in range(first, to_n):
        write_decision(group, n, {"members": {}}, model="test", generated_by="test")
        iter_step(group, n, SETTINGS, FakeWorker())


def test_converged_gate_writes_false_before_min_iter_or_without_an_earlier_move(
        templates: dict[str, Path], tmp_path: Path) -> None:
    group = fresh(templates, tmp_path, "correct")   # a state the review passes
    init_iter0(group, SETTINGS, FakeWorker())
    advance(group, 3)
    early = write_decision(group, 3, {"members": {}, "converged": True}, model="t",
                           generated_by="t")
    assert early.converged_requested and not early.converged_honoured
    assert json.loads(early.path.read_text())["converged"] is False
    assert any("MIN_ITER" in w for w in early.warnings)
    iter_step(group, 3, SETTINGS, FakeWorker())
    advance_from(group, 4, MIN_ITER)
    honoured = write_decision(group, MIN_ITER, {"members": {}, "converged": True},
                              model="t", generated_by="t")
    assert honoured.converged_honoured and json.loads(
        honoured.path.read_text())["converged"] is True
    # A hand-made history whose only moving iteration was emptied afterwards.
    it1 = group / "simple_refiner" / "iter_1" / "transforms.json"
    atomic.write_json(it1, {**json.loads(it1.read_text()), "members": {}})
    ignored = write_decision(group, MIN_ITER, {"members": {}, "converged": True},
                             model="t", generated_by="t")
    assert not ignored.converged_honoured
    assert any("no earlier iteration moved" in w for w in ignored.warnings)


def test_converged_gate_refuses_a_state_the_review_fails_and_a_moving_decision(
        group: Path) -> None:
    """One verdict: the chairs of turned_90 are still turned after three nudges, so the
    review of iter_(N-1) fails and converged is written false, naming the failing items."""
    advance(group, MIN_ITER)
    refused = write_decision(group, MIN_ITER, {"members": {}, "converged": True},
                             model="t", generated_by="t")
    assert refused.converged_requested and not refused.converged_honoured
    assert json.loads(refused.path.read_text())["converged"] is False
    assert refused.review is not None and refused.review["summary"]["verdict"] == "fail"
    warning = next(w for w in refused.warnings if "fails its review" in w)
    assert "Review: fail" in warning and "deg off" in warning
    moving = write_decision(group, MIN_ITER, {"members": {"chair_1": NUDGE}, "converged": True},
                            model="t", generated_by="t")
    assert not moving.converged_honoured
    assert any("decision moves members" in w for w in moving.warnings)


def test_junk_decision_text_or_a_non_object_is_a_transforms_error(group: Path) -> None:
    with pytest.raises(TransformsError, match="decision is not valid JSON") as err:
        read_decision_text("members: chair_1", "<stdin>")
    assert err.value.exit_code == EXIT_TRANSFORMS
    with pytest.raises(TransformsError, match="the decision must be a JSON object, got list"):
        write_decision(group, 1, read_decision_text("[1, 2]", "<stdin>"), model="t",
                       generated_by="t")


# ------------------------------------------------------------------------------ command agents
def agent_script(tmp_path: Path, body: str) -> str:
    """A tiny Python agent: ``prompt`` is the parsed stdin; the body prints a decision."""
    path = tmp_path / "agent.py"
    path.write_text("import json, os, sys, time, subprocess\n"
                    "prompt = json.load(sys.stdin)\n" + textwrap.dedent(body))
    return f"command:{sys.executable} {path}"


def planned_agent(tmp_path: Path, plan: dict[int, dict]) -> str:
    """Answers iteration n with plan[n] (default: no move) and logs every prompt."""
    (tmp_path / "plan.json").write_text(json.dumps({str(k): v for k, v in plan.items()}))
    return agent_script(tmp_path, f"""
        with open({str(tmp_path / 'prompts.jsonl')!r}, "a") as log:
            log.write(json.dumps(prompt) + "\\n")
        plan = json.load(open({str(tmp_path / 'plan.json')!r}))
        print(json.dumps(plan.get(str(prompt["iter"]), {{"members": {{}}}})))
    """)


def run(group: Path, policy: str, worker: FakeWorker | None = None, **kw: Any):
    return run_group(group, policy, SETTINGS, worker or FakeWorker(), **kw)


NUDGES = {"members": {f"chair_{i}": NUDGE for i in (1, 2, 3)}}


def test_command_agent_gets_the_prompt_and_empties_stop_only_from_min_iter(
        templates: dict[str, Path], tmp_path: Path) -> None:
    g = fresh(templates, tmp_path)
    report = run(g, planned_agent(tmp_path, {1: NUDGES}))
    # Iterations 2, 3, 4 are empty (three in a row at N=4) but the stop waits for N=5.
    assert report.ok and report.exit_code == 0
    assert report.final_iter == MIN_ITER and "consecutive empty" in report.stop_reason
    assert report.nonempty_iters == [1]
    prompts = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert [p["iter"] for p in prompts] == [1, 2, 3, 4, 5]
    first = prompts[0]
    assert first["phase"]["name"] == "pattern" and first["phase"]["max_abs_delta_xyz_m"] == 1.0
    assert first["review"]["verdict"] == "fail"   # iter_0 of turned_90: the one review
    assert any(f["id"].startswith("facing_") for f in first["review"]["failing"])
    assert prompts[3]["phase"]["members_max"] == 3 and prompts[3]["phase"]["name"] == "member"
    for key in ("render_persp", "render_bev", "render_bev_annotated", "geometry",
                "previous_transforms", "target_spec", "metadata"):
        assert Path(first["files"][key]).is_absolute() and Path(first["files"][key]).is_file()
    meta = json.loads((g / "simple_refiner/iter_1/transforms.json").read_text())["_island_meta"]
    assert meta["model"] == "external" and meta["generated_by"].startswith("command: ")


def test_empties_interrupted_by_a_move_restart_the_count(templates: dict[str, Path],
                                                         tmp_path: Path) -> None:
    g = fresh(templates, tmp_path)
    back = {"members": {f"chair_{i}": move(dy=0.01) for i in (1, 2, 3)}}
    report = run(g, planned_agent(tmp_path, {1: NUDGES, 3: back}))
    assert report.final_iter == 6 and report.nonempty_iters == [1, 3]


def test_converged_before_min_iter_is_ignored_and_honoured_at_min_iter(
        templates: dict[str, Path], tmp_path: Path) -> None:
    g = fresh(templates, tmp_path, "correct")   # the review passes: the gate may honour it
    converged = {"members": {}, "converged": True}
    report = run(g, planned_agent(tmp_path, {1: NUDGES, 2: converged, 3: NUDGES,
                                             5: converged}))
    assert report.final_iter == 5 and report.stop_reason == "converged at iter 5"
    log = json.loads((g / "simple_refiner/run.json").read_text())
    by_iter = {e["iter"]: e for e in log["iterations"]}
    assert by_iter[2]["converged_requested"] and not by_iter[2]["converged_honoured"]
    assert by_iter[5]["converged_honoured"]
    assert json.loads((g / "simple_refiner/iter_2/transforms.json").read_text())[
        "converged"] is False


def test_final_flag_and_promotion_after_a_solver_run(templates: dict[str, Path],
                                                     tmp_path: Path) -> None:
    g = fresh(templates, tmp_path)
    report = run(g, "solver")
    assert report.ok and report.final_iter == MIN_ITER and report.nonempty_iters == [1]
    assert report.stop_reason == f"converged at iter {MIN_ITER}"
    assert len(report.report_text.split()) <= REPORT_MAX_WORDS
    assert "Review: pass" in report.report_text and "fail" not in report.report_text
    refiner = g / "simple_refiner"
    final = json.loads((refiner / f"iter_{MIN_ITER}/transforms.json").read_text())
    assert final["final"] is True and final["converged"] is True
    assert final["_island_meta"]["model"] == "solver"
    assert (g / "island.blend").read_bytes() == (
        refiner / f"iter_{MIN_ITER}/island.blend").read_bytes()
    for n in range(MIN_ITER):
        assert json.loads((refiner / f"iter_{n}/transforms.json").read_text())["final"] is False
    log = json.loads((refiner / "run.json").read_text())
    assert log["status"] == "completed" and log["exit_code"] == 0
    assert [e["iter"] for e in log["iterations"]] == [1, 2, 3, 4, 5]
    assert log["iterations"][-1]["review"]["verdict"] == "pass"
    assert log["review"]["verdict"] == "pass" and log["review"]["iter"] == MIN_ITER
    assert log["iterations"][-1]["review"]["figures"]["penetration_pairs"] == 0


def test_final_rewrite_preserves_members_converged_and_meta(templates: dict[str, Path],
                                                           tmp_path: Path) -> None:
    g = fresh(templates, tmp_path)
    report = run(g, planned_agent(tmp_path, {1: NUDGES}), max_iter=1)
    assert report.final_iter == 1 and report.stop_reason == "max_iter (1) reached"
    doc = json.loads((g / "simple_refiner/iter_1/transforms.json").read_text())
    assert doc["final"] is True and doc["members"] == NUDGES["members"]
    assert doc["converged"] is False and doc["_island_meta"]["iter"] == 1


def test_agent_marking_final_ends_the_loop(templates: dict[str, Path], tmp_path: Path) -> None:
    g = fresh(templates, tmp_path)
    report = run(g, planned_agent(tmp_path, {1: NUDGES, 2: {"members": {}, "final": True}}))
    assert report.ok and report.final_iter == 2 and "final" in report.stop_reason


def test_exit_4_stops_the_run_and_promotes_nothing(templates: dict[str, Path],
                                                   tmp_path: Path) -> None:
    g = fresh(templates, tmp_path)
    island = (g / "island.blend").read_bytes()
    report = run(g, "solver", FakeWorker(apply=False))
    assert not report.ok and report.exit_code == EXIT_SANITY
    assert report.final_iter is None and "iter_step failed at iter 1 (exit 4)" in report.stop_reason
    assert "identical" in report.errors[0]
    assert (g / "island.blend").read_bytes() == island
    assert not (g / "simple_refiner/iter_1/current_state.json").exists()
    log = json.loads((g / "simple_refiner/run.json").read_text())
    assert log["status"] == "failed" and log["iterations"][0]["error"]["exit_code"] == EXIT_SANITY


@pytest.mark.parametrize("kind,body,words,code", [
    ("timeout", """
        child = subprocess.Popen(["sleep", "60"])
        open(os.path.join(os.path.dirname(__file__), "child.pid"), "w").write(str(child.pid))
        time.sleep(60)
     """, ["timed out after 1 s and was killed"], EXIT_AGENT),
    ("crash", """
        print("half a decision", flush=True)
        print("agent: model quota exceeded", file=sys.stderr)
        sys.exit(3)
     """, ["exited 3: agent: model quota exceeded"], EXIT_AGENT),
    ("junk", """
        print("Sure! Here is my decision: move chair_1 left.")
     """, ["printed no JSON decision", "Sure! Here is"], EXIT_AGENT),
    ("not_an_object", """
        print("[1, 2, 3]")
     """, ["printed JSON list, not an object"], EXIT_AGENT),
    ("rejected", """
        print(json.dumps({"members": {"table": {"delta_xyz": [0, 0, 0], "delta_yaw_deg": 5}}}))
     """, ["members.table", "anchor"], EXIT_TRANSFORMS),
])
def test_failing_command_agent_stops_the_run_cleanly(templates: dict[str, Path], tmp_path: Path,
                                                     kind: str, body: str, words: list[str],
                                                     code: int) -> None:
    g = fresh(templates, tmp_path)
    script = agent_script(tmp_path, textwrap.dedent(f"""
        if prompt["iter"] == 1:
            print(json.dumps({json.dumps(NUDGES)}))
            sys.exit(0)
    """) + textwrap.dedent(body))
    t0 = time.monotonic()
    report = run(g, script, timeout_s=1.0)
    assert time.monotonic() - t0 < 20
    assert not report.ok and report.exit_code == code
    assert report.final_iter == 1 and report.nonempty_iters == [1]
    assert f"at iter 2 (exit {code})" in report.stop_reason
    for word in words:
        assert word in report.errors[0], (word, report.errors[0])
    log = json.loads((g / "simple_refiner/run.json").read_text())
    assert log["status"] == "failed" and log["iterations"][1]["error"]["exit_code"] == code
    # Iteration 1 is intact, marked final and promoted; iteration 2 was never written.
    refiner = g / "simple_refiner"
    assert json.loads((refiner / "iter_1/transforms.json").read_text())["final"] is True
    assert not (refiner / "iter_2").exists()
    assert (g / "island.blend").read_bytes() == (refiner / "iter_1/island.blend").read_bytes()
    if kind == "timeout":   # the whole process group was killed, grandchildren included
        pid = int((tmp_path / "child.pid").read_text())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_unknown_policy_is_a_usage_error_before_anything_changes(group: Path) -> None:
    from island_tools.errors import UsageError

    before = snapshot(group)
    with pytest.raises(UsageError, match="unknown policy 'magic'"):
        run(group, "magic")
    assert snapshot(group) == before


def test_a_broken_group_is_a_failed_report_not_an_exception(templates: dict[str, Path],
                                                            tmp_path: Path) -> None:
    g = fresh(templates, tmp_path)
    (g / "target_spec.json").unlink()
    report = run(g, "solver")
    assert not report.ok and report.exit_code == EXIT_TARGET_SPEC
    assert report.stop_reason == f"init_iter0 failed (exit {EXIT_TARGET_SPEC})"
    assert "target_spec.json" in report.errors[0] and report.run_json is None
    assert not (g / "simple_refiner").exists()


# ------------------------------------------------------------------------------ CLI
def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/agent.py", *args], cwd=REPO, input=stdin,
                          capture_output=True, text=True, check=False)


def test_cli_write_accepts_and_rejects_with_one_line(group: Path) -> None:
    bad = json.dumps({"members": {"chair_1": move(1.5), "chair_2": move(0.1),
                                  "chair_3": move(0.1)}})
    rejected = _cli("write", "--group-dir", str(group), "--iter", "1", stdin=bad)
    assert rejected.returncode == EXIT_TRANSFORMS
    line = rejected.stderr.strip().splitlines()
    assert len(line) == 1 and "pattern phase (iter 1-3)" in line[0] and "'chair_1'" in line[0]
    assert "1.0 m" in line[0]
    assert not (group / "simple_refiner/iter_1").exists()
    good = group / "decision.json"
    good.write_text(json.dumps(NUDGES))
    ok = _cli("write", "--group-dir", str(group), "--iter", "1", "--file", str(good),
              "--model", "opus")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads((group / "simple_refiner/iter_1/transforms.json").read_text())
    assert doc["_island_meta"]["model"] == "opus"
    usage = _cli("write", "--group-dir", str(group), "--iter", "3", stdin=json.dumps(NUDGES))
    assert usage.returncode == 2 and "iter_2 is not complete" in usage.stderr


# ------------------------------------------------------------------------------ tier 2
@pytest.fixture(scope="module")
def real_group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("bpy")
    from fixtures.build import build_fixture
    from worker.launch import resolve_blender

    return build_fixture("long_table_5", "turned_90", tmp_path_factory.mktemp("real"),
                         backend=resolve_blender("bpy", None))


@pytest.mark.bpy
def test_cli_run_solver_end_to_end_on_blender(real_group: Path, tmp_path: Path) -> None:
    g = tmp_path / "g"
    shutil.copytree(real_group, g)
    proc = subprocess.run(
        [sys.executable, "scripts/agent.py", "run", "--group-dir", str(g), "--resolution", "64",
         "--samples", "1", "--blender-bin", "bpy", "--quiet"],
        cwd=REPO, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = proc.stdout.strip().splitlines()[-1]
    assert report.startswith("Final iter_5; stop: converged at iter 5")
    assert len(report.split()) <= REPORT_MAX_WORDS and "Review: pass" in report
    refiner = g / "simple_refiner"
    geometry = json.loads((refiner / "iter_5/geometry.json").read_text())["group"]
    assert geometry["facing_error_max_deg"] <= 0.01 and geometry["penetration_pairs"] == 0
    assert geometry["clearance_error_max_m"] <= 1e-4 and geometry["pattern"]["match"]
    assert (g / "island.blend").read_bytes() == (refiner / "iter_5/island.blend").read_bytes()
    assert (refiner / "iter_5/render_bev_annotated.png").is_file()


@pytest.mark.bpy
def test_skipped_save_stops_the_run_with_exit_4(real_group: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from worker import blend_io
    from worker.launch import resolve_blender, run_job

    g = tmp_path / "g"
    shutil.copytree(real_group, g)
    monkeypatch.setattr(blend_io, "save_blend", lambda path: None)  # the apply fails silently
    backend = resolve_blender("bpy", None)
    report = run_group(g, "solver", SETTINGS, lambda job: run_job(job, backend))
    assert report.exit_code == EXIT_SANITY and report.final_iter is None
    assert "identical" in report.errors[0]
    assert (g / "island.blend").read_bytes() == (real_group / "island.blend").read_bytes()
