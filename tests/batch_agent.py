#!/usr/bin/env python3
"""A stand-in agent for tests/test_batch.py (policy ``command:``): the scene tests' greedy
agent, plus two hooks keyed on the scene the island belongs to (the agent runs in the group
directory, ``<scene>/relation_groups/<G>``):

``--crash-scene NAME``  SIGKILL the Dask worker process refining the island: what a Blender
                        that always crashes inside the worker looks like to Dask.
``--pause-file PATH --pause-scene NAME``  while PATH exists, write ``PATH.waiting`` and wait:
                        a test kills the worker at a known point in the middle of an island.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scene_greedy_agent  # noqa: E402

SHELLS = {"sh", "dash", "bash"}


def _worker_pid() -> int:
    """The nearest ancestor that is not a shell: the worker that ran the policy command."""
    pid = os.getppid()
    while Path(f"/proc/{pid}/comm").read_text().strip() in SHELLS:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rfind(")") + 2:].split()[1])
    return pid


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--crash-scene", default=None)
    ap.add_argument("--pause-file", default=None)
    ap.add_argument("--pause-scene", default=None)
    args = ap.parse_args()
    scene = Path.cwd().parents[1].name
    if args.crash_scene == scene:
        worker = _worker_pid()
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
            time.sleep(0.02)   # its reader is gone with it: never answer
        return 1
    if args.pause_file and args.pause_scene == scene:
        pause = Path(args.pause_file)
        while pause.exists():
            Path(f"{pause}.waiting").write_text(str(os.getpid()))
            time.sleep(0.05)
    sys.argv = sys.argv[:1]
    return scene_greedy_agent.main()


if __name__ == "__main__":
    sys.exit(main())
