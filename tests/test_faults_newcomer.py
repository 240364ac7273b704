"""What a newcomer tripped on, following the README word by word from a fresh clone (issue 33,
item 6). Each case provoked as the newcomer met it:

* the README's "scene with no relation graph" commands called a bare ``island-refine``
  (exit 127: a fresh clone has no console script on PATH): every command in the README's
  shell blocks starts with something a fresh clone has after ``setup_env.sh``;
* ``python -m worker.daemon --status`` kept listing stopped daemons as ``[checkout unknown]:
  not running (no status)``, one more with every stop (two checkouts' daemons, stopped,
  then listed);
* the exit-7 line of a Python without the step host's packages (the system ``python3``
  beside the venv: numpy, no python-fcl) came after a noisy ``step host unavailable ...
  No module named 'fcl'`` line (tier 3: Debian's Blender 3.4 gives the exit 7).

The bench sections that crashed on a moved import (``--section warm`` / ``step``) are run
in their smoke mode by ``tests/test_bench_sections.py``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from tests.test_daemon_scope import alive, daemon_cli
from tests.test_daemon_scope import two_checkouts as two_checkouts  # noqa: PLC0414 - fixture
from tests.test_newcomer_path import EXAMPLE, debian_blender, hand_written, the_line
from tests.test_newcomer_path import demo_group as demo_group  # noqa: PLC0414 - fixture

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
EXIT_WORKER = 7


# --------------------------------------------------------------------------- README
def _commands(text: str) -> list[str]:
    """Every command of the README's shell blocks (``&&`` / ``;`` / ``||`` / `` | `` split
    it; comments and blank lines are none)."""
    out = []
    for block in re.findall(r"```(?:bash|sh|console|shell)\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = re.sub(r"\s#.*$", "", line).strip()
            if not line or line.startswith("#"):
                continue
            out += [seg.strip() for seg in re.split(r"\s(?:&&|\|\||;|\|)\s", line)
                    if seg.strip()]
    return out


def test_every_readme_command_runs_from_a_fresh_clone() -> None:
    """``setup_env.sh`` makes ``.venv`` (and ``.venv313``); nothing else is on PATH."""
    scripts = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])
    venv_bin = {f"{v}/bin/{name}" for v in (".venv", ".venv313", ".venv42", ".venv45")
                for name in ("python", *scripts)}
    wrong = []
    for cmd in _commands(README.read_text(encoding="utf-8")):
        first, *rest = cmd.split()
        if first == "bash":
            ok = bool(rest) and (REPO / rest[0]).is_file()
        else:
            ok = first in venv_bin
        if not ok:
            wrong.append(cmd)
    assert not wrong, wrong


# --------------------------------------------------------------------------- daemon
def test_daemon_status_forgets_stopped_daemons(
        two_checkouts: tuple[Path, Path, Path, dict[str, int]]) -> None:
    a, _, ddir, pids = two_checkouts
    stopped = daemon_cli(a, "--stop", "--all", "--dir", str(ddir))
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 20
    while any(alive(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(p) for p in pids.values())
    for _ in range(2):   # the list does not grow with each look or stop
        seen = daemon_cli(a, "--status", "--json", "--dir", str(ddir))
        assert json.loads(seen.stdout) == [], seen.stdout
        text = daemon_cli(a, "--status", "--dir", str(ddir)).stdout
        assert "not running" not in text and "checkout unknown" not in text, text
        assert text.startswith("no warm worker"), text
        daemon_cli(a, "--stop", "--dir", str(ddir))


# --------------------------------------------------------------------------- exit 7
def _python_without_fcl() -> str | None:
    """A Python on this machine that has numpy but not python-fcl (Debian's python3)."""
    probe = ("import importlib.util as u, sys; "
             "sys.exit(0 if u.find_spec('numpy') and not u.find_spec('fcl') else 1)")
    for cand in ("/usr/bin/python3", shutil.which("python3")):
        if cand and Path(cand).is_file() and subprocess.run(
                [cand, "-c", probe], capture_output=True, check=False).returncode == 0:
            return cand
    return None


@pytest.mark.blender_bin
def test_the_exit_7_line_comes_alone_from_a_python_without_the_hosts_packages(
        demo_group: Path, tmp_path: Path) -> None:
    python = _python_without_fcl()
    assert python, "no Python with numpy and without python-fcl (Debian's python3)"
    backend = debian_blender()
    group = tmp_path / demo_group.name
    shutil.copytree(demo_group, group)
    hand_written(group, json.loads(EXAMPLE.read_text(encoding="utf-8")))
    ddir = Path(tempfile.mkdtemp(prefix="ir-nc-"))   # short: socket paths <= 107 bytes
    ddir.chmod(0o700)
    env = {**os.environ, "ISLAND_REFINER_DAEMON": "1", "ISLAND_REFINER_DAEMON_DIR": str(ddir),
           "BLENDER": "", "PYTHONPATH": "",
           "PATH": f"{Path(backend.path).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        proc = subprocess.run([python, "scripts/iter_step.py", "--group-dir", str(group),
                               "--iter", "1", "--resolution", "64", "--samples", "1",
                               "--quiet"], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        line = the_line(proc, EXIT_WORKER)
        assert line.startswith("[iter_step] error (exit 7): "), line
        assert "saved by Blender" in line and ".venv/bin/python" in line, line
    finally:
        subprocess.run([sys.executable, "-m", "worker.daemon", "--stop", "--all", "--dir",
                        str(ddir)], cwd=REPO, capture_output=True, check=False, timeout=60)
        shutil.rmtree(ddir, ignore_errors=True)
