"""No orphan Blender: a Blender binary started for a worker job dies with the process that
started it (PR_SET_PDEATHSIG, worker/lifetime.py), even when that process is SIGKILLed - as
a Dask worker on a render node is by the OOM killer or a job scheduler."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BLENDER_BIN

REPO = Path(__file__).resolve().parents[1]

# Runs inside Blender in place of worker/entry.py: reports its pid, then hangs like a long job.
SLEEPER = """
import os, time
open(os.environ["TEST_BLENDER_PID_FILE"], "w").write(str(os.getpid()))
time.sleep(120)
"""

# The parent: the real launch.run_binary code path, with the entry script swapped.
PARENT = """
import sys
sys.path.insert(0, {repo!r})
import worker.launch as launch
launch.ENTRY = {sleeper!r}
launch.run_binary({{"op": "read_poses"}}, launch.resolve_blender({blender!r}), timeout=300)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _wait_for_pid(path: Path, parent: subprocess.Popen) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and parent.poll() is None:
        if path.is_file() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the job Blender never started")


@pytest.mark.blender_bin
def test_blender_dies_with_its_sigkilled_parent(tmp_path: Path) -> None:
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    code = PARENT.format(repo=str(REPO), sleeper=str(sleeper), blender=BLENDER_BIN)
    pid_file = tmp_path / "blender.pid"
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL,
                              env={**os.environ, "TEST_BLENDER_PID_FILE": str(pid_file)})
    try:
        blender = _wait_for_pid(pid_file, parent)
        assert _alive(blender)
        assert Path(f"/proc/{blender}/exe").resolve().name.startswith("blender")
        os.kill(parent.pid, signal.SIGKILL)
        assert parent.wait(timeout=10) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while _alive(blender) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(blender), f"Blender {blender} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
