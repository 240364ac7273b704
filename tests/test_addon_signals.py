"""The add-on's children stop on SIGINT even when Blender was started with SIGINT ignored
(a shell's background job, a farm launcher): a Python that starts with SIGINT ignored never
raises KeyboardInterrupt, so Esc would stop nothing until the kill after the grace time.
Pure Python: ``blender_addon.runner`` needs no bpy."""
from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from blender_addon import runner

CHILD = ("import sys, time\n"
         "try:\n"
         "    print('ready', flush=True); time.sleep(30)\n"
         "except KeyboardInterrupt:\n"
         "    print('interrupted', flush=True); sys.exit(130)\n")


def _stop_child(tmp_path: Path, argv: list[str]) -> tuple[int, float, str]:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)   # as a background job has it
    try:
        proc = runner.Process(argv, tmp_path, timeout_s=60)
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 20
    while "ready" not in proc.stdout and time.monotonic() < deadline:
        proc.poll(0.05)
    t0 = time.monotonic()
    proc.stop(grace_s=10.0)
    took = time.monotonic() - t0
    proc.poll(0.0)
    return proc.popen.returncode, took, "".join(proc.stdout)


def test_a_child_started_with_sigint_ignored_is_still_interruptible(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    code, took, out = _stop_child(tmp_path, runner.interruptible([sys.executable, str(script)]))
    assert code == 130 and took < 5.0, (code, took, out)   # its KeyboardInterrupt handler


def test_without_the_reset_sigint_would_not_reach_it(tmp_path: Path) -> None:
    """The premise: the same child started directly only dies by the grace kill."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = runner.Process([sys.executable, str(script)], tmp_path, timeout_s=60)
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 20
    while "ready" not in proc.stdout and time.monotonic() < deadline:
        proc.poll(0.05)
    proc.stop(grace_s=1.0)
    assert proc.popen.returncode == -signal.SIGKILL   # SIGINT did nothing; the kill did
