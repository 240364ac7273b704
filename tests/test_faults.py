"""Tier 2 (bpy wheel): the fault suite (issue 14). Each case is provoked for real - planted
symlinks in a 1777 directory, an agent that prints without end or leaves a ``setsid`` child,
an immutable directory, a full filesystem, a mount inside the group, a worker reply with a
non-finite number, malformed inputs - and each asserts the documented exit code, one line
on stderr naming the file/field (no traceback), and that every earlier artifact is
byte-identical. The randomized kill test SIGKILLs the client, the step host and the worker
at random moments and checks that every iteration is complete or absent and that the next
call succeeds. Renders are 64 px; the daemons are the private ones of the ``ddir`` fixture.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from island_tools.errors import (
    EXIT_AGENT,
    EXIT_FILESYSTEM,
    EXIT_GROUP_INPUT,
    EXIT_INTERNAL,
    EXIT_TRANSFORMS,
    EXIT_USAGE,
    EXIT_WORKER,
    FilesystemError,
    GroupInputError,
)
from island_tools.iteration import ITER_OUTPUTS
from tests._helpers import snapshot
from tests.test_daemon import (  # noqa: F401 - fixtures
    MOVES,
    REPO,
    backend,
    cli,
    ddir,
    group,
    live,
    prepared,
    wait_for,
    write_decision,
)
from worker import daemon
from worker.launch import run_job

pytestmark = pytest.mark.bpy
FLAGS = ("--resolution", "64", "--samples", "1", "--blender-bin", "bpy")
OTHER_UID = 12345


def step(group: Path, n: int = 1, *extra: str, env: dict | None = None
         ) -> subprocess.CompletedProcess:
    return cli("scripts/iter_step.py", "--group-dir", str(group), "--iter", str(n), *FLAGS,
               *extra, env=env)


def one_line(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The call failed with ``code`` and said so in one line naming ``needles``."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if "error (exit" in ln]
    assert len(errors) == 1, proc.stderr[-3000:]
    line = errors[0]
    assert f"(exit {code})" in line, line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def raw_transforms(group: Path, text: str, n: int = 1) -> Path:
    path = group / "simple_refiner" / f"iter_{n}" / "transforms.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def decision_with(group: Path, value_text: str) -> Path:
    """iter_1/transforms.json whose chair_1 delta x is ``value_text`` verbatim."""
    path = write_decision(group, 1, MOVES[0])
    doc, count = re.subn(r'("delta_xyz": \[\s*)0\.1,', lambda m: m.group(1) + value_text + ",",
                         path.read_text(), count=1)
    assert count == 1
    path.write_text(doc)
    return path


def mounted(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.getuid() != 0 or not shutil.which("mount"):
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, check=False).returncode == 0


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    # chattr_group's file system takes the flag; refusing it here is a failure, not a skip.
    assert _chattr("+i", path), f"chattr +i {path} refused"
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)


@pytest.fixture
def chattr_group(prepared: Path, immutable_capable_dir: Path) -> Iterator[Path]:
    """``group``, on a file system whose immutable flag works (tests/conftest.py: the temp
    dir, else a loop-mounted ext4 image as root, else a skip that fails in CI)."""
    home = Path(tempfile.mkdtemp(dir=immutable_capable_dir))
    dest = home / prepared.name
    shutil.copytree(prepared, dest)
    try:
        yield dest
    finally:
        subprocess.run(["chattr", "-R", "-i", str(home)], capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)


# --------------------------------------------------------------------------- malformed inputs

NESTED = '{"iter": 1, "members": ' + "[" * 200_000 + "]" * 200_000 + "}"


@pytest.mark.parametrize("case", ["nested", "digits400", "e308", "e30", "nan_text", "yaw_huge"])
def test_malformed_deltas_are_exit_3_in_one_line(group: Path, case: str) -> None:
    if case == "nested":
        path, needles = raw_transforms(group, NESTED), ("nested too deeply",)
    elif case == "yaw_huge":
        path = write_decision(group, 1, {"chair_1": {"delta_xyz": [0.0, 0.0, 0.0],
                                                     "delta_yaw_deg": 1e9}})
        needles = ("members.chair_1.delta_yaw_deg",)
    else:
        value = {"digits400": "1" * 400, "e308": "1e308", "e30": "1e30",
                 "nan_text": "NaN"}[case]
        path = decision_with(group, value)
        needles = ("NaN",) if case == "nan_text" else ("members.chair_1.delta_xyz",)
    before = snapshot(group)
    one_line(step(group), EXIT_TRANSFORMS, str(path), *needles)
    assert snapshot(group) == before


def test_huge_delta_same_line_warm_or_not(group: Path, ddir: Path) -> None:
    """1e30 through the warm step host and worker, and with --no-daemon: the same exit code
    and the same line, at once (the parser refuses it; nothing reaches Blender)."""
    decision_with(group, "1e30")
    before = snapshot(group)
    t0 = time.monotonic()
    warm = one_line(step(group), EXIT_TRANSFORMS, "members.chair_1.delta_xyz")
    cold = one_line(step(group, 1, "--no-daemon"), EXIT_TRANSFORMS, "members.chair_1.delta_xyz")
    assert warm == cold
    assert time.monotonic() - t0 < 60
    assert snapshot(group) == before


def _corrupt(group: Path, case: str) -> tuple[Path, str | None]:
    root = group
    if case == "meshes_npz":
        path = root / "meshes.npz"
        path.write_bytes(b"PK\x03\x04 this is not a zip")
        return path, None
    if case == "iter0_blend":
        path = root / "simple_refiner" / "iter_0" / "island.blend"
        path.unlink()
        return path, None
    if case == "forward_axes_garbage":
        path = root / "forward_axes.json"
        path.write_text("{not json")
        return path, None
    if case == "forward_axes_schema":
        path = root / "forward_axes.json"
        path.write_text(json.dumps({"members": 5}))
        return path, None
    if case == "metadata_string_matrix":
        path = root / "metadata.json"
        doc = json.loads(path.read_text())
        doc["M_inv_4x4"] = [[str(v) for v in row] for row in doc["M_inv_4x4"]]
        path.write_text(json.dumps(doc))
        return path, "M_inv_4x4"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["meshes_npz", "iter0_blend", "forward_axes_garbage",
                                  "forward_axes_schema", "metadata_string_matrix"])
def test_corrupt_group_inputs_are_exit_8_naming_the_file(group: Path, case: str) -> None:
    write_decision(group, 1, MOVES[0])
    path, fld = _corrupt(group, case)
    before = snapshot(group)
    needles = [str(path)] + ([f"field '{fld}'"] if fld else [])
    one_line(step(group), EXIT_GROUP_INPUT, *needles)
    assert snapshot(group) == before


def test_duplicate_key_in_config_is_refused(group: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "DIRECTORYS.yaml"
    cfg.write_text("engine: workbench\nresolution: 64\nengine: cycles\n")
    write_decision(group, 1, MOVES[0])
    before = snapshot(group)
    one_line(step(group, 1, "--config", str(cfg)), EXIT_USAGE, str(cfg), "'engine'",
             "appears twice")
    assert snapshot(group) == before


def test_iteration_symlink_out_of_the_group_is_refused(group: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    write_decision(group, 1, MOVES[0])
    shutil.move(group / "simple_refiner" / "iter_1" / "transforms.json",
                outside / "transforms.json")
    shutil.rmtree(group / "simple_refiner" / "iter_1")
    (group / "simple_refiner" / "iter_1").symlink_to(outside)
    before, theirs = snapshot(group), snapshot(outside)
    one_line(step(group), EXIT_GROUP_INPUT, "iter_1", "symlink")
    assert snapshot(group) == before and snapshot(outside) == theirs


# --------------------------------------------------------------------------- filesystem refusals

@pytest.mark.required_in_ci
def test_immutable_refiner_is_exit_10_and_loses_nothing(chattr_group: Path) -> None:
    group = chattr_group
    write_decision(group, 1, MOVES[0])
    refiner = group / "simple_refiner"
    before = snapshot(group)
    with immutable(refiner):
        one_line(step(group), EXIT_FILESYSTEM, str(refiner))
    assert snapshot(group) == before
    ok = step(group)
    assert ok.returncode == 0, ok.stderr[-2000:]


def _chattr(flag: str, *paths: Path) -> bool:
    return all(subprocess.run(["chattr", flag, str(p)], capture_output=True,
                              check=False).returncode == 0 for p in paths)


@pytest.mark.required_in_ci
def test_immutable_file_between_renames_restep_is_whole(chattr_group: Path) -> None:
    """The issue's probe: re-step the latest iteration while its geometry.json is immutable.
    The iteration is replaced as a whole directory, so every output is the new step's -
    never new renders beside an old current_state.json/geometry.json."""
    group = chattr_group
    write_decision(group, 1, MOVES[0])
    assert step(group).returncode == 0
    refiner = group / "simple_refiner"
    it1 = refiner / "iter_1"
    old = snapshot(it1)
    doc = json.loads((it1 / "transforms.json").read_text())
    doc["members"]["chair_1"]["delta_yaw_deg"] = 35.0
    (it1 / "transforms.json").write_text(json.dumps(doc))
    assert _chattr("+i", it1 / "geometry.json"), "chattr +i refused on chattr_group"
    try:
        proc = step(group)
    finally:
        _chattr("-i", *refiner.glob("*iter_1*/geometry.json"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    new = snapshot(it1)
    for name in ("island.blend", "current_state.json", "geometry.json", "info.json"):
        assert new[name] != old[name], f"{name} was not replaced with the rest"
    state = json.loads((it1 / "current_state.json").read_text())
    geometry = json.loads((it1 / "geometry.json").read_text())
    assert state["iter"] == geometry["iter"] == 1
    # The old copy could not be removed while immutable; the next call clears it.
    write_decision(group, 2, MOVES[1])
    assert step(group, 2).returncode == 0
    assert not list(refiner.glob(".old.*"))


def test_injected_failure_between_renames_leaves_the_old_iteration(group: Path,
                                                                   backend) -> None:
    from island_tools import iteration
    from tests.test_daemon import SETTINGS

    write_decision(group, 1, MOVES[0])
    iteration.iter_step(group, 1, SETTINGS, lambda job: run_job(job, backend))
    before = snapshot(group)
    real = os.rename

    def failing(src, dst, *a, **k):
        if Path(src).name.startswith(".staging."):   # the new iteration going in
            raise OSError(errno.EIO, "injected", str(dst))
        return real(src, dst, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(iteration.os, "rename", failing)
        with pytest.raises(OSError, match="injected"):
            iteration.iter_step(group, 1, SETTINGS, lambda job: run_job(job, backend))
    assert snapshot(group) == before
    assert not list((group / "simple_refiner").glob(".old.*"))


_KILL_BETWEEN_RENAMES = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from island_tools import iteration
real = os.rename
def rename(src, dst, *a, **k):
    if Path(src).name.startswith(".staging."):
        os.kill(os.getpid(), signal.SIGKILL)        # dies with iter_1 renamed aside
    return real(src, dst, *a, **k)
iteration.os.rename = rename
from scripts.iter_step import run
sys.exit(run(sys.argv[2:]))
"""


