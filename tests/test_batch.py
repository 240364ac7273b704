"""Tier 2 (bpy wheel): ``island-refine batch`` on a 2-worker LocalCluster with real Blender
jobs (the embedded bpy in each single-threaded worker process) on small fixture scenes:
64 px renders, 6 iterations, one round.

A batch completes and a re-run does nothing; a worker SIGKILLed in the middle of an island
gets the island redone by another worker, recorded exactly once; a scene whose worker dies
on every try is failed after the retry limit while the others finish; the SLURM job script
carries the blender resource.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._helpers import ledger_rows, load, snapshot

REPO = Path(__file__).resolve().parents[1]
AGENT = f"{sys.executable} {REPO / 'tests' / 'batch_agent.py'}"
FLAGS = ["--workers", "2", "--blender-bin", "bpy", "--resolution", "64", "--samples", "1",
         "--max-iter", "6", "--max-rounds", "1"]


def cli(*args: str) -> int:
    from scripts.refine_scene import main

    return main(list(args))








def assert_exactly_once(scene: Path, run_id: str) -> None:
    """Each flagged group ends once: one terminal state entry, one terminal ledger event in
    the run, a marker that agrees, and one set of iteration rows per round."""
    state = load(scene / "state.json")
    flagged = state["groups_needing_island"]
    terminal = state["islands_completed"] + [f["id"] for f in state["islands_failed"]]
    assert sorted(terminal) == sorted(flagged)
    groups = [r for r in ledger_rows(scene, "groups") if r["run_id"] == run_id]
    iterations = [r for r in ledger_rows(scene, "iterations") if r["run_id"] == run_id]
    for gid in flagged:
        ends = [r["event"] for r in groups
                if r["group_id"] == gid and r["event"] in ("completed", "failed")]
        marker = load(scene / "relation_groups" / gid / "island_done.json")
        assert ends == [marker["outcome"]], (gid, ends)
        assert state["groups"][gid]["batch"]["attempt_id"] == marker["attempt_id"]
        keys = [(r["round"], r["iter"]) for r in iterations if r["group_id"] == gid]
        assert len(keys) == len(set(keys)), f"{gid}: iteration rows duplicated"


@pytest.fixture(scope="module")
def tv_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    return build_scene(tmp_path_factory.mktemp("tpl") / "tv", resolve_blender("bpy", None),
                       groups=["tv"])


@pytest.fixture(scope="module")
def two_group_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.scenes import build_scene
    from worker.launch import resolve_blender

    return build_scene(tmp_path_factory.mktemp("tpl") / "tv_ring",
                       resolve_blender("bpy", None), groups=["tv", "ring"])


def scenes_from(template: Path, root: Path, *names: str) -> list[Path]:
    out = []
    for name in names:
        shutil.copytree(template, root / name)
        out.append(root / name)
    return out


# ----------------------------------------------------------------------------- complete
@pytest.mark.bpy
def test_batch_completes_then_rerun_does_nothing(tv_template: Path, two_group_template: Path,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    [a] = scenes_from(tv_template, tmp_path, "a")
    [b] = scenes_from(two_group_template, tmp_path, "b")
    assert cli("batch", str(a), str(b), *FLAGS) == 0
    out = capsys.readouterr().out
    assert "2 finished, 0 failed; 3 island(s) refined" in out
    for scene, flagged in ((a, ["tv"]), (b, ["ring", "tv"])):
        state = load(scene / "state.json")
        assert state["status"] == "finished" and state["islands_failed"] == []
        assert sorted(state["islands_completed"]) == flagged
        run_id = state["run_id"]
        assert run_id.startswith("batch-")
        assert_exactly_once(scene, run_id)
        trace = state["stage_trace"]
        assert trace[:2] == [f"run:{run_id}:started", "validate"]
        assert trace[-3:] == ["merge_back", "finalize", "eval"]
        for gid in flagged:
            assert trace.count(f"refine:{gid}:completed") == 1
        runs = ledger_rows(scene, "runs")
        assert [r["event"] for r in runs] == ["started", "finished"]
        assert runs[0]["pid"] == os.getpid()          # the run belongs to the orchestrator
        metrics = load(scene / "metrics.json")
        assert metrics["scene"]["after"]["pass_rate"] == 1.0
        assert metrics["stage_seconds_this_run"]["refine"] > 0

    before = {s: snapshot(s) for s in (a, b)}
    assert cli("batch", str(a), str(b), *FLAGS) == 0
    captured = capsys.readouterr()
    assert "nothing to do: 2 of 2 scene(s) already finished" in captured.err
    assert "already finished" in captured.out
    assert {s: snapshot(s) for s in (a, b)} == before

    # The single-process runner agrees: every stage and group of the batch is complete.
    assert cli("run", "--scene-dir", str(b), "--blender-bin", "bpy", "--resolution", "64",
               "--samples", "1", "--max-iter", "6", "--max-rounds", "1", "--quiet") == 0
    trace = load(b / "state.json")["stage_trace"]
    assert {"refine:tv:skipped:completed", "refine:ring:skipped:completed",
            "merge_back:skipped:complete"} <= set(trace)


# ----------------------------------------------------------------------------- SIGKILL
def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, "the batch ended before the island could be interrupted"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.bpy
def test_sigkill_of_a_worker_mid_island_redoes_it_elsewhere_exactly_once(
        tv_template: Path, tmp_path: Path) -> None:
    victim, other = scenes_from(tv_template, tmp_path, "victim", "other")
    pause = tmp_path / "pause"
    pause.write_text("")
    policy = (f"command:{AGENT} --pause-file {pause} --pause-scene victim")
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts/refine_scene.py"), "batch",
                             str(victim), str(other), *FLAGS, "--policy", policy],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "ISLAND_REFINER_DAEMON": "0"})
    try:
        # The agent waits inside the victim's island: iter_0 is done, iter_1 is being decided.
        _wait_for(Path(f"{pause}.waiting"), proc)
        gdir = victim / "relation_groups" / "tv"
        first = load(gdir / "island_attempt.json")
        assert first["attempt"] == 1 and (gdir / "simple_refiner" / "iter_0").is_dir()
        os.kill(first["pid"], signal.SIGKILL)
        pause.unlink()
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    second = load(gdir / "island_attempt.json")
    assert second["attempt"] == 2 and second["pid"] != first["pid"]
    marker = load(gdir / "island_done.json")
    assert marker["outcome"] == "completed" and marker["attempt"] == 2
    # no-resume: the second attempt started from a fresh simple_refiner
    assert list(gdir.glob("simple_refiner.bak.*"))
    for scene in (victim, other):
        state = load(scene / "state.json")
        assert state["status"] == "finished" and state["islands_completed"] == ["tv"]
        assert_exactly_once(scene, state["run_id"])
    run_id = load(victim / "state.json")["run_id"]
    events = [(r["event"], r["detail"]) for r in ledger_rows(victim, "groups")
              if r["run_id"] == run_id]
    assert [e for e, _ in events if e == "attempt_started"] == ["attempt_started"] * 2
    assert str(first["pid"]) in events[0][1]
    assert [e for e, _ in events].count("completed") == 1
    row = next(line.split() for line in out.splitlines() if line.startswith("victim-"))
    verdict = load(victim / "state.json")["groups"]["tv"]["verification"]["verdict"]
    counts = "/".join(str(int(verdict == v)) for v in ("pass", "fail", "uncertain"))
    # islands, done, failed, refused, review pass/fail/uncertain (the one review), redone,
    # exit
    assert row[1:9] == ["finished", "1", "1", "0", "0", counts, "1", "0"]


# ----------------------------------------------------------------------------- refusals
@pytest.mark.bpy
def test_a_refused_group_makes_its_scene_partial_not_failed(
        tv_template: Path, two_group_template: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    from tests.real_scenes import spoil_unit

    [good] = scenes_from(tv_template, tmp_path, "good")
    part, strict = scenes_from(two_group_template, tmp_path, "part", "strict")
    for scene in (part, strict):
        ring = next(g for g in load(scene / "inputs/relation_graph.json")["groups"]
                    if g["id"] == "ring")
        spoil_unit(scene / "blend/stage3-sub-planned.blend", "keyframed", ring["members"][0])
    code = cli("batch", str(good), str(part), *FLAGS)
    out = capsys.readouterr().out
    assert code == 24, out
    assert "2 scene(s), 1 finished, 0 failed, 1 partial" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("part-"))
    # status, islands, done, failed, refused
    assert row[1:6] == ["partial", "1", "1", "0", "1"], row
    state = load(part / "state.json")
    assert [r["id"] for r in state["islands_refused"]] == ["ring"]
    assert state["islands_completed"] == ["tv"] and state["islands_failed"] == []
    metrics = load(part / "metrics.json")
    assert metrics["scene"]["partial"] and metrics["scene"]["groups_refused"] == ["ring"]
    assert "keyframed transform" in metrics["groups"]["ring"]["refusal_reason"]
    # a re-run has nothing to do and still says partial
    assert cli("batch", str(good), str(part), *FLAGS) == 24
    capsys.readouterr()
    # --strict keeps the whole-scene refusal: that scene fails (exit 23), no output
    assert cli("batch", str(strict), *FLAGS, "--strict") == 21
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.startswith("strict-"))
    assert row[1] == "failed" and "23" in row, row
    assert not (strict / "blend/stage3-scene.blend").exists()
    assert not (strict / "relation_groups").exists()


# ----------------------------------------------------------------------------- crashes
@pytest.mark.bpy
def test_scene_whose_worker_always_crashes_fails_after_the_retry_limit(
        tv_template: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good, crashy, corrupt = scenes_from(tv_template, tmp_path, "good", "crashy", "corrupt")
    (corrupt / "blend/stage3-sub-planned.blend").write_bytes(b"not a blend file" * 64)
    policy = f"command:{AGENT} --crash-scene crashy"
    code = cli("batch", str(good), str(crashy), str(corrupt), *FLAGS, "--retries", "1",
               "--policy", policy)
    out = capsys.readouterr().out
    assert code == 21, out
    assert "3 scene(s), 2 finished, 1 failed" in out

    state = load(good / "state.json")
    assert state["status"] == "finished" and state["islands_completed"] == ["tv"]

    state = load(crashy / "state.json")
    [failed] = state["islands_failed"]
    assert failed["id"] == "tv" and "KilledWorker" in failed["reason"]
    assert state["islands_completed"] == [] and state["status"] == "finished"
    gdir = crashy / "relation_groups/tv"
    assert load(gdir / "island_attempt.json")["attempt"] == 2      # --retries 1: two tries
    assert load(gdir / "island_done.json")["outcome"] == "failed"
    assert_exactly_once(crashy, state["run_id"])
    runs = ledger_rows(crashy, "runs")
    assert runs[-1]["event"] == "finished" and runs[-1]["exit_code"] == 21
    [failure] = ledger_rows(crashy, "failures")
    assert failure["group_id"] == "tv" and failure["error_type"] == "KilledWorker"

    # a bad input is not retried: one failure, the run failed with the input's exit code
    runs = ledger_rows(corrupt, "runs")
    assert [r["event"] for r in runs] == ["started", "failed"] and runs[-1]["exit_code"] == 8
    assert len(ledger_rows(corrupt, "failures")) == 1
    assert not (corrupt / "state.json").exists()


# ----------------------------------------------------------------------------- farm
def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.bpy
def test_batch_on_a_standing_scheduler_with_blender_workers(tv_template: Path,
                                                           tmp_path: Path) -> None:
    """--cluster tcp://: a farm's scheduler and a render node's worker, as docs/BATCH.md
    starts them (here on the loopback interface)."""
    [scene] = scenes_from(tv_template, tmp_path, "farm")
    address = f"tcp://127.0.0.1:{_free_port()}"
    dask = str(Path(sys.executable).with_name("dask"))
    logs = open(tmp_path / "farm.log", "w")
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port",
                               address.rsplit(":", 1)[1], "--no-dashboard"],
                              stdout=logs, stderr=logs, cwd=REPO)]
    try:
        procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1",
                                       "--resources", "blender=1", "--no-dashboard"],
                                      stdout=logs, stderr=logs, cwd=REPO))
        flags = [f for f in FLAGS if f not in ("--workers", "2")]
        assert cli("batch", str(scene), "--cluster", address, *flags) == 0
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        logs.close()
    state = load(scene / "state.json")
    assert state["status"] == "finished" and state["islands_completed"] == ["tv"]
    assert_exactly_once(scene, state["run_id"])


def test_slurm_job_script_runs_one_single_threaded_blender_worker(
        capsys: pytest.CaptureFixture) -> None:
    assert cli("batch", "--cluster", "slurm", "--print-job-script", "--queue", "render",
               "--walltime", "02:00:00") == 0
    script = capsys.readouterr().out
    assert script.startswith("#!") and "#SBATCH" in script
    assert "--resources blender=1" in script
    assert "--nthreads 1" in script
    assert "#SBATCH -p render" in script and "#SBATCH -t 02:00:00" in script
