"""``python -m worker.daemon --stop`` stops this checkout's warm workers, not every one of
the user's (issue 27, item 5).

Two checkouts are two copies of the tree under test (``worker`` and ``island_tools`` as
imported here, so the test judges whichever tree is on the path). Each runs one daemon of
the real server (``worker.daemon.serve``) with a handler that needs no Blender, in one
shared daemon directory, as two clones of one user would. Whose daemon is whose is judged
from the processes this test started (their pids), not from what the tool says.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import worker

TREE = Path(worker.__file__).resolve().parents[1]

SERVE = """
import sys
from worker import daemon

class Echo(daemon.Handler):
    name = "test daemon"

    def prepare(self):
        pass

    def describe(self):
        return {}

    def between_jobs(self):
        pass

    def run(self, job, emit):
        return {"result": {"echo": job}}

sys.exit(daemon.serve(sys.argv[1], sys.argv[2], 120.0, 100, 100000, Echo()))
"""


def checkout(root: Path) -> Path:
    for package in ("worker", "island_tools"):
        shutil.copytree(TREE / package, root / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root.resolve()


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def daemon_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker.daemon", *args], cwd=root,
                          env=env_for(root), capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.fixture
def two_checkouts(tmp_path: Path) -> Iterator[tuple[Path, Path, Path, dict[str, int]]]:
    """Checkouts A and B, each with one running daemon (key ``a-...`` / ``b-...``) in one
    private directory: (A, B, directory, key -> pid)."""
    ddir = Path(tempfile.mkdtemp(prefix="ir-scope-"))   # short: socket paths <= 107 bytes
    ddir.chmod(0o700)
    roots = {"a": checkout(tmp_path / "checkout_a"), "b": checkout(tmp_path / "checkout_b")}
    procs = {}
    try:
        for name, root in roots.items():
            key = f"{name}-test-1"
            procs[key] = subprocess.Popen(
                [sys.executable, "-c", SERVE, str(ddir), key], cwd=root, env=env_for(root),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + 30
        while not all((ddir / f"{key}.sock").exists() for key in procs):
            assert time.monotonic() < deadline, "the test daemons did not start"
            assert all(p.poll() is None for p in procs.values()), "a test daemon exited"
            time.sleep(0.02)
        yield roots["a"], roots["b"], ddir, {k: p.pid for k, p in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        shutil.rmtree(ddir, ignore_errors=True)


def test_stop_stops_this_checkouts_daemons_and_leaves_the_others_running(
        two_checkouts: tuple[Path, Path, Path, dict[str, int]]) -> None:
    a, b, ddir, pids = two_checkouts
    stopped = daemon_cli(a, "--stop", "--dir", str(ddir))
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 20
    while alive(pids["a-test-1"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pids["a-test-1"]), stopped.stdout
    assert alive(pids["b-test-1"]), f"--stop stopped another checkout's daemon: {stopped.stdout}"
    assert str(pids["a-test-1"]) in stopped.stdout and str(pids["b-test-1"]) not in stopped.stdout
    assert "b-test-1" in stopped.stdout and "--all" in stopped.stdout   # says what it left


def test_status_marks_whose_each_daemon_is_and_stop_all_stops_every_one(
        two_checkouts: tuple[Path, Path, Path, dict[str, int]]) -> None:
    a, b, ddir, pids = two_checkouts
    seen = daemon_cli(a, "--status", "--json", "--dir", str(ddir))
    entries = {e["key"]: e for e in json.loads(seen.stdout)}
    assert {k: entries[k]["pid"] for k in pids} == pids
    assert entries["a-test-1"]["this_checkout"] is True
    assert entries["b-test-1"]["this_checkout"] is False
    assert entries["b-test-1"]["checkout"] == str(b)
    text = daemon_cli(b, "--status", "--dir", str(ddir)).stdout.splitlines()
    line_a = next(ln for ln in text if ln.startswith("a-test-1"))
    line_b = next(ln for ln in text if ln.startswith("b-test-1"))
    assert f"[checkout {a}]" in line_a and f"pid {pids['a-test-1']}" in line_a
    assert "[this checkout]" in line_b
    everyone = daemon_cli(a, "--stop", "--all", "--dir", str(ddir))
    assert everyone.returncode == 0, everyone.stderr
    deadline = time.monotonic() + 20
    while any(alive(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(p) for p in pids.values()), everyone.stdout