def test_kill_between_renames_is_put_back_by_the_next_call(group: Path) -> None:
    write_decision(group, 1, MOVES[0])
    assert step(group).returncode == 0
    it1 = group / "simple_refiner" / "iter_1"
    before = snapshot(group)
    proc = subprocess.run([sys.executable, "-c", _KILL_BETWEEN_RENAMES, str(REPO),
                           "--group-dir", str(group), "--iter", "1", "--no-daemon", *FLAGS],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not it1.exists() and list(it1.parent.glob(".old.iter_1.*"))
    # The next call on the group puts iter_1 back first (here one that then stops: iter_2
    # has no transforms.json yet), and iter_1 is byte-identical to what it was.
    one_line(step(group, 2), EXIT_TRANSFORMS, "iter_2")
    assert {k: v for k, v in snapshot(group).items() if k.startswith("simple_refiner/iter_1/")} == \
        {k: v for k, v in before.items() if k.startswith("simple_refiner/iter_1/")}
    write_decision(group, 2, MOVES[1])
    again = step(group, 2)
    assert again.returncode == 0, again.stderr[-2000:]
    after = snapshot(group)
    assert {k: v for k, v in after.items() if k.startswith("simple_refiner/iter_1/")} == \
        {k: v for k, v in before.items() if k.startswith("simple_refiner/iter_1/")}
    assert not list(it1.parent.glob(".old.*")) and not list(it1.parent.glob(".staging.*"))


@pytest.mark.required_in_ci
def test_full_disk_says_so_and_where(prepared: Path, tmp_path: Path, backend) -> None:
    mnt = tmp_path / "small"
    if not mounted(mnt, "16m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        group = mnt / prepared.name
        shutil.copytree(prepared, group)
        write_decision(group, 1, MOVES[0])
        filler = mnt / "filler"
        with open(filler, "wb") as fh:   # fill up to the last few kB
            with contextlib.suppress(OSError):
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
        before = snapshot(group)
        line = one_line(step(group), EXIT_FILESYSTEM, "no space left")
        assert str(mnt) in line
        assert snapshot(group) == before
        # Blender's own save on a full disk ("Error: Success" in Blender's words).
        blend = group / "simple_refiner" / "iter_0" / "island.blend"
        pose = [[1.0, 0, 0, 0.5], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]]
        with pytest.raises(FilesystemError, match="no space left"):
            run_job({"op": "step", "blend": str(blend), "members": ["table", "chair_1"],
                     "anchor_id": "table", "poses": {"chair_1": pose}, "render": None,
                     "export_meshes": None}, backend)
        assert snapshot(group) == before
        filler.unlink()
        ok = step(group)
        assert ok.returncode == 0, ok.stderr[-2000:]
    finally:
        umount(mnt)


@pytest.mark.required_in_ci
def test_mount_inside_the_group_is_exit_10(group: Path) -> None:
    write_decision(group, 1, MOVES[0])
    it1 = group / "simple_refiner" / "iter_1"
    keep = it1 / "transforms.json"
    data = keep.read_bytes()
    if not mounted(it1, "4m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        keep.write_bytes(data)
        before = snapshot(group)
        one_line(step(group), EXIT_FILESYSTEM, "iter_1")
        assert snapshot(group) == before
    finally:
        umount(it1)


# --------------------------------------------------------------------------- internal errors

def test_internal_error_is_one_line_naming_the_traceback_file(tmp_path: Path,
                                                              monkeypatch) -> None:
    from island_tools.clirun import run_main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ISLAND_REFINER_DEBUG", raising=False)

    def bug() -> int:
        return {}["no such key"]

    proc_err: list[str] = []
    import io
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    assert run_main("probe", bug) == EXIT_INTERNAL
    proc_err = buf.getvalue().strip().splitlines()
    assert len(proc_err) == 1 and "KeyError" in proc_err[0], proc_err
    kept = proc_err[0].split("traceback in ", 1)[1].split(";", 1)[0]
    assert "Traceback" in Path(kept).read_text() and "no such key" in Path(kept).read_text()


# --------------------------------------------------------------------------- worker replies

def test_non_finite_pose_same_error_warm_or_in_process(prepared: Path, backend,
                                                       ddir: Path) -> None:
    """A .blend whose member's location is NaN: the warm worker and the in-process path
    give the same GroupInputError naming the object and file - not "the warm worker died
    twice" after a reply it could not encode."""
    import bpy

    blend = ddir / "nan.blend"
    bpy.ops.wm.open_mainfile(filepath=str(prepared / "island.blend"))
    bpy.data.objects["chair_1"].location.x = float("nan")
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    bpy.ops.wm.read_homefile(use_factory_startup=True)
    job = {"op": "read_poses", "blend": str(blend), "members": ["chair_1"]}
    lines = []
    for opts in (daemon.DaemonOptions(directory=str(ddir)), None):
        t0 = time.monotonic()
        with pytest.raises(GroupInputError, match="non-finite transform") as caught:
            run_job(job, backend, daemon=opts)
        assert time.monotonic() - t0 < 60
        assert str(blend) in str(caught.value) and "chair_1" in str(caught.value)
        lines.append(str(caught.value))
    assert lines[0] == lines[1]
    assert live(ddir), "the warm worker is still up: it never died"


def test_result_that_cannot_be_encoded_is_said_as_such(tmp_path: Path, monkeypatch) -> None:
    """worker/entry.py (the Blender-binary path) with a job whose result holds a NaN: the
    result file carries a WorkerError saying the reply could not be sent."""
    from worker import entry, jobs

    monkeypatch.setattr(jobs, "run_job", lambda job: {"poses": {"x": [float("nan")]}})
    job, result = tmp_path / "job.json", tmp_path / "result.json"
    job.write_text(json.dumps({"op": "read_poses"}))
    code = entry.main(["blender", "--", str(job), str(result)])
    doc = json.loads(result.read_text())
    assert code == EXIT_WORKER and doc["error"]["type"] == "WorkerError"
    assert "could not be sent" in doc["error"]["message"]


# --------------------------------------------------------------------------- daemon directory

def test_shared_daemon_dir_with_planted_symlinks(group: Path, tmp_path: Path,
                                                 monkeypatch) -> None:
    """$ISLAND_REFINER_DAEMON_DIR at a 1777 directory in which someone planted symlinks
    named like the daemon's files: the tool makes its own private directory inside, never
    chmods the shared one, never follows the plants; the call succeeds."""
    shared = Path(tempfile.mkdtemp(prefix="ir-shared-"))   # short: socket paths <= 107 B
    shared.chmod(0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    from scripts._step_host import host_key
    from worker.launch import resolve_blender

    keys = [daemon.backend_key(resolve_blender("bpy", None)), host_key()]
    for key in keys:
        for suffix in (".daemon.lock", ".log", ".client.lock", ".status.json"):
            link = shared / f"{key}{suffix}"
            link.symlink_to(victim)
            if os.getuid() == 0:
                os.lchown(link, OTHER_UID, OTHER_UID)
    monkeypatch.setenv(daemon.ENV_DIR, str(shared))
    monkeypatch.setenv(daemon.ENV_ENABLE, "1")
    private = shared / f"island-refiner-{os.getuid()}"
    try:
        write_decision(group, 1, MOVES[0])
        ok = step(group)
        assert ok.returncode == 0, ok.stderr[-2000:]
        assert victim.read_text() == "precious\n"
        assert stat.S_IMODE(os.stat(victim).st_mode) == 0o644
        assert stat.S_IMODE(os.lstat(shared).st_mode) == 0o1777
        assert stat.S_IMODE(os.lstat(private).st_mode) == 0o700
        assert live(private), "the warm path ran in the private subdirectory"
    finally:
        daemon.shutdown_all(private, timeout=10.0)
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.required_in_ci
def test_daemon_dir_of_another_user_falls_back_with_one_warning(group: Path,
                                                                tmp_path: Path,
                                                                monkeypatch) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to make a directory of another uid")
    theirs = tmp_path / f"island-refiner-{os.getuid()}"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    monkeypatch.setenv(daemon.ENV_DIR, str(theirs))
    monkeypatch.setenv(daemon.ENV_ENABLE, "1")
    write_decision(group, 1, MOVES[0])
    ok = step(group)
    assert ok.returncode == 0, ok.stderr[-2000:]
    warnings = [ln for ln in ok.stderr.splitlines() if "belongs to uid" in ln]
    assert len(warnings) == 1, ok.stderr[-2000:]
    assert not any(theirs.iterdir())
    assert os.stat(theirs).st_uid == OTHER_UID


def test_warm_outputs_follow_the_callers_umask(group: Path, ddir: Path) -> None:
    write_decision(group, 1, MOVES[0])
    proc = subprocess.run(
        ["sh", "-c", f"umask 077 && exec {sys.executable} scripts/iter_step.py --group-dir "
                     f"{group} --iter 1 " + " ".join(FLAGS)],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert live(ddir), "the call ran on the warm worker"
    it1 = group / "simple_refiner" / "iter_1"
    modes = {name: stat.S_IMODE(os.stat(it1 / name).st_mode) for name in ITER_OUTPUTS}
    assert all(m & 0o077 == 0 for m in modes.values()), modes


# --------------------------------------------------------------------------- bounded agents

THREE_MOVES = {"members": {f"chair_{i}": {"delta_xyz": [0.01, 0.0, 0.0], "delta_yaw_deg": 0.0}
                           for i in (1, 2, 3)},
               "converged": False, "reason_summary": "probe"}


def agent_run(group: Path, command: str, timeout: float) -> subprocess.CompletedProcess:
    return cli("scripts/agent.py", "run", "--group-dir", str(group), "--policy",
               f"command:{command}", "--timeout", str(timeout), "--max-iter", "6", *FLAGS)


def test_agent_printing_without_end_is_capped(prepared: Path, tmp_path: Path) -> None:
    group = tmp_path / prepared.name
    shutil.copytree(prepared, group)
    t0 = time.monotonic()
    proc = agent_run(group, "yes", 30)
    assert time.monotonic() - t0 < 60
    one_line(proc, EXIT_AGENT, "output too large")


def test_agent_with_a_setsid_child_does_not_hang_the_loop(prepared: Path,
                                                          tmp_path: Path) -> None:
    group = tmp_path / prepared.name
    shutil.copytree(prepared, group)
    marker = f"ir-fault-{os.getpid()}"
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n"
                      f"setsid {sys.executable} -c 'import time; time.sleep(600)' {marker} "
                      "&\n"
                      f"echo '{json.dumps(THREE_MOVES)}'\n")
    script.chmod(0o755)
    t0 = time.monotonic()
    try:
        proc = agent_run(group, str(script), 20)
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True,
                              check=False).stdout.split()
    finally:
        subprocess.run(["pkill", "-f", marker], check=False)
    assert time.monotonic() - t0 < 240, "the loop waited on the setsid child"
    assert proc.returncode in (0, EXIT_AGENT), proc.stderr[-2000:]
    assert not left, f"setsid children left running: {left}"
    run = json.loads((group / "simple_refiner" / "run.json").read_text())
    assert run["status"] != "running"


# --------------------------------------------------------------------------- randomized kills

def _iterations_whole(group: Path) -> None:
    refiner = group / "simple_refiner"
    for it in refiner.glob("iter_*"):
        if (it / "current_state.json").is_file():
            missing = [n for n in ITER_OUTPUTS if not (it / n).is_file()]
            assert not missing, f"{it.name} is marked complete but lacks {missing}"
        else:
            extra = sorted(p.name for p in it.iterdir() if p.name != "transforms.json")
            assert not extra, f"{it.name} is incomplete yet holds {extra}"


@pytest.mark.parametrize("seed", [1, 2])
def test_random_kills_leave_iterations_whole(group: Path, ddir: Path, seed: int) -> None:
    rng = random.Random(seed)
    trials = 9
    write_decision(group, 1, MOVES[1])
    assert step(group, 1).returncode == 0      # warm-up: starts the host and the worker
    write_decision(group, 2, MOVES[2])
    t0 = time.monotonic()
    assert step(group, 2).returncode == 0
    span = time.monotonic() - t0               # kills land anywhere in a warm step
    n = 3
    outcomes: list[tuple] = []
    for trial in range(trials):
        write_decision(group, n, MOVES[n % len(MOVES)])
        victim = ("client", "host", "worker")[trial % 3]
        proc = subprocess.Popen([sys.executable, "scripts/iter_step.py", "--group-dir",
                                 str(group), "--iter", str(n), *FLAGS], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.0, span))
        pid = proc.pid if victim == "client" else next(
            (e["pid"] for e in live(ddir, "host-" if victim == "host" else "bpy-")), None)
        running = proc.poll() is None
        if pid is not None and running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        outcomes.append((victim, pid is not None and running, proc.returncode,
                         err.decode(errors="replace").strip().splitlines()[-1:]))
        # Whatever died, wait until no step runs on the group (a host finishes a dead
        # client's call), then the iterations must be whole.
        wait_for(lambda: not any(e.get("state") == "busy" for e in live(ddir, "host-")),
                 timeout=240, what="the step host to finish")
        _iterations_whole(group)
        again = step(group, n)
        if again.returncode == EXIT_USAGE and "re-stepped under later" in again.stderr:
            pass
        else:
            assert again.returncode == 0, (trial, victim, again.stderr[-2000:])
        _iterations_whole(group)
        assert not list((group / "simple_refiner").glob(".staging.*"))
        assert not list((group / "simple_refiner").glob(".old.*"))
        n += 1
    assert (group / "simple_refiner" / f"iter_{n - 1}" / "current_state.json").is_file()
    print("\n".join(map(str, outcomes)))
    assert sum(hit for _, hit, _, _ in outcomes) >= trials // 2, outcomes


def test_no_exit_1_for_any_case_above() -> None:
    """The documented codes this suite relies on are distinct (a collision would let one
    case pass for another)."""
    codes = [EXIT_USAGE, EXIT_TRANSFORMS, EXIT_WORKER, EXIT_GROUP_INPUT, EXIT_AGENT,
             EXIT_FILESYSTEM]
    assert len(set(codes)) == len(codes) and EXIT_INTERNAL not in codes
